"""The notebooks run top to bottom in a real Jupyter kernel (nbclient, the
engine nbmake drives), offline, each in under two minutes, and their plots
render. The committed notebooks hold no outputs (scripts/make_notebooks.py
writes them empty): every number comes from this run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import optional_import

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
#: The analysis notebooks of issue 8: each draws at least one plot.
PLOTTING = {"inspect_weights.ipynb", "compare_codecs.ipynb", "xarray_dask.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, real_weights: dict[str, Any], tmp_path: Path) -> None:
    nbformat = optional_import("nbformat")
    nbclient = optional_import("nbclient")
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()  # raises CellExecutionError, naming the cell, on any error
    took = time.perf_counter() - start
    assert took < 120, f"{path.name} took {took:.0f} s"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code)
    images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    if path.name in PLOTTING:
        assert images, f"{path.name}: no plot rendered"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_are_committed_without_outputs(path: Path) -> None:
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, path.name


def test_the_analysis_notebooks_are_there() -> None:
    assert {p.name for p in NOTEBOOKS} >= PLOTTING


def test_notebooks_match_their_generator() -> None:
    # Edited through scripts/make_notebooks.py: the committed files are its output.
    import importlib.util

    script = Path(__file__).parent.parent / "scripts" / "make_notebooks.py"
    spec = importlib.util.spec_from_file_location("make_notebooks", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, cells in (("inspect_weights", module.INSPECT), ("compare_codecs", module.COMPARE),
                        ("xarray_dask", module.XARRAY)):  # fmt: skip
        committed = json.loads((script.parent.parent / "notebooks" / f"{name}.ipynb").read_text())
        assert committed == module.notebook(cells), name
