# fluxgo build and test entry points. See README.md.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.1.0-dev)
LDFLAGS := -s -w -X github.com/fluxgo/fluxgo/internal/version.Version=$(VERSION)
export CGO_ENABLED ?= 0

.PHONY: all build demo check test fmt-check vet race bench deb clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/flux ./cmd/flux
	ln -sf flux bin/flux-capacitor

# Quick start, step 1: build and run a demo instance.
demo: build
	./scripts/demo.sh

# Quick start, step 2: the whole test suite (what CI runs).
check:
	./scripts/check.sh

bench: build
	./scripts/bench.sh

# A Debian package of the system instance (docs/SITE.md): dist/flux_*.deb
deb: build
	./packaging/deb/build.sh bin/flux dist $(VERSION)

clean:
	rm -rf bin dist
