"""The user documentation stays true: every Python example in README.md and docs/ runs,
the command-line sample in README.md prints what it shows, the front page stays short,
and no user page carries the project's internal references.

Each page's Python blocks run in order, as one program, in a fresh folder of their own.
A page may use names it does not define (``state_dict``, a CSR matrix): :data:`SETUP`
defines them, page by page, in front of its blocks. A block that cannot run here is
marked in the page by a comment line ``<!-- not run: REASON -->`` just above it, and is
listed by :func:`test_blocks_not_run_say_why`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
USER_PAGES = [p for p in PAGES if p.name != "development.md"]
_BLOCK = re.compile(r"(<!-- not run: ([^\n]*?) -->\n)?```python\n(.*?)```", re.S)

#: What a page's examples take as given, defined before its blocks run.
SETUP = {
    "container.md": """
import dask.array, numpy as np, scipy.sparse, xarray, zarr
import nncodecs
from safetensors.numpy import save_file

rng = np.random.default_rng(0)
state_dict = {
    "encoder.weight": rng.standard_normal((256, 64)).astype(np.float32),
    "encoder.layer.5.output.dense.weight": rng.standard_normal((128, 64)).astype(np.float32),
    "bias": np.zeros(64, np.float32),
}
x = np.ones(8, np.float32)
for name, value in (("a", 1.0), ("b", 2.0)):
    with nncodecs.Writer(f"{name}.zarr.zip") as w:
        w.add_tensor(name, np.full(16, value, np.float32))
with nncodecs.Writer("store/ckpt-1000.zarr.zip") as w:
    for name, t in state_dict.items():
        w.add_tensor(name, t)
state_dict = {k: v + np.float32(1e-3) for k, v in state_dict.items()}
scipy_csr_or_csc_or_coo = scipy.sparse.random(50, 40, density=0.1, format="csc",
                                              dtype=np.float32, random_state=1)
csr = scipy.sparse.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=2)
data, indices, indptr, shape = csr.data, csr.indices, csr.indptr, csr.shape
coords = np.vstack([csr.tocoo().row, csr.tocoo().col])  # (ndim, nnz), with data
blocks = rng.integers(0, 256, (64, 16), dtype=np.uint8)
scales = rng.integers(100, 140, (64, 1), dtype=np.uint8)
fp8_scales = np.ones((64, 2), np.float32).astype(nncodecs.dtypes.ML_DTYPES["float8_e4m3fn"])
q4_0_bytes = rng.integers(0, 256, 18 * 32, dtype=np.uint8).tobytes()
save_file({"embeddings.word_embeddings.weight": np.ones((8, 4), np.float32)},
          "model.safetensors")
from nncodecs.formats import compress
compress("model.safetensors", "model.safetensors.zarr.zip")
""",
}


#: The optional packages a page's examples need (the Python 3.12 test venv has no torch).
NEEDS = {"container.md": ["torch"], "checkpoints.md": ["torch"]}


def blocks(page: Path) -> list[tuple[str | None, str]]:
    """``(reason not run, code)`` of each Python block of ``page``."""
    return [(m.group(2), m.group(3)) for m in _BLOCK.finditer(page.read_text())]


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=lambda p: p.name)
def test_every_python_example_runs(page: Path, tmp_path: Path) -> None:
    code = "\n".join(c for reason, c in blocks(page) if reason is None)
    if not code:
        pytest.skip(f"{page.name}: every block is marked not run")
    for package in NEEDS.get(page.name, []):
        pytest.importorskip(package, reason=f"{page.name}'s examples need {package}")
    program = SETUP.get(page.name, "") + "\n" + code
    r = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, f"{page.name}:\n{r.stderr[-3000:]}"


def test_blocks_not_run_say_why() -> None:
    marked = [(p.name, reason) for p in PAGES for reason, _ in blocks(p) if reason is not None]
    assert marked, "none marked: then this test and its marker can go"
    for page, reason in marked:
        assert len(reason.split()) >= 4, (page, reason)  # (a reason, not a word)
    assert {page for page, _ in marked} <= {"gpu.md", "parallel.md"}, marked


def test_the_command_line_sample_is_what_the_command_prints(
    real_weights: dict, tmp_path: Path
) -> None:
    """README's ``console`` block, run on the bundled model: each line printed as shown
    (a line ``...`` stands for any number of lines)."""
    from nncodecs.datasets import minilm_path

    text = (ROOT / "README.md").read_text()
    (sample,) = re.findall(r"```console\n(.*?)```", text, re.S)
    shutil.copy(minilm_path(), tmp_path / "model.safetensors")
    expected: list[str] = []
    got: list[str] = []
    for line in sample.splitlines():
        if line.startswith("$ nncodecs "):
            args = line.removeprefix("$ nncodecs ").split()
            cmd = [sys.executable, "-m", "nncodecs", *args]
            r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            got += [line, *r.stdout.rstrip("\n").splitlines()]
        expected.append(line)
    assert _matches([g.rstrip() for g in got], [e.rstrip() for e in expected]), "\n".join(got)


def _matches(got: list[str], expected: list[str]) -> bool:
    """``expected`` with ``...`` lines matching any run of lines of ``got``."""
    if not expected:
        return not got
    if expected[0] == "...":
        return any(_matches(got[i:], expected[1:]) for i in range(len(got) + 1))
    return bool(got) and got[0] == expected[0] and _matches(got[1:], expected[1:])


def test_the_front_page_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


_INTERNAL = [
    re.compile(r"\bissues? #?\d+", re.I),  # the project's issue numbers
    re.compile(r"\bsessions?\b", re.I),  # a work log's phrase
    re.compile(r"\bthe issue\b|\bissue's\b", re.I),  # a work item, not the user's
    re.compile(r"(?<![0-9a-fx])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}(?![0-9a-f])"),
]


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_internal_references_in_user_pages(page: Path) -> None:
    text = page.read_text()
    for pattern in _INTERNAL:
        found = pattern.search(text)
        assert found is None, (page.name, found.group(0) if found else None)


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped (``-`` and
    ``_`` kept), spaces to ``-``."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_anchor_resolves(page: Path) -> None:
    """A relative link names a file of the repository, and its #anchor a heading there."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):  # (https:, mailto:)
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), (page.name, target)
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), (page.name, target)
