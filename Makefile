# The two commands a new machine needs: `make serve` and `make test`. Both install missing Debian
# packages first (scripts/ensure-deps.sh).
SWIFT ?= swift
PORT ?= 8080

.PHONY: deps build release install reference dist dist-check brew-check serve test test-core test-swift test-python docs bench h2-abuse-compare hotpath tls-allocations soak fuzz fuzz-ci clean

deps:
	@scripts/ensure-deps.sh build

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product faultline

# Serve the bundled scenarios/ on 127.0.0.1:$(PORT) (PORT=0 picks a free port).
serve: release
	.build/release/faultline serve scenarios --port $(PORT)

# The release binary on PATH for use outside this checkout (PREFIX=~/.local installs to ~/.local/bin).
PREFIX ?= /usr/local
install: release
	install -d $(PREFIX)/bin
	install -m 755 .build/release/faultline $(PREFIX)/bin/faultline

# The reference pages generated from the program's own tables (scripts/gen-reference.py): docs/reference/cli.md from
# the debug binary's --help, scenario-fields.md from scenarios/faultline.schema.json, admin-api.md from the OpenAPI
# document. Tests/Python/test_reference_docs.py fails when a committed page differs from what this writes.
reference: deps
	$(SWIFT) build --product faultline
	FAULTLINE_BIN=$(CURDIR)/.build/debug/faultline python3 scripts/gen-reference.py

# What installs without a Swift toolchain, in dist/ (scripts/dist.sh): the release binary with the Swift runtime,
# FoundationEssentials and Dispatch linked in (no ICU, no libcurl; --static-swift-stdlib) and no $ORIGIN RUNPATH
# (--disable-local-rpath), stripped, as faultline-VERSION-linux-ARCH.tar.gz, faultline_VERSION_ARCH.deb and the Python
# package's wheel faultline-VERSION-py3-none-manylinux_*.whl (scripts/dist-wheel.sh), each with its .sha256. The flags
# live here, not in Package.swift. It relinks .build/release/faultline (seconds). Then scripts/dist-image.sh builds the
# container image from the tarball, with no registry: distroless (the binary, the libraries ldd names, CA
# certificates, the scenarios), user 65532, `serve /scenarios` on 0.0.0.0:8080 and HTTPS on 8443 with --tls-dir
# /tls, as faultline-VERSION-oci.tar (OCI layout) and faultline-VERSION-docker.tar (docker/podman load). Not part of
# `make test`.
DIST_BUILD = $(SWIFT) build -c release --static-swift-stdlib --disable-local-rpath --product faultline
dist:
	@scripts/ensure-deps.sh dist
	$(DIST_BUILD)
	scripts/dist.sh "$$($(DIST_BUILD) --show-bin-path)/faultline"

# Proves dist/'s artefacts where no Swift exists (scripts/dist-check.sh; root): a debootstrap'd Debian bookworm
# (cached under .build/dist-check/) installs the .deb with apt and unpacks the tarball, then each binary serves
# HTTP/1.1, h2c, HTTPS and h2 to curl outside and runs verify and export inside; then the wheel, in a fresh venv
# there, runs a pytest suite with its bundled binary (scripts/dist-check-wheel.sh). scripts/dist-check-image.sh then
# unpacks the OCI archive (umoci) and runs the image's entrypoint and cmd in its rootfs as its user with the same
# requests, and in podman too where podman is installed. Not part of `make test`.
dist-check: dist
	scripts/dist-check.sh

# Proves packaging/homebrew/faultline.rb without Homebrew (scripts/brew-check.sh; root, or user namespaces): ruby -wc,
# then a `git archive` of HEAD built and tested with the network cut off (unshare -n) by the formula's own install and
# test methods, which scripts/brew-shim.rb runs with just enough of Homebrew's Formula. A release build from scratch
# (about 10 minutes on 2 cores). What only a Mac can prove is in docs/PORTABILITY.md. Not part of `make test`.
brew-check:
	@scripts/ensure-deps.sh brew
	scripts/brew-check.sh

# The Swift suites, run after `swift build --build-tests`. As root on Debian with CI=true or
# FAULTLINE_INSTALL_TEST_CA=1, scripts/install-test-ca.sh first adds a test CA to the system's trust store, so that
# URLSession (libcurl) can succeed over HTTPS; otherwise it changes nothing.
SWIFT_TESTS = FAULTLINE_SYSTEM_TRUSTED_TLS_DIR="$$(scripts/install-test-ca.sh)" $(SWIFT) test --skip-build
# The Python suite against the debug binary; PYTHON_TESTS=Tests/Python/test_cli.py runs one file of it.
PYTHON_TESTS ?= Tests/Python
PYTEST = FAULTLINE_BIN=$(CURDIR)/.build/debug/faultline python3 -m pytest -q -p no:benchmark -p no:cacheprovider $(PYTHON_TESTS)

# Every test: Swift (core without sockets, live server with curl and URLSession, the CLI), a short fuzz, Python.
test:
	@scripts/ensure-deps.sh test
	@scripts/check-case-clashes.sh
	$(SWIFT) build --build-tests
	@scripts/check-binary-links.sh .build/debug/faultline
	$(SWIFT_TESTS)
	$(MAKE) --no-print-directory fuzz-ci
	$(PYTEST)

# One suite of `make test` at a time. test-core: FaultlineCoreTests, the pure logic (parser, engine, scenarios,
# verdicts) with no sockets and no server.
test-core:
	@scripts/ensure-deps.sh build
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter FaultlineCoreTests

# Every Swift test target: FaultlineCoreTests, FaultlineHTTP2Tests (the HTTP/2 codec on a fake transport),
# FaultlineTests (a live server: raw sockets, curl, URLSession, the binary as a process) and FaultlineCLITests (the
# CLI's parser and commands, called directly).
test-swift:
	@scripts/ensure-deps.sh test
	$(SWIFT) build --build-tests
	$(SWIFT_TESTS)

# The pytest suite under Tests/Python: real clients (Python, Go, node, curl) against the debug binary.
test-python:
	@scripts/ensure-deps.sh test
	$(SWIFT) build --product faultline
	$(PYTEST)

# The documentation site in .build/docs/site (scripts/docs.sh; open index.html, or serve the folder): the README and
# docs/ staged with their links rewritten, `mkdocs build --strict` (mkdocs.yml; a broken link or anchor fails), the
# Swift API reference from DocC under api/ (symbol graphs of the debug build's public modules), then
# scripts/check-site-links.py over the result. DOCC=0 skips DocC (seconds instead of a debug build). Not part of
# `make test` (Tests/Python/test_docs_site.py builds the site without DocC).
DOCC ?= 1
docs:
	@scripts/ensure-deps.sh docs
	DOCC=$(DOCC) SWIFT=$(SWIFT) scripts/docs.sh

# wrk (and h2load for the HTTP/2 rows) against Faultline and nginx in the same run, unpinned and pinned to separate
# cores, then one summary table of every row's ratio and p99 ratio (scripts/bench-summary.py, bench-results/summary.md);
# not part of `make test`.
bench:
	@scripts/ensure-deps.sh bench
	$(SWIFT) build -c release --product faultline
	scripts/bench.sh
	PIN=1 scripts/bench.sh
	python3 scripts/bench_timing.py
	python3 scripts/bench-summary.py

# The HTTP/2 attacks of Tests/Python/h2_attacks.py against Faultline (release) and nginx, side by side: survives,
# answer, RSS growth, a good client's p99 (docs/http2.md, "Abuse"); not part of `make test`.
h2-abuse-compare:
	@scripts/ensure-deps.sh bench
	$(SWIFT) build -c release --product faultline
	scripts/h2-abuse-compare.py --binary .build/release/faultline

# Instructions per request on the request path, counted by callgrind: steady where requests/s are noisy.
hotpath:
	@scripts/ensure-deps.sh hotpath
	scripts/hotpath.sh

# Heap allocations per new TLS connection, Faultline against nginx (scripts/tls_allocations.py).
tls-allocations:
	@scripts/ensure-deps.sh bench
	$(SWIFT) build -c release --product faultline
	python3 scripts/tls_allocations.py

# A mixed load over every protocol for SOAK_SECONDS (default 180) against a release build (scripts/soak.py): HTTP/1.1
# with every fault, HTTPS with the TLS handshake faults, h2 and h2c with every HTTP/2 fault and the client's RST_STREAM
# and GOAWAY, ws and wss sessions, proxied requests to an upstream in the soak, a download cut and resumed, and network
# changes on a second server. Fails unless the journal counted every request and connection attempt exactly, per kind,
# route and protocol, with the outcome each kind expects, descriptors return to their baseline, RSS stays flat and
# SIGTERM exits 0. Not part of `make test` (Tests/Python/test_soak_short.py runs it for 8 s).
soak: deps
	@scripts/ensure-deps.sh soak
	$(SWIFT) build -c release --product faultline
	python3 scripts/soak.py

# libFuzzer on the HTTP parser, the scenario loader, the TLS accept path and the HTTP/2 codec, FUZZ_SECONDS each
# (scripts/fuzz.sh).
FUZZ_SECONDS ?= 60
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

# The short run inside `make test`: 10,000 inputs each from a fixed seed (repeatable; about 10 s), built without
# optimization (a third of the build time).
fuzz-ci:
	FUZZ_RUNS=10000 FUZZ_SECONDS=60 FUZZ_OPTIMIZE=-Onone scripts/fuzz.sh

clean:
	rm -rf .build dist
