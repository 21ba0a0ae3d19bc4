# Roam's two entry points are `make demo` and `make test`; each installs what is missing first.
SWIFT ?= swift
BUILD_FLAGS ?=
# The examples and RoamNIO build in Roam's own build directory: they depend on Roam by path, so
# Roam's modules built once serve them all, and so does SwiftNIO, built once for RoamNIO and the
# example that uses it.
SHARED_BUILD = --scratch-path $(CURDIR)/.build

.PHONY: bench-path-managers bench-replay setup setup-vm build install demo demo-vm monitor-demo test prebuild example nio real-clients python toxiproxy-go samples docs api-check api-baseline bench bench-flagship bench-quick bench-quick-core bench-quick-network soak fuzz clean

setup:
	@scripts/setup.sh

# What running scenarios needs here: a VM with Debian's kernel when this kernel lacks sch_netem.
setup-vm:
	@scripts/setup.sh --vm-if-needed

build: setup
	$(SWIFT) build $(BUILD_FLAGS)

# roam, its systemd unit (roam daemon, docs/daemon.md), its user, its D-Bus policy and that
# page: `make install` as root, or DESTDIR=DIR to stage it (no user is made then;
# CONFIGURATION=debug builds the debug roam; BINARY=PATH installs that roam and builds nothing,
# for tests, which run while SwiftPM holds the build directory).
PREFIX ?= /usr/local
CONFIGURATION ?= release
install: setup
	@binary="$(BINARY)"; \
	if [ -z "$$binary" ]; then \
		$(SWIFT) build $(BUILD_FLAGS) -c $(CONFIGURATION) --product roam || exit 1; \
		binary="$$($(SWIFT) build $(BUILD_FLAGS) -c $(CONFIGURATION) --show-bin-path)/roam"; \
	fi; \
	install -D -m 0755 "$$binary" "$(DESTDIR)$(PREFIX)/bin/roam"
	install -d "$(DESTDIR)$(PREFIX)/lib/systemd/system"
	sed -e 's|/usr/local/bin/roam|$(PREFIX)/bin/roam|' -e 's|/usr/local/share/doc|$(PREFIX)/share/doc|' systemd/roam.service \
		> "$(DESTDIR)$(PREFIX)/lib/systemd/system/roam.service"
	install -D -m 0644 docs/daemon.md "$(DESTDIR)$(PREFIX)/share/doc/roam/daemon.md"
	install -D -m 0644 systemd/org.roam.PathMonitor1.conf "$(DESTDIR)$(PREFIX)/share/dbus-1/system.d/org.roam.PathMonitor1.conf"
	install -D -m 0644 systemd/roam.sysusers "$(DESTDIR)$(PREFIX)/lib/sysusers.d/roam.conf"
	@scripts/install-user.sh "$(DESTDIR)" "$(DESTDIR)$(PREFIX)/lib/sysusers.d/roam.conf"
	@echo "installed; as root: systemctl daemon-reload && systemctl reload dbus && systemctl enable --now roam"

# The main job: the bundled walk-out-of-home scenario, end to end (netem where the kernel has
# it, Roam's userspace link emulator otherwise). `make demo-vm` plays it with netem in a VM.
demo: build
	@scripts/demo.sh "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam"

demo-vm: setup-vm build
	@scripts/demo.sh "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam" --vm

# `roam monitor` in a private namespace whose links fail and come back.
monitor-demo: build
	@scripts/monitor-demo.sh "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam"

# Unit tests run anywhere; kernel tests (namespaces, veth, netlink) run as root and skip otherwise.
# The netem backend's tests run on this kernel where it has sch_netem, in a VM otherwise.
# Tests run one at a time: kernel tests share one kernel, and leak checks count process-wide.
# A VM's checks go on beside the suites that wait on scenario clocks (scripts/test-suites.sh).
# The suites run from the test binary, as `swift test` runs it, but without `swift test
# --skip-build`, which holds SwiftPM's lock on .build for the whole run: so that CI builds the
# other packages in .build meanwhile (ROAM_BUILD_BESIDE_TESTS: `make prebuild`).
test:
	@scripts/setup.sh --vm-if-needed --browser --dbus
	$(SWIFT) build $(BUILD_FLAGS) --build-tests
	@bin="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)" && \
		ROAM_BIN="$$bin" ROAM_AFTER_SUITES='scripts/rootless-check.sh "$$ROAM_BIN/roam" "$$ROAM_BIN/roamPackageTests.xctest"' \
		scripts/test-suites.sh "$$bin/roam" "$$bin/roamPackageTests.xctest" --testing-library swift-testing --no-parallel

# What the steps after `make test` build (the examples, RoamNIO and its benchmark, RealClients:
# products and tests, in Roam's .build; the fuzzers, with their sanitizers, in Fuzz/.build), so
# that they find it built. CI runs it beside the suites, in the idle scheduling class
# (scripts/test-suites.sh); it needs `make test`'s build.
prebuild:
	cd Examples/SpottyWiFi && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --build-tests
	cd RoamNIO && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --build-tests
	cd RoamNIO && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --product RoamNIOBenchmark
	cd Examples/RealClients && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --build-tests
	$(SWIFT) build --package-path Fuzz -c debug -Xswiftc -sanitize=fuzzer,address

# Examples/SpottyWiFi: another package that depends on Roam by path and tests its HTTP client
# against spotty Wi-Fi with RoamTesting (Swift Testing and XCTest).
example: setup
	cd Examples/SpottyWiFi && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --build-tests && ../../scripts/test.sh $(SWIFT) test $(BUILD_FLAGS) $(SHARED_BUILD) --skip-build
	@scripts/rootless-example.sh "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/SpottyWiFiPackageTests.xctest"

# RoamNIO/: SwiftNIO channels raced by Roam, with path events in the pipeline. A package of its
# own beside Roam's, so that Roam's build does not compile SwiftNIO (its first build takes minutes).
nio: setup
	cd RoamNIO && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --build-tests && ../scripts/test.sh $(SWIFT) test $(BUILD_FLAGS) $(SHARED_BUILD) --skip-build --no-parallel

# Examples/RealClients: AsyncHTTPClient against a Hummingbird service on spotty and blackholed
# Wi-Fi (RoamTesting, RoamNIO). AsyncHTTPClient and Hummingbird take minutes to build the first time.
real-clients: setup
	cd Examples/RealClients && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --build-tests && ../../scripts/test.sh $(SWIFT) test $(BUILD_FLAGS) $(SHARED_BUILD) --skip-build --no-parallel

# clients/python: the Python client and its pytest plugin, installed from its path into a venv
# (.build/python, with pytest from PyPI), tested against real runs of the built roam (rootless);
# then Examples/PythonApp, a Python app's retry tested with the plugin, and Examples/QUICApp,
# QUIC's migration through a NAT rebinding that breaks TCP.
python: build
	@scripts/python-env.sh >/dev/null
	ROAM_BINARY="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam" .build/python/bin/python -m pytest -q -p no:cacheprovider clients/python/tests Examples/PythonApp/tests Examples/QUICApp/tests

# clients/go: toxiproxy's own Go client (vendored unchanged, its README's calls) against a run's
# toxiproxy API (`roam run --toxiproxy-port`). Go from Debian; offline: the client is its only
# dependency, and Go's caches stay in .build.
toxiproxy-go: build
	@scripts/setup.sh --go
	cd clients/go && GOPROXY=off GOFLAGS=-mod=mod GOPATH=$(CURDIR)/.build/go GOCACHE=$(CURDIR)/.build/go-cache ROAM_BINARY="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam" go test -count=1 -v ./...

# The code samples of the README, docs/ and every DocC catalog and doc comment, type-checked
# against the built modules with warnings as errors (RoamNIO's samples too: it is built first).
samples: setup
	$(SWIFT) build $(BUILD_FLAGS)
	cd RoamNIO && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD)
	@scripts/check-samples.py --build "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)"

# Every library's DocC documentation, with warnings as errors (a broken symbol link fails), in
# .build/plugins/Swift-DocC/outputs; first, that every import is a declared dependency, that
# docs/architecture.md's module graph is Package.swift's (scripts/module-graph.py), and that
# RoamDecisions is pure and builds alone (scripts/decisions-alone.sh); and that the libraries of
# DOC_COMPLETE document every public function's parameters, result and errors.
# The libraries whose every public function says its parameters, result and errors in DocC's
# form (scripts/doc-check.py): the ones an app imports; the others are on their way
# (docs/contributing.md).
DOC_COMPLETE = RoamDecisions PathMonitor Multipath RoamTesting RoamNIO ScenarioModel:ScenarioReader,ScenarioError
DOC_TARGETS = RoamCore RoamSystem Netlink PathMonitor RoamDecisions ScenarioModel Simulator RoamReport LinkEmulation Multipath RoamTesting RoamFuzzTargets
docs: setup
	@scripts/module-graph.py --check-imports
	@scripts/module-graph.py --check-pure RoamDecisions
	@scripts/decisions-alone.sh
	@python3 scripts/test_doc_check.py
	$(SWIFT) build $(BUILD_FLAGS) --target RoamTesting
	cd RoamNIO && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --target RoamNIO
	@scripts/doc-check.py --build "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)" $(DOC_COMPLETE)
	@scripts/module-graph.py --check-doc docs/architecture.md
	$(SWIFT) package --disable-sandbox generate-documentation $(addprefix --target ,$(DOC_TARGETS)) --warnings-as-errors
	cd RoamNIO && $(SWIFT) package $(SHARED_BUILD) --disable-sandbox generate-documentation --target RoamNIO --warnings-as-errors

# The public API of every library (RoamNIO's too: built in Roam's .build) against the last
# release (API_BASELINE): an addition, removal
# or change that CHANGELOG.md's Unreleased section does not name fails (the checker's own tests
# first). The release's API is kept in api/RELEASE (swift-api-digester's dumps), so neither the
# old tree nor git history is needed; a release renames Unreleased, is tagged, and
# `make api-baseline API_BASELINE=NEW` dumps its API.
API_BASELINE ?= 0.4.0
API_MODULES = RoamCore RoamSystem Netlink PathMonitor RoamDecisions Multipath ScenarioModel Simulator RoamReport LinkEmulation RoamTesting
api-check: build
	@python3 scripts/test_api_check.py
	cd RoamNIO && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --target RoamNIO
	@scripts/api-check.py --build "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)" --baseline api/$(API_BASELINE) $(API_MODULES) RoamNIO

api-baseline: build
	cd RoamNIO && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --target RoamNIO
	@scripts/api-check.py --build "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)" --baseline api/$(API_BASELINE) --dump $(API_MODULES) RoamNIO

# Benchmarks print tables of figures measured side by side with a reference (see README).
bench: setup
	$(SWIFT) build -c release --product PathMonitorBenchmark
	$(SWIFT) build -c release --product SimulatorBenchmark
	$(SWIFT) build -c release --product EmulatorBenchmark
	$(SWIFT) build -c release --product MultipathBenchmark
	$(SWIFT) build -c release --product NetworkBenchmark
	"$$($(SWIFT) build -c release --show-bin-path)/PathMonitorBenchmark"
	"$$($(SWIFT) build -c release --show-bin-path)/SimulatorBenchmark"
	"$$($(SWIFT) build -c release --show-bin-path)/EmulatorBenchmark"
	"$$($(SWIFT) build -c release --show-bin-path)/MultipathBenchmark"
	"$$($(SWIFT) build -c release --show-bin-path)/NetworkBenchmark"
	cd RoamNIO && $(SWIFT) build -c release $(SHARED_BUILD) --product RoamNIOBenchmark && "$$($(SWIFT) build -c release $(SHARED_BUILD) --show-bin-path)/RoamNIOBenchmark"
	$(SWIFT) build -c release --product roam
	ROAM_BINARY="$$($(SWIFT) build -c release --show-bin-path)/roam" python3 Benchmarks/ControlBenchmark/control_benchmark.py
	ROAM_BINARY="$$($(SWIFT) build -c release --show-bin-path)/roam" python3 Benchmarks/ScaleBenchmark/scale_benchmark.py
	ROAM_BINARY="$$($(SWIFT) build -c release --show-bin-path)/roam" python3 Benchmarks/QueueBenchmark/queue_benchmark.py
	ROAM_BINARY="$$($(SWIFT) build -c release --show-bin-path)/roam" python3 Benchmarks/CrowdBenchmark/crowd_benchmark.py

# The flagship, walk-out-of-home, 20 runs per way of keeping the flow (docs/benchmarks.md#flagship);
# BACKEND=netem on a kernel with sch_netem (else inside scripts/vm.sh). Not in `bench`: it takes
# about 40 minutes.
BACKEND ?= userspace
bench-flagship: build
	ROAM_BINARY="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam" python3 Benchmarks/FlagshipBenchmark/flagship_benchmark.py --backend $(BACKEND)

# A recorded drive (the vendored G-NetTrack Pro excerpt) replayed on both backends under a TCP
# download: what it received each second beside what the recording said (docs/benchmarks.md#replay).
bench-replay: build
	python3 Benchmarks/ReplayFidelity/replay_fidelity.py --roam "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam" --backend userspace --backend netem
	python3 Benchmarks/ReplayFidelity/replay_fidelity.py --roam "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam" --mahimahi --backend userspace --backend netem

# The same benchmarks on small counts, to check that they still run.
# roam daemon --mptcp handover against Debian's mptcpd as the phone's path manager, in three
# bundled scenarios, for an unmodified mptcpize program: the longest gap each leaves (about 6
# minutes a repetition; docs/daemon.md has a table).
bench-path-managers: build
	@scripts/setup.sh --mptcpd
	python3 Benchmarks/PathManagerComparison/compare.py --roam "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam" --repeat 3

# Every benchmark, briefly: bench-quick-core, then NetworkBenchmark alone (bench-quick-network),
# which waits on scenario clocks (about 15 s of CPU in its 75): CI runs it beside the fuzzers.
bench-quick: bench-quick-core bench-quick-network

bench-quick-network: setup
	$(SWIFT) build $(BUILD_FLAGS) --product NetworkBenchmark
	"$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/NetworkBenchmark" --quick

bench-quick-core: setup
	$(SWIFT) build $(BUILD_FLAGS) --product PathMonitorBenchmark
	$(SWIFT) build $(BUILD_FLAGS) --product SimulatorBenchmark
	$(SWIFT) build $(BUILD_FLAGS) --product EmulatorBenchmark
	$(SWIFT) build $(BUILD_FLAGS) --product MultipathBenchmark
	"$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/PathMonitorBenchmark" --changes 100 --flaps 500 --sequences 100
	"$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/SimulatorBenchmark" --quick
	"$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/EmulatorBenchmark" --quick
	"$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/MultipathBenchmark" --quick
	cd RoamNIO && $(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --product RoamNIOBenchmark && "$$($(SWIFT) build $(BUILD_FLAGS) $(SHARED_BUILD) --show-bin-path)/RoamNIOBenchmark" --quick
	ROAM_BINARY="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam" python3 Benchmarks/ControlBenchmark/control_benchmark.py --quick
	ROAM_BINARY="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam" python3 Benchmarks/ScaleBenchmark/scale_benchmark.py --quick
	ROAM_BINARY="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam" python3 Benchmarks/QueueBenchmark/queue_benchmark.py --quick

# A long run sampled for growth: descriptors, threads, memory, sockets (SOAK_MINUTES, default 60).
SOAK_MINUTES ?= 60
soak: setup
	$(SWIFT) build -c release --product roam
	$(SWIFT) build -c release --product SoakBenchmark
	"$$($(SWIFT) build -c release --show-bin-path)/SoakBenchmark" --minutes $(SOAK_MINUTES)

# Each fuzz target of Roam's input readers (scenario, trace, interfaces file, JSON, report) for
# FUZZ_SECONDS with libFuzzer and AddressSanitizer, from the seed corpus in Fuzz/Corpus.
FUZZ_SECONDS ?= 60
fuzz: setup
	@scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf .build Fuzz/.build RoamNIO/.build Examples/*/.build
