"""docs/format.md, "The container", against what nncodecs writes and reads.

Its example documents are what a Writer writes; tests/spec_reader.py, a reader written
from that section alone (nothing of nncodecs imported but the frame decoder), reads
every kind of tensor a Writer makes, from a directory and from a zip, bit for bit as
``nncodecs.Reader`` does, and the conformance corpus' accepted containers.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import spec_reader
from spec_reader import SpecError, SpecReader

import nncodecs

ROOT = Path(__file__).resolve().parents[2]
SPEC = (ROOT / "docs" / "format.md").read_text()
SECTION = SPEC[SPEC.index("\n# The container\n") :]
CORPUS = ROOT / "tests" / "conformance"


def _json_blocks() -> list[dict[str, Any]]:
    return [json.loads(b) for b in re.findall(r"```json\n(.*?)```", SECTION, re.S)]


def _abbreviated(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("(abbreviated")


def _example_container(path: Path) -> None:
    """The container the spec's examples describe."""
    with nncodecs.Writer(path) as w:
        w.add_tensor("lm_head.weight", np.zeros((8704, 1024), np.float32))
        w.add_tensor("norm.bias", np.zeros(1024, np.float32))
        w.add_file("config.json", b"{}")
        w.metadata["format"] = "pt"


def test_the_spec_s_example_documents_are_what_a_writer_writes(tmp_path: Path) -> None:
    root_example, array_example, delta_example = _json_blocks()
    _example_container(tmp_path / "m.zarr")
    root = json.loads((tmp_path / "m.zarr" / "zarr.json").read_bytes())
    written = root["consolidated_metadata"]["metadata"]
    # The root: exactly as shown, each node's document abbreviated.
    shown = root_example["consolidated_metadata"]["metadata"]
    assert set(shown) == set(written)
    assert all(_abbreviated(v) for v in shown.values())
    assert {**root_example, "consolidated_metadata": None} == {
        **root,
        "consolidated_metadata": None,
    }
    assert {k: v for k, v in root_example["consolidated_metadata"].items() if k != "metadata"} == {
        k: v for k, v in root["consolidated_metadata"].items() if k != "metadata"
    }
    # The array: exactly as written, key for key (its own zarr.json and the root's copy).
    own = json.loads((tmp_path / "m.zarr" / "lm_head.weight" / "zarr.json").read_bytes())
    assert array_example == own == written["lm_head.weight"]
    assert (tmp_path / "m.zarr" / "lm_head.weight" / "c" / "1" / "0").is_file()
    # The delta codec: its keys as a Writer writes them.
    assert set(delta_example) == {"name", "configuration"}
    assert set(delta_example["configuration"]) == {"transform", "reference", "codec"}
    assert set(delta_example["configuration"]["reference"]) == {"container", "tensor", "sha256"}


def test_the_delta_example_s_keys_are_written(tmp_path: Path) -> None:
    _, _, example = _json_blocks()
    _chain(tmp_path)
    docs = json.loads((tmp_path / "c2.zarr" / "zarr.json").read_bytes())
    codec = docs["consolidated_metadata"]["metadata"]["w"]["codecs"][0]
    if codec["name"] == "sharding_indexed":  # (inside the shard where sharded)
        (codec,) = codec["configuration"]["codecs"]
    assert codec["name"] == example["name"]
    assert set(codec["configuration"]) == set(example["configuration"])
    assert set(codec["configuration"]["reference"]) == set(example["configuration"]["reference"])
    assert codec["configuration"]["codec"]["name"] == example["configuration"]["codec"]["name"]


# -- the reader written from the spec ---------------------------------------------------


def test_the_spec_reader_imports_nothing_of_nncodecs_but_the_frame_decoder() -> None:
    tree = ast.parse(Path(spec_reader.__file__).read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found |= {f"{node.module}.{a.name}" for a in node.names}
    ours = {n for n in found if n == "nncodecs" or n.startswith("nncodecs.")}
    assert ours == {"nncodecs.frame.decode_frame"}, ours
    assert "importlib" not in found and "__import__" not in Path(spec_reader.__file__).read_text()


def _same(a: Any, b: Any) -> None:
    """Bit for bit: the same kind, dtype, shape and bytes."""
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
        return
    if isinstance(a, dict):
        assert set(a) == set(b)
        for k in a:
            if k == "shape":
                assert tuple(a[k]) == tuple(b[k])
            else:
                _same(a[k], b[k])
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def _agree(path: Path, references: Any = None) -> tuple[list[str], list[str]]:
    """Every tensor and kept file read by both readers, compared; (tensors, files)."""
    with nncodecs.Reader(path, references=references) as r, SpecReader(path) as s:
        assert s.order == r.keys()
        assert s.metadata == r.metadata
        for name in r:
            assert s.layout(name) == r.layout(name)
            _same(r.read_tensor(name, check=True), s.read_tensor(name))
        assert sorted(s.files) == sorted(r.files(hidden=True))
        for name in s.files:
            assert s.read_file(name) == r.read_file(name)
        return s.order, list(s.files)


def _every_kind(path: Path) -> None:
    rng = np.random.default_rng(7)
    scipy = pytest.importorskip("scipy.sparse")
    with nncodecs.Writer(path, chunk_bytes=1024) as w:
        w.add_tensor("dense.f32", rng.standard_normal((40, 12)).astype(np.float32))
        w.add_tensor("sharded.bf16", rng.standard_normal((300, 64)).astype(ml_dtypes.bfloat16))
        w.add_tensor("f16", rng.standard_normal((33, 5)).astype(np.float16))
        w.add_tensor("f8", rng.standard_normal((20, 16)).astype(ml_dtypes.float8_e4m3fn))
        w.add_tensor("i64.zstd", np.arange(500, dtype=np.int64), codec="zstd")
        w.add_tensor("zstd.sharded", rng.integers(0, 9, (400, 32), dtype=np.int32), codec="zstd")
        w.add_tensor("raw", rng.standard_normal((7, 3)).astype(np.float64), codec="raw")
        w.add_tensor("u8.raw", np.arange(11, dtype=np.uint8), codec="raw")
        w.add_tensor("scalar", np.float32(2.5))
        w.add_tensor("empty", np.zeros((0, 4), np.float32))
        w.add_tensor("bool", rng.integers(0, 2, 30).astype(bool))
        w.add_tensor("a/b\\c", np.ones(3, np.int16))  # (escaped: %2F, %5C)
        w.add_tensor("_private", np.ones(2, np.uint16))
        w.add_tensor("", np.ones(2, np.uint32))
        w.add_tensor("zarr.json", np.ones(2, np.int8))
        w.add_tensor("csr", scipy.random(30, 20, density=0.2, format="csr", random_state=1,
                                         dtype=np.float32))  # fmt: skip
        w.add_tensor("csc", scipy.random(20, 30, density=0.2, format="csc", random_state=2,
                                         dtype=np.float32))  # fmt: skip
        coords = np.array([[0, 1, 2], [3, 0, 1], [1, 1, 0]])
        w.add_sparse_coo("coo3", coords, np.array([1.0, 2.0, 3.0], np.float32), (3, 4, 2))
        w.add_quantized("mx", rng.integers(0, 256, (8, 16), dtype=np.uint8),
                        rng.integers(100, 140, (8, 1), dtype=np.uint8), scheme="mxfp4")  # fmt: skip
        w.add_quantized("nv", rng.integers(0, 256, (8, 16), dtype=np.uint8),
                        np.ones((8, 2), np.float32).astype(ml_dtypes.float8_e4m3fn),
                        scheme="nvfp4")  # fmt: skip
        w.add_records("q4_0", rng.integers(0, 256, 18 * 50, dtype=np.uint8).tobytes(),
                      [("d", "float16", 1), ("qs", "uint8", 16)])  # fmt: skip
        w.add_file("config.json", b'{"hidden_size": 12}')
        w.add_file("tokenizer/vocab.txt", b"a\nb\n" * 100)
        w.add_hidden_file(".nncodecs/own", b"\x00\x01" * 10)
        w.metadata["format"] = "pt"


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_the_spec_reader_reads_every_kind_as_the_reader_does(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"m{suffix}"
    _every_kind(path)
    tensors, files = _agree(path)
    assert len(tensors) == 21 and len(files) == 3
    with SpecReader(path) as s:  # (the layouts this covers)
        assert {s.layout(n) for n in tensors} == {"dense", "csr", "csc", "coo", "mxfp4",
                                                   "nvfp4", "records"}  # fmt: skip
        codecs = {json.dumps(d["codecs"][0]["name"]) for _, d in s.nodes.values() if "codecs" in d}
        assert '"sharding_indexed"' in codecs


def _chain(tmp_path: Path) -> list[Path]:
    """c0 (whole), c1 (against c0: deltas, a duplicate), c2 (against c1), in tmp_path."""
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((256, 64)).astype(np.float32)
    b0 = rng.standard_normal((300, 8)).astype(ml_dtypes.bfloat16)
    frozen = rng.standard_normal((64, 64)).astype(np.float32)
    paths = [tmp_path / f"c{i}.zarr" for i in range(3)]
    steps = [(w0, b0), (w0 + np.float32(1e-6), b0), (w0 + np.float32(2e-6), b0)]
    for i, (w, b) in enumerate(steps):
        ref = None if i == 0 else paths[i - 1]
        with nncodecs.Writer(paths[i], reference=ref, chunk_bytes=1024, hashes=True) as wr:
            wr.add_tensor("w", w)
            wr.add_tensor("b", b)
            wr.add_tensor("frozen", frozen)
    return paths


def test_the_spec_reader_follows_delta_chains_with_references(tmp_path: Path) -> None:
    paths = _chain(tmp_path)
    with nncodecs.Reader(paths[2]) as r:
        refs = r.references()
        assert refs, "the chain's last container stores tensors against its references"
    seen = set()
    for p in paths:
        doc = json.loads((p / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"]
        for node in ("w", "b", "frozen"):
            own = doc[node]["attributes"]["nncodecs"]
            seen.add((own.get("transform"), bool(own.get("duplicate"))))
        _agree(p)
    assert (None, False) in seen and ("xor", True) in seen
    assert {"xor", "sub"} & {t for t, d in seen if not d}


def test_the_spec_reader_refuses_what_the_spec_says_to(tmp_path: Path) -> None:
    path = tmp_path / "m.zarr"
    _every_kind(path)
    (path / "dense.f32" / "c" / "1" / "0").unlink()  # a missing chunk: damage, not zeros
    with SpecReader(path) as s, pytest.raises(SpecError, match="missing"):
        s.read_tensor("dense.f32")
    shard = path / "sharded.bf16" / "c" / "0" / "0"
    raw = bytearray(shard.read_bytes())
    raw[-5] ^= 1  # the shard index's bytes, under its CRC32C
    shard.write_bytes(bytes(raw))
    with SpecReader(path) as s, pytest.raises(SpecError, match="CRC32C"):
        s.read_tensor("sharded.bf16")


@pytest.mark.parametrize(
    "name",
    sorted(
        n
        for n, case in json.loads((CORPUS / "manifest.json").read_text())["accept"].items()
        if case["decode"] == "container"
    ),
)
def test_the_spec_reader_reads_the_conformance_corpus_containers(name: str) -> None:
    _agree(CORPUS / "accept" / name)
