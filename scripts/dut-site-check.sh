#!/usr/bin/env bash
# Issue 18's agreement check for DuTs elsewhere: the same DuT measured three ways by
# `bench rfc2544`, which the goal wants within 3 % of each other:
#   local     the tester's own driver sets the DuT up in the lab's DuT namespace;
#   external  this script builds the same DuT by hand in a lab of `wirespeed lab up` and the
#             tester, run in the lab's tester namespace, is told only its interfaces and MACs
#             (`--dut external`);
#   ssh       the tester's driver sets the DuT up over ssh (`--dut-host`), through an OpenSSH
#             server started per connection in the lab's DuT namespace (`sshd -i` as the ssh
#             client's ProxyCommand; throwaway keys, the host key checked).
# The three alternate, one search each, ROUNDS times (L E S L E S ...), so a drift of the shared
# machine spreads over all three; then the median NDR of each and its ratio to the local one.
#
# DUT is `linux-router-tbf:MBIT` (the Linux router shaped by tbf: a capacity set in advance,
# below what this machine's stalls allow, so the three ways can be told apart to 3 %) or
# `linux-bridge` (as fast as the machine lets it: its zero-loss rate is the machine's stalls'
# as much as the bridge's, see the report's "DuT core wake-ups").
#
# Usage: scripts/dut-site-check.sh [OUT_DIR]   (root; sshd from Debian's openssh-server)
# Environment: WIRESPEED (binary, default target/release/wirespeed), DUT
# (linux-router-tbf:50), ROUNDS (3), PREFIX (wss); the search's options in SEARCH; other
# arguments for all three in EXTRA.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
wirespeed=${WIRESPEED:-$here/target/release/wirespeed}
dut=${DUT:-linux-router-tbf:50}
rounds=${ROUNDS:-3}
prefix=${PREFIX:-wss}
# The shaped-router lab test's search: 0.5-s trials, a majority of three per rate.
search=${SEARCH:---frame-sizes 64 --trial-seconds 0.5 --calibration-seconds 0.2 --resolution 1000 --exceed-ratio 0.5 --duration-sum 1.5 --latency-loads= --tests throughput}
out=${1:-$(mktemp -d /tmp/wirespeed-dut-site.XXXXXX)}
mkdir -p "$out"
# shellcheck disable=SC2206 # SEARCH and EXTRA are lists of words
search_words=($search)
# shellcheck disable=SC2206
extra=(${EXTRA:-})

# The lab's fixed addresses (crates/lab): t1 and the DuT's ports by pair.
t1_mac=02:57:53:00:01:01
d0_mac=02:57:53:00:00:fe
d1_mac=02:57:53:00:01:fe

# --- ssh: keys, an sshd configuration, a client configuration whose host runs sshd -i in the
# lab's DuT namespace (which exists while `bench` runs).
ssh=$out/ssh
rm -rf "$ssh"
mkdir -p "$ssh" /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$ssh/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$ssh/user_key"
cp "$ssh/user_key.pub" "$ssh/authorized_keys"
cat > "$ssh/sshd_config" <<EOF
HostKey $ssh/host_key
AuthorizedKeysFile $ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
EOF
echo "wsdut $(cut -d' ' -f1,2 "$ssh/host_key.pub")" > "$ssh/known_hosts"
cat > "$ssh/config" <<EOF
Host wsdut
  User root
  ProxyCommand ip netns exec $prefix-dut /usr/sbin/sshd -i -f $ssh/sshd_config
  HostKeyAlias wsdut
  IdentityFile $ssh/user_key
  IdentitiesOnly yes
  UserKnownHostsFile $ssh/known_hosts
  StrictHostKeyChecking yes
EOF

# --- external: the DuT by hand, in a lab of its own, as the local driver would build it
# (the commands its report lists) and placed as the RFC 2544 placement places it.
lab_down() { "$wirespeed" lab down --prefix "$prefix" > /dev/null 2>&1 || true; }
trap lab_down EXIT
in_dut() { ip netns exec "$prefix-dut" "$@"; }
external_lab() {
  "$wirespeed" lab up --prefix "$prefix" --pairs 2 > /dev/null
  # Veths that push back, as `Testbed::backpressure` gives the tester's own labs.
  for link in t0 t1; do tc -n "$prefix-tester" qdisc replace dev "$prefix-$link" root pfifo limit 1000; done
  for link in d0 d1; do tc -n "$prefix-dut" qdisc replace dev "$prefix-$link" root pfifo limit 8192; done
  case $dut in
    linux-router-tbf:*)
      local mbit=${dut#linux-router-tbf:}
      # tbf's bucket holds 2 ms of the rate and its queue 4 ms (the driver's choice).
      in_dut tc qdisc replace dev "$prefix-d1" root tbf rate "${mbit}mbit" \
        burst $((mbit * 250)) limit $((mbit * 500))
      in_dut sysctl -qw net.ipv4.ip_forward=1
      ip -n "$prefix-dut" neigh replace 198.18.1.1 lladdr "$t1_mac" dev "$prefix-d1" nud permanent
      ip -n "$prefix-dut" route add 198.19.0.0/16 via 198.18.1.1 dev "$prefix-d1"
      external_args=(--dut-mac "$d0_mac" --dut-egress-mac "$d1_mac")
      ;;
    linux-bridge)
      ip -n "$prefix-dut" link add name "$prefix-br" type bridge stp_state 0 forward_delay 0
      ip -n "$prefix-dut" link set "$prefix-d0" master "$prefix-br"
      ip -n "$prefix-dut" link set "$prefix-d1" master "$prefix-br"
      ip -n "$prefix-dut" link set "$prefix-br" up
      external_args=()
      ;;
    *) echo "DUT=$dut: give linux-router-tbf:MBIT or linux-bridge" >&2; exit 2 ;;
  esac
  # d0's receive is the DuT's whole forwarding path: a NAPI thread (a veth has NAPI with GRO
  # on) on core 1, nice -20 and real-time.
  in_dut ethtool -K "$prefix-d0" gro on
  in_dut sh -c "echo 1 > /sys/class/net/$prefix-d0/threaded"
  local pid
  for pid in $(pgrep "^napi/$prefix-d0-"); do
    taskset -pc 1 "$pid" > /dev/null
    renice -n -20 -p "$pid" > /dev/null
    chrt -f -p 1 "$pid"
  done
}

for round in $(seq 1 "$rounds"); do
  echo "round $round/$rounds (load $(cut -d' ' -f1 /proc/loadavg)): local" >&2
  "$wirespeed" bench rfc2544 --dut "$dut" "${search_words[@]}" --prefix "$prefix" \
    "${extra[@]}" --out "$out/local-$round" > "$out/local-$round.txt"
  echo "round $round/$rounds: external" >&2
  external_lab
  ip netns exec "$prefix-tester" "$wirespeed" bench rfc2544 --dut external \
    --tx "$prefix-t0" --rx "$prefix-t1" "${external_args[@]}" "${search_words[@]}" \
    "${extra[@]}" --out "$out/external-$round" > "$out/external-$round.txt"
  lab_down
  echo "round $round/$rounds: ssh" >&2
  "$wirespeed" bench rfc2544 --dut "$dut" --dut-host wsdut --ssh-config "$ssh/config" \
    "${search_words[@]}" --prefix "$prefix" "${extra[@]}" --out "$out/ssh-$round" \
    > "$out/ssh-$round.txt"
done

python3 - "$out" "$rounds" "$dut" <<'EOF'
import json, statistics, sys
out, rounds, dut = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ways = ("local", "external", "ssh")
ndr = {way: [] for way in ways}
for round in range(1, rounds + 1):
    for way in ways:
        with open(f"{out}/{way}-{round}/report.json") as f:
            result = json.load(f)["results"][0]
        found = (result.get("throughput") or {}).get("ndr")
        ndr[way].append(found / 1e6 if found else float("nan"))
print(f"{dut}, NDR in Mpps per round (local, external, ssh interleaved)")
print("| round | " + " | ".join(ways) + " |")
print("| ---: | " + " | ".join("---:" for _ in ways) + " |")
for round in range(rounds):
    print(f"| {round + 1} | " + " | ".join(f"{ndr[w][round]:.4f}" for w in ways) + " |")
medians = {w: statistics.median(ndr[w]) for w in ways}
print("| median | " + " | ".join(
    f"**{medians[w]:.4f}**" + ("" if w == "local" else f" ({medians[w] / medians['local']:.3f}x)")
    for w in ways) + " |")
EOF
