"""torch.distributed.checkpoint through nncodecs' storage: real multi-process runs (gloo
on the CPU, DTensors sharded on a CPU device mesh) save one container and load it back,
at the same and at another world size, into a directory and into an S3-compatible
server; async saves, one writer for successive steps; ranks killed midway."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import optional_import
from s3_server import S3Server, free_port

from nncodecs import Reader

WORKER = Path(__file__).resolve().parents[1] / "dcp_worker.py"


def ranks(world: int, job: dict[str, Any], timeout: float = 120) -> list[dict[str, Any]]:
    """Run ``world`` ranks of the worker on ``job``; each one's JSON line (``None`` for
    a rank that died), and the return codes."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", NNCODECS_THREADS="1")  # fmt: skip
        command = [sys.executable, str(WORKER), json.dumps(job)]
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))  # fmt: skip
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        line = stdout.strip().splitlines()[-1:] if p.returncode == 0 else []
        out.append({"rc": p.returncode, "stderr": stderr[-2000:],
                    **(json.loads(line[0]) if line else {})})  # fmt: skip
    return out


def all_ok(results: list[dict[str, Any]]) -> None:
    for r in results:
        assert r["rc"] == 0, r["stderr"]


@pytest.fixture(scope="module", autouse=True)
def _torch() -> None:
    optional_import("torch")


@pytest.mark.parametrize(
    ("saved", "loaded", "suffix"), [(2, 2, ""), (4, 2, ""), (2, 4, ""), (4, 2, ".zip")]
)
def test_save_and_load_resharded(tmp_path: Path, saved: int, loaded: int, suffix: str) -> None:
    """Into a directory, or a zip (each rank writing a part, joined at the commit)."""
    path = str(tmp_path / f"step-1{suffix}")
    all_ok(ranks(saved, {"mode": "save", "path": path}))
    with Reader(path) as r:  # (one container: a shard a tensor, DCP's metadata as JSON)
        assert "dcp.metadata" in r.metadata and json.loads(r.metadata["dcp.metadata"])
        assert f"model.w@{96 // saved},0" in r and "model.r" in r
    assert [p.name for p in tmp_path.iterdir()] == [f"step-1{suffix}"]  # (nothing beside it)
    got = ranks(loaded, {"mode": "load", "path": path})
    all_ok(got)
    for r in got:
        assert r["ok"] and r["step"] == 1 and r["extra"] == {"lr": 0.5, "name": "run"}
        assert r["opt_step"] == 7.0
    with Reader(path) as r:
        stored = sum(r.info(n).stored_bytes for n in r)
    info = subprocess.run([sys.executable, "-m", "nncodecs", "info", path, "--json"],
                          capture_output=True, text=True)  # fmt: skip
    by_fqn = {t["name"]: t for t in json.loads(info.stdout)["dcp_tensors"]}
    assert by_fqn["model.w"]["shape"] == [96, 40] and by_fqn["model.w"]["shards"] == saved
    for r in got:  # (each rank reads its plan's shards, not the checkpoint)
        assert 0 < r["bytes_read"] < stored, (r["bytes_read"], stored)


def test_async_save_and_one_writer_for_two_steps(tmp_path: Path) -> None:
    a, b = str(tmp_path / "step-1"), str(tmp_path / "step-2")
    all_ok(ranks(2, {"mode": "async", "path": a, "path2": b}))
    for path, seed in ((a, 1), (b, 2)):
        got = ranks(2, {"mode": "load", "path": path, "seed": seed})
        all_ok(got)
        assert all(r["ok"] and r["step"] == seed for r in got)


def test_a_step_stored_against_the_previous_one_shard_by_shard(tmp_path: Path) -> None:
    a, b = str(tmp_path / "step-1"), str(tmp_path / "step-2.zip")  # (a directory, then a zip)
    all_ok(ranks(2, {"mode": "save", "path": a}))
    all_ok(ranks(2, {"mode": "save", "path": b, "nudged": True, "reference": a}))
    with Reader(b) as r:
        stored = {n: r.info(n) for n in r}
    assert stored["model.w@48,0"].reference is not None  # (a difference)
    assert stored["model.b@15"].reference["duplicate"]  # (the same bits: no data stored)
    got = ranks(4, {"mode": "load", "path": b, "nudged": True})  # (resharded, through a)
    all_ok(got)
    assert all(r["ok"] for r in got)
    # a shard the previous step lacks (another world size: other offsets) is stored whole
    c = str(tmp_path / "step-3")
    all_ok(ranks(4, {"mode": "save", "path": c, "nudged": True, "reference": b}))
    with Reader(c) as r:
        assert r.info("model.w@24,0").reference is None
        assert r.info("model.r").reference is not None  # (replicated: same name and size)


def test_into_an_s3_compatible_server(tmp_path: Path) -> None:
    optional_import("s3fs")
    with S3Server() as s3:
        url = f"{s3.bucket('ckpt')}/step-1"
        opts = s3.storage_options
        all_ok(ranks(4, {"mode": "save", "path": url, "storage_options": opts}))
        got = ranks(2, {"mode": "load", "path": url, "storage_options": opts})
        all_ok(got)
        assert all(r["ok"] for r in got)
        refused = ranks(2, {"mode": "save", "path": url, "storage_options": opts})
        assert all(r["rc"] != 0 for r in refused)  # (a container there: never replaced)
        assert any("holds data already" in r["stderr"] for r in refused)


@pytest.mark.parametrize(("victim", "suffix"), [(1, ""), (0, ""), (1, ".zip")])
def test_an_existing_container_is_replaced_only_at_commit_and_only_when_asked(
    tmp_path: Path, victim: int, suffix: str
) -> None:
    """(victim: a rank, or the coordinator, killed midway.)"""
    path = str(tmp_path / f"step{suffix}")
    all_ok(ranks(2, {"mode": "save", "path": path, "seed": 1}))
    refused = ranks(2, {"mode": "save", "path": path, "seed": 2})
    assert all(r["rc"] != 0 for r in refused)
    assert any("overwrite=True" in r["stderr"] for r in refused)
    # a rank killed midway (the others time out): the previous content intact
    killed = ranks(2, {"mode": "kill", "path": path, "seed": 2, "victim": victim, "overwrite": True,
                       "timeout": 6})  # fmt: skip
    assert any(r["rc"] != 0 for r in killed)
    got = ranks(2, {"mode": "load", "path": path, "seed": 1})
    all_ok(got)
    assert all(r["ok"] and r["step"] == 1 for r in got)
    left = ".step.zip.nncodecs-parts" if suffix else ".step.nncodecs-dcp"
    assert list(tmp_path.glob(left))  # (what the killed save left)
    all_ok(ranks(2, {"mode": "save", "path": path, "seed": 2, "overwrite": True}))
    assert not list(tmp_path.glob(".*"))  # (removed by the next save)
    got = ranks(2, {"mode": "load", "path": path, "seed": 2})
    assert all(r["ok"] and r["step"] == 2 for r in got)


def test_refusals() -> None:
    from nncodecs.integrations.dcp import ContainerReader, ContainerWriter

    with pytest.raises(ValueError, match="local file"):
        ContainerWriter("s3://b/ckpt.zip")
    assert ContainerWriter.validate_checkpoint_id("x.zip")
    assert not ContainerWriter.validate_checkpoint_id("s3://b/x.zip")
    assert ContainerWriter.validate_checkpoint_id("s3://b/step-1")
    assert not ContainerReader.validate_checkpoint_id("/no/such/container")
    with pytest.raises(ValueError, match="codec"):
        ContainerWriter("x", codec="nope")


def test_a_bytes_item_that_is_not_weights_only_is_refused(tmp_path: Path) -> None:
    import argparse

    import torch
    import torch.distributed.checkpoint as dcp

    from nncodecs.integrations.dcp import ContainerReader, ContainerWriter

    path = tmp_path / "one"  # (one process: DCP runs without a process group)
    state = {"w": torch.arange(6.0), "args": argparse.Namespace(lr=0.1), "epoch": 4}
    dcp.save(state, storage_writer=ContainerWriter(path))
    plain = {"w": torch.zeros(6), "epoch": 0}  # (what loads with weights_only=True)
    dcp.load(plain, storage_reader=ContainerReader(path))
    assert torch.equal(plain["w"], torch.arange(6.0)) and plain["epoch"] == 4
    from torch.distributed.checkpoint.api import CheckpointException

    with pytest.raises(CheckpointException) as refused:  # (DCP gathers it from each rank)
        dcp.load({"w": torch.zeros(6), "args": None}, storage_reader=ContainerReader(path))
    (failure,) = refused.value.failures.values()
    assert "weights_only=True" in str(failure) and "ValueError" in str(failure)
    with Reader(path) as r:  # (DCP's metadata as JSON, never a pickle)
        doc = json.loads(r.metadata["dcp.metadata"])
        assert doc["tensors"]["w"] == {
            "dtype": "float32",
            "requires_grad": False,
            "size": [6],
            "chunks": [{"offsets": [0], "sizes": [6], "name": "w"}],
        }
        assert doc["tensors"]["args"] == {"bytes": "args"}


def test_complex_tensors_a_zip_of_the_container_and_a_missing_reference(tmp_path: Path) -> None:
    import torch
    import torch.distributed.checkpoint as dcp

    from nncodecs.integrations.dcp import ContainerReader, ContainerWriter

    state = {"c": torch.randn(4, 3, dtype=torch.complex64), "w": torch.randn(5)}
    dcp.save(state, storage_writer=ContainerWriter(tmp_path / "a"))  # (complex: as bytes)
    back = {"c": torch.zeros(4, 3, dtype=torch.complex64), "w": torch.zeros(5)}
    dcp.load(back, storage_reader=ContainerReader(tmp_path / "a"))
    assert torch.equal(back["c"], state["c"]) and torch.equal(back["w"], state["w"])
    r = subprocess.run([sys.executable, "-m", "nncodecs", "convert", "a", "-o", "a.zarr.zip"],
                       cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert ContainerReader.validate_checkpoint_id(tmp_path / "a.zarr.zip")
    again = {"c": torch.zeros(4, 3, dtype=torch.complex64), "w": torch.zeros(5)}
    dcp.load(again, storage_reader=ContainerReader(tmp_path / "a.zarr.zip"))
    assert torch.equal(again["c"], state["c"])
    writer = ContainerWriter(tmp_path / "b", reference=tmp_path / "missing")
    with pytest.raises(BaseException, match="missing"):  # (DCP's CheckpointException)
        dcp.save(state, storage_writer=writer)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "a.zarr.zip"]  # (nothing begun)


def test_a_zip_target_that_is_not_a_container_is_never_replaced(tmp_path: Path) -> None:
    import torch
    import torch.distributed.checkpoint as dcp

    from nncodecs.integrations.dcp import ContainerReader, ContainerWriter

    other = tmp_path / "notes.zip"
    other.write_bytes(b"PK\x05\x06" + bytes(18))  # (an empty zip, not a container)
    state = {"w": torch.randn(7, 3), "step": 3}
    with pytest.raises(BaseException, match="not a container"):  # (DCP's CheckpointException)
        dcp.save(state, storage_writer=ContainerWriter(other, overwrite=True))
    assert other.read_bytes() == b"PK\x05\x06" + bytes(18)
    path = tmp_path / "one.zip"  # (one process: DCP without a process group)
    dcp.save(state, storage_writer=ContainerWriter(path))
    back = {"w": torch.zeros(7, 3), "step": 0}
    dcp.load(back, storage_reader=ContainerReader(path))
    assert torch.equal(back["w"], state["w"]) and back["step"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.zip", "one.zip"]


def test_a_checkpoint_is_never_its_own_reference_and_file_urls_are_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    import torch.distributed.checkpoint as dcp

    from nncodecs.integrations.dcp import ContainerReader, ContainerWriter

    state = {"w": torch.randn(7, 3)}
    for path in (tmp_path / "one.zip", tmp_path / "dir"):
        dcp.save(state, storage_writer=ContainerWriter(path))
        same = ContainerWriter(path, overwrite=True, reference=f"{tmp_path}/./{path.name}")
        with pytest.raises(BaseException, match="its own reference"):  # (DCP's exception)
            dcp.save({"w": torch.zeros(7, 3)}, storage_writer=same)
        back = {"w": torch.zeros(7, 3)}
        dcp.load(back, storage_reader=ContainerReader(path))  # (the checkpoint intact)
        assert torch.equal(back["w"], state["w"])
    monkeypatch.chdir(tmp_path)
    url = f"file://{tmp_path}/u.zip"
    dcp.save(state, storage_writer=ContainerWriter(url))
    assert (tmp_path / "u.zip").is_file() and not (tmp_path / "file:").exists()
    back = {"w": torch.zeros(7, 3)}
    dcp.load(back, storage_reader=ContainerReader(url))
    assert torch.equal(back["w"], state["w"])


def test_alternating_slots_and_what_a_directory_holds_are_never_lost(tmp_path: Path) -> None:
    """A save never replaces a checkpoint its reference is stored against (two slots in
    turn); a directory holding a file the container does not, or one a Writer holds, is
    not replaced; a save killed between its two renames leaves the previous container,
    which the next save puts back."""
    import shutil

    import numpy as np
    import torch
    import torch.distributed.checkpoint as dcp

    from nncodecs import Writer
    from nncodecs.integrations.dcp import ContainerReader, ContainerWriter

    def state(seed: int) -> dict[str, Any]:
        return {"w": torch.randn(64, 8, generator=torch.Generator().manual_seed(seed))}

    def loads(path: Path, seed: int) -> bool:
        back = {"w": torch.zeros(64, 8)}
        dcp.load(back, storage_reader=ContainerReader(path))
        return torch.equal(back["w"], state(seed)["w"])

    a, b = tmp_path / "a", tmp_path / "b.zip"
    dcp.save(state(1), storage_writer=ContainerWriter(a))
    dcp.save(state(1), storage_writer=ContainerWriter(b, reference=a))  # (b: against a)
    writer = ContainerWriter(overwrite=True)
    writer.reference = f"file://{b}"  # (set between steps, spelled as a URL)
    with pytest.raises(BaseException, match="stored against it"):
        dcp.save(state(3), storage_writer=writer, checkpoint_id=a)
    assert loads(a, 1) and loads(b, 1)
    (a / "notes.txt").write_text("mine")
    with pytest.raises(BaseException, match=r"notes\.txt"):
        dcp.save(state(4), storage_writer=ContainerWriter(a, overwrite=True))
    (a / "notes.txt").unlink()
    with Writer(a, mode="a") as w:  # (it holds the lock)
        with pytest.raises(BaseException, match="another writer"):
            dcp.save(state(4), storage_writer=ContainerWriter(a, overwrite=True))
        w.add_tensor("extra", np.arange(3, dtype=np.float32))
    assert loads(a, 1)
    old = tmp_path / ".a.nncodecs-old"  # (a save killed between its two renames)
    a.rename(old)
    shutil.copytree(old, tmp_path / ".a.nncodecs-dcp")
    with pytest.raises(BaseException, match="overwrite=True"):  # (a is back: not replaced)
        dcp.save(state(5), storage_writer=ContainerWriter(a))
    assert loads(a, 1) and not old.exists()
