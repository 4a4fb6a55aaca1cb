# SessionKit — the commands a newcomer and CI run. `make test` and `make demo` install what they need.
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)
SYSTEM_PACKAGES := libcurl4-openssl-dev libssl-dev zlib1g-dev
# The benchmark is a package of its own (Benchmarks/, with AsyncHTTPClient), built into a scratch directory of its own.
BENCH_PACKAGES := valgrind binutils nginx openssl
BENCH_BUILD := .build-bench
BENCH_QUICK ?=
# BENCH_CLIENTS=a,b: only those clients (Client raw names in Benchmarks/Sources/sessionkit-bench/Bench.swift).
BENCH_CLIENTS ?=
SOAK_COUNT ?= 100000
SOAK_ALL := sessionkit-curl sessionkit-curl-get sessionkit-curl-async sessionkit-curl-core
SOAK_CLIENTS ?= sessionkit-curl sessionkit-curl-async
# The tests run the curl command line (cURL descriptions) and ip (reachability in a network namespace).
TEST_PACKAGES := curl iproute2
DOCS_DIR ?= .build-docs
# The package's traits this repository builds with: `OpenAPI` compiles the OpenAPISessionKit product and its tests (a
# consumer that does not ask for the trait never resolves swift-openapi-runtime). Every build of .build passes the same
# traits, so that switching never rebuilds everything.
TRAITS := --traits OpenAPI

FUZZ_TARGETS ?= http json xml plist compound decodable archive head trailer date cache challenge websocket utf8 sse \
  deflate cookie
FUZZ_SECONDS ?= 60
FUZZ_BUILD := .build-fuzz

.PHONY: setup install-packages build build-strict test demo bench soak fuzz fuzz-long fuzz-replay docs docs-check \
  consumer-check consumer-test lint format clean

## setup: install the system libraries SessionKit links (libcurl with OpenSSL, OpenSSL headers) when missing.
setup:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(SYSTEM_PACKAGES)"

install-packages:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

## build: debug build of everything, tests included.
build: setup
	$(SWIFT) build --build-tests $(TRAITS)

## build-strict: the library (and the OpenAPI transport) alone, with compiler warnings as errors (CI).
build-strict: setup
	$(SWIFT) build --target SessionKit -Xswiftc -warnings-as-errors $(TRAITS)
	$(SWIFT) build --target OpenAPISessionKit -Xswiftc -warnings-as-errors $(TRAITS)

## test: every test, against the in-process loopback server; the transport-neutral ones on both transports.
test: setup
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(TEST_PACKAGES)"
	$(SWIFT) build --build-tests $(TRAITS)
	$(MAKE) --no-print-directory fuzz-replay
	SESSIONKIT_TEST_TRANSPORT=foundation $(SWIFT) test --skip-build --disable-swift-testing
	SESSIONKIT_TEST_TRANSPORT=curl $(SWIFT) test --skip-build --disable-swift-testing
	$(MAKE) --no-print-directory consumer-test

## demo: the tour of SessionKit against its embedded server.
demo: setup
	$(SWIFT) build --product sessionkit-demo $(TRAITS)
	$(SWIFT) run --skip-build sessionkit-demo

## bench: speed and memory of SessionKit against raw libcurl, raw URLSession and AsyncHTTPClient, against a local
## nginx (HTTP and HTTPS, installed when missing) and the in-process server, release build; instructions per GET by
## valgrind's callgrind. BENCH_QUICK=1: one round and fewer requests (about 3 minutes). See Docs/Benchmark.md.
bench: setup
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(BENCH_PACKAGES)"
	$(SWIFT) build -c release --package-path Benchmarks --scratch-path $(BENCH_BUILD) --product sessionkit-bench
	BENCH_QUICK=$(BENCH_QUICK) BENCH_CLIENTS=$(BENCH_CLIENTS) $(BENCH_BUILD)/release/sessionkit-bench

## soak: SOAK_COUNT (100,000) sequential requests through each of SOAK_CLIENTS in turn (curl transport, in-process
## server), printing RSS along the way (release build). The default is SessionKit's task API and async verb;
## SOAK_CLIENTS=all adds the closure verb (sessionkit-curl-get) and the HTTP core API (sessionkit-curl-core).
soak: setup
	$(SWIFT) build -c release --package-path Benchmarks --scratch-path $(BENCH_BUILD) --product sessionkit-bench
	@for c in $(if $(filter all,$(SOAK_CLIENTS)),$(SOAK_ALL),$(SOAK_CLIENTS)); do \
	  $(BENCH_BUILD)/release/sessionkit-bench soak $(SOAK_COUNT) $$c || exit 1; \
	done

## fuzz: libFuzzer on every parser target for FUZZ_SECONDS each (default 60), from the committed seeds.
fuzz: setup
	$(SWIFT) build -c release --scratch-path $(FUZZ_BUILD) -Xswiftc -sanitize=fuzzer -Xswiftc -use-ld=lld \
	  --product sessionkit-fuzz
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t Fuzz/regressions/$$t; \
	  echo "== fuzzing $$t for $(FUZZ_SECONDS) s"; \
	  SWIFT_BACKTRACE=enable=no $(FUZZ_BUILD)/release/sessionkit-fuzz $$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    -max_len=65536 -print_final_stats=1 -artifact_prefix=Fuzz/regressions/$$t/ \
	    $(FUZZ_BUILD)/corpus/$$t Fuzz/seeds/$$t > $(FUZZ_BUILD)/$$t.log 2>&1; status=$$?; \
	  grep -E "stat::(number_of_executed_units|peak_rss_mb)" $(FUZZ_BUILD)/$$t.log; \
	  if [ $$status -ne 0 ]; then tail -60 $(FUZZ_BUILD)/$$t.log; exit $$status; fi; \
	done

## fuzz-long: every target for 10 minutes each (before a release), from the committed seeds and the corpus so far.
fuzz-long:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=600

## fuzz-replay: run every seed and every saved crash input once through a plain build (part of `make test`).
fuzz-replay:
	$(SWIFT) build --product sessionkit-fuzz $(TRAITS)
	@for t in $(FUZZ_TARGETS); do \
	  $(SWIFT) run --skip-build sessionkit-fuzz $$t Fuzz/seeds/$$t $$(ls -d Fuzz/regressions/$$t 2>/dev/null) || exit 1; \
	done

## docs: DocC reference of the SessionKit module into $(DOCS_DIR).
docs: setup
	$(SWIFT) package --allow-writing-to-directory $(DOCS_DIR) generate-documentation \
	  --target SessionKit --output-path $(DOCS_DIR) --transform-for-static-hosting

## docs-check: `make docs`, failing on any DocC warning (CI). Compiler warnings are build-strict's to catch.
docs-check:
	@$(MAKE) --no-print-directory docs > $(DOCS_DIR).log 2>&1; status=$$?; cat $(DOCS_DIR).log; exit $$status
	@# SwiftPM's note on a dependency's files (swift-distributed-tracing's CMakeLists.txt) is not about our docs.
	@n=$$(grep "^warning:" $(DOCS_DIR).log | grep -vc "which are unhandled; explicitly declare them"); \
	if [ "$$n" -ne 0 ]; then echo "docs-check: $$n DocC warning(s)"; grep "^warning:" $(DOCS_DIR).log; exit 1; fi; \
	echo "docs-check: 0 DocC warnings"

## consumer-check: a scratch package in a temporary directory that depends on this one by path and imports
## SessionKit must resolve the API packages of decision 10 and nothing else: swift-distributed-tracing,
## swift-http-types, swift-log, swift-metrics and swift-service-context (CI).
consumer-check:
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; mkdir -p "$$dir/Sources/Consumer"; \
	printf '%s\n' '// swift-tools-version:6.0' 'import PackageDescription' 'let package = Package(' \
	  '    name: "Consumer",' '    dependencies: [.package(path: "$(CURDIR)")],' \
	  '    targets: [.executableTarget(name: "Consumer", dependencies: [.product(name: "SessionKit", package: "$(notdir $(CURDIR))")])]' \
	  ')' > "$$dir/Package.swift"; \
	printf '%s\n' 'import SessionKit' 'print(SessionKitVersion.current)' > "$$dir/Sources/Consumer/main.swift"; \
	(cd "$$dir" && $(SWIFT) package resolve > resolve.log 2>&1) || { cat "$$dir/resolve.log"; exit 1; }; \
	fetched=$$(ls "$$dir/.build/checkouts" | tr '\n' ' ' | sed 's/ $$//'); \
	echo "consumer-check: fetched $$fetched ($$(du -sh "$$dir/.build/checkouts" | cut -f1))"; \
	[ "$$fetched" = "swift-distributed-tracing swift-http-types swift-log swift-metrics swift-service-context" ] || \
	  { echo "consumer-check: a consumer must resolve swift-distributed-tracing, swift-http-types, swift-log," \
	    "swift-metrics and swift-service-context only"; exit 1; }

## consumer-test: IntegrationTests/Consumer, a Swift 6 language-mode package depending on SessionKit by path, built
## with warnings as errors (a Sendable diagnostic fails it) and run: it serves 127.0.0.1:8080 itself, calls the closure
## forms from the main actor and from an actor and every async form, then runs the README's quick start, which must be
## the package's Sources/QuickStart/QuickStart.swift line for line (part of `make test`).
CONSUMER := IntegrationTests/Consumer
consumer-test: setup
	@awk '/^## Quick start/{q=1; next} q && /^```swift/{c=1; next} c && /^```/{exit} c{print}' README.md \
	  | diff -u - $(CONSUMER)/Sources/QuickStart/QuickStart.swift \
	  || { echo "consumer-test: the README's quick start and $(CONSUMER)/Sources/QuickStart/QuickStart.swift differ"; exit 1; }
	$(SWIFT) build --package-path $(CONSUMER) -Xswiftc -warnings-as-errors
	$(CONSUMER)/.build/debug/consumer-checks $(CONSUMER)/.build/debug/quick-start

## lint: swift-format's strict lint with .swift-format, as CI runs it.
lint:
	$(SWIFT) format lint --strict --recursive --parallel Sources Tests Package.swift

## format: lay out the sources with swift-format and .swift-format.
format:
	swift-format format --in-place --recursive --parallel Sources Tests Package.swift

clean:
	rm -rf .build $(CONSUMER)/.build $(DOCS_DIR) $(DOCS_DIR).log $(FUZZ_BUILD) $(BENCH_BUILD)
