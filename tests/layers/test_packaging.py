"""What the package is shipped as: its licence, its extras, and the release matrix in
pyproject.toml, checked by cibuildwheel itself so that it stays valid. (The wheels are
built, repaired and installed by `make wheel` and `make test`: scripts/wheels.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_release_matrix_is_what_cibuildwheel_reads() -> None:
    # (beside this interpreter: make runs the suite without the venv on PATH)
    tool = shutil.which("cibuildwheel", path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.skip("cibuildwheel is installed in the Python 3.12 test environment only")
    cmd = [tool, "--print-build-identifiers", "--platform", "linux"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    built = set(r.stdout.split())
    assert built == {f"cp3{v}-manylinux_{a}" for v in (11, 12) for a in ("x86_64", "aarch64")}


def test_the_licence_ships_with_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
