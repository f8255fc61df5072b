"""The rANS lane header compiles for the GPU (nvcc -arch=sm_90 -cubin), wherever nvcc is."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
def test_lane_header_compiles_with_nvcc(tmp_path: Path) -> None:
    out = tmp_path / "rans_lane_check.cubin"
    result = subprocess.run(
        [
            "nvcc",
            "-arch=sm_90",
            "-cubin",
            "-std=c++17",
            f"-I{ROOT / 'cpp' / 'include'}",
            str(ROOT / "tests" / "cuda" / "rans_lane_check.cu"),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 0
