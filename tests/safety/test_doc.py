"""docs/safety.md names a test for each guarantee: each named test must exist (issue 36).

Every backticked name in a table's test column that starts with ``test_`` must be
a test function pytest collects: defined at module level (or in a ``Test`` class)
in a ``tests/**/test_*.py`` file. A renamed or deleted test fails here, so the page
cannot go on citing a test that no longer runs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collected_names() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.startswith("test"):
                    names.add(node.name)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                names |= {
                    n.name
                    for n in node.body
                    if isinstance(n, ast.FunctionDef) and n.name.startswith("test")
                }
    return names


def _named_tests(text: str) -> list[tuple[str, str]]:
    """(guarantee, test name) for every test the tables name."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or set(cells[-1]) <= set("-"):
            continue
        for name in re.findall(r"`([^`]+)`", cells[-1]):
            if name.startswith("test_"):
                out.append((cells[0][:60], name))
    return out


def test_every_test_safety_md_names_exists() -> None:
    named = _named_tests((ROOT / "docs" / "safety.md").read_text())
    assert len(named) > 60, "the tables were not read"
    collected = _collected_names()
    missing = sorted({name for _, name in named if name not in collected})
    assert not missing, f"docs/safety.md names tests that do not exist: {missing}"


def test_the_check_catches_a_missing_name() -> None:
    fake = "| a guarantee | `test_that_was_never_written` |\n"
    assert _named_tests(fake) == [("a guarantee", "test_that_was_never_written")]
    assert "test_that_was_never_written" not in _collected_names()
