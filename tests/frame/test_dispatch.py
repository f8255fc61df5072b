"""NNCODECS_DISPATCH: the cap on the kernels' SIMD level, and the portable scalar path.

Every level writes the same frames (the level is a speed setting, never a
format one), reports itself, and a value that names no level stops the
kernels from loading with a message that says which values exist. The
scalar path builds for aarch64 where a cross compiler is installed
(``make cross`` installs Debian's g++-aarch64-linux-gnu where it can).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nncodecs import _core

ROOT = Path(__file__).parent.parent.parent
LEVELS = ["scalar", "avx2", "avx512"]


def run_python(code: list[str], dispatch: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("NNCODECS_DISPATCH", None)
    if dispatch is not None:
        env["NNCODECS_DISPATCH"] = dispatch
    return subprocess.run(
        [sys.executable, *code], capture_output=True, text=True, env=env, timeout=600
    )


def expected(cap: str) -> str:
    """The level a cap gives here: the lower of it and the CPU's own."""
    return LEVELS[min(LEVELS.index(cap), LEVELS.index(_core.cpu_dispatch_level()))]


@pytest.fixture(scope="module")
def per_level() -> dict[str, dict]:
    script = str(Path(__file__).parent.parent / "dispatch_frames.py")
    with ThreadPoolExecutor(len(LEVELS)) as pool:
        runs = pool.map(lambda cap: run_python([script], cap), LEVELS)
        done = dict(zip(LEVELS, runs, strict=True))
    out = {}
    for cap, result in done.items():
        assert result.returncode == 0, (cap, result.stderr[-3000:])
        out[cap] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


def test_the_process_default_is_the_cpus_level() -> None:
    assert tuple(LEVELS) == _core.DISPATCH_LEVELS
    assert _core.cpu_dispatch_level() in LEVELS
    if os.environ.get("NNCODECS_DISPATCH", "") == "":
        assert _core.dispatch_level() == _core.cpu_dispatch_level()


@pytest.mark.parametrize("cap", LEVELS)
def test_each_level_reports_itself_and_caps_every_variant(per_level: dict, cap: str) -> None:
    got = per_level[cap]
    assert got["level"] == expected(cap)
    assert got["cpu"] == _core.cpu_dispatch_level()
    simd = {"scalar": 0, "avx2": 1, "avx512": 2}[got["level"]]
    assert got["variants"] == ["scalar", "avx2"][: min(simd, 1) + 1]
    assert set(got["rans_variants"]) <= set(LEVELS[: simd + 1])
    assert got["rans_variants"][0] == "scalar"
    if simd >= 1:
        assert "avx2" in got["rans_variants"]


def test_every_level_writes_the_same_frames(per_level: dict) -> None:
    # Each process checked that its frames decode to their inputs and that it
    # re-encodes the committed fixtures byte for byte; here the frames of
    # every dtype, coder and thread count are compared across levels.
    reference = per_level["scalar"]
    assert len(reference["frames"]) >= 70
    for cap in LEVELS[1:]:
        got = per_level[cap]
        assert got["fixtures"] == reference["fixtures"]
        different = sorted(k for k, v in got["frames"].items() if reference["frames"].get(k) != v)
        assert not different, (cap, different[:10])
        assert got["frames"].keys() == reference["frames"].keys()
        assert got["crc32c"] == reference["crc32c"], cap


@pytest.mark.parametrize("value", ["avx3", "AVX2", "sse", " avx2", "avx2,avx512"])
def test_a_value_naming_no_level_stops_the_kernels_from_loading(value: str) -> None:
    result = run_python(["-c", "import nncodecs._core"], value)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: NNCODECS_DISPATCH=" + repr(value)), result.stderr
    assert "scalar, avx2 or avx512" in last


def test_empty_is_unset_and_the_command_line_shows_the_level() -> None:
    result = run_python(["-c", "import nncodecs._core as c; print(c.dispatch_level())"], "")
    assert result.stdout.strip() == _core.cpu_dispatch_level()
    shown = run_python(["-m", "nncodecs", "--version"], "scalar")
    assert shown.returncode == 0, shown.stderr
    assert "kernels: scalar" in shown.stdout and "NNCODECS_DISPATCH=scalar" in shown.stdout
    bad = run_python(["-m", "nncodecs", "--version"], "avx3")
    assert bad.returncode == 0 and "kernels: not loaded" in bad.stdout
    assert "NNCODECS_DISPATCH='avx3'" in bad.stdout


# -- the scalar path on another architecture ------------------------------------

CROSS = "aarch64-linux-gnu-g++"


def test_the_kernels_cross_compile_for_aarch64(tmp_path: Path) -> None:
    # Every kernel source (not the Python bindings), as CMake builds them: the
    # x86 files (*_avx2*.cpp, *_avx512.cpp) must compile to their stubs. Then
    # one shared object: nothing of nncodecs' own may be left undefined (a
    # definition only under an x86 #if would be), only libzstd, libc and C++.
    cxx = shutil.which(CROSS)
    if cxx is None:
        pytest.skip(
            f"no {CROSS} here (Debian: apt-get install g++-aarch64-linux-gnu, or `make cross`)"
        )
    zstd_h = next((p for p in (Path("/usr/include/zstd.h"), Path("/usr/local/include/zstd.h"))
                   if p.exists()), None)  # fmt: skip
    if zstd_h is None:
        pytest.skip("no zstd.h to compile the frame code against (it is architecture-neutral)")
    shutil.copy(zstd_h, tmp_path / "zstd.h")  # alone: no other host header may leak in
    sources = sorted((ROOT / "cpp" / "src").glob("*.cpp"))

    def compile_one(src: Path) -> subprocess.CompletedProcess[str]:
        cmd = [cxx, "-std=c++17", "-O1", "-fPIC", "-Wall", "-Wextra", "-c", str(src),
               f"-I{ROOT / 'cpp' / 'include'}", f"-I{tmp_path}", "-o",
               str(tmp_path / (src.stem + ".o"))]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True)

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        results = list(pool.map(compile_one, sources))
    for src, result in zip(sources, results, strict=True):
        assert result.returncode == 0, (src.name, result.stderr[-3000:])
        assert "warning" not in result.stderr, (src.name, result.stderr[-3000:])
    lib = tmp_path / "libnncodecs_kernels.so"
    objects = [str(tmp_path / (s.stem + ".o")) for s in sources]
    subprocess.run([cxx, "-shared", "-o", str(lib), *objects], check=True)
    assert lib.read_bytes()[18:20] == (183).to_bytes(2, "little")  # e_machine: EM_AARCH64
    nm = shutil.which("aarch64-linux-gnu-nm") or "nm"
    undefined = subprocess.run([nm, "-u", "-C", str(lib)], capture_output=True, text=True,
                               check=True).stdout  # fmt: skip
    ours = [line for line in undefined.splitlines() if "nnc::" in line]
    assert not ours, ours
