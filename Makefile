# segchain: make demo | make test (as root on Debian 12). See README.md.
GO       ?= go
BIN      := bin/segchain
GOFLAGS  ?=
TESTFLAGS ?= -count=1 -timeout 30m

.PHONY: all deps build generate check-generated test test-repeat unit skipcheck race fuzz demo clean

all: build

deps:
	@scripts/deps.sh

# segchain version reports these (else Go's embedded VCS information).
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# bin/segchain-agent is `segchain agent` in a binary of its own (the agent's
# packages only: a smaller resident set per agent); see docs/agents.md.
build:
	$(GO) build $(GOFLAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/segchain
	$(GO) build $(GOFLAGS) -ldflags "$(LDFLAGS)" -o $(BIN)-agent ./cmd/segchain-agent

# Regenerate the committed eBPF objects and Go bindings (bpf2go; needs clang)
# and the agent protocol's Go code (protoc; proto/).
# The protoc plugins are installed by scripts/deps.sh into $(GOBIN_DIR).
GOBIN_DIR ?= $(shell $(GO) env GOPATH)/bin
generate:
	PATH="$(GOBIN_DIR):$$PATH" $(GO) generate ./...

# CI: the committed generated files must be what the C sources produce.
check-generated: generate
	@git diff --exit-code --stat -- '*_bpfel.go' '*_bpfel.o' '*_bpfconst.go' '*.pb.go' || \
		{ echo "generated eBPF or protobuf files are stale: run make generate and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- '*.pb.go')" || \
		{ echo "make generate made protobuf files that are not committed" >&2; exit 1; }

# Unprivileged tests only (no namespaces): quick feedback while editing.
unit:
	$(GO) test $(TESTFLAGS) -short ./...

# test and test-repeat run go test through test/skipcheck: it prints what
# go test prints (failures, a line per package), fails the run on any skip
# test/skipcheck/allow.txt does not name (a skip is a test that did not
# run), and counts passed / failed / skipped by reason.
SKIPCHECK := bin/skipcheck -allow test/skipcheck/allow.txt
skipcheck:
	$(GO) build -o bin/skipcheck ./test/skipcheck

# The CI time budget (20 minutes on 2 cores, issue #28; README.md "Two
# commands"):
#  - the namespace tests use the bin/segchain `make build` just made
#    (SEGCHAIN_BIN) instead of each test binary building its own;
#  - go test starts packages in the order given: the long namespace
#    packages first (SLOW_PKGS, longest first), so that the run does not
#    end with one of them alone while the other slots idle;
#  - -vet=off: go test would vet every package again (a subset of the
#    checks of the go vet ./... that make test runs);
#  - TEST_P packages at a time (go test's default is one per core): the
#    namespace tests spend much of their time waiting on the kernel,
#    captures and daemons, not on the CPU;
#  - go vet and make race run alongside (their output printed after the
#    main run's): the main run's length is its longest package (test/agents,
#    waiting on its labs for most of it), the CPU idles meanwhile.
SLOW_PKGS := ./test/agents ./test/e2e ./test/fw ./test/apply ./test/bgp ./test/docs ./test/oam ./test/pools ./test/proxy ./test/fuzz \
	./internal/dataplane/netfilter ./pkg/srv6svc ./internal/dataplane/firewall ./internal/perf ./test/native \
	./internal/ids ./examples/services/ids ./test/userspace ./test/usid ./internal/lab ./internal/cpbench
TEST_P ?= 3
TESTENV := SEGCHAIN_BIN=$(CURDIR)/$(BIN)

test: deps build skipcheck
	@( $(GO) vet ./...; vet=$$?; $(RACE) && exit $$vet ) >bin/vet-race.log 2>&1 & bg=$$!; \
	$(TESTENV) $(SKIPCHECK) -- $(GO) test -json -vet=off -p $(TEST_P) $(TESTFLAGS) $(SLOW_PKGS) ./...; main=$$?; \
	wait $$bg; rc=$$?; echo "--- go vet ./... and make race"; cat bin/vet-race.log; \
	[ $$main = 0 ] && [ $$rc = 0 ]

# The unit packages' tests once more under the race detector (test/ and
# examples/ are integration tests). The namespace tests skip here
# (SEGCHAIN_TEST_UNPRIVILEGED: testutil.RequireRoot); they run without
# -race above. Timing: README.md ("Two commands").
RACE_PKGS := ./internal/... ./pkg/... ./cmd/...
RACE = SEGCHAIN_TEST_UNPRIVILEGED=1 $(SKIPCHECK) -short -- $(GO) test -json -vet=off -race -short $(TESTFLAGS) $(RACE_PKGS)
race: skipcheck
	$(RACE)

# Coverage-guided fuzzing of every fuzz target for FUZZTIME each (go test
# alone runs only their seeds and committed corpora): scripts/fuzz.sh.
FUZZTIME ?= 8s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

# The namespace-heavy packages once more (with `test`, two runs): a race
# that fails one run in a few shows up before it lands (REPEAT_COUNT=2 for
# more; CI runs one to stay near its time budget, README.md).
# test/fw (4 min a run, most of `test`) runs once; its captures and
# namespaces use the same helpers as test/native and test/proxy. Timings
# on 2 shared cores: README.md ("Two commands").
REPEAT_PKGS := ./test/e2e ./test/apply ./test/proxy ./internal/dataplane/firewall ./test/native ./internal/perf ./internal/lab ./internal/dataplane/srunaware
REPEAT_COUNT ?= 1
test-repeat: deps build skipcheck
	$(TESTENV) $(SKIPCHECK) -- $(GO) test -json -vet=off -p $(TEST_P) -count=$(REPEAT_COUNT) -timeout 30m $(REPEAT_PKGS)

demo: deps build
	@scripts/demo.sh

clean:
	rm -rf bin
