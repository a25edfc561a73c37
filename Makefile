# One entry point. `make test` is what CI runs.
CARGO ?= cargo

.PHONY: test test-rust test-compat test-shell test-bench check fmt clippy build run bench-engine bench-pymongo

# Every test: the Rust tests, the pymongo compatibility suite against a real siltd, the shell
# helpers through a real mongosh, and the benchmark harness's smoke test (its peers only where
# they are built).
test: test-rust test-compat test-shell test-bench

test-rust:
	$(CARGO) test --workspace --release

test-compat:
	bash tests/compat/run.sh

test-shell:
	bash tests/shell/run.sh

test-bench:
	bash bench/smoke.sh

run:
	$(CARGO) run --release -p siltd

check: fmt clippy test

fmt:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

build:
	$(CARGO) build --workspace --release

bench-engine:
	$(CARGO) run --release -p silt-bench -- engine --json engine.json

bench-pymongo:
	bash tests/compat/run.sh --collect-only -q >/dev/null
	target/compat-venv/bin/python tests/compat/throughput.py --json pymongo.json
