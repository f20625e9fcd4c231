# The same checks CI runs (.ci/run), for running locally.
.PHONY: test ci fmt lint bench-monitor demo

# The README's test command: installs the system packages the tests need (PostgreSQL,
# curl), builds both binaries (the end-to-end tests run the real strainline and
# strainline-testbed), then runs every test.
test:
	bash scripts/test-deps.sh
	cargo build --workspace --bins
	cargo test --workspace

fmt:
	cargo fmt --all -- --check

lint:
	cargo clippy --all-targets -- -D warnings

ci:
	bash .ci/run

bench-monitor:
	bash bench/monitor-overhead.sh
