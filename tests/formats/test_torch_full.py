"""Whole torch checkpoints (model and optimizer state, a scheduler, an epoch, RNG state):
stored as their storage records, back byte for byte through the CLI and as the very
object ``torch.load(weights_only=True)`` gives through ``integrations.torch.load``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import optional_import

from nncodecs import Reader
from nncodecs.errors import CorruptDataError


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nncodecs", *args], cwd=cwd, capture_output=True, text=True
    )


def assert_same(a: Any, b: Any, at: str = "") -> None:
    """``b`` is ``a``: the same types and keys (and key types), tensors of the same dtype,
    shape, stride, offset and bytes."""
    torch = optional_import("torch")
    assert type(a) is type(b), (at, type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert (a.dtype, a.shape, a.stride(), a.storage_offset()) == (
            b.dtype,
            b.shape,
            b.stride(),
            b.storage_offset(),
        ), at

        def raw(t: Any) -> Any:
            return t.detach().contiguous().reshape(-1).view(torch.uint8)

        assert torch.equal(raw(a), raw(b)), at
    elif isinstance(a, dict):
        assert [(type(k), k) for k in a] == [(type(k), k) for k in b], at
        for k in a:
            assert_same(a[k], b[k], f"{at}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), at
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{at}[{i}]")
    else:
        assert a == b, (at, a, b)


def training_checkpoint(weights: dict[str, Any], dtype: str, steps: int = 2) -> dict[str, Any]:
    """``torch.save``'s usual checkpoint of ``weights`` trained ``steps`` AdamW steps on
    gradients of a fixed seed: model, optimizer and scheduler state, epoch, RNG state."""
    torch = optional_import("torch")
    torch.manual_seed(0)
    params = {
        n: torch.nn.Parameter(torch.from_numpy(a.copy()))
        for n, a in weights.items()
        if a.dtype.kind == "f"
    }
    opt = torch.optim.AdamW(params.values(), lr=1e-4)
    sched = torch.optim.lr_scheduler.LinearLR(opt, total_iters=100)
    for _ in range(steps):
        for p in params.values():
            p.grad = torch.randn_like(p) * 1e-3
        opt.step()
        sched.step()
    model = {n: p.detach().to(getattr(torch, dtype)) for n, p in params.items()}
    return {
        "model": model,
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "epoch": 3,
        "global_step": steps,
        "rng_state": torch.get_rng_state(),
        "note": "trained on a fixed seed",
    }


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_training_checkpoint_comes_back_whole(
    real_weights: dict, tmp_path: Path, dtype: str
) -> None:
    torch = optional_import("torch")
    from nncodecs.integrations.torch import load

    layers = dict(list(real_weights.items())[:24])  # (the embeddings and two layers)
    checkpoint = training_checkpoint(layers, dtype)
    torch.save(checkpoint, tmp_path / "ckpt.pt")
    r = run("compress", "ckpt.pt", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    container = tmp_path / "ckpt.pt.zarr.zip"
    with Reader(container) as c:
        names = list(c)
        assert "model.embeddings.word_embeddings.weight" in names
        assert "optimizer.state.0.exp_avg" in names and "optimizer.state.0.exp_avg_sq" in names
        assert str(c.info("model.embeddings.word_embeddings.weight").dtype) == dtype
        assert c.metadata["source.torch.checkpoint"] == "full"
    r = run("decompress", str(container), "-o", "back.pt", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back.pt").read_bytes() == (tmp_path / "ckpt.pt").read_bytes()
    assert run("verify", str(container), cwd=tmp_path).returncode == 0
    expected = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert_same(expected, load(container))
    assert_same(expected["model"], load(container, prefix="model"))
    assert_same(expected["optimizer"]["state"][0], load(container, prefix="optimizer.state.0"))
    assert_same(expected["scheduler"], load(container, prefix=("scheduler",)))
    # a state dict alone is refused by load_state_dict, which would give its storages
    from nncodecs.integrations.torch import load_state_dict

    with pytest.raises(ValueError, match=r"integrations\.torch\.load"):
        load_state_dict(container)


def test_names_that_would_collide_stay_apart(tmp_path: Path) -> None:
    torch = optional_import("torch")
    from nncodecs.integrations.torch import load

    checkpoint = {
        "a.b": torch.ones(3),
        "a": {"b": torch.zeros(3)},
        0: torch.arange(4),
        "0": torch.arange(5),
        (1, "x"): torch.full((2,), 7.0),
        "": torch.ones(1),
        "w/x\\y": torch.ones(2, dtype=torch.float16),
        "long" * 100: torch.ones(2),
    }
    torch.save(checkpoint, tmp_path / "c.pt")
    assert run("compress", "c.pt", "-q", cwd=tmp_path).returncode == 0
    with Reader(tmp_path / "c.pt.zarr.zip") as r:
        assert len(r) == len(checkpoint)  # (one stored record each, under its own name)
        assert {"a.b", "a.b~1", "0", "0~3"} <= set(r)
    assert_same(torch.load(tmp_path / "c.pt", weights_only=True), load(tmp_path / "c.pt.zarr.zip"))
    assert_same(checkpoint[0], load(tmp_path / "c.pt.zarr.zip", prefix=(0,)))
    assert_same(checkpoint["0"], load(tmp_path / "c.pt.zarr.zip", prefix=("0",)))
    assert_same(checkpoint["a"]["b"], load(tmp_path / "c.pt.zarr.zip", prefix=("a", "b")))
    with pytest.raises(KeyError, match="no part"):
        load(tmp_path / "c.pt.zarr.zip", prefix="nothing.here")


def test_views_slices_and_shared_storages_come_back(tmp_path: Path) -> None:
    torch = optional_import("torch")
    from nncodecs.integrations.torch import load

    w = torch.randn(6, 8)
    flat = torch.arange(100, dtype=torch.int64)
    checkpoint = {
        "w": w,
        "views": {"t": w.t(), "row": w[2], "cols": w[:, 3:5], "strided": w[::2, ::3]},
        "tie": w,
        "pair": (flat[10:20], flat[50:]),
        "list": [flat[:5].view(5, 1), torch.empty(0), torch.tensor(3.5)],
        "param": torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16)),
        "bits": torch.tensor([True, False, True]),
        "fp8": torch.randn(16).to(torch.float8_e4m3fn),
        "complex": torch.randn(3, dtype=torch.complex64),  # (stored as its bytes)
    }
    torch.save(checkpoint, tmp_path / "v.pt")
    assert run("compress", "v.pt", "-q", cwd=tmp_path).returncode == 0
    container = tmp_path / "v.pt.zarr.zip"
    with Reader(container) as r:  # (a storage stored once, whole, named by its first path)
        assert "views.t" not in r and "tie" not in r and r.info("w").shape == (6, 8)
        assert r.info("pair.0").shape == (100,)
    r = run("decompress", "v.pt.zarr.zip", "-o", "back.pt", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back.pt").read_bytes() == (tmp_path / "v.pt").read_bytes()
    back = load(container)
    assert_same(torch.load(tmp_path / "v.pt", weights_only=True), back)
    assert back["tie"] is back["w"]
    pointer = back["w"].untyped_storage().data_ptr()
    assert back["views"]["t"].untyped_storage().data_ptr() == pointer
    assert (
        back["pair"][1].untyped_storage().data_ptr() == back["list"][0].untyped_storage().data_ptr()
    )


def test_a_prefix_reads_only_the_storages_it_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = optional_import("torch")
    from nncodecs.integrations.torch import load

    model = {"w": torch.randn(8, 8), "b": torch.randn(8)}
    shared = torch.randn(5)
    checkpoint = {
        "model": model,
        "optimizer": {"state": {0: {"m": torch.randn(8, 8)}}, "shared": shared},
        "also": shared[1:],
    }
    torch.save(checkpoint, tmp_path / "p.pt")
    assert run("compress", "p.pt", "-q", cwd=tmp_path).returncode == 0
    read: list[str] = []
    real = Reader.read_tensor

    def counting(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        read.append(name)
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(Reader, "read_tensor", counting)
    container = tmp_path / "p.pt.zarr.zip"
    assert_same(checkpoint["model"], load(container, prefix="model"))
    assert sorted(n for n in read if isinstance(n, str)) == ["model.b", "model.w"]
    read.clear()
    assert_same(checkpoint["also"], load(container, prefix="also"))
    assert [n for n in read if isinstance(n, str)] == ["optimizer.shared"]


def test_a_state_dict_container_loads_as_torch_load_gives_it(tmp_path: Path) -> None:
    torch = optional_import("torch")
    from nncodecs.integrations.torch import load

    state = torch.nn.Linear(4, 3).state_dict()  # (an OrderedDict, with its _metadata)
    torch.save(state, tmp_path / "sd.pt")
    assert run("compress", "sd.pt", "-q", cwd=tmp_path).returncode == 0
    back = load(tmp_path / "sd.pt.zarr.zip")
    expected = torch.load(tmp_path / "sd.pt", weights_only=True)
    assert_same(expected, back)
    assert back._metadata == expected._metadata  # (what load_state_dict reads)
    assert_same(expected["weight"], load(tmp_path / "sd.pt.zarr.zip", prefix="weight"))


def test_a_legacy_pickle_of_more_than_a_state_dict_is_refused_by_name(tmp_path: Path) -> None:
    torch = optional_import("torch")
    checkpoint = {"model": {"w": torch.ones(2)}, "epoch": 1}
    torch.save(checkpoint, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    r = run("compress", "old.pt", cwd=tmp_path)
    assert r.returncode == 1 and "legacy (not zip)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "old.pt.zarr.zip").exists()


def test_damaged_records_are_refused(tmp_path: Path) -> None:
    torch = optional_import("torch")
    from nncodecs.integrations.torch import load

    torch.save({"model": {"w": torch.ones(4)}, "epoch": 2}, tmp_path / "c.pt")
    assert run("compress", "c.pt", "-o", "c.zarr", "-q", cwd=tmp_path).returncode == 0
    root = tmp_path / "c.zarr" / "zarr.json"
    good = root.read_text()
    for forged in ('{"0": "nothing"}', "[1]", "not json"):
        doc = json.loads(good)
        doc["attributes"]["nncodecs"]["metadata"]["source.torch.storages"] = forged
        root.write_text(json.dumps(doc))
        with pytest.raises(CorruptDataError, match="storages is damaged"):
            load(tmp_path / "c.zarr")
    doc = json.loads(good)
    doc["attributes"]["nncodecs"]["metadata"]["source.torch.storages"] = (
        '{"9": "model.w"}'  # (0 unnamed)
    )
    root.write_text(json.dumps(doc))
    with pytest.raises(CorruptDataError, match="not stored"):
        load(tmp_path / "c.zarr")


def test_a_trainer_folder_keeps_its_torch_files_typed(tmp_path: Path) -> None:
    import argparse
    import random

    torch = optional_import("torch")
    import numpy as np

    from nncodecs.formats.safetensors import write_safetensors
    from nncodecs.integrations.torch import load

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Linear(64, 8))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LinearLR(opt, total_iters=10)
    for _ in range(2):
        model(torch.randn(4, 32)).sum().backward()
        opt.step()
        sched.step()
    folder = tmp_path / "checkpoint-2"
    folder.mkdir()
    write_safetensors(
        folder / "model.safetensors", [(k, v.numpy()) for k, v in model.state_dict().items()]
    )
    torch.save(opt.state_dict(), folder / "optimizer.pt")
    torch.save(sched.state_dict(), folder / "scheduler.pt")
    rng = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "cpu": torch.get_rng_state(),
    }
    torch.save(rng, folder / "rng_state.pth")
    torch.save(argparse.Namespace(lr=1e-3), folder / "training_args.bin")  # (not weights-only)
    (folder / "trainer_state.json").write_text('{"global_step": 2}')
    r = run("compress", "checkpoint-2", "-o", "c.zarr.zip", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    container = tmp_path / "c.zarr.zip"
    with Reader(container) as c:
        assert "optimizer.pt/state.0.exp_avg" in c and "optimizer.pt/state.1.exp_avg_sq" in c
        assert "training_args.bin" in c.files() and "optimizer.pt" not in c.files()
        assert "trainer_state.json" in c.files()
    assert run("verify", "c.zarr.zip", cwd=tmp_path).returncode == 0
    r = run("decompress", "c.zarr.zip", "-o", "back", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for path in folder.iterdir():
        assert (tmp_path / "back" / path.name).read_bytes() == path.read_bytes(), path.name
    assert sorted(p.name for p in (tmp_path / "back").iterdir()) == sorted(
        p.name for p in folder.iterdir()
    )
    expected = torch.load(folder / "optimizer.pt", weights_only=True)
    assert_same(expected, load(container, file="optimizer.pt"))
    assert_same(expected["state"][1], load(container, file="optimizer.pt", prefix="state.1"))
    with pytest.raises(KeyError, match=r"training_args\.bin"):
        load(container, file="training_args.bin")


def test_a_series_of_whole_checkpoints_is_stored_step_against_step(tmp_path: Path) -> None:
    torch = optional_import("torch")
    import nncodecs
    from nncodecs.integrations.torch import load

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.Linear(128, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    files = []
    for step in range(1, 4):
        model(torch.randn(8, 128)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        files.append(tmp_path / f"s{step}.pt")
        torch.save(
            {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, files[-1]
        )
    assert run("compress", "s1.pt", "-q", cwd=tmp_path).returncode == 0
    r = run("compress", "s2.pt", "--reference", "s1.pt.zarr.zip", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with Reader(tmp_path / "s2.pt.zarr.zip") as c:
        against = {n for n in c if c.info(n).reference is not None}
    assert "model.0.weight" in against  # (a moment too where its difference pays: the Writer
    # codes both ways and keeps the smaller; early moments move by a tenth of a gradient)
    r = run("decompress", "s2.pt.zarr.zip", "-o", "b2.pt", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "b2.pt").read_bytes() == files[1].read_bytes()
    assert_same(torch.load(files[1], weights_only=True), load(tmp_path / "s2.pt.zarr.zip"))
    nncodecs.archive([str(f) for f in files], str(tmp_path / "series"), delta="previous")
    for i, f in enumerate(files):
        container = tmp_path / "series" / f"s{i + 1}"
        assert_same(torch.load(f, weights_only=True), load(container))
        back = tmp_path / f"a{i}.pt"
        assert (
            run("decompress", str(container), "-o", str(back), "-q", cwd=tmp_path).returncode == 0
        )
        assert back.read_bytes() == f.read_bytes()
    with Reader(tmp_path / "series" / "s3") as c:
        assert c.info("model.0.weight").reference is not None
