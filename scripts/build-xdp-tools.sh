#!/usr/bin/env bash
# Builds xdp-tools (xdp-trafficgen, xdp-bench, ...) from Debian's source package and installs it
# into /opt/wirespeed/xdp-tools: the independent generator and sink of
# `wirespeed bench forwarding --generator xdp-tools` (issue 18). A no-op when that version is
# already installed.
#
# Why from source: bookworm's xdp-tools 1.3.1 does not load on this kernel (its BTF lacks the
# xdp_redirect_map_err tracepoint the 1.3.1 programs attach to), and the binaries of newer Debian
# releases need a newer glibc than bookworm's. The orig tarball does not bundle libbpf and
# bookworm's libbpf (1.1) is older than xdp-tools wants, so Debian's libbpf source package is
# unpacked where upstream's git submodule would be (lib/libbpf) and linked in statically: the
# installed programs need nothing but libelf, zlib and libc. Debian's own packaging applies no
# patches to xdp-tools; its build flags are used (PRODUCTION=1, BPF_CFLAGS below).
#
# The versions are pinned with the sha256 of their .dsc; the tarballs are checked against the
# .dsc's Checksums-Sha256. The pool keeps only the versions of current releases: when a pinned
# version leaves it (the download fails with 404), pin the version `apt-cache showsrc` names
# (with a deb-src line for the release that has it).
#
# Usage: sudo scripts/build-xdp-tools.sh    (run builds as `taskset -c 0 nice -n 19 ...` on a
# machine that also benchmarks)
set -euo pipefail

prefix=/opt/wirespeed/xdp-tools
pool=http://deb.debian.org/debian/pool/main
xdp_tools_version=1.6.3-1
xdp_tools_dsc_sha256=d02a97adc46587362567c223b45b78d680f456bf7027a744e7094f9708d498f2
libbpf_version=1.5.0-3
libbpf_dsc_sha256=b8fdd3a9c58a13d13e9da0927062f1237303db3a804207e423ec4335119d3245
stamp="xdp-tools $xdp_tools_version, libbpf $libbpf_version"

if [ "$(cat "$prefix/VERSION" 2>/dev/null)" = "$stamp" ] &&
  [ -x "$prefix/sbin/xdp-trafficgen" ] && [ -x "$prefix/sbin/xdp-bench" ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "build-xdp-tools: $stamp is not in $prefix; run 'sudo $0' once" >&2
  exit 1
fi

# Debian's Build-Depends of xdp-tools, less debhelper (no .deb is made), plus make and m4;
# bookworm's bpftool (7.1) generates the skeletons fine.
packages=(clang llvm gcc make m4 pkgconf libelf-dev libpcap-dev zlib1g-dev bpftool curl ca-certificates)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-xdp-tools: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

work=$(mktemp -d /var/tmp/wirespeed-xdp-tools.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

# fetch SOURCE VERSION DSC_SHA256: downloads SOURCE's .dsc, checks it against DSC_SHA256, then
# downloads every file it lists and checks each against its Checksums-Sha256 line.
fetch() {
  local source=$1 version=$2 sha=$3 dir
  # The pool's directories: lib* sources under their first four letters, others their first.
  case $source in
  lib*) dir="$pool/${source:0:4}/$source" ;;
  *) dir="$pool/${source:0:1}/$source" ;;
  esac
  curl -fsS -O "$dir/${source}_${version}.dsc"
  echo "$sha  ${source}_${version}.dsc" | sha256sum -c --quiet
  awk '/^Checksums-Sha256:/ {on = 1; next} /^[^ ]/ {on = 0} on && NF == 3 {print $1, $3}' \
    "${source}_${version}.dsc" |
    while read -r file_sha file; do
      curl -fsS -O "$dir/$file"
      echo "$file_sha  $file" | sha256sum -c --quiet
    done
}
fetch xdp-tools "$xdp_tools_version" "$xdp_tools_dsc_sha256"
fetch libbpf "$libbpf_version" "$libbpf_dsc_sha256"

upstream=${xdp_tools_version%-*}
tar xzf "xdp-tools_${upstream}.orig.tar.gz"
src=$work/xdp-tools-$upstream
mkdir -p "$src/lib/libbpf"
tar xzf "libbpf_${libbpf_version%-*}.orig.tar.gz" -C "$src/lib/libbpf" --strip-components=1

cd "$src"
export PREFIX=$prefix
export FORCE_SUBDIR_LIBBPF=1
export PRODUCTION=1
export BPF_CFLAGS="-Wno-visibility -I/usr/include/$(gcc -print-multiarch)"
./configure
make -j"$(nproc)"
rm -rf "$prefix"
make install
echo "$stamp" > "$prefix/VERSION"
echo "build-xdp-tools: installed $stamp in $prefix"
echo "$("$prefix/sbin/xdp-trafficgen" udp --version)"
