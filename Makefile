# redis-ratelimit: native rate limiting commands for Redis and Valkey.
# `make help` lists the targets.

SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO ?= cargo
PORT ?= 6379
RELEASE_MODULE := target/release/libredis_ratelimit.so
DEBUG_MODULE := target/debug/libredis_ratelimit.so

.PHONY: help deps build run test lint unit integration bench bench-core

help: ## Show this list
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

deps: ## Install missing system packages (redis-server, libclang-dev, cc) with apt-get as root
	@./scripts/deps.sh

build: deps ## Build the module in release mode (target/release/libredis_ratelimit.so)
	$(CARGO) build --release --lib

run: build ## Run redis-server on 127.0.0.1:$(PORT) in the foreground with the module and redis.conf.example
	redis-server redis.conf.example --port $(PORT)

lint: deps ## cargo fmt --check and clippy with -D warnings
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit: deps ## Unit and property tests of the pure code
	$(CARGO) test -p ratelimit-core

integration: deps ## Integration, differential and reliability tests against real servers
	$(CARGO) build --lib
	RATELIMIT_MODULE=$(abspath $(DEBUG_MODULE)) $(CARGO) test -p redis-ratelimit

test: lint unit integration ## Everything: lint, unit, integration, differential, reliability

bench: build ## Native commands against their Lua twins on a throwaway server, plus bench-core; writes bench/results.{md,csv,svg}
	@command -v python3 >/dev/null || { echo "bench: python3 is needed (apt-get install python3)"; exit 1; }
	python3 bench/bench.py --module $(abspath $(RELEASE_MODULE)) --core $(BENCH_ARGS)

bench-core: deps ## Criterion micro-benchmarks of the pure algorithms (ns per decision, fake clock)
	$(CARGO) bench -p ratelimit-core --bench algorithms
