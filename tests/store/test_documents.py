"""The container's own writes and reads, against Zarr's.

The Writer makes each array's zarr.json from a template Zarr made and encodes
chunks and shards itself; the Reader decodes weights chunks straight into the
output. Whatever they write must be what Zarr itself would write (plain Zarr
reads it back, metadata equal), and what they read what Zarr reads.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import zarr
from zarr.storage import MemoryStore, ZipStore

import nncodecs
from nncodecs.container import layout
from nncodecs.dtypes import SUPPORTED_DTYPES, normalize_dtype
from nncodecs.store import documents, zarr_nodes

RNG = np.random.default_rng(7)


def _weights(shape: tuple[int, ...], dtype: object) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.05).astype(dtype)


# (name, array, codec): every rank, a padded last chunk, shards with a partial last
# one, empty arrays, each codec, and the narrow float types
CASES = [
    ("scalar", np.float32(1.5), "auto"),
    ("vector", _weights((1000,), np.float32), "auto"),
    ("padded", _weights((1001, 300), ml_dtypes.bfloat16), "auto"),
    ("sharded", _weights((70_000, 20), np.float16), "auto"),
    ("fp8", _weights((300, 40), ml_dtypes.float8_e4m3fn), "rans"),
    ("huff", _weights((64, 64, 3), np.float32), "huffman"),
    ("zstd", _weights((40_000, 30), np.float32), "zstd"),
    ("zstd.small", np.arange(10, dtype=np.int64), "zstd"),
    ("raw", _weights((50, 7), np.float32), "raw"),
    ("empty", np.zeros((0, 5), np.float32), "auto"),
    ("ints", np.arange(5000, dtype=np.int32).reshape(50, 100), "auto"),
    ("big.endian", _weights((300,), ">f4"), "auto"),
]


def _write(target: Path, chunk_bytes: int = 64 << 10) -> None:
    with nncodecs.Writer(target, chunk_bytes=chunk_bytes) as w:
        for name, arr, codec in CASES:
            w.add_tensor(name, arr, codec=codec)
        w.add_sparse_coo("coo", np.array([[0, 3], [1, 2]]), np.array([1.0, 2.0]), (4, 4))


def _group(target: Path, consolidated: bool = True) -> zarr.Group:
    store = ZipStore(target, mode="r") if target.suffix == ".zip" else target
    return zarr.open_group(store, mode="r", use_consolidated=consolidated)


@pytest.mark.parametrize("name", [*SUPPORTED_DTYPES, ">f4", ">u2"])
def test_the_weights_codecs_templates_are_zarrs(name: str) -> None:
    """The Writer makes the weights codec's documents itself (no Zarr imported): each
    kind must be the very document Zarr writes for it."""
    dtype = normalize_dtype(name)
    for ndim in range(4):
        for codec in ("auto", "rans", "huffman"):
            for sharded in (False, True) if ndim else (False,):
                ours = documents.template(dtype, ndim, codec, sharded).doc
                assert ours == documents.zarr_doc(dtype, ndim, codec, sharded)[0], (ndim, codec)


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_plain_zarr_reads_what_the_writer_wrote(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"m{suffix}"
    _write(target)
    group = _group(target)
    for name, arr, _ in CASES:
        z = group[nncodecs.container.names.escape(name)]
        got = z[...]
        assert got.shape == np.shape(arr)
        assert (
            got.tobytes()
            == np.asarray(arr).astype(np.asarray(arr).dtype.newbyteorder("<")).tobytes()
        )
    assert zarr.open_array(group.store, path="sharded", mode="r").shards is not None


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_the_reader_reads_what_was_written(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"m{suffix}"
    _write(target)
    with nncodecs.Reader(target) as r:
        assert r.keys() == [n for n, _, _ in CASES] + ["coo"]
        for name, arr, _ in CASES:
            got = r.read_tensor(name)
            assert (
                got.shape == np.shape(arr)
                and got.tobytes()
                == np.asarray(arr).astype(np.asarray(arr).dtype.newbyteorder("<")).tobytes()
            )
            assert r[name][...].tobytes() == got.tobytes()
        r.verify()


def test_each_document_is_zarrs_own(tmp_path: Path) -> None:
    """Every array's metadata equals that of the same array created through Zarr."""
    target = tmp_path / "m.zarr"
    _write(target)
    group = _group(target, consolidated=False)
    for name, arr, codec in CASES:
        arr = np.asarray(arr)
        arr = arr.astype(arr.dtype.newbyteorder("<"))
        node = nncodecs.container.names.escape(name)
        ours = group[node].metadata
        theirs = zarr.create_array(
            MemoryStore(),
            shape=arr.shape,
            dtype=arr.dtype,
            dimension_names=[f"{node}.{i}" for i in range(arr.ndim)] if arr.ndim else None,
            attributes=dict(ours.attributes),
            config=layout.ARRAY_CONFIG,
            **layout.chunking(arr.shape, arr.dtype.itemsize, 64 << 10, codec),
            **layout.codec_settings(codec),
        ).metadata
        assert ours == theirs, name


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_the_consolidated_metadata_is_what_the_nodes_say(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"m{suffix}"
    _write(target)
    fast, slow = _group(target), _group(target, consolidated=False)
    assert fast.metadata.consolidated_metadata is not None
    members = dict(slow.members(max_depth=None))
    assert set(dict(fast.members(max_depth=None))) == set(members)
    for path, node in fast.members(max_depth=None):
        if isinstance(node, zarr.Array):
            assert node.metadata == members[path].metadata, path
        else:  # (Zarr nests the consolidated metadata of a sub-group's members in it)
            assert node.attrs.asdict() == members[path].attrs.asdict(), path


def test_a_zip_holds_compact_deflated_metadata_and_stored_chunks(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr.zip"
    _write(target)
    with zipfile.ZipFile(target) as zf:
        names = [i.filename for i in zf.infolist()]
        assert len(names) == len(set(names)) and "zarr.json" in names
        for info in zf.infolist():
            meta = info.filename.endswith("zarr.json")
            want = zipfile.ZIP_DEFLATED if meta else zipfile.ZIP_STORED
            assert info.compress_type == want, info.filename
        root = zf.read("zarr.json")
    assert b"\n" not in root and b": " not in root  # compact JSON
    assert json.loads(root)["consolidated_metadata"]["kind"] == "inline"


def test_a_zip_flushed_then_appended_to_keeps_every_commit(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr.zip"
    a, b, c = (_weights((500, 10), np.float32) for _ in range(3))
    with nncodecs.Writer(target) as w:
        w.add_tensor("a", a)
        w.flush()
        with nncodecs.Reader(target) as r:
            assert r.keys() == ["a"]
        w.add_tensor("b", b)
    with nncodecs.Writer(target, mode="a") as w:
        w.add_tensor("c", c)
    with nncodecs.Reader(target) as r:
        assert r.keys() == ["a", "b", "c"]
        for name, want in zip("abc", (a, b, c), strict=True):
            assert np.array_equal(r.read_tensor(name), want)
    with zipfile.ZipFile(target) as zf:
        names = [i.filename for i in zf.infolist()]
        assert len(names) == len(set(names))
    assert set(dict(_group(target).members(max_depth=None))) == {"a", "b", "c"}


def _tamper(target: Path, change: object) -> None:
    """Edit the root zarr.json of a directory container."""
    doc = json.loads((target / "zarr.json").read_bytes())
    change(doc)  # type: ignore[operator]
    (target / "zarr.json").write_text(json.dumps(doc))


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["consolidated_metadata"]["metadata"].update(w=None),
        lambda d: d["consolidated_metadata"]["metadata"].update(w=[1]),
        lambda d: d["consolidated_metadata"]["metadata"]["w"].update(node_type="group"),
        lambda d: d["consolidated_metadata"]["metadata"].pop("w"),
        lambda d: d["consolidated_metadata"]["metadata"]["w"].update(attributes=[1]),
        lambda d: d["attributes"]["nncodecs"].update(tensors=5),
        lambda d: d["attributes"]["nncodecs"].update(metadata="abc"),
    ],
)
def test_a_damaged_root_document_is_an_error_not_a_lost_tensor(tmp_path: Path, change) -> None:
    target = tmp_path / "m.zarr"
    with nncodecs.Writer(target) as w:
        w.add_tensor("w", np.ones((4, 4), np.float32))
        w.add_tensor("b", np.ones(4, np.float32))
    _tamper(target, change)
    with pytest.raises(nncodecs.CorruptDataError), nncodecs.Reader(target) as r:
        r.verify()


def test_damaged_records_are_corrupt_data(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    with nncodecs.Writer(target) as w:
        w.add_tensor("z", np.ones((4, 4), np.float32), codec="zstd")
        w.add_tensor("s", np.ones((4, 4), np.float32))
    meta = lambda d, n: d["consolidated_metadata"]["metadata"][n]["attributes"]["nncodecs"]  # noqa: E731
    _tamper(target, lambda d: (meta(d, "z").update(crc32c="x"), meta(d, "s").update(shape=4)))
    with nncodecs.Reader(target) as r:
        for name in ("z", "s"):
            with pytest.raises(nncodecs.CorruptDataError, match=name):
                r.read_tensor(name)


def test_a_forged_huge_grid_is_refused_before_listing_its_chunks(tmp_path: Path) -> None:
    """A container without records, whose array declares 10**15 rows: an error at once
    (not a list of every chunk key of the declared grid)."""
    target = tmp_path / "m.zarr"
    with nncodecs.Writer(target) as w:
        w.add_tensor("w", np.ones((300, 257), np.float32))

    def forge(d: dict) -> None:
        node = d["consolidated_metadata"]["metadata"]["w"]
        node["shape"] = [10**15, 257]
        for key in ("shape", "dtype", "chunks"):
            node["attributes"]["nncodecs"].pop(key)
        d["attributes"]["nncodecs"].pop("records")

    _tamper(target, forge)
    with nncodecs.Reader(target) as r, pytest.raises(nncodecs.CorruptDataError, match="declares"):
        r.read_tensor("w")


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_info_from_the_documents_is_info_from_the_arrays(tmp_path: Path, suffix: str) -> None:
    """Reader.info reads a dense tensor's zarr.json without making its Zarr array; what
    it says equals what it says once the array is made (every kind of CASES)."""
    target = tmp_path / f"m{suffix}"
    _write(target)
    with nncodecs.Reader(target) as early, nncodecs.Reader(target) as late:
        for name in early:
            late[name]  # (made and checked: info then comes from the array)
            assert early.info(name) == late.info(name), name
        assert early.info("big.endian").dtype == "float32"


def test_info_refuses_documents_that_contradict_their_records(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    with nncodecs.Writer(target) as w:
        w.add_tensor("s", np.ones((4, 4), np.float32))
        w.add_tensor("d", np.ones((4, 4), np.float32))
        w.add_tensor("t", np.ones((4, 4), np.float32))
    docs = lambda d: d["consolidated_metadata"]["metadata"]  # noqa: E731
    _tamper(target, lambda d: docs(d)["s"].update(shape=[4, 5]))
    _tamper(target, lambda d: docs(d)["d"].update(data_type="float64"))
    _tamper(target, lambda d: docs(d)["t"].update(data_type="no-such-type"))
    with nncodecs.Reader(target) as r:
        for name, why in (("s", "shape"), ("d", "dtype"), ("t", "unreadable")):
            with pytest.raises(nncodecs.CorruptDataError, match=f"tensor '{name}'.*{why}"):
                r.info(name)


def test_a_closed_reader_reads_nothing_of_another_file(tmp_path: Path) -> None:
    """A zip Reader reads through a descriptor of its own: after close() a read is a
    clear error, even once another file has taken the descriptor's number."""
    target = tmp_path / "m.zarr.zip"
    with nncodecs.Writer(target) as w:
        w.add_tensor("w", _weights((3000, 100), np.float32))
    r = nncodecs.Reader(target)
    first = r.read_tensor("w")
    r.close()
    with contextlib.ExitStack() as stack:
        for _ in range(4):  # (descriptor numbers just freed are taken again)
            stack.enter_context(open(target, "rb"))
        with pytest.raises((ValueError, OSError), match="closed"):
            r.read_tensor("w")
    with nncodecs.Reader(target) as again:
        assert again.read_tensor("w").tobytes() == first.tobytes()


def test_a_zip_cut_short_is_corrupt_data_not_another_kind_of_file(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr.zip"
    with nncodecs.Writer(target) as w:
        w.add_tensor("w", _weights((300, 100), np.float32))
    raw = target.read_bytes()
    for cut in (len(raw) // 2, len(raw) - 30):  # (its end of central directory gone)
        (tmp_path / "cut.zarr.zip").write_bytes(raw[:cut])
        with pytest.raises(nncodecs.CorruptDataError, match=r"damaged zip file.*cut short"):
            nncodecs.Reader(tmp_path / "cut.zarr.zip")
    (tmp_path / "other.zip").write_bytes(b"not a zip at all")
    with pytest.raises(nncodecs.NotAContainerError, match="not a zip file"):
        nncodecs.Reader(tmp_path / "other.zip")


@pytest.mark.parametrize("name", ["m.zarr", "m.zarr.zip"])
def test_a_closed_reader_says_closed_never_corrupt(name: str, tmp_path: Path) -> None:
    # (a zip Reader's reads after close() had said "unreadable as stored", a
    # CorruptDataError, and a directory Reader's still read)
    target = tmp_path / name
    with nncodecs.Writer(target) as w:
        w.add_tensor("w", _weights((300, 100), np.float32))
    r = nncodecs.Reader(target)
    array, pieces, lazy = r["w"], r.read_pieces("w"), r.to_dask("w")  # (made before close)
    r.close()
    reads = {
        "read_tensor": lambda: r.read_tensor("w"),
        "read_pieces": lambda: r.read_pieces("w"),
        "getitem": lambda: r["w"],
        "info": lambda: r.info("w"),
        "verify": r.verify,
        "an array made before": lambda: array[0:2],
        "pieces begun before": lambda: list(pieces),
        "a dask array made before": lambda: lazy.compute(),
    }
    for what, read in reads.items():
        with pytest.raises(ValueError, match="the container is closed") as caught:
            read()
        assert not isinstance(caught.value, nncodecs.CorruptDataError), what


def test_a_name_its_local_header_cannot_encode_is_corrupt_data(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr.zip"
    with nncodecs.Writer(target) as w:
        w.add_tensor("权重", _weights((64, 64), np.float32))
    raw = bytearray(target.read_bytes())
    with zipfile.ZipFile(target) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith("/c/0/0"))
    flags = int.from_bytes(raw[info.header_offset + 6 : info.header_offset + 8], "little")
    assert flags & 0x800
    raw[info.header_offset + 6 : info.header_offset + 8] = (flags & ~0x800).to_bytes(2, "little")
    target.write_bytes(bytes(raw))
    with nncodecs.Reader(target) as r, pytest.raises(nncodecs.CorruptDataError, match="names"):
        r.read_tensor("权重")


def test_a_chunk_shape_with_an_empty_side_is_corrupt_data(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    with nncodecs.Writer(target) as w:
        w.add_tensor("w", np.ones((64, 16), np.float32))
    grid = lambda d: d["consolidated_metadata"]["metadata"]["w"]["chunk_grid"]  # noqa: E731
    _tamper(target, lambda d: grid(d)["configuration"].update(chunk_shape=[0, 16]))
    with nncodecs.Reader(target) as r, pytest.raises(nncodecs.CorruptDataError):
        r.read_tensor("w")


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_a_forged_tiny_chunk_shape_is_refused_before_its_lookups(tmp_path: Path, suffix) -> None:
    """chunk_shape [1, 1] on a 1024 x 1024 tensor: a million chunks declared in a few
    MiB stored. An error at once, not a million lookups through Zarr (34 s)."""
    target = tmp_path / f"m{suffix}"
    with nncodecs.Writer(target) as w:
        w.add_tensor("w", _weights((1024, 1024), np.float32))
    if suffix == ".zarr.zip":  # (forged in a directory, zipped as the Writer zips)
        staged = tmp_path / "m.zarr"
        with nncodecs.Reader(target) as r, nncodecs.Writer(staged) as w:
            w.add_tensor("w", r.read_tensor("w"))
        target.unlink()
    else:
        staged = target
    grid = lambda d: d["chunk_grid"]["configuration"]  # noqa: E731
    _tamper(staged, lambda d: grid(d["consolidated_metadata"]["metadata"]["w"]).update(
        chunk_shape=[1, 1]))  # fmt: skip
    node = staged / "w" / "zarr.json"
    doc = json.loads(node.read_text())
    grid(doc).update(chunk_shape=[1, 1])
    node.write_text(json.dumps(doc))
    if suffix == ".zarr.zip":
        with zipfile.ZipFile(target, "w") as zf:
            for f in sorted(staged.rglob("*")):
                if f.is_file():
                    zf.write(f, f.relative_to(staged).as_posix())
    with nncodecs.Reader(target) as r:
        with pytest.raises(nncodecs.CorruptDataError, match="1048576 chunks"):
            r.read_tensor("w")
        with pytest.raises(nncodecs.CorruptDataError):
            r.verify()


def _forge_node(target: Path, name: str, change: Any) -> None:
    """Apply ``change`` to a directory container's document of ``name``, and to its copy
    in the consolidated metadata."""
    _tamper(target, lambda d: change(d["consolidated_metadata"]["metadata"][name]))
    node = target / name / "zarr.json"
    doc = json.loads(node.read_text())
    change(doc)
    node.write_text(json.dumps(doc))


def test_an_older_container_with_unstored_zero_shards_still_reads(tmp_path: Path) -> None:
    """Written before the "every chunk" record, Zarr left shards of zeros unstored:
    such a tensor has more chunks than stored objects, legitimately, and reads."""
    target = tmp_path / "m.zarr"
    arr = _weights((4200, 8), np.float32)
    arr[-200:] = 0
    with nncodecs.Writer(target, chunk_bytes=32) as w:  # (one row a chunk: 4,200 chunks)
        w.add_tensor("emb", arr)
    _forge_node(target, "emb", lambda d: d["attributes"]["nncodecs"].pop("chunks"))
    _tamper(target, lambda d: d["attributes"]["nncodecs"].pop("records"))  # (nor the root's)
    shards = sorted((target / "emb" / "c").iterdir(), key=lambda p: int(p.name))
    per = 4200 // len(shards) + (4200 % len(shards) > 0)
    gone = [s for s in shards if int(s.name) * per >= 4000]  # (all zeros)
    assert gone
    for s in gone:
        shutil.rmtree(s)
    with nncodecs.Reader(target) as r:
        assert r.read_tensor("emb").tobytes() == arr.tobytes()


@pytest.mark.parametrize(
    ("forge", "match"),
    [
        ("inner [1, 1]", "chunks"),  # (shards' indexes could not hold so many chunks)
        ("inner [0, 64]", "unreadable"),  # (Zarr's parse divides by zero)
        ("rows 10**12", "rows"),  # (the padded chunk would be 256 TB)
    ],
)
def test_forged_chunk_shapes_are_corrupt_data_at_once(tmp_path: Path, forge, match) -> None:
    target = tmp_path / "m.zarr"
    arr = _weights((4096, 64), np.float32)
    with nncodecs.Writer(target, chunk_bytes=1024) as w:  # (4 rows a chunk, in shards)
        w.add_tensor("w", arr)
        w.add_tensor("plain", arr)

    def change(d: dict) -> None:
        sharding = d["codecs"][0]["configuration"]
        if forge == "inner [1, 1]":
            sharding["chunk_shape"] = [1, 1]
        elif forge == "inner [0, 64]":
            sharding["chunk_shape"] = [0, 64]
        else:
            d["chunk_grid"]["configuration"]["chunk_shape"] = [10**12, 64]
            d["codecs"] = sharding["codecs"]  # (unsharded, one padded chunk)

    _forge_node(target, "w", change)
    with nncodecs.Reader(target) as r:
        with pytest.raises(nncodecs.CorruptDataError, match=match):
            r.read_tensor("w")
        assert r.read_tensor("plain").tobytes() == arr.tobytes()


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_whole_reads_of_weights_tensors_make_no_zarr_array(
    tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tensor of the weights codec is read from its document (nncodecs.container.declared):
    Zarr's array object costs more than decoding a small tensor. Other codecs, and a slice,
    still go through Zarr's array."""
    target = tmp_path / f"m{suffix}"
    _write(target)
    made: list[str] = []
    real = zarr_nodes.array_from_doc

    def counted(store: Any, path: str, doc: dict) -> Any:
        made.append(path)
        return real(store, path, doc)

    monkeypatch.setattr(zarr_nodes, "array_from_doc", counted)
    zarr_path = {"zstd", "zstd.small", "raw", "empty"}
    with nncodecs.Reader(target) as r:
        for name, arr, _ in CASES:
            want = np.asarray(arr)
            got = r.read_tensor(name)
            assert got.tobytes() == want.astype(want.dtype.newbyteorder("<")).tobytes(), name
            assert r.info(name).shape == want.shape
        assert set(made) <= zarr_path, made
        assert {"zstd", "raw"} <= set(made)
        made.clear()
        assert r["sharded"][5:9].tobytes() == CASES[3][1][5:9].tobytes()
        assert made == ["sharded"]


def _forge_weights(d: dict, how: str) -> None:
    inner = d["codecs"][0]
    if how == "codec for another dtype":
        inner["configuration"]["dtype"] = "float16"
    elif how == "unreadable codec setting":
        inner["configuration"]["coder"] = "lzma"
    elif how == "unreadable fill value":
        d["fill_value"] = "not a number"
    elif how == "unknown data type":
        d["data_type"] = "float128x"
    elif how == "shards that do not tile":
        d["chunk_grid"]["configuration"]["chunk_shape"] = [9, 64]
        d["codecs"] = [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [4, 64],
                    "codecs": [inner],
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"},
                    ],
                    "index_location": "end",
                },
            }
        ]


@pytest.mark.parametrize(
    "how",
    [
        "codec for another dtype",
        "unreadable codec setting",
        "unreadable fill value",
        "unknown data type",
        "shards that do not tile",
    ],
)
def test_a_document_zarr_refuses_is_refused_by_whole_reads_too(tmp_path: Path, how: str) -> None:
    """Whole reads skip Zarr's array object, not its checks: what Zarr's parser refuses
    is a CorruptDataError naming the tensor, from read_tensor as from r[name]."""
    target = tmp_path / "m.zarr"
    arr = _weights((64, 64), np.float32)
    with nncodecs.Writer(target, chunk_bytes=1024) as w:  # (16 chunks of 4 rows, unsharded)
        w.add_tensor("w", arr)
        w.add_tensor("plain", arr)
    _forge_node(target, "w", lambda d: _forge_weights(d, how))
    with nncodecs.Reader(target) as r:
        with pytest.raises(nncodecs.CorruptDataError, match="'w'"):
            r.read_tensor("w")
        with pytest.raises(nncodecs.CorruptDataError, match="'w'"):
            r["w"]
        with pytest.raises(nncodecs.CorruptDataError, match="'w'"):
            r.verify()
        assert r.read_tensor("plain").tobytes() == arr.tobytes()


def _forge_more(d: dict, how: str) -> None:
    if how == "unsupported data type":
        d["data_type"], d["fill_value"] = "complex64", [0.0, 0.0]
        d["attributes"]["nncodecs"]["dtype"] = "complex64"
        d["codecs"][0]["configuration"].pop("dtype")
    elif how == "an extra grid setting":
        d["chunk_grid"]["configuration"]["extra"] = 1
    elif how == "a hex fill value":
        d["fill_value"] = "0x7fc00000"
    elif how == "chunk keys with dots":
        d["chunk_key_encoding"] = {"name": "default", "configuration": {"separator": "."}}
    elif how == "a negative shape":
        d["shape"][0] = -64
        d["attributes"]["nncodecs"]["shape"][0] = -64


@pytest.mark.parametrize(
    "how",
    [
        "unsupported data type",
        "an extra grid setting",
        "a hex fill value",
        "chunk keys with dots",
        "a negative shape",
    ],
)
def test_reads_and_slices_refuse_a_forged_document_alike(tmp_path: Path, how: str) -> None:
    """Found by review: every way into a tensor (whole read, slice, info, verify) refuses
    these documents as a CorruptDataError naming the container and the tensor (the
    dotted keys: Zarr would look up keys that are not there and read zeros), or, where
    this Zarr's parser takes one (an extra grid setting on zarr 3.4), reads it right."""
    target = tmp_path / "m.zarr"
    with nncodecs.Writer(target) as w:
        w.add_tensor("w", np.ones((64, 64), np.float32))
    _forge_node(target, "w", lambda d: _forge_more(d, how))
    if how == "an extra grid setting" and _zarr_reads(target / "w" / "zarr.json"):
        with nncodecs.Reader(target) as r:  # (newer Zarr ignores it: every path reads)
            assert r.read_tensor("w").tobytes() == np.ones((64, 64), np.float32).tobytes()
            assert r["w"][:2].tobytes() == np.ones((2, 64), np.float32).tobytes()
            r.verify()
        return
    calls = {
        "read_tensor": lambda r: r.read_tensor("w"),
        "slice": lambda r: r["w"][:2],
        "verify": lambda r: r.verify(),
    }
    if how in ("unsupported data type", "a negative shape"):
        calls["info"] = lambda r: r.info("w")
    for what, call in calls.items():
        where = re.escape(str(target))
        with (
            nncodecs.Reader(target) as r,
            pytest.raises(nncodecs.CorruptDataError, match=f"{where}.*'w'"),
        ):
            call(r)
            pytest.fail(what)


def _zarr_reads(node: Path) -> bool:
    """Whether this Zarr's own parser takes an array document."""
    from zarr.core.metadata.v3 import ArrayV3Metadata

    try:
        ArrayV3Metadata.from_dict(json.loads(node.read_text()))
    except (TypeError, ValueError):
        return False
    return True


def test_shards_that_leave_out_their_index_location_read(tmp_path: Path) -> None:
    """``index_location`` is optional (Zarr's default: the end)."""
    target = tmp_path / "m.zarr"
    arr = _weights((70_000, 8), np.float32)
    with nncodecs.Writer(target, chunk_bytes=1024) as w:
        w.add_tensor("s", arr)
    _forge_node(target, "s", lambda d: d["codecs"][0]["configuration"].pop("index_location"))
    with nncodecs.Reader(target) as r:
        assert r.read_tensor("s").tobytes() == arr.tobytes()
        assert r["s"][5:9].tobytes() == arr[5:9].tobytes()
        r.verify()


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_read_pieces_gives_every_tensors_bytes_a_window_at_a_time(
    tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What decompress writes: a weights tensor a window of chunks at a time (never the
    whole tensor in memory), any other whole; the bytes are read_tensor's."""
    from nncodecs.container import decoding

    monkeypatch.setattr(decoding, "WINDOW_BYTES", 64 << 10)
    target = tmp_path / f"m{suffix}"
    _write(target)
    with nncodecs.Reader(target) as r:
        for name, _, _ in CASES:
            pieces = list(r.read_pieces(name))
            whole = np.ascontiguousarray(r.read_tensor(name)).tobytes()
            assert b"".join(p.tobytes() for p in pieces) == whole, name
            assert all(p.dtype == np.uint8 and p.ndim == 1 for p in pieces)
        big = list(r.read_pieces("sharded"))  # (70,000 x 20 float16: 2.7 MB in 64 KiB windows)
        assert len(big) > 10 and max(p.nbytes for p in big) <= 2 * (64 << 10)
        with pytest.raises(ValueError, match="coo"):
            r.read_pieces("coo")  # (at the call, not at the first piece)
        with pytest.raises(KeyError):
            r.read_pieces("nope")


def test_read_pieces_refuses_a_missing_chunk_naming_the_tensor(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    arr = _weights((64, 64), np.float32)
    with nncodecs.Writer(target, chunk_bytes=1024) as w:  # (16 chunks of 4 rows)
        w.add_tensor("w", arr)
    (target / "w" / "c" / "9" / "0").unlink()
    with (
        nncodecs.Reader(target) as r,
        pytest.raises(nncodecs.CorruptDataError, match=r"'w'.*missing"),
    ):
        b"".join(p.tobytes() for p in r.read_pieces("w"))


def test_a_shard_index_with_chunks_swapped_is_refused(tmp_path: Path) -> None:
    """Found by review: two entries of a shard's index swapped, its CRC32C recomputed,
    decoded each frame intact into the other's rows (verify passed). Zarr and nncodecs
    write a shard's chunks in order, so an index out of order is corruption."""
    from nncodecs import _core

    target = tmp_path / "m.zarr"
    arr = _weights((70_000, 8), np.float32)
    with nncodecs.Writer(target, chunk_bytes=1024) as w:  # (shards of 16 chunks)
        w.add_tensor("s", arr)
    shard = target / "s" / "c" / "1" / "0"
    raw = bytearray(shard.read_bytes())
    index = np.frombuffer(raw[-(16 * 16 + 4) : -4], "<u8").reshape(16, 2).copy()
    index[[2, 3]] = index[[3, 2]]
    body = index.tobytes()
    raw[-(16 * 16 + 4) :] = body + int(_core.crc32c(np.frombuffer(body, np.uint8))).to_bytes(
        4, "little"
    )
    shard.write_bytes(bytes(raw))
    calls = {
        "read_tensor": lambda r: r.read_tensor("s"),
        "slice": lambda r: r["s"][:],
        "verify": lambda r: r.verify(),
        "pieces": lambda r: list(r.read_pieces("s")),
    }
    for what, call in calls.items():
        with (
            nncodecs.Reader(target) as r,
            pytest.raises(nncodecs.CorruptDataError, match="out of order"),
        ):
            call(r)
            pytest.fail(what)
