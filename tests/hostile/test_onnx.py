"""ONNX models a review built to break the wire walk: each one is kept whole, refused
with the reason, or bounded; never a file lost, values from beyond a tensor, a hang or
a MemoryError."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import optional_import
from formats.test_onnx_graph import constant, field, number

from nncodecs.formats.onnx import SMALL_LIMIT


def run(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nncodecs", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def one_line(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr
    assert "MemoryError" not in r.stderr


def external_tensor(name: bytes, count: int, location: bytes, offset: int, length: int) -> bytes:
    """A float32 TensorProto whose values lie in an external file."""
    pairs = ((b"location", location), (b"offset", b"%d" % offset), (b"length", b"%d" % length))
    entries = b"".join(field(13, field(1, k) + field(2, v)) for k, v in pairs)
    return number(1, count) + number(2, 1) + field(8, name) + entries + number(14, 1)


def model(graph: bytes) -> bytes:
    return number(1, 8) + field(8, field(1, b"") + number(2, 17)) + field(7, graph)


def test_a_data_file_only_a_node_attribute_uses_is_kept(tmp_path: Path) -> None:
    """A file holding only a non-Constant node's tensor attribute (what
    ``convert_attribute=True`` moves out) comes back with the model."""
    onnx = optional_import("onnx")
    from onnx import TensorProto, helper, numpy_helper

    value = numpy_helper.from_array(np.arange(300, dtype=np.float32), "v")
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], value=value)
    typed = helper.make_tensor("t", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    inputs = [helper.make_tensor_value_info("shape", TensorProto.INT64, [1])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=[typed])
    src = tmp_path / "src"
    src.mkdir()
    onnx.save_model(
        helper.make_model(graph),
        src / "m.onnx",
        save_as_external_data=True,
        all_tensors_to_one_file=False,
        size_threshold=0,
        convert_attribute=True,
    )
    data = sorted(p.name for p in src.iterdir() if p.name != "m.onnx")
    assert data, "onnx wrote no external data"
    assert run("compress", "m.onnx", "-q", cwd=src).returncode == 0
    r = run("verify", "m.onnx.zarr.zip", cwd=src)
    assert r.returncode == 0 and "byte for byte" in r.stdout, r.stderr
    out = tmp_path / "out"
    out.mkdir()
    r = run("decompress", str(src / "m.onnx.zarr.zip"), "-o", str(out / "m.onnx"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for name in ["m.onnx", *data]:
        assert (out / name).read_bytes() == (src / name).read_bytes(), name
    onnx.load(str(out / "m.onnx"))  # (with its data, as onnx reads it)


@pytest.mark.parametrize("length", [800, 99_999_999_999])
def test_an_external_length_that_is_not_the_values_is_refused(tmp_path: Path, length: int) -> None:
    """400 float32 values declared with 800 bytes of data, or more than the file has:
    refused as damaged, as onnx refuses them, never values from outside the data."""
    (tmp_path / "w.bin").write_bytes(np.arange(400, dtype="<f4").tobytes())
    graph = field(5, external_tensor(b"w", 400, b"w.bin", 0, length))
    (tmp_path / "m.onnx").write_bytes(model(graph))
    r = run("compress", "m.onnx", cwd=tmp_path)
    one_line(r, "'w'", "external data")
    assert not (tmp_path / "m.onnx.zarr.zip").exists()


def test_an_external_file_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    graph = field(5, external_tensor(b"w", 4, b"pipe", 0, 16))
    (tmp_path / "m.onnx").write_bytes(model(graph))
    one_line(run("compress", "m.onnx", cwd=tmp_path, timeout=60), "not a regular file")


def test_the_fallback_listing_is_bounded(tmp_path: Path) -> None:
    """A model that cannot come back as ONNX (two external tensors share bytes) lists
    its small Constants as tensors, up to a bound: past it, refused, in little memory."""
    (tmp_path / "d.bin").write_bytes(bytes(64))
    shared = field(5, external_tensor(b"a", 8, b"d.bin", 0, 32))
    shared += field(5, external_tensor(b"b", 8, b"d.bin", 16, 32))
    small = np.zeros(4, np.float32)
    nodes = b"".join(constant(b"c%d" % i, small) for i in range(SMALL_LIMIT + 1))
    (tmp_path / "m.onnx").write_bytes(model(nodes + shared))
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from nncodecs.cli import main\n"
        "sys.exit(main(['compress', 'm.onnx']))\n"
    )
    cmd = [sys.executable, "-c", code]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    one_line(r, "share bytes", f"more than {SMALL_LIMIT} small Constants")
    # under the bound, it is stored as tensors, every Constant among them
    fewer = b"".join(constant(b"c%d" % i, small) for i in range(3))
    (tmp_path / "f.onnx").write_bytes(model(fewer + shared))
    assert run("compress", "f.onnx", "-q", cwd=tmp_path).returncode == 0
    from nncodecs import Reader

    with Reader(tmp_path / "f.onnx.zarr.zip") as c:
        assert sorted(c.keys()) == ["a", "b", "c0", "c1", "c2"]


def test_zeros_and_nameless_constants_are_refused(tmp_path: Path) -> None:
    (tmp_path / "z.onnx").write_bytes(bytes(64))
    one_line(run("compress", "z.onnx", cwd=tmp_path), "field number 0")
    big = np.zeros(300, np.float32)  # (1 KiB or more: both listed, both named '')
    attribute = field(1, b"value") + field(
        5, number(1, 300) + number(2, 1) + field(9, big.tobytes())
    )
    nameless = field(1, field(4, b"Constant") + field(5, attribute + number(20, 4)))
    (tmp_path / "n.onnx").write_bytes(model(nameless + nameless))
    one_line(run("compress", "n.onnx", cwd=tmp_path), "two tensors named ''")
