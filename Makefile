# Thin wrapper around CMake. `make test` is what CI runs (.ci/run).
BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_RUNS ?= 10000000
GEN := -G Ninja

.PHONY: all deps build test fuzz demo bench clean

all: build

deps:
	@sh scripts/deps.sh

# Optimised build of the library and the tool (used by demo and bench).
build: deps
	cmake -S . -B $(BUILD_DIR)/release $(GEN) -DCMAKE_BUILD_TYPE=Release -DSTG_BUILD_TESTS=OFF
	cmake --build $(BUILD_DIR)/release -j$(JOBS)

# Every test, built with -Wall -Wextra -Werror under ASan and UBSan.
test: deps
	cmake -S . -B $(BUILD_DIR)/test $(GEN) -DCMAKE_BUILD_TYPE=Debug -DSTG_SANITIZE=ON -DSTG_WERROR=ON
	cmake --build $(BUILD_DIR)/test -j$(JOBS)
	cd $(BUILD_DIR)/test && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --output-on-failure -j$(JOBS)

# libFuzzer harnesses, each run for FUZZ_RUNS inputs under ASan+UBSan.
fuzz:
	@sh scripts/deps.sh fuzz
	CC=clang cmake -S . -B $(BUILD_DIR)/fuzz $(GEN) -DCMAKE_BUILD_TYPE=Debug -DSTG_SANITIZE=ON \
		-DSTG_BUILD_FUZZ=ON -DSTG_BUILD_TESTS=OFF -DSTG_BUILD_BENCH=OFF
	cmake --build $(BUILD_DIR)/fuzz -j$(JOBS) --target fuzzers
	sh scripts/fuzz.sh $(BUILD_DIR)/fuzz/fuzz $(FUZZ_RUNS)

# The demo builds quietly (the build's output is shown only if it fails).
demo: deps
	@sh scripts/demo.sh --build $(BUILD_DIR)/release

bench: build
	sh scripts/bench.sh $(BUILD_DIR)/release

clean:
	rm -rf $(BUILD_DIR)
