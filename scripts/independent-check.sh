#!/usr/bin/env bash
# Issue 18's agreement check: `bench forwarding` with the tester's own sender and sink
# (--generator xdp-live) against the same trials sent by xdp-tools' xdp-trafficgen and counted
# by its xdp-bench drop (--generator xdp-tools), both in the product's lab with the product's
# DuT setup and placement. The two alternate, one run each, ROUNDS times (A B A B ...), so a
# drift of the shared machine spreads over both; then the median of each (DuT, flows) over the
# rounds and the ratio tester / independent, which the goal wants within 10 %.
#
# Usage: scripts/independent-check.sh [OUT_DIR]   (root; builds xdp-tools first if missing)
# Environment: WIRESPEED (binary, default target/release/wirespeed), ROUNDS (3), DUTS
# (linux-bridge,xdp-redirect), FLOWS (1,256), TRIAL_SECONDS (5), PREFIX (wsi); other arguments for
# both runs in EXTRA (e.g. "--nice off").
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
wirespeed=${WIRESPEED:-$here/target/release/wirespeed}
rounds=${ROUNDS:-3}
duts=${DUTS:-linux-bridge,xdp-redirect}
flows=${FLOWS:-1,256}
seconds=${TRIAL_SECONDS:-5}
prefix=${PREFIX:-wsi}
out=${1:-$(mktemp -d /tmp/wirespeed-independent.XXXXXX)}
mkdir -p "$out"

bash "$here/scripts/build-xdp-tools.sh"
# The xdp-tools trial's own lab test first (ignored by `make test`, which cannot build them).
(cd "$here" && cargo test --release --locked -p wirespeed-tester --test dut -- --ignored \
  an_xdp_tools_trial_counts_what_t1_received_and_detaches_both_programs)
# The benchmark removes its lab itself, also when interrupted; this catches a killed run.
trap '"$wirespeed" lab down --prefix "$prefix" >/dev/null 2>&1 || true' EXIT

for round in $(seq 1 "$rounds"); do
  for generator in xdp-live xdp-tools; do
    echo "round $round/$rounds: --generator $generator" >&2
    # shellcheck disable=SC2086 # EXTRA is a list of words
    "$wirespeed" bench forwarding --duts "$duts" --flows "$flows" --runs 1 \
      --trial-seconds "$seconds" --generator "$generator" --prefix "$prefix" \
      --out "$out/$generator-$round" ${EXTRA:-} > "$out/$generator-$round.txt"
  done
done

python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
# (dut, flows) -> generator -> [Mpps per round]; for the generator alone, what it offered
rates = {}
for generator in ("xdp-live", "xdp-tools"):
    for round in range(1, rounds + 1):
        with open(f"{out}/{generator}-{round}/forwarding.json") as f:
            for s in json.load(f)["summaries"]:
                if s["trials"]:
                    alone = s["dut"] == "generator-ceiling"
                    key = ("generator alone (offered)" if alone else s["dut"], s["flows"])
                    pps = s["offered_median_pps"] if alone else s["median_pps"]
                    rates.setdefault(key, {}).setdefault(generator, []).append(pps / 1e6)
print("| DuT | flows | xdp-live (tester), median Mpps (runs) | xdp-tools (independent) | tester / independent |")
print("| --- | ---: | --- | --- | ---: |")
for (dut, flows), by in rates.items():
    live, tools = by.get("xdp-live", []), by.get("xdp-tools", [])
    if not live or not tools:
        continue
    ml, mt = statistics.median(live), statistics.median(tools)
    runs = lambda xs: ", ".join(f"{x:.3f}" for x in xs)
    ratio = f"{ml / mt:.2f}" if mt > 0 else "-"
    print(f"| {dut} | {flows} | {ml:.3f} ({runs(live)}) | {mt:.3f} ({runs(tools)}) | {ratio} |")
print(f"\nevery run's report and JSON: {out}")
EOF
