# One entry point. `make test` is what CI runs.
CARGO ?= cargo

.PHONY: test check fmt clippy build bench-engine

test:
	$(CARGO) test --workspace --release

check: fmt clippy test

fmt:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

build:
	$(CARGO) build --workspace --release

bench-engine:
	$(CARGO) run --release -p silt-bench -- engine --json engine.json
