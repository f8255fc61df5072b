"""ONNX models come back byte for byte (sha256) through the CLI: the graph kept, each
tensor's ``raw_data`` stored typed and compressed and put back at its place."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import optional_import

from nncodecs import Reader
from nncodecs.errors import CorruptDataError
from nncodecs.formats.onnx_graph import SMALL_CONSTANT, graph_tensors


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nncodecs", *args], cwd=cwd, capture_output=True, text=True
    )


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def round_trip(path: Path) -> Path:
    """compress, then decompress to a new name; the restored file's path."""
    r = run("compress", path.name, "-q", cwd=path.parent)
    assert r.returncode == 0, r.stderr
    back = path.with_name("back-" + path.name)
    r = run("decompress", path.name + ".zarr.zip", "-o", back.name, cwd=path.parent)
    assert r.returncode == 0, r.stderr
    assert "(onnx," in r.stdout
    return back


@pytest.mark.parametrize("folding", [True, False], ids=["folded", "unfolded"])
def test_exported_minilm_comes_back_byte_identical(
    real_weights: dict, tmp_path: Path, folding: bool
) -> None:
    optional_import("torch")
    optional_import("transformers")
    optional_import("onnx")
    from nncodecs.datasets import export_minilm_onnx

    path = tmp_path / "minilm.onnx"
    export_minilm_onnx(path, folding=folding)
    back = round_trip(path)
    assert sha(back) == sha(path)
    with Reader(tmp_path / "minilm.onnx.zarr.zip") as r:
        names = r.keys()
        assert "m.embeddings.word_embeddings.weight" in names or any(
            "word_embeddings" in n for n in names
        )
        stored = sum(r.info(n).stored_bytes for n in names)
    assert stored < 0.85 * path.stat().st_size  # typed and compressed, not raw bytes
    r = run("decompress", "minilm.onnx.zarr.zip", "-o", "w.safetensors", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # its tensors, as safetensors, as before


def helper_model(onnx: Any) -> Any:
    """Initializers of every dtype the codecs keep, Constant nodes of every kind (raw_data,
    typed fields, value_float(s) / value_int(s)), an If with one subgraph per branch."""
    import ml_dtypes
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    inits = []
    kinds = "float32 float16 float64 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool"
    for i, dtype in enumerate(kinds.split()):
        arr = (rng.standard_normal((5, 7)) * 50).astype(dtype)
        inits.append(numpy_helper.from_array(arr, f"init_{dtype}_{i}"))
    bf16 = rng.standard_normal((16, 8)).astype(np.float32).astype(ml_dtypes.bfloat16)
    inits.append(
        helper.make_tensor(
            "init_bf16", TensorProto.BFLOAT16, bf16.shape, bf16.view(np.uint16).tobytes(), raw=True
        )
    )
    inits.append(helper.make_tensor("typed_init", TensorProto.FLOAT, [3], [0.5, 1.5, -2.0]))
    inits.append(numpy_helper.from_array(np.float32(7.0), "scalar"))
    inits.append(numpy_helper.from_array(np.zeros((0, 4), np.float32), "empty"))

    def branch(value: float) -> Any:
        c = helper.make_node("Constant", [], ["t"], value=numpy_helper.from_array(
            np.full(3, value, np.float32)))  # fmt: skip
        return helper.make_graph(
            [c], f"b{value}", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])]
        )

    nodes = [
        helper.make_node(
            "Constant",
            [],
            ["c_raw"],
            value=numpy_helper.from_array(rng.standard_normal((16, 17)).astype(np.float32)),
        ),
        helper.make_node(
            "Constant",
            [],
            ["c_typed"],
            value=helper.make_tensor("c_typed", TensorProto.INT64, [2], [4, -5]),
        ),
        helper.make_node("Constant", [], ["c_floats"], value_floats=[1.0, 2.0]),
        helper.make_node("Constant", [], ["c_int"], value_int=9),
        helper.make_node(
            "If", ["cond"], ["y"], name="choose", then_branch=branch(1.0), else_branch=branch(2.0)
        ),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], initializer=inits,
    )  # fmt: skip
    model = helper.make_model(graph, doc_string="kept verbatim")
    model.metadata_props.add(key="author", value="nncodecs tests")
    return model


def test_helper_built_model_comes_back_byte_identical(tmp_path: Path) -> None:
    onnx = optional_import("onnx")
    path = tmp_path / "h.onnx"
    onnx.save(helper_model(onnx), path)
    back = round_trip(path)
    assert sha(back) == sha(path)
    from onnx import numpy_helper

    model = onnx.load(str(path))
    with Reader(tmp_path / "h.onnx.zarr.zip") as r:
        for init in model.graph.initializer:  # every value readable by name, as stored
            got = np.asarray(r.read_tensor(init.name))
            want = numpy_helper.to_array(init)
            if init.data_type == onnx.TensorProto.BFLOAT16:
                got, want = got.view(np.uint16), np.frombuffer(init.raw_data, np.uint16)
            assert np.array_equal(got.reshape(-1), np.asarray(want).reshape(-1)), init.name
        assert r.read_tensor("c_raw").shape == (16, 17)  # a Constant of 1 KiB or more
        # the small ones (under 1 KiB: shapes, scalars) stay in the graph's bytes
        assert not {"c_typed", "c_floats", "c_int", "choose.else_branch/t"} & set(r.keys())


def test_small_constants_are_listed_where_the_model_restores_as_safetensors() -> None:
    """Listed with ``small`` (what a model that cannot come back as ONNX stores): every
    Constant, typed ones and subgraphs' too, in the walk's order."""
    onnx = optional_import("onnx")
    listed = graph_tensors(helper_model(onnx).SerializeToString(), small=True)
    names = [t.name for t in listed if not t.name.startswith(("init_", "typed_init"))]
    branches = ["choose.else_branch/t", "choose.then_branch/t"]  # (attributes sorted by name)
    assert names[-6:] == ["c_raw", "c_typed", "c_floats", "c_int", *branches]
    kinds = ["tensor", "tensor", "value_floats", "value_int", "tensor", "tensor"]
    assert [t.kind for t in listed[-6:]] == kinds


def test_every_raw_data_span_is_where_onnx_reads_it() -> None:
    onnx = optional_import("onnx")
    model = helper_model(onnx)
    raw = model.SerializeToString()
    listed = graph_tensors(raw)
    inits = list(model.graph.initializer)
    for t, wt in zip(inits, listed, strict=False):
        assert wt.name == t.name and list(wt.dims) == list(t.dims), t.name
        assert wt.data_type == t.data_type, t.name
        if t.HasField("raw_data"):
            start, size = wt.raw
            assert raw[start : start + size] == t.raw_data, t.name
        else:
            assert wt.raw is None, t.name  # typed_init: its values are in float_data
    assert any(not t.HasField("raw_data") for t in inits)
    # then the one Constant of 1 KiB or more (c_raw), at its place
    (c_raw,) = listed[len(inits) :]
    want = model.graph.node[0].attribute[0].t.raw_data
    assert len(want) >= SMALL_CONSTANT and raw[c_raw.raw[0] : sum(c_raw.raw)] == want


def external_model(onnx: Any, path: Path, one_file: bool) -> list[Path]:
    """A model whose larger initializers (f32, f16, bf16, int8) lie in external data, the
    small ones inline; returns the data files."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.standard_normal((64, 48)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((3,)).astype(np.float32), "small"),
             numpy_helper.from_array(rng.standard_normal((40, 40)).astype(np.float16), "h"),
             numpy_helper.from_array(rng.integers(-9, 9, (300,)).astype(np.int8), "q")]  # fmt: skip
    bf = rng.standard_normal(500).astype(np.float32).view(np.uint32) >> 16
    inits.append(helper.make_tensor("b", TensorProto.BFLOAT16, [500],
                                    bf.astype(np.uint16).tobytes(), raw=True))  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 48])], initializer=inits,
    )  # fmt: skip
    onnx.save(helper.make_model(graph), path, save_as_external_data=True,
              all_tensors_to_one_file=one_file, location=f"{path.name}.data",
              size_threshold=256)  # fmt: skip
    files = sorted(p for p in path.parent.iterdir() if p != path and not p.name.endswith(".zip"))
    assert files, "no external data written"
    return files


@pytest.mark.parametrize("one_file", [True, False], ids=["one-file", "file-per-tensor"])
def test_external_data_comes_back_byte_identical(tmp_path: Path, one_file: bool) -> None:
    """The model and every external data file come back sha256-identical beside the
    output, each tensor stored typed and read from its external file."""
    onnx = optional_import("onnx")
    src = tmp_path / "src"
    src.mkdir()
    files = external_model(onnx, src / "e.onnx", one_file)
    assert run("compress", "e.onnx", "-q", cwd=src).returncode == 0
    with Reader(src / "e.onnx.zarr.zip") as r:
        assert {"w", "h", "q", "b", "small"} <= set(r.keys())
        assert r.info("h").dtype == "float16" and r.info("b").dtype == "bfloat16"
    out = tmp_path / "out"
    out.mkdir()  # (the command creates no folder for its output)
    r = run("decompress", str(src / "e.onnx.zarr.zip"), "-o", str(out / "e.onnx"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sha(out / "e.onnx") == sha(src / "e.onnx")
    for f in files:
        assert sha(out / f.name) == sha(f), f.name
    loaded = onnx.load(str(out / "e.onnx"))  # (and onnx reads it, data and all)
    assert len(loaded.graph.initializer) == 5
    # a -f re-run replaces the data files the model at -o names as its own
    (out / files[0].name).write_bytes(b"damaged")
    r = run(
        "decompress", str(src / "e.onnx.zarr.zip"), "-o", str(out / "e.onnx"), "-f", cwd=tmp_path
    )
    assert r.returncode == 0 and sha(out / files[0].name) == sha(files[0]), r.stderr
    # a data file already there, with no model naming it, is refused (nothing written,
    # the file untouched), with -f too: a container never names a file for you
    (out / "e.onnx").unlink()
    (out / files[0].name).write_bytes(b"mine")
    for force in ((), ("-f",)):
        r = run(
            "decompress",
            str(src / "e.onnx.zarr.zip"),
            "-o",
            str(out / "e.onnx"),
            *force,
            cwd=tmp_path,
        )
        assert r.returncode != 0 and files[0].name in r.stderr, r.stderr
        assert not (out / "e.onnx").exists() and (out / files[0].name).read_bytes() == b"mine"


def test_forged_external_records_write_nothing(tmp_path: Path) -> None:
    onnx = optional_import("onnx")
    import json

    from nncodecs.formats import compress, decompress

    external_model(onnx, tmp_path / "e.onnx", True)
    compress(tmp_path / "e.onnx", tmp_path / "e.zarr")
    root = tmp_path / "e.zarr" / "zarr.json"
    good = json.loads(root.read_text())
    for forge, match in [("../escape.data", "is not one"), ("/abs.data", "is not one"),
                         ("e.onnx", "model's own name"), (None, "is not one")]:  # fmt: skip
        doc = json.loads(json.dumps(good))
        meta = doc["attributes"]["nncodecs"]["metadata"]
        records = json.loads(meta["source.onnx.external"])
        records[0]["file"] = forge
        meta["source.onnx.external"] = json.dumps(records)
        root.write_text(json.dumps(doc))
        out = tmp_path / f"out{len(match)}"
        with pytest.raises(CorruptDataError, match=match):
            decompress(tmp_path / "e.zarr", out / "e.onnx")
        assert not out.exists() or not any(out.iterdir())
    assert not (tmp_path / "escape.data").exists()
    doc = json.loads(json.dumps(good))
    records = json.loads(doc["attributes"]["nncodecs"]["metadata"]["source.onnx.external"])
    records[0]["crc32c"] = "00000000"
    doc["attributes"]["nncodecs"]["metadata"]["source.onnx.external"] = json.dumps(records)
    root.write_text(json.dumps(doc))
    with pytest.raises(CorruptDataError, match="crc32c differs"):
        decompress(tmp_path / "e.zarr", tmp_path / "o2" / "e.onnx")
    assert not (tmp_path / "o2").exists() or not any((tmp_path / "o2").iterdir())


def test_external_files_with_uncovered_bytes_and_two_spellings(tmp_path: Path) -> None:
    """Bytes of a data file no tensor covers go in a hidden array (not the attributes);
    "./d.bin" and "d.bin" are one file; a forged record naming a file the model does not
    name, or none where the model names one, writes nothing."""
    onnx = optional_import("onnx")
    import json

    from onnx import TensorProto, helper

    from nncodecs.formats import compress, decompress

    rng = np.random.default_rng(9)
    a, b = rng.standard_normal(100).astype(np.float32), rng.standard_normal(50).astype(np.float32)
    tail = rng.integers(0, 256, 300_000, dtype=np.uint8).tobytes()  # (left by an optimiser)
    (tmp_path / "d.bin").write_bytes(a.tobytes() + b"pad!" + b.tobytes() + tail)
    inits = []
    for name, arr, loc, off in (("a", a, "d.bin", 0), ("b", b, "./d.bin", 404)):
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", loc), ("offset", str(off)), ("length", str(arr.nbytes))):
            entry = t.external_data.add()
            entry.key, entry.value = k, v
        inits.append(t)
    graph = helper.make_graph([helper.make_node("Add", ["x", "a"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [100])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [100])],
                              initializer=inits)  # fmt: skip
    onnx.save(helper.make_model(graph), tmp_path / "m.onnx")
    compress(tmp_path / "m.onnx", tmp_path / "m.zarr")
    with Reader(tmp_path / "m.zarr") as r:
        assert len(json.dumps(r.metadata)) < 20_000 and len(r.files(hidden=True)) == 2
    decompress(tmp_path / "m.zarr", tmp_path / "out" / "m.onnx")
    assert sha(tmp_path / "out" / "d.bin") == sha(tmp_path / "d.bin")
    assert sha(tmp_path / "out" / "m.onnx") == sha(tmp_path / "m.onnx")
    root = tmp_path / "m.zarr" / "zarr.json"
    good = root.read_text()
    forgeries = [
        (lambda rs: rs.clear(), "names the external data files"),
        (lambda rs: rs[0].update(file="notes.txt"), "names the external"),
        (lambda rs: rs.append({**rs[0], "file": "d.bin/x"}), "a file twice"),
    ]
    for change, match in forgeries:
        doc = json.loads(good)
        meta = doc["attributes"]["nncodecs"]["metadata"]
        records = json.loads(meta["source.onnx.external"])
        change(records)
        meta["source.onnx.external"] = json.dumps(records)
        root.write_text(json.dumps(doc))
        out = tmp_path / "forged"
        with pytest.raises(CorruptDataError, match=match):
            decompress(tmp_path / "m.zarr", out / "m.onnx")
        assert not out.exists() or not any(out.iterdir())


def test_malformed_protobuf_is_a_clear_error() -> None:
    for bad in (b"\x3a\xff\xff\xff\xff\x0f", b"\x3a\x05ab", b"\x3f", b"\x3a\x80"):
        with pytest.raises(CorruptDataError, match="not a readable ONNX model"):
            graph_tensors(bad)
    assert graph_tensors(b"") == []


def test_dtypes_the_codecs_do_not_model_are_kept_as_their_bytes(tmp_path: Path) -> None:
    onnx = optional_import("onnx")
    from onnx import TensorProto, helper

    rng = np.random.default_rng(5)
    c64 = (rng.standard_normal(6) + 1j * rng.standard_normal(6)).astype(np.complex64)
    inits = [
        helper.make_tensor(
            "c", TensorProto.COMPLEX64, [6], c64.view(np.float32).tobytes(), raw=True
        ),
        helper.make_tensor(
            "q", TensorProto.INT4, [9], bytes([0x21, 0x43, 0x65, 0x07, 0x0F]), raw=True
        ),
        helper.make_tensor("w", TensorProto.FLOAT, [3], np.ones(3, np.float32).tobytes(), raw=True),
    ]
    graph = helper.make_graph([], "g", [], [], initializer=inits)
    path = tmp_path / "odd.onnx"
    onnx.save(helper.make_model(graph), path)
    assert sha(round_trip(path)) == sha(path)
    with Reader(tmp_path / "odd.onnx.zarr.zip") as r:
        assert r.read_tensor("c").tobytes() == c64.tobytes()  # its bytes, as uint8
        assert r.read_tensor("q").tobytes() == bytes([0x21, 0x43, 0x65, 0x07, 0x0F])
        assert r.read_tensor("w").dtype == np.float32


def test_what_the_review_found(tmp_path: Path) -> None:
    """Empty files refused; a graph given twice read as protobuf merges it; proto2
    groups skipped; a short raw_data named; damaged records and a missing
    checksum refused, never a different file."""
    import json

    onnx = optional_import("onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    r = run("compress", "empty.onnx", cwd=tmp_path)
    assert r.returncode == 1 and "empty file" in r.stderr
    model = helper_model(onnx)
    raw = model.SerializeToString()
    twice = raw + b"\x3a\x03\x12\x01x"  # the graph field again: protobuf merges the two
    (tmp_path / "twice.onnx").write_bytes(twice)
    assert run("compress", "twice.onnx", "-q", cwd=tmp_path).returncode == 0
    r = run("decompress", "twice.onnx.zarr.zip", "-o", "twice-back.onnx", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # (read as protobuf merges it: one graph)
    assert (tmp_path / "twice-back.onnx").read_bytes() == twice
    merged = [(t.name, t.raw) for t in graph_tensors(twice)]
    assert merged == [(t.name, t.raw) for t in graph_tensors(raw)]
    added = twice + b"\x3a\x07\x2a\x05\x42\x03abc"  # a graph field with an initializer "abc"
    inits = [t.name for t in onnx.load_from_string(added).graph.initializer]
    assert inits[-1] == "abc" and [t.name for t in graph_tensors(added)][: len(inits)] == inits
    group = raw + b"\x9b\x06" + b"\x08\x01" + b"\x9c\x06"  # field 99 as a group: skipped
    assert graph_tensors(group) == graph_tensors(raw)
    from onnx import TensorProto, helper

    short = TensorProto(name="s", data_type=TensorProto.FLOAT, dims=[5], raw_data=b"\0" * 12)
    onnx.save(helper.make_model(helper.make_graph([], "g", [], [], [short])), tmp_path / "s.onnx")
    r = run("compress", "s.onnx", cwd=tmp_path)
    assert r.returncode == 1 and "'s': 12 bytes of raw data for 20" in r.stderr, r.stderr

    path = tmp_path / "h.onnx"
    onnx.save(model, path)
    assert run("compress", "h.onnx", "-o", "h.zarr", "-q", cwd=tmp_path).returncode == 0
    meta_path = tmp_path / "h.zarr" / "zarr.json"
    meta_path.chmod(0o644)
    doc = json.loads(meta_path.read_text())
    meta = doc["attributes"]["nncodecs"]["metadata"]
    for edit in ("no checksum", "a list for a name"):
        changed = dict(meta)
        if edit == "no checksum":
            changed.pop("source.crc32c")
        else:
            ranges = json.loads(changed["source.onnx.ranges"])
            ranges[0][0] = [ranges[0][0]]
            changed["source.onnx.ranges"] = json.dumps(ranges)
        doc["attributes"]["nncodecs"]["metadata"] = changed
        meta_path.write_text(json.dumps(doc))
        r = run("decompress", "h.zarr", "-o", "back.onnx", cwd=tmp_path)
        assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, (edit, r.stderr)
        # (without its checksum the records do not count: not an ONNX file's container)
        want = "only a container made from an ONNX file" if edit == "no checksum" else "damaged"
        assert want in r.stderr
        assert not (tmp_path / "back.onnx").exists()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def test_a_declared_size_allocates_nothing(tmp_path: Path) -> None:
    """A tensor declaring 2^40 values, with two in typed fields or 16 bytes of external
    data: a clear error, never a 4 TiB allocation."""
    onnx = optional_import("onnx")
    from onnx import TensorProto, helper

    typed = TensorProto(name="huge", data_type=TensorProto.FLOAT, dims=[1 << 40])
    typed.float_data.extend([1.0, 2.0])
    external = TensorProto(name="ext", data_type=TensorProto.FLOAT, dims=[1 << 40])
    external.data_location = TensorProto.EXTERNAL
    entry = external.external_data.add()
    entry.key, entry.value = "location", "d.bin"
    (tmp_path / "d.bin").write_bytes(b"0" * 16)
    short = "16 bytes of external data for 4398046511104"
    for t, want in ((typed, "cannot reshape"), (external, short)):
        path = tmp_path / f"{t.name}.onnx"
        onnx.save(helper.make_model(helper.make_graph([], "g", [], [], [t])), path)
        r = run("compress", path.name, cwd=tmp_path)
        assert r.returncode == 1 and want in r.stderr and "MemoryError" not in r.stderr, r.stderr
        assert not (tmp_path / f"{path.name}.zarr.zip").exists()
