#!/usr/bin/env bash
# Download, on a machine with PyPI, the wheels that the GPU machine lacks for
# scripts/gpu_check.sh (its image has Python 3.12, numpy, CuPy, pytest, CMake,
# ninja, pybind11 and scikit-build-core, but no zarr, numcodecs or zstandard,
# and no network). They go to .whl/ (git-ignored through .git/info/exclude),
# which the device run carries along. Run from the repository root.
set -euo pipefail
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
# zarr and what it needs beyond the image: numcodecs, donfig, crc32c (numcodecs[crc32c]);
# zstandard for nncodecs itself.
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" -d .whl \
  "zarr==3.1.5" "numcodecs==0.16.5" "donfig==0.8.1.post1" "crc32c==2.7.1" "zstandard==0.25.0"
ls -l .whl
