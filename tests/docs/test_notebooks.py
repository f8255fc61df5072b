"""The notebooks are committed with their outputs (plots visible where the repository is
browsed; scripts/make_notebooks.py --execute writes them), and still run to the same
outputs: nbval reruns each in a real Jupyter kernel, offline, and compares every text
output with the committed one (cells tagged ``nbval-ignore-output``, timings and the
peers installed, excepted; plots are checked to render, not compared pixel for pixel)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import optional_import

NOTEBOOKS = sorted((Path(__file__).parent.parent.parent / "notebooks").glob("*.ipynb"))
#: The analysis notebooks of issue 8: each draws at least one plot.
PLOTTING = {"inspect_weights.ipynb", "compare_codecs.ipynb", "xarray_dask.ipynb"}


def code_cells(path: Path) -> list[dict[str, Any]]:
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_reruns_to_its_committed_outputs(
    path: Path, real_weights: dict[str, Any], tmp_path: Path
) -> None:
    optional_import("nbval")
    optional_import("nbclient")
    copy = tmp_path / path.name  # (the kernel runs in the notebook's directory)
    shutil.copyfile(path, copy)
    start = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-cell-timeout=120", "-q",
         "-p", "no:cacheprovider", "-p", "no:randomly", copy.name],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    took = time.perf_counter() - start
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]
    assert took < 180, f"{path.name} took {took:.0f} s"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_are_committed_with_their_outputs(path: Path) -> None:
    cells = code_cells(path)
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1)), path.name
    assert sum(bool(c["outputs"]) for c in cells) >= len(cells) // 2, path.name
    for c in cells:
        for out in c["outputs"]:
            assert out["output_type"] != "error", (path.name, out.get("ename"))
            assert "execution" not in c["metadata"], path.name  # no timestamps
    images = [o for c in cells for o in c["outputs"] if "image/png" in o.get("data", {})]
    if path.name in PLOTTING:
        assert images, f"{path.name}: no plot committed"


def test_the_analysis_notebooks_are_there() -> None:
    assert {p.name for p in NOTEBOOKS} >= PLOTTING


def test_notebooks_match_their_generator() -> None:
    # Edited through scripts/make_notebooks.py: the committed files are its output.
    import importlib.util

    script = Path(__file__).parent.parent.parent / "scripts" / "make_notebooks.py"
    spec = importlib.util.spec_from_file_location("make_notebooks", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, cells in (("inspect_weights", module.INSPECT), ("compare_codecs", module.COMPARE),
                        ("xarray_dask", module.XARRAY)):  # fmt: skip
        committed = json.loads((script.parent.parent / "notebooks" / f"{name}.ipynb").read_text())
        assert module.without_outputs(committed) == module.notebook(cells), name
