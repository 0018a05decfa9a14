# Hutch. `make build` makes bin/hutch; `make runsc` builds gVisor's runsc
# into bin/ beside it; `make test` runs every test (the sandbox tests need
# root, runc and runsc: ./setup installs them); `make bench` compares Hutch
# with plain runc and unshare.

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X github.com/hutchdev/hutch/internal/app/cli.Version=$(VERSION)
BIN      := bin/hutch

# gVisor's runsc, built from the Go module proxy at a pinned version (one
# that is served and builds with Go 1.26), with the Sentry's seccomp
# programs compiled ahead as gVisor's release builds have them (see
# build/runsc/build.sh). The daemon finds it beside bin/hutch. The stamp
# file rebuilds it when the pin or the way it is built changes (./setup
# asks `make -q runsc`). While it builds, bin/runsc.building holds the
# build's process id: a daemon started meanwhile (./setup does) waits for
# it rather than use runc instead.
RUNSC_VERSION := v0.0.0-20260701204157-69c2d17aea96
RUNSC_STAMP   := bin/.runsc-$(RUNSC_VERSION)-precompiled

.PHONY: build runsc test test-templates attack bench soak lint generate clean fuzz

# The web console (console/: TypeScript and Vite, on the TypeScript SDK),
# built into console/dist/app, gzipped, when its sources change; the binary
# embeds it (package console). Its packages are installed again when its
# lock changes.
CONSOLE     := console/dist/app/index.html.gz
CONSOLE_SRC := $(shell find console/src console/scripts sdk/typescript/src -type f 2>/dev/null) \
	console/index.html console/vite.config.ts console/tsconfig.json console/package.json
CONSOLE_NPM := console/node_modules/.hutch-lock

# The agent every sandbox runs is its own small binary (cmd/hutch-agent),
# built first and embedded in hutch (see internal/agent/agentexe); renamed
# into place, as another build (the end-to-end tests') may read it.
AGENT := internal/agent/agentexe/embed/hutch-agent
build: $(CONSOLE)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(dir $(AGENT)).hutch-agent.$$$$ ./cmd/hutch-agent && \
	mv $(dir $(AGENT)).hutch-agent.$$$$ $(AGENT)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hutch

$(CONSOLE): $(CONSOLE_SRC) $(CONSOLE_NPM)
	cd console && npm run --silent build

$(CONSOLE_NPM): console/package-lock.json
	cd console && npm ci --no-audit --no-fund --loglevel=error
	touch $@

runsc: $(RUNSC_STAMP)

$(RUNSC_STAMP):
	mkdir -p bin
	echo $$$$ >bin/runsc.building; \
	GO=$(GO) build/runsc/build.sh $(RUNSC_VERSION) $(CURDIR)/bin/runsc; \
	status=$$?; rm -f bin/runsc.building; exit $$status
	rm -f bin/.runsc-* && touch $@

# The end-to-end tests build their own binary from the same sources. They
# are the longest part, mostly waiting on sandboxes. First, alone on the
# host, the tests whose checks are about what one workload does to the rest:
# those that measure CPU use (a spin held to its limit, a loop's samples),
# and the hostile workloads (each checks that
# the daemon and a neighbour answer within a bound while it runs, which
# the rest of the suite beside it would decide instead: a health call took
# 2.7 s with it). Then everything else at once: the fuzz targets briefly
# (see fuzz below), the other end-to-end tests,
# 8 at a time (go test would take them last), the other packages, and the
# lifecycle's race tests again under the race detector (cgo: it needs gcc,
# which ./setup installs). Each part's output is printed whole when it
# ends, and how long it took; the end-to-end tests' (run -v) only when they
# fail, else their slowest ten.
E2E  := ./test/e2e/
ALONE := ^(TestHostile|TestCPUSpinStaysWithinItsLimit|TestSandboxMetrics)$$
# The default templates' tests (base, python, browser, desktop) each build their
# template first: minutes on a fresh machine, mostly downloading packages.
# make test-templates runs them, CI after make test; what a build made is
# kept (see docs/templates.md), and the next build of it unpacks it.
TEMPLATES := ^(TestBaseTemplate|TestCodeContexts|TestE2BCodeInterpreter|TestBrowser|TestDesktop|TestAttackDesktopViewOnly)$$
test: build
	CGO_ENABLED=0 $(GO) vet ./...
	@began=$$(date +%s); status=0; \
	$(GO) test -count=1 -timeout 20m -run '$(ALONE)' $(E2E) > bin/alone.log 2>&1 || status=1; cat bin/alone.log; \
	echo "make test: the hostile and CPU tests, alone, took $$(( $$(date +%s) - began )) s"; began=$$(date +%s); \
	$(GO) test -v -count=1 -timeout 25m -parallel 8 -skip '$(ALONE)|$(TEMPLATES)' $(E2E) > bin/e2e.log 2>&1 & e2e=$$!; \
	$(GO) test -count=1 -timeout 10m -race -run 'TestRace' ./internal/core/ > bin/race.log 2>&1 & race=$$!; \
	$(MAKE) --no-print-directory fuzz-short > bin/fuzz.log 2>&1 & fuzz=$$!; \
	$(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/test/e2e$$') || status=1; \
	wait $$race || status=1; cat bin/race.log; \
	wait $$fuzz || status=1; cat bin/fuzz.log; \
	if wait $$e2e; then \
		tail -1 bin/e2e.log; echo "the slowest end-to-end tests (s):"; \
		sed -En 's/^--- PASS: ([^ ]+) \(([0-9.]+)s\)$$/\2 \1/p' bin/e2e.log | sort -rn | head -10; \
	else status=1; grep -v '^=== ' bin/e2e.log; fi; \
	echo "make test: the rest, at once, took $$(( $$(date +%s) - began )) s"; \
	exit $$status

test-templates: build
	@began=$$(date +%s); \
	$(GO) test -v -count=1 -timeout 30m -run '$(TEMPLATES)' $(E2E) > bin/templates.log 2>&1 && status=0 || status=1; \
	if [ $$status = 0 ]; then tail -1 bin/templates.log; sed -En 's/^--- PASS: ([^ ]+) \(([0-9.]+)s\)$$/\2 \1/p' bin/templates.log | sort -rn; \
	else grep -v '^=== ' bin/templates.log; fi; \
	echo "make test-templates took $$(( $$(date +%s) - began )) s"; \
	exit $$status

# The adversarial suite alone (docs/security.md): every TestAttack test,
# the end-to-end ones under both runtimes. make test runs them with the
# rest.
attack: build
	$(GO) test -count=1 -timeout 20m -run '^TestAttack' ./...

# The fuzz targets (go test -fuzz): path confinement of the files of a
# create (the tar reader) and of template imports (the layer reader), of
# the agent's paths and of archived symlinks; the patch parser; Hutchfiles;
# every JSON body of the API; the redaction stream. make fuzz runs each for
# FUZZTIME and keeps what it found in the package's testdata/fuzz (go test
# runs that corpus every time); make test runs each for FUZZTIME_SHORT.
FUZZ := ./internal/storage/rootfs:FuzzWorkspaceFiles ./internal/storage/rootfs:FuzzUntar \
	./internal/agent:FuzzResolvePath ./internal/agent/tools:FuzzLinkStaysInside \
	./internal/agent/tools:FuzzPatch ./internal/storage/rootfs:FuzzParseHutchfile \
	./internal/front/api:FuzzDecodeBodies ./internal/base/redact:FuzzStream \
	./internal/storage/imagestore:FuzzDirNames
FUZZTIME ?= 10m
FUZZTIME_SHORT ?= 20000x
fuzz:
	@cache=$$($(GO) env GOCACHE)/fuzz; for t in $(FUZZ); do \
		pkg=$${t%%:*}; name=$${t##*:}; began=$$(date +%s); \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s $$pkg || exit 1; \
		from=$$cache/$$($(GO) list $$pkg)/$$name; mkdir -p $$pkg/testdata/fuzz/$$name; \
		if [ -d $$from ]; then cp -n $$from/* $$pkg/testdata/fuzz/$$name/ 2>/dev/null; fi; \
		echo "make fuzz: $$name ran $$(( $$(date +%s) - began )) s; its corpus has $$(ls $$pkg/testdata/fuzz/$$name | wc -l) inputs"; \
	done

fuzz-short:
	@for t in $(FUZZ); do pkg=$${t%%:*}; name=$${t##*:}; \
		out=$$($(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME_SHORT) -fuzzminimizetime 2s $$pkg 2>&1) || { echo "$$out"; exit 1; }; \
		echo "$$name: $$(echo "$$out" | grep -o 'execs: [0-9]*' | tail -1), no crash"; \
	done

# The side-by-side benchmarks: their figures go into bench/results.json,
# and docs/performance.md is written from it, also when a row failed after
# others were recorded. BENCHFLAGS='-rows ah' measures rows (a) and (h)
# only; the page keeps the others' last figures.
BENCHFLAGS ?=
bench: build
	$(GO) run ./bench -hutch $(BIN) -json bench/results.json $(BENCHFLAGS); status=$$?; \
	$(GO) run ./bench -write-doc docs/performance.md -from bench/results.json && exit $$status

# The soak and the crash matrix, long (about 20 minutes here; not part of
# make test, which runs the crash matrix once per step): SOAK's lifecycles
# by SOAK_CLIENTS clients under runc and a tenth as many under gVisor, with
# hostile workloads, then each crash step CRASH_ROUNDS times. The full
# figure: make soak SOAK=10000 SOAK_CLIENTS=50.
SOAK ?= 2000
SOAK_CLIENTS ?= 20
CRASH_ROUNDS ?= 20
soak: build runsc
	$(GO) run ./bench -hutch $(BIN) -soak -soak-n $(SOAK) -soak-c $(SOAK_CLIENTS)
	$(GO) test -count=1 -timeout 60m -run '^TestCrashMatrix$$' $(E2E) -crash-rounds $(CRASH_ROUNDS)

# gosec's G104 (unchecked errors) is errcheck's job here, with the
# exclusions listed in .errcheck-excludes; every other finding is fixed or
# marked #nosec with the reason. bench/ is left out: a harness that runs the
# tools it measures and reads /proc and cgroup files is what G204/G304 flag.
lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.7.0 ./...
	$(GO) run github.com/kisielk/errcheck@v1.9.0 -exclude .errcheck-excludes ./...
	$(GO) run github.com/securego/gosec/v2/cmd/gosec@v2.22.10 -quiet -exclude-generated -exclude=G104 -exclude-dir=bench ./...

# Regenerates the agent's Connect/protobuf code from api/*.proto (envd's
# process and filesystem services, and Hutch's own hutch.agent.v1) into
# internal/agent/agentpb/. The generated code is checked in: building needs
# no protoc. Needs
# protoc (apt-get install protobuf-compiler); the Go plugins are pinned in
# go.mod's tool lines.
generate:
	GOBIN=$(CURDIR)/bin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go connectrpc.com/connect/cmd/protoc-gen-connect-go
	PATH=$(CURDIR)/bin:$$PATH protoc -I api \
		--go_out=. --go_opt=module=github.com/hutchdev/hutch \
		--connect-go_out=. --connect-go_opt=module=github.com/hutchdev/hutch \
		api/process/process.proto api/filesystem/filesystem.proto api/agent/v1/agent.proto

clean:
	rm -rf bin

# Hutch on Kubernetes: make image, make test-kube (see test/kube/kube.mk).
include test/kube/kube.mk
