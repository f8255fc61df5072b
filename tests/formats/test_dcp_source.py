"""torch.distributed.checkpoint directories (``.metadata`` and ``.distcp`` files, as DCP's
FileSystemWriter writes them) as input: stored typed, back byte for byte, their
``.metadata`` read by a restricted unpickler."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
from conftest import optional_import

from nncodecs import Reader


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nncodecs", *args], cwd=cwd, capture_output=True, text=True
    )


def same_tree(a: Path, b: Path) -> None:
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*"))
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*"))
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def save(path: Path, **writer: object) -> dict:
    torch = optional_import("torch")
    import torch.distributed.checkpoint as dcp

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Linear(48, 8))
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 32)).sum().backward()
    opt.step()
    state = {
        "model": model.state_dict(),
        "optim": opt.state_dict(),
        "epoch": 3,
        "half": torch.randn(6, 4).to(torch.bfloat16),
        "bits": torch.randn(16).to(torch.float8_e4m3fn),
        "cx": torch.randn(3, dtype=torch.complex64),  # (a dtype not stored: kept as bytes)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (DCP's "no process group: one process")
        dcp.save(state, storage_writer=dcp.FileSystemWriter(path, **writer))
    return state


def test_a_dcp_directory_comes_back_byte_for_byte(tmp_path: Path) -> None:
    save(tmp_path / "ckpt" / "step-1")
    r = run("compress", "ckpt/step-1", "-o", "c.zarr.zip", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with Reader(tmp_path / "c.zarr.zip") as c:
        assert c.metadata["source.format"] == "dcp"
        assert str(c.info("half").dtype) == "bfloat16" and c.info("half").shape == (6, 4)
        assert str(c.info("bits").dtype) == "float8_e4m3fn"
        assert c.info("model.0.weight").shape == (48, 32)
        assert "optim.state.0.exp_avg" in c and "cx" not in c
        assert c.files() == [".metadata"]
    info = run("info", "ckpt/step-1", cwd=tmp_path)  # (the directory itself, by fqn)
    assert info.returncode == 0 and "model.0.weight" in info.stdout, info.stderr
    assert run("verify", "c.zarr.zip", cwd=tmp_path).returncode == 0
    r = run("decompress", "c.zarr.zip", "-o", "back", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    same_tree(tmp_path / "ckpt" / "step-1", tmp_path / "back")


def test_items_through_dcp_zstd_are_kept_as_bytes(tmp_path: Path) -> None:
    optional_import("torch")
    from torch.distributed.checkpoint._extension import ZStandard

    save(tmp_path / "z", _extensions=[ZStandard()])
    assert run("compress", "z", "-o", "z.zarr.zip", "-q", cwd=tmp_path).returncode == 0
    with Reader(tmp_path / "z.zarr.zip") as c:
        assert len(c) == 0 and len(c.files()) == 2  # (.metadata and the .distcp, as bytes)
    assert run("decompress", "z.zarr.zip", "-o", "back", "-q", cwd=tmp_path).returncode == 0
    same_tree(tmp_path / "z", tmp_path / "back")


def test_a_sharded_directory_of_two_ranks(tmp_path: Path) -> None:
    optional_import("torch")
    from integrations.test_dcp import all_ok, ranks

    all_ok(ranks(2, {"mode": "save", "path": str(tmp_path / "s"), "plain": True}))
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        ".metadata",
        "__0_0.distcp",
        "__1_0.distcp",
    ]
    assert run("compress", "s", "-o", "s.zarr", "-q", cwd=tmp_path).returncode == 0
    with Reader(tmp_path / "s.zarr") as c:
        assert (
            "model.w@0,0" in c
            and "model.w@48,0" in c
            and c.info("model.w@48,0").shape
            == (
                48,
                40,
            )
        )
    for shown in ("s.zarr", "s"):  # (the container, and the directory itself)
        info = run("info", shown, "--json", cwd=tmp_path)
        assert info.returncode == 0, info.stderr
        by_fqn = {t["name"]: t for t in json.loads(info.stdout)["dcp_tensors"]}
        assert by_fqn["model.w"]["shape"] == [96, 40] and by_fqn["model.w"]["shards"] == 2
        assert by_fqn["model.r"]["shards"] == 1 and by_fqn["step"]["dtype"] == "bytes"
        assert by_fqn["model.w"]["stored_bytes"] > 0
    text = run("info", "s.zarr", cwd=tmp_path).stdout
    assert "by fully qualified name" in text and "96x40" in text
    assert run("decompress", "s.zarr", "-o", "back", "-q", cwd=tmp_path).returncode == 0
    same_tree(tmp_path / "s", tmp_path / "back")


def test_dcp_rows_of_forged_json_leave_out_what_is_not_of_its_form(tmp_path: Path) -> None:
    from nncodecs.cli.info import dcp_rows
    from nncodecs.container import tasks

    forged = {
        "ok": {"dtype": "float32", "size": [4, 2], "chunks": [{"name": "ok"}]},
        "no-chunks": {"dtype": "float32", "size": [4]},
        "odd": 7,
        "b": {"bytes": 5},
        "shape": {"dtype": "x", "size": ["1", 2], "chunks": [{"name": "s"}]},
        "bool": {"dtype": "x", "size": [True, -3], "chunks": [{"name": "s"}]},
        "junk": {"dtype": "x", "size": [2], "chunks": ["junk"]},
        "kind": {"dtype": {"x": 1}, "size": [2], "chunks": [{"name": "s"}]},
    }
    rows = {r["name"]: r for r in dcp_rows(forged, {"ok": 10})}
    assert set(rows) == {"ok"} and rows["ok"]["stored_bytes"] == 10
    assert dcp_rows([1, 2], {}) == [] and dcp_rows(None, {}) == []
    for name, text in (("esc", json.dumps({"tensors": {"w\x1b[2J": {
            "dtype": "\x1b]0;PWNED\x07\udfff", "size": [4], "chunks": [{"name": "w"}]}}})),
            ("deep", "[" * 100000 + "]" * 100000)):  # fmt: skip
        a = np.zeros(4, np.float32)
        p = tasks.plan("w", a.dtype, a.shape)
        tasks.begin(str(tmp_path / name))
        rec = [tasks.write_rows(str(tmp_path / name), p, s, e, a[s:e]) for s, e in p.slabs()]
        tasks.commit(str(tmp_path / name), [p], rec, {"dcp.metadata": text})
        out = run("info", name, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\x07" not in out.stdout  # (escapes written out)
    assert "\\x1b]0;PWNED" in run("info", "esc", cwd=tmp_path).stdout


class _Evil:
    def __reduce__(self) -> tuple:
        return (print, ("ran",))


def test_a_metadata_pickle_naming_anything_else_is_refused_by_name(tmp_path: Path) -> None:
    save(tmp_path / "d")
    (tmp_path / "d" / ".metadata").write_bytes(pickle.dumps(_Evil()))
    r = run("compress", "d", "-o", "d.zarr.zip", cwd=tmp_path)
    assert r.returncode == 1 and "builtins.print" in r.stderr and "ran" not in r.stdout
    assert not (tmp_path / "d.zarr.zip").exists()
    (tmp_path / "d" / ".metadata").write_bytes(b"\x80\x04not a pickle")
    r = run("compress", "d", "-o", "d.zarr.zip", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr


def test_a_metadata_naming_a_file_outside_is_refused(tmp_path: Path) -> None:
    torch = optional_import("torch")
    from nncodecs.formats.dcp import read_dcp_metadata

    save(tmp_path / "d")
    meta = read_dcp_metadata(tmp_path / "d" / ".metadata")
    index = next(i for i in meta.storage_data if i.fqn == "model.0.weight")
    info = meta.storage_data[index]
    meta.storage_data[index] = type(info)("../outside", info.offset, info.length)
    (tmp_path / "d" / ".metadata").write_bytes(pickle.dumps(meta))
    assert torch is not None
    r = run("compress", "d", "-o", "d.zarr.zip", cwd=tmp_path)
    assert r.returncode == 1 and "'../outside'" in r.stderr, r.stderr


def test_a_folder_inside_is_refused_not_dropped(tmp_path: Path) -> None:
    save(tmp_path / "d")
    (tmp_path / "d" / "extra").mkdir()
    r = run("compress", "d", "-o", "d.zarr.zip", cwd=tmp_path)
    assert r.returncode == 1 and "not a regular file" in r.stderr, r.stderr
    assert not (tmp_path / "d.zarr.zip").exists()
