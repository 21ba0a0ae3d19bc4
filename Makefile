# Roam's two entry points are `make demo` and `make test`; each installs what is missing first.
SWIFT ?= swift
BUILD_FLAGS ?=

.PHONY: setup build demo test bench bench-quick clean

setup:
	@scripts/setup.sh

build: setup
	$(SWIFT) build $(BUILD_FLAGS)

# The main job. Until the scenario engine lands: a private namespace with a Wi-Fi and a cellular
# uplink, `roam monitor` watching it, and the links failing and coming back.
demo: build
	@scripts/demo.sh "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/roam"

# Unit tests run anywhere; kernel tests (namespaces, veth, netlink) run as root and skip otherwise.
# Tests run one at a time: kernel tests share one kernel, and leak checks count process-wide.
test: setup
	$(SWIFT) build $(BUILD_FLAGS) --build-tests
	$(SWIFT) test $(BUILD_FLAGS) --skip-build --no-parallel

# Benchmarks print tables of figures measured side by side with a reference (see README).
bench: setup
	$(SWIFT) build -c release --product PathMonitorBenchmark
	"$$($(SWIFT) build -c release --show-bin-path)/PathMonitorBenchmark"

# The same benchmark on a small count, to check that it still runs.
bench-quick: setup
	$(SWIFT) build $(BUILD_FLAGS) --product PathMonitorBenchmark
	"$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)/PathMonitorBenchmark" --changes 100 --flaps 500

clean:
	rm -rf .build
