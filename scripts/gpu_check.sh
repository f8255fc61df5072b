#!/usr/bin/env bash
# The GPU check of issue 7, for a machine with an NVIDIA GPU, CUDA, Python
# 3.12, CuPy, pytest and the build tools (the device tool's H200 image), and
# no network. Before: on a machine with PyPI, `bash scripts/gpu_wheels.sh`
# puts the missing wheels (zarr, numcodecs, zstandard, ...) in .whl/. Then,
# with the device tool: run(command="bash scripts/gpu_check.sh",
# carry=[".whl"]). It installs the wheels, builds the extension, runs the
# GPU tests (decode and encode kernels on the device, parity with the CPU
# both ways, corrupt input, the codecs, Zarr, torch and the Reader on device
# arrays, the compile checks), compute-sanitizer's memcheck on a small case
# and the throughput table, and writes everything to $OUT/gpu_check.txt (and
# gpu_throughput.json). Exit status 0 only when every step passed.
set -uo pipefail
OUT=${OUT:-gpu-check-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.txt") 2>&1
export PYTHONUNBUFFERED=1
status=0
step() {
  local name=$1
  shift
  echo "== $name: $*"
  if "$@"; then echo "-- $name: passed"; else echo "-- $name: FAILED"; status=1; fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/nnc-site .whl/*.whl || status=1
  export PYTHONPATH=/tmp/nnc-site${PYTHONPATH:+:$PYTHONPATH}
fi
step build python3 -m pip install -q --no-index --no-deps --no-build-isolation \
  --target /tmp/nnc-pkg .
export PYTHONPATH=/tmp/nnc-pkg:$PYTHONPATH
# The CuPy variants of the GPU tests and the compile checks (the emulator
# variants run in the normal suite; they need g++ 11 for <barrier>).
step tests timeout 150 python3 -m pytest -q -p no:cacheprovider -rs -k "not emulator" \
  tests/gpu/test_decode.py tests/gpu/test_encode.py tests/gpu/test_placement.py \
  tests/gpu/test_cuda_compile.py
if command -v compute-sanitizer >/dev/null; then
  step memcheck timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 \
    python3 scripts/gpu_small_case.py
else
  echo "-- memcheck: compute-sanitizer not found"; status=1
fi
step throughput timeout 120 python3 benchmarks/gpu.py --json "$OUT/gpu_throughput.json"
echo "gpu_check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
