"""The decoders under AddressSanitizer and UBSan, the thread pool under ThreadSanitizer.

Two runs here (the fuzz targets' drivers under ASan, UBSan and TSan are in
tests/hostile/test_fuzz.py): a build of ``_core`` with the
same sanitizers running the hostile-input, kernel and conformance-corpus tests and
the threaded stress (scripts/stress_threads.py: 8 Python threads, mixed sizes and
dtypes, a pool of 16 past the core count); and the threads
driver (tests/cpp/threads_driver.cpp: nested parallel_for calls and frame
encodes and decodes from 8 std::threads at once) with -fsanitize=thread. Any
out-of-bounds access, undefined behaviour or data race fails here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nncodecs

ROOT = Path(__file__).parent.parent.parent
SOURCES = sorted(str(p) for p in (ROOT / "cpp" / "src").glob("*.cpp"))
#: ``make fuzz`` runs the threaded stress longer (NNCODECS_SANITIZER_SCALE times).
SCALE = int(os.environ.get("NNCODECS_SANITIZER_SCALE", "1"))
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def compiler() -> str:
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        pytest.fail("no C++ compiler: the package could not have been built either")
    return cxx


def runtime_library(cxx: str, name: str) -> str:
    return subprocess.run([cxx, f"-print-file-name={name}"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def build_driver(exe: Path, flags: list[str], driver: list[Path]) -> None:
    """A C++ driver linked with the kernels' sources and libzstd, built with ``flags``."""
    cmd = [compiler(), "-std=c++17", "-O1", "-g", *flags, f"-I{ROOT / 'cpp' / 'include'}",
           *SOURCES, *map(str, driver), "-o", str(exe), "-lzstd", "-lpthread"]  # fmt: skip
    subprocess.run(cmd, check=True)


def test_threads_driver_under_thread_sanitizer(tmp_path: Path) -> None:
    # A C++ driver rather than Python with libtsan preloaded: the interpreter
    # is not instrumented, and its own threads would need suppressions.
    exe = tmp_path / "threads_driver"
    build_driver(exe, ["-fsanitize=thread"], [ROOT / "tests" / "cpp" / "threads_driver.cpp"])
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1")
    # 10 rounds of 8 callers, tensors up to 1 MiB: a few seconds under TSan.
    result = subprocess.run([str(exe), "10", "8", str(1 << 20), "1"], capture_output=True,
                            text=True, env=env, timeout=600)  # fmt: skip
    assert "ThreadSanitizer" not in result.stderr, result.stderr[-4000:]
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    assert "no corrupt frame" in result.stdout


def test_python_decoder_tests_with_a_sanitized_core(tmp_path: Path) -> None:
    cxx = compiler()
    bindir = Path(sys.executable).parent
    cmake = shutil.which("cmake", path=str(bindir)) or shutil.which("cmake")
    assert cmake, "cmake is a build dependency"
    import pybind11

    build = tmp_path / "build"
    subprocess.run(
        [
            cmake,
            "-S",
            str(ROOT),
            "-B",
            str(build),
            "-DNNCODECS_SANITIZE=ON",
            "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
            f"-DCMAKE_CXX_COMPILER={cxx}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            f"-DPython_EXECUTABLE={sys.executable}",
        ]
        + (["-G", "Ninja"] if shutil.which("ninja", path=str(bindir)) else []),
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [cmake, "--build", str(build), "--target", "_core"], check=True, capture_output=True
    )
    built = next(build.glob("_core*.so"))
    # A copy of the installed package with the sanitized module in it.
    package = tmp_path / "site" / "nncodecs"
    shutil.copytree(Path(nncodecs.__file__).parent, package)
    for old in package.glob("_core*.so"):
        old.unlink()
    shutil.copy(built, package / built.name)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(package.parent)
    env["LD_PRELOAD"] = " ".join(runtime_library(cxx, lib) for lib in ("libasan.so", "libubsan.so"))
    env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
    env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-x",
            str(ROOT / "tests" / "hostile/test_frames.py"),
            str(ROOT / "tests" / "frame/test_kernels.py"),
            str(ROOT / "tests" / "codecs/test_coders.py"),
            str(ROOT / "tests" / "codecs/test_rowshift.py"),
            str(ROOT / "tests" / "frame/test_buffers.py"),
            str(ROOT / "tests" / "conformance/test_corpus.py"),
            "-k",
            # (the corpus under an address-space limit: not where ASan reserves terabytes)
            "not round_trip_every_array and not under_a_memory_and_time_limit",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    # The threaded stress under the same sanitizers: 8 Python threads encoding and
    # decoding mixed tensors of every dtype at once, the kernels' pool (16) past the
    # core count, scratch unmapped as soon as it is freed.
    stress = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "stress_threads.py"), "--count", str(240 * SCALE),
         "--workers", "8", "--threads", "16", "--seed", "3"],
        env={**env, "MALLOC_MMAP_THRESHOLD_": "131072"}, cwd=tmp_path, capture_output=True,
        text=True, timeout=900,
    )  # fmt: skip
    assert stress.returncode == 0, (stress.stdout[-3000:], stress.stderr[-3000:])
    probe = subprocess.run(
        [sys.executable, "-c", "import nncodecs._core as c; print(c.__file__)"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(package) in probe.stdout  # the sanitized build was the one tested
