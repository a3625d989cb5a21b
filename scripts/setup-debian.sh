#!/usr/bin/env bash
# Installs every Debian package wirespeed's `make test` and `make demo` need, and the Python
# packages from PyPI in a virtual environment of their own (os-ken, the OpenFlow controller of
# the controller test). Idempotent: it only calls apt-get or pip when something is missing, so
# repeated `make` runs stay fast.
set -euo pipefail

packages=(
  iproute2      # ip netns / veth: the lab
  iputils-ping  # reachability checks in lab tests
  ethtool       # queue counts of lab interfaces
  tshark        # third-party check that our pcap files open in Wireshark's reader
  chromium      # headless render of the HTML report (crates/wirespeed/tests/rfc2544.rs)
  nftables      # the linux-router-nft DuT's rule set (nft -f)
  openvswitch-switch  # the ovs DuT (its own daemons in the lab, never the system service)
  dpdk-dev            # dpdk-testpmd: the dpdk-testpmd DuT and the testpmd-txonly generator
  librte-net-af-xdp23 # DPDK's AF_XDP poll-mode driver (net_af_xdp), which testpmd loads
  libdpdk-dev         # rte_lpm/rte_lpm6 headers and libraries: crates/dpdk-lpm, the FIB reference
  pkgconf             # pkg-config: crates/dpdk-lpm's build finds libdpdk-dev with it
  gcc                 # compiles crates/dpdk-lpm's C shim (the cc crate)
  clang               # compiles the XDP programs (crates/fastpath/bpf, crates/io/bpf) with -target bpf
  libbpf-dev          # the BPF helper headers the XDP programs include (bpf/bpf_helpers.h)
  g++                 # compiles libFuzzer (C++) for the fuzz targets (make fuzz)
  python3-scapy       # the parser conformance suite's independent frame generator
  prometheus          # promtool: the metrics endpoint's exposition is checked with it
  tmux                # a real terminal for the `wirespeed top` test
  systemd             # systemd-analyze verifies the service unit in dist/
  openssh-server      # sshd for the remote-DuT test (started by the test in the DuT namespace)
  procps              # pgrep: a DuT's NAPI threads placed over ssh, scripts/dut-site-check.sh
  python3-venv        # the virtual environment os-ken is installed in (below)
)

# os-ken (OpenStack's maintained fork of Ryu) from PyPI, pinned: the learning-switch controller
# of crates/wirespeed/tests/openflow_controller.rs. Debian has no package of it; a virtual
# environment keeps it apart from the system's Python.
osken_venv=/opt/wirespeed/os-ken
osken_version=4.2.2

install_osken() {
  if "$osken_venv/bin/python" -c "import os_ken" 2>/dev/null; then
    return
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: os-ken is missing from $osken_venv; run 'sudo $0' once" >&2
    exit 1
  fi
  echo "setup: installing os-ken $osken_version in $osken_venv"
  python3 -m venv "$osken_venv"
  "$osken_venv/bin/pip" install -q "os-ken==$osken_version"
}

missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  install_osken
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
# openvswitch-switch's postinst would start the system OvS service. The ovs DuT runs its own
# daemons with their own run directory and never needs it, so keep package scripts from starting
# any service during this install (policy-rc.d "101: action forbidden"), unless the machine
# already has a policy of its own, and disable the service where systemd runs.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Likewise the Prometheus server (only its promtool is used) and the system's ssh server (the
# remote-DuT test runs its own sshd in a lab namespace).
for service in openvswitch-switch prometheus ssh; do
  if [ -d /run/systemd/system ] && systemctl list-unit-files "$service.service" >/dev/null 2>&1; then
    systemctl disable --now "$service.service" >/dev/null 2>&1 || true
  fi
done
install_osken
