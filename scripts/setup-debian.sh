#!/usr/bin/env bash
# Installs every Debian package wirespeed's `make test` and `make demo` need. Idempotent: it only
# calls apt-get when something is missing, so repeated `make` runs stay fast.
set -euo pipefail

packages=(
  iproute2      # ip netns / veth: the lab
  iputils-ping  # reachability checks in lab tests
  ethtool       # queue counts of lab interfaces
  tshark        # third-party check that our pcap files open in Wireshark's reader
  chromium      # headless render of the HTML report (crates/wirespeed/tests/rfc2544.rs)
)

missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing Debian packages: ${missing[*]}; run 'sudo $0' once" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer once, non-interactively.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
