# wirespeed: the README's commands. `make demo` and `make test` do all the set-up themselves.
CARGO ?= cargo
FUZZ_SECONDS ?= 60
BENCH_ARGS ?= --warm-up-time 1 --measurement-time 5

.PHONY: setup build test lint demo bench fuzz clean-lab

# Debian packages the tests and the demo need (tshark, iproute2, ...); a no-op when present.
setup:
	bash scripts/setup-debian.sh

build: setup
	$(CARGO) build --release --locked -p wirespeed

# Formatting, lints and every test. Tests that need root and network namespaces run when
# root (always in CI) and skip with a printed reason otherwise.
test: setup lint
	$(CARGO) test --workspace --locked

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) fmt --manifest-path fuzz/Cargo.toml --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

# The main job: build wirespeed, check it on a capture, then an RFC 2544 run against it in a
# namespace lab, with a summary table and a report in reports/demo.
demo: build
	./target/release/wirespeed demo --out reports/demo

# Criterion micro- and pipeline benchmarks (figures go to docs/benchmarks.md with the command).
bench: setup
	$(CARGO) bench --workspace --locked -- $(BENCH_ARGS)

# Every fuzz target for FUZZ_SECONDS seconds each, one after the other, on the stable toolchain
# (fuzz/run.sh says how; CI runs it with FUZZ_SECONDS=20). cargo-fuzz is pinned: its build flags
# are what make stable work, so a new version is taken on purpose, not by accident.
CARGO_FUZZ_VERSION = 0.13.2
fuzz: setup
	$(CARGO) fuzz --version 2>/dev/null | grep -qx 'cargo-fuzz $(CARGO_FUZZ_VERSION)' || \
		$(CARGO) install cargo-fuzz --version $(CARGO_FUZZ_VERSION) --locked
	CARGO=$(CARGO) FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh

# Removes namespaces left by a killed lab run (prefix ws).
clean-lab:
	-./target/release/wirespeed lab down
