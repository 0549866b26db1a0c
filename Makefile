# troupe's build, test and benchmark targets. Every install step the project
# needs lives here or in a script under scripts/ that a target calls.
SHELL := /bin/bash
GO    ?= go
BIN   := bin/troupe
# Race-detected unit tests need cgo (gcc is installed by `deps` if missing).
# checkptr is off: GoMLX's CPU matmul trips it in race builds (a false alarm
# that kills the whole test binary); the race detector itself stays on.
TEST_FLAGS ?= -race -gcflags=all=-d=checkptr=0 -count=1 -timeout 15m
FUZZTIME   ?= 10s
# Builds that run (troupe itself, benchmarks, the demo) use Go's SIMD
# experiment: AVX-512 elementwise kernels in the engine and ~2.7× faster
# GoMLX on CPU. Tests use the default build, which exercises the portable
# fallbacks. Set SIMD= to build without it.
SIMD       ?= simd

.PHONY: help build demo ablations test test-unit lint test-integration bench fuzz deps clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: ## build bin/troupe
	GOEXPERIMENT=$(SIMD) $(GO) build -o $(BIN) ./cmd/troupe

demo: deps build ## the embedded CPU demo: tiny model, troupe serve, AT-GRPO on Plan-Path, report
	@scripts/demo.sh

ablations: deps build ## the paper's ablations at toy scale on the embedded engine, with a comparison report
	@scripts/ablations.sh

deps: ## install the toolchain pieces the tests need (gcc for -race)
	@scripts/deps.sh

test: deps lint test-unit ## what CI runs: vet, gofmt check, unit tests with -race

lint: ## go vet and gofmt check
	$(GO) vet ./...
	@scripts/check-gofmt.sh

test-unit:
	$(GO) test $(TEST_FLAGS) ./...
	@# Environments scale their 10k-instance and oracle checks down under -race
	@# (envtest.Scale); run them once more at full size without it.
	$(GO) test -count=1 -timeout 15m ./envs/...

test-integration: deps build ## slow and cross-tool checks (npm-installed DuckDB, tokenizer reference, …)
	$(GO) test -tags integration -count=1 -timeout 60m ./...
	@scripts/run-dir.sh scripts/integration.d

bench: deps build ## benchmarks, printed as one table (TROUPE_BENCH_LARGE=1 adds ~0.5B-parameter models)
	@GOEXPERIMENT=$(SIMD) scripts/bench.sh

fuzz: ## run every fuzz target for FUZZTIME each
	@FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

clean: ## remove build outputs
	rm -rf bin
