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
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

# The main job: build wirespeed, check it on a capture, then an RFC 2544 run against it in a
# namespace lab, with a summary table and a report in reports/demo.
demo: build
	./target/release/wirespeed demo --out reports/demo

# Criterion micro- and pipeline benchmarks (figures go to docs/benchmarks.md with the command).
bench: setup
	$(CARGO) bench --workspace --locked -- $(BENCH_ARGS)

# Every fuzz target for FUZZ_SECONDS seconds each (stable toolchain, no sanitizer).
fuzz:
	command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd fuzz && for target in $$($(CARGO) fuzz list); do \
		$(CARGO) fuzz run -s none $$target -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

# Removes namespaces left by a killed lab run (prefix ws).
clean-lab:
	-./target/release/wirespeed lab down
