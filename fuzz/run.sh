#!/usr/bin/env bash
# Runs every fuzz target for FUZZ_SECONDS seconds (default 60), one after the other, one process
# each, on the stable toolchain (cargo-fuzz with `-s none`: coverage instrumentation and
# `--cfg fuzzing` are stable rustc flags; no sanitizer, since AddressSanitizer needs nightly's
# -Zsanitizer and our code has no `unsafe` outside io's kernel rings).
#
# Each target starts from its committed seeds in corpus/<target>/ and from what earlier runs on
# this machine found (target/corpus/<target>/, where new inputs go, so the committed seeds never
# fill up with generated ones). A crash or hang is saved by libFuzzer in artifacts/<target>/ and
# what failed is printed with the input; the other targets still run, and the script fails at
# the end.
# Closing line: `fuzz: N passed, N failed`.
set -euo pipefail
cd "$(dirname "$0")"
cargo=${CARGO:-cargo}
seconds=${FUZZ_SECONDS:-60}

# The committed Cargo.lock is what is fuzzed: refuse to resolve anything new. It goes stale when
# a fuzzed crate gains a dependency; say so rather than leave cargo's words alone.
if ! "$cargo" fetch --locked --quiet; then
  echo "fuzz/run.sh: fuzz/Cargo.lock does not match the crates it fuzzes; run" \
    "'cargo update --workspace --manifest-path fuzz/Cargo.toml' and commit fuzz/Cargo.lock" >&2
  exit 1
fi
# One build for every target (debug assertions and overflow checks on, as cargo-fuzz does);
# the targets then run from it directly, so that no run waits for a rebuild.
host=$(rustc -vV | sed -n 's/^host: //p')
"$cargo" fuzz build -s none --target "$host"
bin="target/$host/release"

passed=0
failed=0
mkdir -p target/logs
for target in $("$cargo" fuzz list); do
  mkdir -p "target/corpus/$target" "artifacts/$target"
  log="target/logs/$target.log"
  # -timeout: one input running 10 s is a hang; -rss_limit_mb: growing past 2 GiB is a leak.
  if "$bin/$target" "target/corpus/$target" "corpus/$target" -artifact_prefix="artifacts/$target/" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
    echo "fuzz: $target: ${runs:-?} runs in ${seconds} s, ${coverage:-cov: ?}, no crash"
    passed=$((passed + 1))
  else
    # What failed, where the input was saved, and the input itself (Base64), so that a failure
    # seen only in CI's output can be replayed; the backtrace stays in the log.
    echo "fuzz: $target FAILED (whole log: fuzz/$log)"
    grep -m 1 -A 3 'panicked at' "$log" ||
      grep -E '^(==[0-9]+== ERROR|ERROR|SUMMARY)' "$log" || tail -n 20 "$log"
    grep -E '^(artifact_prefix|Base64)' "$log" || true
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
