# segchain: make demo | make test (as root on Debian 12). See README.md.
GO       ?= go
BIN      := bin/segchain
GOFLAGS  ?=
TESTFLAGS ?= -count=1 -timeout 30m

.PHONY: all deps build generate test unit demo clean

all: build

deps:
	@scripts/deps.sh

build:
	$(GO) build $(GOFLAGS) -o $(BIN) ./cmd/segchain

# Unprivileged tests only (no namespaces): quick feedback while editing.
unit:
	$(GO) test $(TESTFLAGS) -short ./...

test: deps build
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...

demo: deps build
	@scripts/demo.sh

clean:
	rm -rf bin
