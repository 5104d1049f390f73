# tether build, test and tooling. `make help` lists the targets.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO ?= go
FUZZTIME ?= 10s

# The binary the e2e tests start; exported so `go test` finds it.
TETHER_BIN := $(CURDIR)/bin/tether
export TETHER_BIN
# Where the e2e tests find ide_client.js and its node_modules.
TETHER_E2E_CLIENTS := $(CURDIR)/e2e/clients
export TETHER_E2E_CLIENTS

# Project-local Go tools. They come first on PATH for every recipe, so tests
# that look up `dlv` get the pinned delve, not Debian's (1.20, too old to debug
# Go 1.26 programs).
TOOLS := $(CURDIR)/.bin
export PATH := $(TOOLS):$(PATH)
STATICCHECK_VERSION := v0.8.2
DELVE_VERSION := v1.27.2
# pebble: Let's Encrypt's test ACME server, for the ACME e2e test.
PEBBLE_VERSION := v2.10.3
# cyclonedx-gomod: the SBOM of make release (CycloneDX, the module graph).
CYCLONEDX_GOMOD_VERSION := v1.10.0

# Debian packages the tests use: Redis for the bus, debug adapters for dap,
# bubblewrap and ripgrep for terminal/sandbox, gcc for -race; python3-aiohttp
# (with python3-socketio and python3-redis) for the python peer of bench-peers;
# prometheus for promtool, which checks deploy/prometheus, and haproxy, which
# e2e/deploy_test.go runs with deploy/compose/haproxy.cfg (scripts/apt-deps.sh
# installs both without their recommends and keeps their servers stopped);
# systemd for systemd-analyze, which verifies deploy/systemd's units; podman
# with runc (crun fails on these machines' cgroups) for make image and its
# test, busybox-static for the root filesystem the sandbox container tests
# import as their image (nothing is pulled), ca-certificates for the image's
# /etc/ssl/certs, file for the release test's static-binary check.
APT_PACKAGES := redis-server lldb-19 python3-debugpy delve gcc gdb ripgrep bubblewrap python3-redis git python3-socketio python3-websocket python3-requests python3-aiohttp prometheus haproxy systemd podman runc busybox-static ca-certificates file

CLIENTS := e2e/clients
# The servers bench-peers compares tether with (their npm packages are not
# part of deps: only bench-peers needs them).
PEERS := e2e/bench/peers
# bench-peers: BASELINE=old.json flags figures worse than that run's;
# UPDATE_DOCS=1 fills the results section of docs/benchmarks.md and its chart;
# RENDER=run.json writes the report of that earlier run again, measuring nothing.
BASELINE ?=
UPDATE_DOCS ?=
RENDER ?=
BENCH_PEERS_OUT ?= $(CURDIR)/bin/bench-peers

# podman's settings for make image and the image test: runc and cgroupfs,
# the ulimits containers get here (deploy/podman/containers.conf).
CONTAINERS_CONF ?= $(CURDIR)/deploy/podman/containers.conf
export CONTAINERS_CONF

.PHONY: help deps deps-apt deps-node deps-peers deps-tools build test fuzz cross release image fmt lint bench bench-go bench-e2e bench-peers chaos soak run clean

help:
	@echo 'make deps       install Debian packages, e2e node clients, staticcheck, delve, pebble and cyclonedx-gomod'
	@echo '                 (idempotent)'
	@echo 'make build      build bin/tether'
	@echo 'make test       deps + build, go test -race ./..., broker without -race, e2e with TETHER_TUNING=off, every fuzz target for $$FUZZTIME (10s),'
	@echo '                 then make cross, then the release and image tests (e2e/release), then'
	@echo '                 scripts/deploy-check.sh (promtool, systemd-analyze, compose file and Kubernetes'
	@echo '                 manifests through their loaders: deploy/check)'
	@echo 'make fuzz       only the fuzz targets (FUZZTIME=1m make fuzz for longer)'
	@echo 'make cross      compile and vet for macOS (darwin/arm64, darwin/amd64) and Windows (windows/amd64:'
	@echo '                 the broker and clients), which CI cannot run (docs/platforms.md)'
	@echo 'make release    dist/tether_<version>_<os>_<arch>.tar.gz for linux and darwin, amd64 and arm64 (static,'
	@echo '                 reproducible, built from a fresh clone of HEAD), the SBOM and SHA256SUMS; VERSION=v1.2.3'
	@echo '                 overrides the version (default: git describe --tags; with no tag v0.0.0-<commit time>-<commit>)'
	@echo 'make image      podman image localhost/tether:<version>: the static linux binary, CA certificates and a'
	@echo '                 non-root user, FROM scratch (IMAGE=name:tag to name it otherwise)'
	@echo 'make fmt        gofmt -w the Go files'
	@echo 'make lint       gofmt -l, go mod tidy -diff, go vet, staticcheck'
	@echo 'make bench      Go benchmarks, then bench-e2e'
	@echo 'make bench-e2e  e2e load benchmarks against bin/tether'
	@echo 'make bench-peers  tether side by side with node socket.io and python-socketio (minutes;'
	@echo '                 BASELINE=old.json flags regressions, UPDATE_DOCS=1 fills docs/benchmarks.md,'
	@echo '                 RENDER=run.json redoes the report of an earlier run;'
	@echo '                 knobs: see docs/benchmarks.md)'
	@echo 'make chaos      the chaos run: brokers, Redis, bridges and clients under random faults, every'
	@echo '                 call checked (about a minute; CHAOS_CALLS=1000000 CHAOS_DURATION=3h for the long'
	@echo '                 run; knobs: e2e/chaos/doc.go, results: docs/reliability.md)'
	@echo 'make soak       10,000 idle connections and 1,000 bridges on one broker for minutes, then'
	@echo '                 everything disconnected back to the baseline (knobs: e2e/soak/doc.go)'
	@echo 'make run        build and run bin/tether up --root .'

deps: deps-apt deps-node deps-tools

deps-apt:
	@scripts/apt-deps.sh $(APT_PACKAGES)

deps-node: $(CLIENTS)/node_modules/.package-lock.json

deps-peers: $(PEERS)/node_modules/.package-lock.json

# npm ci writes node_modules/.package-lock.json, so this reruns only when the
# committed lockfile or package.json is newer than the installed tree.
%/node_modules/.package-lock.json: %/package-lock.json %/package.json | deps-apt
	cd $* && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

deps-tools: $(TOOLS)/.staticcheck-$(STATICCHECK_VERSION) $(TOOLS)/.dlv-$(DELVE_VERSION) $(TOOLS)/.pebble-$(PEBBLE_VERSION) $(TOOLS)/.cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)

# The stamp's name carries the version, so bumping a version reinstalls.
$(TOOLS)/.staticcheck-$(STATICCHECK_VERSION):
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@touch $@

$(TOOLS)/.dlv-$(DELVE_VERSION):
	GOBIN=$(TOOLS) $(GO) install github.com/go-delve/delve/cmd/dlv@$(DELVE_VERSION)
	@touch $@

$(TOOLS)/.pebble-$(PEBBLE_VERSION):
	GOBIN=$(TOOLS) $(GO) install github.com/letsencrypt/pebble/v2/cmd/pebble@$(PEBBLE_VERSION)
	@touch $@

# -trimpath: the SBOM names the generator by the hashes of its binary, which
# then depend on the Go version alone, not on where its sources were.
$(TOOLS)/.cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION):
	GOBIN=$(TOOLS) $(GO) install -trimpath github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)
	@touch $@

build:
	$(GO) build -o $(TETHER_BIN) ./cmd/tether

# The release of HEAD into dist/ (scripts/release.sh says what and how).
release: $(TOOLS)/.cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)
	@GO=$(GO) scripts/release.sh

# The image of HEAD's release binary (scripts/image.sh; deploy/image).
image: deps-apt $(TOOLS)/.cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)
	@GO=$(GO) scripts/image.sh

test: deps build
	@GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/test.sh

fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

cross:
	@GO=$(GO) scripts/cross.sh

# Tracked and new (not ignored) Go files; node_modules and tools stay out.
GO_FILES = $(shell git ls-files -co --exclude-standard -- '*.go')

fmt:
	@files="$(GO_FILES)"; [ -z "$$files" ] || gofmt -w $$files

lint: $(TOOLS)/.staticcheck-$(STATICCHECK_VERSION)
	@files="$(GO_FILES)"; bad=$$([ -z "$$files" ] || gofmt -l $$files); \
	if [ -n "$$bad" ]; then echo "gofmt would change (run make fmt):"; echo "$$bad"; exit 1; fi
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy (run go mod tidy):"; $(GO) mod tidy -diff; exit 1; }
	$(GO) vet ./...
	staticcheck ./...
	@# deploy/check is a module of its own (compose-go, the Kubernetes API types).
	cd deploy/check && $(GO) mod tidy -diff >/dev/null && $(GO) vet ./... && staticcheck ./...

# Micro benchmarks everywhere but e2e, then the e2e load benchmarks once.
bench: bench-go bench-e2e

bench-go: deps build
	$(GO) test -run '^$$' -bench . -benchmem $$($(GO) list -e ./... | grep -v '/e2e\(/\|$$\)')

# Hook for the e2e load benchmarks (Go code in e2e/, written by the broker
# work): each Benchmark runs once against the real binary in $$TETHER_BIN.
bench-e2e: deps build
	@if [ -z "$$($(GO) list -e ./e2e/... 2>/dev/null)" ]; then echo "bench-e2e: no Go packages under e2e/ yet"; exit 0; fi; \
	set -x; $(GO) test -run '^$$' -bench . -benchtime 1x ./e2e/...

# tether against node socket.io and python-socketio, every system driven by
# the same echo client and load generator (docs/benchmarks.md). First checks
# that an interrupt stops every process the benchmark starts.
bench-peers: deps deps-peers build
	TETHER_BENCH_PEERS=1 BENCH_PEERS_OUT='$(BENCH_PEERS_OUT)' BENCH_PEERS_BASELINE='$(if $(BASELINE),$(abspath $(BASELINE)))' \
	BENCH_PEERS_DOC='$(if $(UPDATE_DOCS),$(CURDIR)/docs/benchmarks.md)' \
	BENCH_PEERS_COMMAND='make bench-peers$(if $(BASELINE), BASELINE=$(BASELINE))$(if $(UPDATE_DOCS), UPDATE_DOCS=$(UPDATE_DOCS))' \
	BENCH_PEERS_RENDER='$(if $(RENDER),$(abspath $(RENDER)))' \
	$(GO) test -count=1 -timeout 2h -run '$(if $(RENDER),^$$,^TestPeersInterruptStopsEveryChild$$)' -bench '^BenchmarkPeers$$' -benchtime 1x ./e2e/bench/

# The chaos run (e2e/chaos; its short configuration is part of make test).
# CHAOS_* variables given to make reach the test: make chaos CHAOS_CALLS=1000000.
chaos: deps build
	$(GO) test -count=1 -timeout 12h -run '^TestChaos$$' -v ./e2e/chaos/

# The soak (e2e/soak): minutes, thousands of connections; not part of make test.
soak: deps build
	TETHER_SOAK=1 $(GO) test -count=1 -timeout 2h -run '^TestSoak$$' -v ./e2e/soak/

run: build
	$(TETHER_BIN) up --root $(CURDIR)

clean:
	rm -rf bin dist
