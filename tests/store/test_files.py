"""Local containers written and read without Zarr (nncodecs.store.files, docs.py).

`import zarr` is a fifth of a second and ~25 MiB of every process; a Writer of
local files with the weights codec, and whole reads of its tensors, never need it.
What a Reader takes of a tensor's document without Zarr (data type, fill value, the
codec's settings) must read as Zarr reads it, and be refused where Zarr refuses it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import nncodecs
from nncodecs.container import declared
from nncodecs.store import zarr_nodes

RNG = np.random.default_rng(11)

# (name, array, codec): chunked, sharded, padded, every float width, ints, a raw one
TENSORS = {
    "emb": ((RNG.standard_normal((3000, 64)) * 0.02).astype(ml_dtypes.bfloat16), "auto"),
    "w.f32": ((RNG.standard_normal((513, 40)) * 0.02).astype(np.float32), "auto"),
    "w.f16": ((RNG.standard_normal((40_000, 9)) * 0.02).astype(np.float16), "rans"),
    "fp8": ((RNG.standard_normal((64, 32)) * 0.5).astype(ml_dtypes.float8_e4m3fn), "huffman"),
    "ids": (np.arange(512, dtype=np.int64).reshape(1, 512), "auto"),
    "scalar": (np.float32(2.5), "auto"),
    "mask": (np.tril(np.ones((8, 8), dtype=bool)), "auto"),
    "raw": (np.arange(60, dtype=np.float32).reshape(6, 10), "raw"),
}

_CHILD = """
import importlib.util, json, sys, zlib
import nncodecs
path, names = sys.argv[1], json.loads(sys.argv[2])
out = {}
with nncodecs.Reader(path) as r:
    for n in names:
        out[n] = zlib.crc32(r.read_tensor(n).tobytes())
    out["info"] = [list(r.info(n).shape) for n in names]
    out["zarr after whole reads"] = "zarr" in sys.modules
    out["numcodecs after whole reads"] = "numcodecs" in sys.modules
    if importlib.util.find_spec("torch") is not None:
        import torch
        from nncodecs.integrations.torch import load_state_dict

        loaded = load_state_dict(path)
        out["zarr after load_state_dict"] = "zarr" in sys.modules
        out["torch"] = {n: zlib.crc32(t.reshape(-1).view(torch.uint8).numpy().tobytes())
                        for n, t in loaded.items()}
    out["slice"] = zlib.crc32(r["w.f32"][5:9].tobytes())  # (a Zarr array: zarr now)
    out["zarr after a slice"] = "zarr" in sys.modules
print(json.dumps(out))
"""


def _write(target: Path, raw: bool = True) -> None:
    with nncodecs.Writer(target, chunk_bytes=16 << 10) as w:
        for name, (arr, codec) in TENSORS.items():
            if raw or codec != "raw":
                w.add_tensor(name, arr, codec=codec)


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_whole_reads_import_neither_zarr_nor_numcodecs(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"m{suffix}"
    _write(target, raw=False)  # (a raw tensor is a memory map, made through Zarr's array)
    names = [n for n in TENSORS if n != "raw"]
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, str(target), json.dumps(names)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    for n in names:
        want = np.asarray(TENSORS[n][0])
        assert got[n] == zlib.crc32(want.tobytes()), n
        if "torch" in got:  # (where torch is installed)
            assert got["torch"][n] == zlib.crc32(want.tobytes()), n
    assert got["info"] == [list(np.shape(TENSORS[n][0])) for n in names]
    assert got["slice"] == zlib.crc32(TENSORS["w.f32"][0][5:9].tobytes())
    assert not got["zarr after whole reads"]
    assert not got["numcodecs after whole reads"]
    assert not got.get("zarr after load_state_dict")
    assert got["zarr after a slice"]


_WRITER = """
import sys
import numpy as np
import ml_dtypes
import nncodecs
rng = np.random.default_rng(3)
for target in sys.argv[1:]:
    with nncodecs.Writer(target, chunk_bytes=16 << 10) as w:
        w.add_tensor("big", (rng.standard_normal((40_000, 9)) * 0.02).astype(ml_dtypes.bfloat16))
        w.add_tensor("f32", (rng.standard_normal((300, 7)) * 0.02).astype(np.float32))
        w.flush()
        w.add_tensor("ids", np.arange(99, dtype=np.int64), codec="huffman")
print("zarr" in sys.modules, "numcodecs" in sys.modules)
"""


def test_writing_local_files_imports_no_zarr(tmp_path: Path) -> None:
    targets = [str(tmp_path / "m.zarr"), str(tmp_path / "m.zarr.zip")]
    run = subprocess.run(
        [sys.executable, "-c", _WRITER, *targets], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "False"]
    for target in targets:  # (what Zarr itself reads, and the Reader)
        with nncodecs.Reader(target) as r:
            assert r.keys() == ["big", "f32", "ids"]
            assert r["big"].shards is not None
            assert r["big"][...].tobytes() == r.read_tensor("big").tobytes()
            assert r.read_tensor("ids").tolist() == list(range(99))
            r.verify()


def test_a_zip_published_over_an_open_reader_is_never_mixed_in(tmp_path: Path) -> None:
    """Zarr's store is made on first use, after the Reader opened: it must read the
    file the Reader opened (its descriptor), not one published at its path since."""
    target = tmp_path / "m.zarr.zip"
    _write(target)
    old = {n: np.asarray(a) for n, (a, _) in TENSORS.items()}
    with nncodecs.Reader(target) as r:
        with nncodecs.Writer(target, overwrite=True, chunk_bytes=16 << 10) as w:
            for name, (arr, codec) in TENSORS.items():
                w.add_tensor(name, np.asarray(arr) * 2 if arr.dtype.kind == "f" else arr, codec)
        assert r["w.f32"][5:9].tobytes() == old["w.f32"][5:9].tobytes()
        assert r.read_tensor("raw").tobytes() == old["raw"].tobytes()  # (a memory map)
        assert r.read_tensor("emb").tobytes() == old["emb"].tobytes()
    with nncodecs.Reader(target) as r:
        assert r.read_tensor("raw").tobytes() == (old["raw"] * 2).tobytes()


# -- the document, read without Zarr, as Zarr reads it ---------------------------------

_FILLS = [0, 0.0, -0.0, 1, -1, 1.5, 0.1, 448, 449, 57344, 1e300, -1e300, 300, 70000,
          2**31, 2**63, -(2**63) - 1, 2**64, "NaN", "Infinity", "-Infinity", True, False,
          "0x7fc0", "nope", None, [0], 1e-45]  # fmt: skip


def _outcome(fn: object, *args: object) -> tuple[str, bytes | None]:
    try:
        value = fn(*args)  # type: ignore[operator]
    except Exception:  # (Zarr refuses with several classes: declared.py makes each
        return "error", None  # a CorruptDataError)
    return "value", None if value is None else np.asarray(value).tobytes()


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(declared._DATA_TYPES))
def test_data_types_and_fill_values_read_as_zarr_reads_them(name: str) -> None:
    import nncodecs.codecs  # noqa: F401  (registers nncodecs' data types with Zarr)

    doc = {"data_type": name}
    assert declared.doc_dtype(doc) == zarr_nodes.doc_dtype(doc)
    text = json.dumps(name)
    for fill in _FILLS:
        if not declared._plain(fill):
            continue  # (not a fill value whole reads take: Zarr's parser reads the array)
        ours = _outcome(declared._fill_value.__wrapped__, text, json.dumps(fill))
        zarrs = _outcome(
            lambda t, f: zarr_nodes.data_type(t).from_json_scalar(f, zarr_format=3), text, fill
        )
        if zarrs[0] == "error":
            assert ours[0] == "error", (name, fill)
        else:
            assert ours == zarrs, (name, fill)


def test_fill_values_equal_as_python_keys_stay_apart() -> None:
    """0, 0.0, -0.0 and false are one key to a cache of Python values: the fill values
    are cached by their JSON text, so -0.0 keeps its sign after 0.0 was read."""
    text = json.dumps("float32")
    assert np.signbit(declared._fill_value(text, "0.0")) == np.False_
    assert np.signbit(declared._fill_value(text, "-0.0")) == np.True_
    assert declared._fill_value(json.dumps("bool"), "false") == np.False_


_CONFIGS = [
    {},
    {"coder": "rans", "dtype": "bfloat16"},
    {"coder": "huffman", "dtype": "float32", "precision": 11},
    {"coder": "lzma"},
    {"precision": 9},
    {"precision": 11.0},
    {"checksum": "yes"},
    {"min_gain": 2},
    {"zstd_level": 0},
    {"dtype": "complex64"},
    {"dtype": 7},
    {"threads": 2},
    {"colour": "red"},
    None,
    [],
]


@pytest.mark.parametrize("config", _CONFIGS, ids=repr)
def test_the_weights_codecs_settings_read_as_zarr_reads_them(config: object) -> None:
    from nncodecs.codecs.weights import Weights

    data = {"name": "nncodecs.weights"}
    if config is not None:
        data["configuration"] = config
    text = json.dumps(data, sort_keys=True)
    ours = _outcome(declared._weights_dtype.__wrapped__, text)
    zarrs = _outcome(lambda d: Weights.from_dict(d).dtype, data)
    if zarrs[0] == "error":
        assert ours[0] == "error"
    else:
        assert ours == zarrs
