"""The notebooks' code cells run, in order, against the installed package."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, real_weights: dict[str, Any]) -> None:
    cells = json.loads(path.read_text())["cells"]
    namespace: dict[str, Any] = {}
    ran = 0
    for cell in cells:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{path.name}[{ran}]", "exec"), namespace)
            ran += 1
    assert ran > 0


def test_there_is_a_notebook() -> None:
    assert NOTEBOOKS
