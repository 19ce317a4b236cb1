GO ?= go
# Packages whose code runs goroutines: their tests also run under -race.
RACE_PKGS = ./engine ./actors/... ./cluster/... ./client/... ./persist/... ./transport/... ./server/... ./internal/warm/... ./internal/fixed/...

.PHONY: run test build vet fuzz bench bench-quick gobench screenshots mutate clean

# make run HTTP=:9090 NATS=127.0.0.1:4333 DATA=./data2; any other serve flag
# through its PLAUDIT_* variable (plaudit serve --help lists them).
HTTP ?= $(or $(PLAUDIT_HTTP),:8080)
NATS ?= $(or $(PLAUDIT_NATS_LISTEN),127.0.0.1:4222)
DATA ?= $(or $(PLAUDIT_DATA),./data)

run: build
	./bin/plaudit serve --data '$(DATA)' --http '$(HTTP)' --nats-listen '$(NATS)'

build:
	$(GO) build -o bin/plaudit ./cmd/plaudit

test: vet
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race $(RACE_PKGS)

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

# Short fuzz runs of every fuzz target (seed corpora live in testdata/).
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=30s ./engine/objective/
	$(GO) test -run='^$$' -fuzz=FuzzSyntaxError -fuzztime=30s ./engine/field/
	$(GO) test -run='^$$' -fuzz=FuzzLoneSurrogate -fuzztime=30s ./engine/field/
	$(GO) test -run='^$$' -fuzz=FuzzDecodeEvent -fuzztime=30s ./engine/
	$(GO) test -run='^$$' -fuzz=FuzzDecodeBatch -fuzztime=30s ./persist/jslog/
	$(GO) test -run='^$$' -fuzz=FuzzDecodeDirOp -fuzztime=30s ./persist/jslog/
	$(GO) test -run='^$$' -fuzz=FuzzDecode -fuzztime=30s ./persist/compress/
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=30s ./engine/judge/
	$(GO) test -run='^$$' -fuzz=FuzzInstructsJudge -fuzztime=30s ./engine/judge/
	$(GO) test -run='^$$' -fuzz=FuzzSignalBody -fuzztime=30s ./transport/api/
	$(GO) test -run='^$$' -fuzz=FuzzReportBody -fuzztime=30s ./transport/api/
	$(GO) test -run='^$$' -fuzz=FuzzFeedbackBody -fuzztime=30s ./transport/api/
	$(GO) test -run='^$$' -fuzz=FuzzBodyArgs -fuzztime=30s ./transport/api/
	$(GO) test -run='^$$' -fuzz=FuzzRoute -fuzztime=30s ./transport/httpdoor/
	$(GO) test -run='^$$' -fuzz=FuzzParseConnAccount -fuzztime=30s ./transport/natsdoor/

# The standard suite of BENCHMARKS.md: the server in a child process, the
# load from bin/plaudit bench; BENCHFLAGS adds flags (--json, --dir, ...).
bench: build
	./bin/plaudit bench $(BENCHFLAGS)

bench-quick: build
	./bin/plaudit bench --quick $(BENCHFLAGS)

# The in-process Go benchmarks, for profiling one workload with go test's flags.
gobench:
	$(GO) test -run='^$$' -bench=. -benchtime=2s ./engine/... ./persist/... ./bench/...

# The console's screenshots in docs/console, taken by its browser test.
screenshots:
	PLAUDIT_SCREENSHOTS=1 $(GO) test -count=1 -run TestConsoleInBrowser ./transport/console/

# Mutation testing of the critical packages (slow; not part of make test).
mutate:
	./mutate.sh

clean:
	rm -rf bin
