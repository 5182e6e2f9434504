# llga: the two commands a new machine needs are `make demo` and `make test`.
# Both install missing Debian packages first (scripts/bootstrap.sh), then build.
PY      ?= /usr/bin/python3
BUILD   ?= build
ASAN    ?= build-asan
FUZZ    ?= build-fuzz
JOBS    ?= 2
CMAKE_FLAGS = -G Ninja -DPython3_EXECUTABLE=$(PY)
export CCACHE_BASEDIR := $(CURDIR)

.PHONY: all bootstrap build demo test test-cpp test-asan test-py test-install fuzz fuzz-smoke bench bench-quick bench-parse bench-runtime clean

all: build

bootstrap:
	@scripts/bootstrap.sh

build: bootstrap
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(PY) -m llga.demo

# Every test: C++ (plain and ASan+UBSan), a short fuzz run, Python, packaging.
test: test-cpp test-asan fuzz-smoke test-py test-install

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: bootstrap
	@cmake -S . -B $(ASAN) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Debug -DLLGA_SANITIZE=ON -DLLGA_BUILD_PYTHON=OFF >/dev/null
	@cmake --build $(ASAN) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir $(ASAN) --output-on-failure -j $(JOBS)

test-py: build
	$(PY) -m pytest tests/py

# pip install . offline into a fresh venv that sees Debian's packages.
test-install: bootstrap
	scripts/check_install.sh $(PY)

FUZZ_SECONDS ?= 600
fuzz: bootstrap
	@CXX=clang++ cmake -S . -B $(FUZZ) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLGA_FUZZ=ON -DLLGA_SANITIZE=ON \
	  -DLLGA_BUILD_PYTHON=OFF -DLLGA_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(FUZZ) -j $(JOBS) --target llga_parse_fuzzer
	scripts/run_fuzzer.sh $(FUZZ)/llga_parse_fuzzer $(FUZZ_SECONDS)

fuzz-smoke:
	$(MAKE) fuzz FUZZ_SECONDS=45

# llga vs PyTorch (eager, frozen+OFI), ONNX Runtime and the machine's limit.
# Writes bench/results/latest.{json,md,png}. BENCH_ARGS="--models resnet50 --batch 1,16"
bench: build
	@scripts/bootstrap.sh bench
	$(PY) -m bench $(BENCH_ARGS)

bench-quick: build
	@scripts/bootstrap.sh bench
	$(PY) -m bench --quick $(BENCH_ARGS)

bench-parse: build
	$(PY) bench/parse_bench.py

bench-runtime: build
	$(PY) bench/runtime_bench.py --model resnet50

clean:
	rm -rf $(BUILD) $(ASAN) $(FUZZ) llga/_llga*.so
