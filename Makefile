# snapflow: `make demo` and `make test` are the two commands a newcomer needs.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

BIN        := $(CURDIR)/bin
GO         ?= go
GOFLAGS    ?= -mod=mod
export GOFLAGS
export GOTOOLCHAIN := local
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X github.com/snapflow/snapflow/internal/version.Version=$(VERSION)
# The e2e package is the slowest binary: 17.8 min measured on a quiet 2-core
# machine, over 30 on a busy one. Its timeout is over twice that.
TEST_FLAGS ?= -count=1 -timeout 75m
FLAKE_RUNS ?= 5

.PHONY: all tools build generate test test-unit vet lint demo demo-up bench clean help flake-hunt image image-push release

all: build

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

tools: ## build the pinned kube-apiserver, etcd, kubectl, controller-gen, helm, versitygw, promtool, fake-gcs-server and golangci-lint into bin/ (skips what is current); as root, install runc for the local node
	@bash hack/runc.sh
	@bash hack/tools.sh
	@$(GO) run ./test/prefetch

build: ## build bin/snapflow
# Static and path-free, as the release builds it: the release check in
# make test then reuses these compiled packages and only links again.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/snapflow ./cmd/snapflow

image: ## build the container image (OCI layout, a loadable tarball per platform, its digest) into bin/image; reproducible per commit
	$(GO) run ./hack/dist image -o $(BIN)/image

image-push: image ## push bin/image to REGISTRY (e.g. make image-push REGISTRY=ghcr.io/acme), with your docker or crane login
	@test -n "$(REGISTRY)" || { echo "REGISTRY is required: make image-push REGISTRY=ghcr.io/acme" >&2; exit 2; }
	$(GO) run ./hack/dist push -layout $(BIN)/image/oci -registry $(REGISTRY)

release: ## CLI archives (linux, darwin x amd64, arm64), image tarballs, the chart pinned to the image digest, a krew manifest, an SBOM, release notes and checksums into bin/release
	@bash hack/tools.sh helm
	$(GO) run ./hack/dist release -o $(BIN)/release -helm $(BIN)/helm

generate: ## regenerate deepcopy code and CRDs from api/v1alpha1
	@bash hack/tools.sh controller-gen
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd/bases

vet:
	$(GO) vet ./...

lint: ## golangci-lint with .golangci.yml (the floors, errcheck, staticcheck, revive, ...)
	@bash hack/tools.sh golangci-lint
	$(BIN)/golangci-lint run ./...

test: tools build vet lint ## the whole suite: unit and e2e tests on the real control plane, then the demo
# The e2e package first: go test runs its work in the order of its
# arguments, and the longest package should start as soon as it is built,
# with the unit packages beside it, not after them.
	SNAPFLOW_REQUIRE_TOOLS=1 $(GO) test $(TEST_FLAGS) ./test/e2e/ $$($(GO) list ./... | grep -v '/test/e2e$$')
# The release builds and checks itself (the chart pinned to the image
# digest, the krew manifest, the notes) for this machine's platform.
	$(GO) run ./hack/dist release -o $(BIN)/release-check -helm $(BIN)/helm -platforms $$($(GO) env GOOS)/$$($(GO) env GOARCH) -image-platforms linux/$$($(GO) env GOARCH)
# Counts, not durations: Go 1.26's fuzz coordinator can fail a clean run
# with "context deadline exceeded" when a -fuzztime duration expires
# (golang/go#75804, fixed in 1.27); a count has no deadline, so a busy
# machine only makes the run slower.
	$(GO) test -run='^$$' -fuzz=FuzzAdmissionReview -fuzztime=3000x -fuzzminimizetime=200x ./webhook/
	$(GO) run ./test/demo

test-unit: ## the unit tests alone: no bin/ needed, tests that need a tool from make tools skip and say so
	$(GO) test $(TEST_FLAGS) $$($(GO) list ./... | grep -v '/test/e2e$$')

flake-hunt: tools build ## run the e2e suite FLAKE_RUNS times (default 5), the last next to a CPU-burning neighbour, and report each test's pass count
	$(GO) run ./test/flakehunt -n $(FLAKE_RUNS) -o $(BIN)/flake-hunt.md

demo: tools build ## start the local stack, apply the try-it bundle, show it, stop
	$(GO) run ./test/demo

demo-up: tools build ## like demo, but leave the stack running (Ctrl-C stops it)
	$(GO) run ./test/demo -keep

bench: build ## run the benchmarks and rewrite docs/benchmarks.md (needs restic: apt-get install restic)
	@bash hack/tools.sh kopia
	@command -v restic >/dev/null || { echo "restic is a benchmark peer: apt-get install restic" >&2; exit 1; }
	$(GO) run ./bench/webhook
	$(GO) run ./bench/retention
	$(GO) run ./bench/backup
	$(GO) run ./bench/backup -backend s3
	$(GO) run ./bench/maintenance

clean: ## remove built binaries and tools
	rm -rf $(BIN)
