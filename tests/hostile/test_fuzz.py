"""The fuzz targets, briefly (``make fuzz`` runs them at length; docs/development.md).

* Every C++ target (fuzz/fuzz_*.cpp) built with the mutation driver (fuzz/driver.cpp)
  under ASan + UBSan, by clang where there is one (``make test`` installs Debian's where
  apt-get can run: its UBSan also checks pointer arithmetic against the array it came
  from, which g++'s does not, and which the Huffman regression case needs), else g++:
  its seeds (frames of every mode and version, and the conformance corpus's frames), its
  regression cases (fuzz/regressions/cpp-TARGET), then a few thousand mutated inputs.
  The frame and round-trip targets also under ThreadSanitizer: their decodes and encodes
  run on the kernels' thread pool.
* Every Python target (fuzz/targets.py) over its seeds and every regression case
  (fuzz/regressions/TARGET): each input that once was a finding must now decode or raise
  a clear error, within a time limit (an input that runs past it is a finding: a hang).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import optional_import
from frame.test_sanitizers import SANITIZE, SOURCES, compiler

ROOT = Path(__file__).parent.parent.parent
CPP_TARGETS = ["frame", "info", "tables", "roundtrip"]
#: ``make fuzz`` scales the brief runs up (NNCODECS_SANITIZER_SCALE).
SCALE = int(os.environ.get("NNCODECS_SANITIZER_SCALE", "1"))


def _targets() -> Any:
    spec = importlib.util.spec_from_file_location("fuzz_targets", ROOT / "fuzz" / "targets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TARGETS = _targets()


def sanitizing_compiler() -> str:
    """clang++ where there is one (see the module), else the compiler of the other tests."""
    found = shutil.which("clang++") or shutil.which("clang++-14")
    return found or compiler()


@pytest.fixture(scope="module")
def kernel_objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The kernels compiled once per sanitizer (ASan + UBSan, TSan), two at a time."""
    out: dict[str, list[str]] = {}
    for kind, flags in (("asan", SANITIZE), ("tsan", ["-fsanitize=thread"])):
        where = tmp_path_factory.mktemp(f"objects-{kind}")
        procs, objects = [], []
        for src in SOURCES:
            obj = str(where / (Path(src).stem + ".o"))
            cmd = [_cxx(kind), "-std=c++17", "-O1", "-g", *flags, f"-I{ROOT / 'cpp' / 'include'}",
                   "-c", src, "-o", obj]  # fmt: skip
            procs.append(subprocess.Popen(cmd))
            objects.append(obj)
            if len(procs) == 2:
                assert procs.pop(0).wait() == 0
        assert all(p.wait() == 0 for p in procs)
        out[kind] = objects
    return out


def _cxx(kind: str) -> str:
    return sanitizing_compiler() if kind == "asan" else compiler()


def _driver(objects: list[str], flags: list[str], target: str, exe: Path) -> Path:
    fuzz = ROOT / "fuzz"
    cxx = _cxx("tsan" if "-fsanitize=thread" in flags else "asan")
    cmd = [cxx, "-std=c++17", "-O1", "-g", *flags, f"-I{ROOT / 'cpp' / 'include'}",
           *objects, str(fuzz / f"fuzz_{target}.cpp"), str(fuzz / "common.cpp"),
           str(fuzz / "driver.cpp"), "-o", str(exe), "-lzstd", "-lpthread"]  # fmt: skip
    subprocess.run(cmd, check=True)
    return exe


def _conformance_frames() -> list[str]:
    corpus = ROOT / "tests" / "conformance"
    return [str(p) for sub in ("accept", "reject") for p in sorted((corpus / sub).glob("*.bin"))]


@pytest.mark.parametrize("target", CPP_TARGETS)
def test_cpp_target_under_address_sanitizer(
    target: str, kernel_objects: dict[str, list[str]], tmp_path: Path
) -> None:
    exe = _driver(kernel_objects["asan"], SANITIZE, target, tmp_path / "driver")
    # The conformance frames made into this target's inputs: seeds as libFuzzer gets them.
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    subprocess.run([str(exe), "--write-seeds", str(seeds), *_conformance_frames()], check=True,
                   capture_output=True)  # fmt: skip
    cases = sorted((ROOT / "fuzz" / "regressions" / f"cpp-{target}").glob("*"))
    inputs = [*map(str, sorted(seeds.iterdir())), *map(str, cases)]
    iterations = {"roundtrip": 600, "frame": 3000}.get(target, 6000) * SCALE
    result = subprocess.run([str(exe), str(iterations), "7", *inputs], capture_output=True,
                            text=True, timeout=1800)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert "no fault" in result.stdout


@pytest.mark.parametrize("target", ["frame", "roundtrip"])
def test_cpp_target_under_thread_sanitizer(
    target: str, kernel_objects: dict[str, list[str]], tmp_path: Path
) -> None:
    exe = _driver(kernel_objects["tsan"], ["-fsanitize=thread"], target, tmp_path / "driver")
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1:exitcode=66")
    result = subprocess.run([str(exe), str(300 * SCALE), "5"], capture_output=True, text=True,
                            env=env, timeout=1800)  # fmt: skip
    assert "ThreadSanitizer" not in result.stderr, result.stderr[-4000:]
    assert result.returncode == 0, result.stderr[-4000:]


def _python_targets() -> list[str]:
    return [t for t in TARGETS.TARGETS]


#: Seconds one input may take (the slowest seed decodes in well under one).
INPUT_SECONDS = 60


@contextlib.contextmanager
def _time_limit(seconds: int) -> Any:
    """A TimeoutError (a finding: not a clear error) raised into an input that runs past
    ``seconds`` (a hang in Python code, as in the gguf package's loop over a forged count)."""

    def expired(*_: object) -> None:
        raise TimeoutError(f"an input ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("target", _python_targets())
def test_python_target_over_its_seeds_and_regressions(target: str) -> None:
    if target in ("torch", "ztensor"):
        optional_import(target)
    run = TARGETS.target_function(target)
    seeds = list(TARGETS.seeds(target))
    assert seeds, f"no seed for {target}"
    cases = TARGETS.regressions(target)
    torch_absent = importlib.util.find_spec("torch") is None
    for data in [*seeds, *(p.read_bytes() for p in cases)]:
        try:
            with _time_limit(INPUT_SECONDS):
                run(data)  # (FindingError on anything but a result or a clear error)
        except TARGETS.FindingError as exc:
            # (an input taken for a torch pickle needs torch: absent on Python 3.12 here)
            if not (torch_absent and isinstance(exc.__cause__, ModuleNotFoundError)):
                raise


def test_every_regression_case_has_a_target() -> None:
    known = {*TARGETS.TARGETS, *(f"cpp-{t}" for t in CPP_TARGETS)}
    found = {p.name for p in (ROOT / "fuzz" / "regressions").iterdir()}
    assert found <= known, found - known
    assert found, "the findings of the first campaign are regression cases"


def test_a_finding_is_reported() -> None:
    """The harness itself: an input raising something unclear is a finding."""

    def broken() -> str:
        raise KeyError("a bare KeyError out of a parser")

    with pytest.raises(TARGETS.FindingError):
        TARGETS._checked(broken, b"x")
    TARGETS._checked(lambda: (_ for _ in ()).throw(ValueError("clear")), b"x")


def test_an_input_past_the_time_limit_is_a_finding() -> None:
    """The time limit of the regression runs: a hang is reported, not waited on."""

    def hang() -> str:
        while True:
            pass

    with pytest.raises(TARGETS.FindingError, match="ran past"), _time_limit(1):
        TARGETS._checked(hang, b"x")


def test_python_targets_run_under_atheris_where_installed(tmp_path: Path) -> None:
    """One target through atheris itself (``make fuzz`` installs it): a short run ends
    without a finding and reports its coverage."""
    if importlib.util.find_spec("atheris") is None:
        pytest.skip("atheris is installed by make fuzz, not by the test environments")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    result = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "targets.py"), "safetensors", "-runs=2000",
         str(corpus)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cov:" in result.stderr
