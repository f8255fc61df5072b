"""The conformance corpus (tests/conformance, written by scripts/make_conformance.py):
every must-accept input decodes to its recorded SHA-256, every must-reject input raises
its recorded error class; and the whole corpus, run again in a fresh process under an
address-space limit and a time limit, crashes, hangs and over-allocates on none of it.

docs/format.md links the corpus, so that another implementation of the format can test
itself against it; tests/conformance/README.md says how each kind is decoded.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import optional_import

import nncodecs

ROOT = Path(__file__).parent.parent.parent
CORPUS = ROOT / "tests" / "conformance"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
#: The bound a fresh process decodes the whole corpus under (virtual memory: Python,
#: NumPy, zarr and their threads' stacks included; no input may need more).
ADDRESS_SPACE = 1 << 30


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_conformance", ROOT / "scripts" /
                                                  "make_conformance.py")  # fmt: skip
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def _error_class(name: str) -> type[BaseException]:
    found = getattr(nncodecs, name, None) or getattr(__builtins__, name, None)
    if found is None and isinstance(__builtins__, dict):
        found = __builtins__.get(name)
    assert isinstance(found, type) and issubclass(found, Exception), name
    return found


def test_the_corpus_is_large_enough_and_covers_every_kind() -> None:
    accept, reject = MANIFEST["accept"], MANIFEST["reject"]
    assert len(accept) >= 30 and len(reject) >= 80, (len(accept), len(reject))
    kinds = {v["decode"] for v in accept.values()}
    assert kinds == {"frame", "weights", "container", "model"}
    assert {v["decode"] for v in reject.values()} == kinds
    assert {v["error"] for v in reject.values()} <= set(GEN.ERRORS)
    on_disk = {p.name for p in (CORPUS / "accept").iterdir()}
    assert on_disk == set(accept)
    assert {p.name for p in (CORPUS / "reject").iterdir()} == set(reject)


@pytest.mark.parametrize("name", sorted(MANIFEST["accept"]))
def test_must_accept(name: str) -> None:
    case = MANIFEST["accept"][name]
    if "needs" in case:  # (a PyTorch checkpoint: read with torch)
        optional_import(case["needs"])
    assert GEN.decode(case["decode"], CORPUS / "accept" / name) == case["sha256"]


@pytest.mark.parametrize("name", sorted(MANIFEST["reject"]))
def test_must_reject(name: str) -> None:
    case = MANIFEST["reject"][name]
    if "needs" in case:
        optional_import(case["needs"])
    with pytest.raises(_error_class(case["error"])) as info:
        GEN.decode(case["decode"], CORPUS / "reject" / name)
    assert type(info.value).__name__ == case["error"], info.value  # (that class, not a subclass)
    assert str(info.value).strip(), "an error says what is wrong"


_RUN_ALL = r"""
import importlib.util, json, resource, sys
from pathlib import Path
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
root = Path(sys.argv[2])
spec = importlib.util.spec_from_file_location("g", root / "scripts" / "make_conformance.py")
g = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)
manifest = json.loads((root / "tests" / "conformance" / "manifest.json").read_text())
bad = []
try:
    import torch
except ImportError:
    torch = None
for kind in ("accept", "reject"):
    for name in [n for n, c in manifest[kind].items() if "needs" in c and torch is None]:
        del manifest[kind][name]
for name, case in manifest["accept"].items():
    if g.decode(case["decode"], root / "tests" / "conformance" / "accept" / name) != case["sha256"]:
        bad.append(name)
for name, case in manifest["reject"].items():
    try:
        g.decode(case["decode"], root / "tests" / "conformance" / "reject" / name)
        bad.append(name)
    except MemoryError:
        bad.append(name + " (MemoryError)")
    except Exception as exc:
        if type(exc).__name__ != case["error"]:
            bad.append(f"{name}: {type(exc).__name__}")
print(json.dumps(bad))
"""


def test_the_whole_corpus_under_a_memory_and_time_limit() -> None:
    # A build without sanitizers (ASan reserves terabytes of address space), a fresh
    # process: a hang fails by the timeout, an allocation past the bound by MemoryError.
    r = subprocess.run(
        [sys.executable, "-c", _RUN_ALL, str(ADDRESS_SPACE), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []
