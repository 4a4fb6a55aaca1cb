# SessionKit — the commands a newcomer and CI run. `make test` and `make demo` install what they need.
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)
SYSTEM_PACKAGES := libcurl4-openssl-dev libssl-dev
DOCS_DIR ?= .build-docs

.PHONY: setup build test demo bench soak docs format clean

## setup: install the system libraries SessionKit links (libcurl with OpenSSL, OpenSSL headers) when missing.
setup:
	@missing=""; for p in $(SYSTEM_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

## build: debug build of everything, tests included.
build: setup
	$(SWIFT) build --build-tests

## test: every test, against the in-process loopback server.
test: setup
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

## demo: the tour of SessionKit against its embedded server.
demo: setup
	$(SWIFT) build --product sessionkit-demo
	$(SWIFT) run --skip-build sessionkit-demo

## bench: speed and memory against raw URLSession and raw libcurl, release build.
bench: setup
	$(SWIFT) build -c release --product sessionkit-bench
	$(SWIFT) run -c release --skip-build sessionkit-bench

## soak: 100,000 sequential requests through SessionKit, printing RSS along the way (release build).
soak: setup
	$(SWIFT) build -c release --product sessionkit-bench
	$(SWIFT) run -c release --skip-build sessionkit-bench soak 100000

## docs: DocC reference of the SessionKit module into $(DOCS_DIR).
docs: setup
	$(SWIFT) package --allow-writing-to-directory $(DOCS_DIR) generate-documentation \
	  --target SessionKit --output-path $(DOCS_DIR) --transform-for-static-hosting

## format: lay out the sources with swift-format and .swift-format.
format:
	swift-format format --in-place --recursive --parallel Sources Tests Package.swift

clean:
	rm -rf .build $(DOCS_DIR)
