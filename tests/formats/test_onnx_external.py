"""A container never names a file for you: ONNX external data names (issue 36, N1).

An ONNX model's external data lies in files its graph names; decompress writes
them beside the restored model. Hostile names (``.bashrc``,
``sub/.ssh/authorized_keys``), links on the way and existing files of the user
are refused before any byte is written; ``compress`` refuses such a model with
the reason; a container written before the rule restores only into a new,
empty directory; a ``--force`` re-run replaces only the files the model at the
output names as its own; each file written beside the output is named on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import optional_import
from harness import run_cli

from nncodecs.errors import CorruptDataError


def model_with_data_at(onnx: Any, folder: Path, location: str) -> Path:
    """A model whose one initializer lies in the external file ``location``."""
    from onnx import TensorProto, helper

    w = np.random.default_rng(1).standard_normal(300).astype(np.float32)
    data = folder / location
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_bytes(w.tobytes())
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=w.shape)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(w.nbytes))):
        entry = t.external_data.add()
        entry.key, entry.value = k, v
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [300])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [300])],
        initializer=[t],
    )
    path = folder / "m.onnx"
    onnx.save(helper.make_model(graph), path)
    return path


HOSTILE = [".bashrc", ".bash_profile", "sub/.ssh/authorized_keys", "./.hidden", "a/../b.bin"]


@pytest.mark.parametrize("name", HOSTILE)
def test_compress_refuses_a_name_decompress_would_refuse(tmp_path: Path, name: str) -> None:
    onnx = optional_import("onnx")
    from nncodecs.formats import compress

    src = model_with_data_at(onnx, tmp_path, name.replace("a/../", ""))
    if "../" in name:  # (the graph states the '..' spelling itself)
        model = onnx.load(str(src), load_external_data=False)
        model.graph.initializer[0].external_data[0].value = name
        (tmp_path / "a").mkdir()
        onnx.save(model, src)
    with pytest.raises(CorruptDataError, match="nncodecs would not write back"):
        compress(src, tmp_path / "m.zarr")
    assert not (tmp_path / "m.zarr").exists()


def _older_container(onnx: Any, tmp_path: Path, name: str, monkeypatch: Any) -> Path:
    """A container of a model with a dotted data name, as releases before the rule wrote."""
    import nncodecs.formats.onnx as onnx_format
    from nncodecs.formats import compress

    src = tmp_path / "src"
    model_with_data_at(onnx, src, name)
    with monkeypatch.context() as m:
        m.setattr(onnx_format, "check_external_name", lambda name: name)
        compress(src / "m.onnx", tmp_path / "old.zarr")
    return tmp_path / "old.zarr"


@pytest.mark.parametrize("name", [".bashrc", "sub/.ssh/authorized_keys"])
def test_an_older_container_never_writes_a_dotfile_beside_the_users_files(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    onnx = optional_import("onnx")
    container = _older_container(onnx, tmp_path, name, monkeypatch)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# mine\n")
    for force in ([], ["--force"]):
        r = run_cli(
            "decompress", str(container), "-o", str(home / "model.onnx"), *force, cwd=tmp_path
        )
        assert r.returncode != 0 and "new, empty directory" in r.stderr, r.stderr
        assert sorted(p.name for p in home.iterdir()) == [".bashrc"]
        assert (home / ".bashrc").read_text() == "# mine\n"
    # "-o new/../model.onnx" is the same non-empty directory, not a new one
    (home / "notes.txt").write_text("mine")
    (home / "new").mkdir()  # (an existing folder: the command creates none)
    r = run_cli(
        "decompress", str(container), "-o", str(home / "new" / ".." / "model.onnx"), cwd=tmp_path
    )
    assert r.returncode != 0 and "new, empty directory" in r.stderr, r.stderr
    assert sorted(p.name for p in home.iterdir() if p.name != "new") == [".bashrc", "notes.txt"]
    (home / "notes.txt").unlink()
    # Into a new, empty directory it restores, byte for byte, and names what it wrote.
    (tmp_path / "new").mkdir()
    r = run_cli(
        "decompress", str(container), "-o", str(tmp_path / "new" / "model.onnx"), cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "new" / name).read_bytes() == (tmp_path / "src" / name).read_bytes()
    assert f"also wrote {tmp_path / 'new' / name}" in r.stderr
    # --json lists them too, and its stdout is that one object
    out = tmp_path / "json" / "model.onnx"
    out.parent.mkdir()
    r = run_cli("decompress", str(container), "-o", str(out), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    record = json.loads(r.stdout)
    assert record["beside"] == [str(out.parent / name)] and record["format"] == "onnx"
    assert record["output"] == str(out)  # (every file written counts)
    assert record["original_bytes"] == out.stat().st_size + (out.parent / name).stat().st_size
    files = [f for f in container.rglob("*") if f.is_file()]
    assert record["stored_bytes"] == sum(f.stat().st_size for f in files)
    assert f"also wrote {out.parent / name}" in r.stderr


def test_no_link_on_the_way_and_no_user_file_replaced(tmp_path: Path) -> None:
    onnx = optional_import("onnx")
    from nncodecs.formats import compress, decompress

    model_with_data_at(onnx, tmp_path / "src", "sub/w.bin")
    compress(tmp_path / "src" / "m.onnx", tmp_path / "m.zarr")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "sub").symlink_to(elsewhere)
    with pytest.raises(ValueError, match="is a link") as refused:
        decompress(tmp_path / "m.zarr", out / "m.onnx")
    assert not isinstance(refused.value, CorruptDataError)  # (the user's folder, not the container)
    assert not any(elsewhere.iterdir()) and not (out / "m.onnx").exists()
    (out / "sub").unlink()
    (out / "sub").mkdir()
    (out / "sub" / "w.bin").write_bytes(b"the user's own")
    # --force replaces the output, never a file the model at the output does not name
    for force in (False, True):
        with pytest.raises(FileExistsError, match=r"w\.bin"):
            decompress(tmp_path / "m.zarr", out / "m.onnx", force=force)
        assert (out / "sub" / "w.bin").read_bytes() == b"the user's own"
        assert not (out / "m.onnx").exists()


def test_a_force_rerun_replaces_the_models_own_data(tmp_path: Path) -> None:
    onnx = optional_import("onnx")
    from nncodecs.formats import compress, decompress

    src = model_with_data_at(onnx, tmp_path / "src", "w.bin")
    compress(src, tmp_path / "m.zarr")
    out = tmp_path / "out" / "m.onnx"
    beside: list[Path] = []
    decompress(tmp_path / "m.zarr", out, beside=beside)
    assert beside == [out.parent / "w.bin"]
    (out.parent / "w.bin").write_bytes(b"damaged")
    with pytest.raises(FileExistsError):
        decompress(tmp_path / "m.zarr", out)
    decompress(tmp_path / "m.zarr", out, force=True)  # the model at out names w.bin: a re-run
    assert (out.parent / "w.bin").read_bytes() == (tmp_path / "src" / "w.bin").read_bytes()


@pytest.mark.parametrize("one_file", [True, False])
def test_the_wire_walk_lists_what_onnx_lists(tmp_path: Path, one_file: bool) -> None:
    """decompress reads the external names a model's graph gives by the wire walk alone
    (no protobuf objects: a model of millions of nodes); it lists what onnx lists."""
    onnx = optional_import("onnx")
    from onnx import TensorProto, external_data_helper, helper, numpy_helper

    from nncodecs.formats.onnx_wire import external_locations

    big = numpy_helper.from_array(np.arange(512, dtype=np.float32), "big")
    branch = helper.make_graph(
        [helper.make_node("Constant", [], ["c"], value=big)],
        "then",
        [],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [512])],
    )
    node = helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch)
    init = numpy_helper.from_array(np.ones((64, 32), np.float32), "w")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [512])],
        initializer=[init],
    )
    path = tmp_path / "m.onnx"
    onnx.save(
        helper.make_model(graph),
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=one_file,
        location="m.data",
        size_threshold=128,
    )
    model = onnx.load(str(path), load_external_data=False)
    want = {
        {e.key: e.value for e in t.external_data}["location"]
        for t in external_data_helper._get_all_tensors(model)
        if external_data_helper.uses_external_data(t)
    }
    assert want and external_locations(path.read_bytes()) == want
