# The same checks CI runs (.ci/run), for running locally.
.PHONY: test ci fmt lint bench-monitor demo

# The README's test command: installs the system packages the tests need (PostgreSQL,
# curl), builds both binaries (the end-to-end tests run the real strainline and
# strainline-testbed), then runs every test.
test:
	bash scripts/test-deps.sh
	cargo build --workspace --bins
	# One test at a time: the end-to-end tests measure real processes against known
	# truths (CPU, latency, leaks) on a 2-core machine; two at once disturb each other.
	cargo test --workspace -- --test-threads=1

fmt:
	cargo fmt --all -- --check

lint:
	cargo clippy --all-targets -- -D warnings

ci:
	bash .ci/run

bench-monitor:
	bash bench/monitor-overhead.sh
