# llga: the two commands a new machine needs are `make demo` and `make test`.
# Both install missing Debian packages first (scripts/bootstrap.sh), then build.
PY      ?= /usr/bin/python3
BUILD   ?= build
ASAN    ?= build-asan
FUZZ    ?= build-fuzz
JOBS    ?= 2
CMAKE_FLAGS = -G Ninja -DPython3_EXECUTABLE=$(PY)
export CCACHE_BASEDIR := $(CURDIR)
# The -g builds in build/ and build-pip/ (and any clone's) share cached objects:
# ccache leaves the working directory out of their hash (debug info then names
# the directory of the build that first compiled an object).
export CCACHE_NOHASHDIR := 1

.PHONY: all bootstrap build demo test test-cpp test-asan test-tsan test-py test-isa test-isa-all test-install test-deps test-fresh test-ops-long \
	dev-path notebook install uninstall fuzz fuzz-smoke fuzz-graphs fuzz-graphs-bf16 fuzz-graphs-int8 fuzz-graphs-signals stress test-zoo test-zoo-int8 test-zoo-bf16 test-zoo-pytorch-int8 bench bench-quick bench-coverage bench-parse bench-runtime bench-load bench-dask clean

all: build

bootstrap:
	@scripts/bootstrap.sh

build: bootstrap
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(PY) -m llga.demo

# Every test: C++ (plain and ASan+UBSan), a short fuzz run, Python (on this CPU, then the
# parity and layout tests as oneDNN runs them on an AVX2-only CPU), packaging, and the check
# that everything the build and the tests used comes from a package bootstrap installs.
test: test-cpp test-asan fuzz-smoke test-py test-isa test-install test-deps

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The C++ tests under ASan+UBSan, then the Python path: the same build's extension
# (build-asan/_llga*.so) loaded into /usr/bin/python3 with the ASan runtime preloaded
# (scripts/test_sanitized.sh) for parity on three models, layouts, the memory planner,
# faults, odd inputs, threads, the fixed graph-fuzzer programs, llga's one-row product, softmax and strided binary loop, shape-only values, im2col convolutions, bf16 between linears (llga's bf16 gelu and layer norm rows), and the generated cases of the kernels added on 2026-12-07 evening (logcumsumexp wrote past an empty result: a heap corruption the plain build only showed tests later).
ASAN_PY_TESTS ?= "tests/py/test_parity.py::test_model_parity[resnet18-1]" \
	"tests/py/test_parity.py::test_model_parity[mobilenet_v3_large-1]" \
	"tests/py/test_parity.py::test_model_parity[bert_like-1]" \
	tests/py/test_layouts.py tests/py/test_runtime.py tests/py/test_memory_plan.py tests/py/test_faults.py \
	tests/py/test_inputs.py tests/py/test_fuzz_graphs.py tests/py/test_stress.py tests/py/test_model_file.py \
	tests/py/test_attention.py tests/py/test_gemv.py tests/py/test_strided_binary.py tests/py/test_shape_values.py \
	tests/py/test_row_softmax.py tests/py/test_im2col_conv.py tests/py/test_spectrogram.py \
	$(foreach k,atan2 bucketize searchsorted isin one_hot cummax cummin logcumsumexp digamma lgamma nan_to_num \
	  hann_window unfold stft pad kron cdist median nanmedian quantile nanquantile mode histc fmod i0 nextafter \
	  logaddexp xlogy,"tests/py/test_differential.py::test_op_matches_pytorch[aten::$(k)-float32]") \
	tests/py/test_precision.py::test_feed_forward_hands_bf16_from_one_linear_to_the_next \
	tests/py/test_precision.py::test_layer_norm_writes_bf16_for_its_linear \
	"tests/py/test_differential.py::test_op_matches_pytorch[aten::median-int64]" \
	"tests/py/test_differential.py::test_op_matches_pytorch[aten::mode-int64]" \
	tests/py/test_ops_more.py::test_order_statistics_large_rows_and_bad_arguments -k "not rss"
test-asan: bootstrap
	@cmake -S . -B $(ASAN) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Debug -DLLGA_SANITIZE=ON -DLLGA_PY_OUTPUT_DIR=$(CURDIR)/$(ASAN) >/dev/null
	@cmake --build $(ASAN) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir $(ASAN) --output-on-failure -j $(JOBS)
	scripts/test_sanitized.sh address $(ASAN) $(PY) $(ASAN_PY_TESTS)

# ThreadSanitizer on the Python path (not in make test: a third build): the tests that
# call one compiled model from several threads, with OpenMP teams of one thread.
TSAN ?= build-tsan
TSAN_PY_TESTS ?= tests/py/test_stress.py tests/py/test_runtime.py tests/py/test_memory_plan.py \
	tests/py/test_fuser.py tests/py/test_fuzz_graphs.py tests/py/test_precision.py tests/py/test_quantize.py \
	tests/py/test_quantized_graphs.py tests/py/test_model_file.py tests/py/test_attention.py tests/py/test_rnn.py \
	-k "thread or concurren or fuzzed_program or found_a_bug"
test-tsan: bootstrap
	@cmake -S . -B $(TSAN) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLGA_TSAN=ON -DLLGA_BUILD_TESTS=OFF \
	  -DLLGA_PY_OUTPUT_DIR=$(CURDIR)/$(TSAN) >/dev/null
	@cmake --build $(TSAN) -j $(JOBS) --target _llga
	scripts/test_sanitized.sh thread $(TSAN) $(PY) $(TSAN_PY_TESTS)

# The notebooks' test runs them from notebooks/ without PYTHONPATH: llga is found through dev-path.
test-py: build dev-path
	LLGA_RECORD_MODULES=$(CURDIR)/$(BUILD)/test-modules.txt $(PY) -m pytest tests/py

# oneDNN picks kernels per CPU; ONEDNN_MAX_CPU_ISA makes it behave as on an older one: AVX2 (no
# bf16 kernels: precision="bf16" is an error there), and AVX-512 without AVX512-BF16/AMX, where
# oneDNN emulates bf16 (those tests skip on a CPU without AVX-512, oneDNN having no bf16 there).
ISA_TESTS ?= tests/py/test_parity.py tests/py/test_layouts.py tests/py/test_inputs.py tests/py/test_model_file.py
test-isa: build
	ONEDNN_MAX_CPU_ISA=AVX2 $(PY) -m pytest -q $(ISA_TESTS) tests/py/test_precision.py
	ONEDNN_MAX_CPU_ISA=AVX512_CORE $(PY) -m pytest -q tests/py/test_precision.py -k "not corpus"

# The whole Python suite as oneDNN runs on AVX2 and on AVX-512 without VNNI/BF16/AMX (slower; not in make test).
test-isa-all: build dev-path
	ONEDNN_MAX_CPU_ISA=AVX2 $(PY) -m pytest -q tests/py
	ONEDNN_MAX_CPU_ISA=AVX512_CORE $(PY) -m pytest -q tests/py

# Every system file the builds and the tests used belongs to a package bootstrap installs
# (or to one of their dependencies, or to Debian's base system).
test-deps: build
	$(PY) scripts/check_deps.py --build $(BUILD)
	$(PY) scripts/check_deps.py --build $(ASAN)
	$(PY) scripts/check_deps.py --build $(FUZZ)

# From nothing: a fresh Debian 12 root (mmdebstrap), a clone of HEAD, make demo, make test (long).
test-fresh:
	scripts/test_fresh.sh $(FRESH_ARGS)

# This checkout's llga importable from any directory and Jupyter kernel (a .pth in the system site).
dev-path: build
	@scripts/dev_path.sh $(PY)

# Jupyter on notebooks/ (installs Debian's jupyter-notebook if missing). NOTEBOOK_PORT=8888
NOTEBOOK_PORT ?= 8888
notebook: build dev-path
	@scripts/bootstrap.sh notebook
	cd notebooks && $(PY) -m notebook --ip=127.0.0.1 --port=$(NOTEBOOK_PORT) --no-browser \
	  $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

# llga into Debian's Python (/usr/local/lib/python3.X/dist-packages), built by pip through CMake.
install: bootstrap
	$(PY) -m pip install --break-system-packages --no-build-isolation --no-index .

uninstall:
	$(PY) -m pip uninstall --break-system-packages -y llga
	scripts/dev_path.sh $(PY) --remove

# pip install . offline into a fresh venv that sees Debian's packages, built with `make
# build`'s flags (LLGA_BUILD_TYPE) so that the compiler cache serves its objects: a fourth
# full build otherwise (308 s on the 2-core Zen 3 with no cache). A user's `pip install .`
# builds Release.
test-install: build
	LLGA_BUILD_TYPE=RelWithDebInfo scripts/check_install.sh $(PY)

FUZZ_SECONDS ?= 600
fuzz: bootstrap
	@CXX=clang++ cmake -S . -B $(FUZZ) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLGA_FUZZ=ON -DLLGA_SANITIZE=ON \
	  -DLLGA_BUILD_PYTHON=OFF -DLLGA_BUILD_TESTS=OFF -DCMAKE_AR=/usr/bin/ar -DCMAKE_RANLIB=/usr/bin/ranlib >/dev/null
	@cmake --build $(FUZZ) -j $(JOBS) --target llga_parse_fuzzer llga_model_file_fuzzer
	scripts/run_fuzzer.sh $(FUZZ)/llga_parse_fuzzer $(FUZZ_SECONDS)
	scripts/run_fuzzer.sh $(FUZZ)/llga_model_file_fuzzer $(FUZZ_SECONDS)

fuzz-smoke:
	$(MAKE) fuzz FUZZ_SECONDS=30

# Stress: 200,000 calls of a small CNN over 10,000 image sizes, RSS flat after
# the warm-up and every per-shape record bounded; then 100,000 calls at one size
# (scripts/stress.py).
stress: build dev-path
	$(PY) scripts/stress.py --calls 200000 --sizes 100 $(STRESS_ARGS)
	$(PY) scripts/stress.py --calls 100000 --sizes 1 --max-growth-mib 2 $(STRESS_ARGS)

# The differential graph fuzzer: random PyTorch programs, llga against PyTorch
# (scripts/fuzz_graphs.py). Reproducers of mismatches go to build/fuzz-graphs/.
# `make test` runs 24 fixed programs, 8 of them in bf16 too, 8 (and 4 signal ones) in int8
# (tests/py/test_fuzz_graphs.py).
# fuzz-graphs-bf16 compiles every program with precision="bf16" (where oneDNN has bf16 kernels).
# fuzz-graphs-int8 quantizes every program with llga.quantize, calibrated on its example inputs
# (every other one with asymmetric activations; where oneDNN has VNNI).
# fuzz-graphs-signals draws [batch, channels, length] programs with 1-d convolutions and pooling
# (every other one with LLGA_IM2COL=all, so llga's im2col path meets small shapes too).
FUZZ_GRAPHS_SECONDS ?= 300
fuzz-graphs: build dev-path
	$(PY) scripts/fuzz_graphs.py --seconds $(FUZZ_GRAPHS_SECONDS) --seed $$(date +%s) $(FUZZ_GRAPHS_ARGS)

fuzz-graphs-bf16: build dev-path
	$(PY) scripts/fuzz_graphs.py --precision bf16 --seconds $(FUZZ_GRAPHS_SECONDS) --seed $$(date +%s) $(FUZZ_GRAPHS_ARGS)

fuzz-graphs-int8: build dev-path
	$(PY) scripts/fuzz_graphs.py --precision int8 --seconds $(FUZZ_GRAPHS_SECONDS) --seed $$(date +%s) $(FUZZ_GRAPHS_ARGS)

fuzz-graphs-signals: build dev-path
	$(PY) scripts/fuzz_graphs.py --family signals --seconds $(FUZZ_GRAPHS_SECONDS) --seed $$(date +%s) $(FUZZ_GRAPHS_ARGS)

# llga vs PyTorch (eager, frozen+OFI), ONNX Runtime and the machine's limit.
# Writes bench/results/latest.{json,md,png}. BENCH_ARGS="--models resnet50 --batch 1,16"
# Then scripted loops against PyTorch's TorchScript interpreter: bench/results/script_loops.md.
bench: build
	@scripts/bootstrap.sh bench
	$(PY) -m bench $(BENCH_ARGS)
	$(PY) -m bench.script_bench --write bench/results/script_loops.md

bench-quick: build
	@scripts/bootstrap.sh bench
	$(PY) -m bench --quick $(BENCH_ARGS)

# The differential op test with 2000 generated cases per op and dtype (make test runs 200).
test-ops-long: build
	LLGA_OPS_EXAMPLES=2000 $(PY) -m pytest -q tests/py/test_differential.py

# Every torchvision model (torchvision.models.list_models(): classification, quantizable in float
# form, segmentation, detection, video, optical flow): every dump PyTorch prints for it (traced and
# scripted, graph/inlined/frozen; cached in build/tv-dumps) parses and round-trips, then each model
# runs against PyTorch (parity, time, partitions, heavy ops outside) into docs/zoo.md. Each row is
# also appended to build/zoo-rows.jsonl as it finishes: `make test-zoo ZOO_ARGS=--resume` goes on
# from a sweep that was cut off (hours on 2 cores).
test-zoo: build
	LLGA_ZOO=all $(PY) -m pytest -q tests/py/test_tv_dumps.py
	$(PY) scripts/zoo_sweep.py --rows $(BUILD)/zoo-rows.jsonl --write docs/zoo.md $(ZOO_ARGS)

# Every torchvision classifier in low precision, against PyTorch's fp32 (minutes on 2 cores each):
# through llga.quantize into docs/zoo-int8.md, through precision="bf16" into docs/zoo-bf16.md.
test-zoo-int8: build
	$(PY) scripts/zoo_precision.py --precision int8 --write docs/zoo-int8.md $(ZOO_ARGS)

test-zoo-bf16: build
	$(PY) scripts/zoo_precision.py --precision bf16 --write docs/zoo-bf16.md $(ZOO_ARGS)

# PyTorch's own int8 graphs of every torchvision classifier (prepare_fx, convert_fx, traced, frozen)
# through llga.optimize, against PyTorch's int8 logits, into docs/zoo-pytorch-int8.md.
test-zoo-pytorch-int8: build
	$(PY) scripts/zoo_precision.py --precision pytorch-int8 --write docs/zoo-pytorch-int8.md $(ZOO_ARGS)

# The coverage models (torchaudio, recurrent, transformer decoders) against PyTorch and ONNX Runtime.
bench-coverage: build
	@scripts/bootstrap.sh bench
	$(PY) -m bench --latest coverage --models $$($(PY) -c "from bench.models import COVERAGE; print(','.join(COVERAGE))") $(BENCH_ARGS)

bench-parse: build
	$(PY) bench/parse_bench.py

bench-runtime: build
	$(PY) bench/runtime_bench.py --model resnet50

# Model files: llga.load against torch.jit.load, and pages shared by two processes.
bench-load: build
	$(PY) bench/load_bench.py --models bert,resnet50

# llga.dask on LocalClusters of 1-2 workers x 1-2 threads: 2,000 images through resnet18 (docs/scale-out.md).
bench-dask: build
	$(PY) bench/dask_bench.py --images 2000

clean:
	rm -rf $(BUILD) $(ASAN) $(TSAN) $(FUZZ) llga/_llga*.so
