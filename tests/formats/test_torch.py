"""Tied tensors of a torch checkpoint (the same view of one storage under two names, as
``torch.save`` keeps an output layer that is the embedding) are stored once by the CLI,
and come back under every name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import optional_import

from nncodecs import Reader
from nncodecs.formats.safetensors import read_safetensors


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nncodecs", *args], cwd=cwd, capture_output=True, text=True
    )


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cli_stores_tied_tensors_once(real_weights: dict, tmp_path: Path, dtype: str) -> None:
    torch = optional_import("torch")
    from nncodecs.integrations.torch import load_state_dict

    state = {n: torch.from_numpy(a.copy()) for n, a in real_weights.items()}
    if dtype == "bfloat16":
        state = {n: t.to(torch.bfloat16) if t.is_floating_point() else t for n, t in state.items()}
    embedding = "embeddings.word_embeddings.weight"
    state["lm_head.weight"] = state[embedding]  # tied by aliasing
    state["head.t"] = state[embedding].t()  # another view of it: not the same bytes in order
    torch.save(state, tmp_path / "model.bin")
    untied = {n: t.clone() for n, t in state.items()}
    torch.save(untied, tmp_path / "untied.bin")
    for name in ("model.bin", "untied.bin"):
        r = run("compress", name, "-q", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    tied_size = (tmp_path / "model.bin.zarr.zip").stat().st_size
    untied_size = (tmp_path / "untied.bin.zarr.zip").stat().st_size
    big = state[embedding].numel() * state[embedding].element_size()
    assert untied_size - tied_size > 0.5 * big  # the embedding once, not twice
    with Reader(tmp_path / "model.bin.zarr.zip") as r:
        assert "lm_head.weight" not in r and "head.t" in r
        assert json.loads(r.metadata["torch.tied"]) == {"lm_head.weight": embedding}
    back = load_state_dict(tmp_path / "model.bin.zarr.zip")
    assert list(back) == list(state)  # every name, in order
    assert back["lm_head.weight"] is back[embedding]
    for name, t in state.items():
        assert torch.equal(back[name], t), name
    r = run("decompress", "model.bin.zarr.zip", "-o", "m.safetensors", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    restored = read_safetensors(tmp_path / "m.safetensors")
    assert list(restored) == list(state)
    for name, t in state.items():
        want = t.contiguous().view(torch.int16 if dtype == "bfloat16" and t.is_floating_point()
                                   else t.dtype).numpy()  # fmt: skip
        got = (
            restored[name].view(want.dtype)
            if restored[name].dtype != want.dtype
            else restored[name]
        )
        assert np.array_equal(got, want), name
    r = run("decompress", "model.bin.zarr.zip", "-o", "m.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "m.npz") as z:
        assert set(z.files) == set(state)


def test_a_forged_tie_record_is_refused(real_weights: dict, tmp_path: Path) -> None:
    torch = optional_import("torch")
    state = {"a": torch.ones(4), "b": torch.zeros(4)}
    state["c"] = state["a"]
    torch.save(state, tmp_path / "m.pt")
    assert run("compress", "m.pt", "-o", "m.zarr", "-q", cwd=tmp_path).returncode == 0
    meta = tmp_path / "m.zarr" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["nncodecs"]["metadata"]["torch.tied"] = json.dumps({"c": "missing"})
    meta.chmod(0o644)
    meta.write_text(json.dumps(doc))
    r = run("decompress", "m.zarr", "-o", "m.safetensors", cwd=tmp_path)
    assert r.returncode == 1 and "tied" in r.stderr and len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "m.safetensors").exists()


def sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("dtype", "file"),
    [("float32", "pytorch_model.bin"), ("bfloat16", "m.pt"), ("float16", "m.pth")],
)
def test_zip_checkpoints_come_back_byte_identical(
    real_weights: dict, tmp_path: Path, dtype: str, file: str
) -> None:
    torch = optional_import("torch")
    cast = getattr(torch, dtype)
    state = {
        n: torch.from_numpy(a.copy()).to(cast) if a.dtype == np.float32 else torch.from_numpy(a)
        for n, a in real_weights.items()
    }
    state["lm_head.weight"] = state["embeddings.word_embeddings.weight"]  # tied
    torch.save(state, tmp_path / file)
    want = sha(tmp_path / file)
    r = run("compress", file, "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / file).rename(tmp_path / "original")
    r = run("decompress", f"{file}.zarr.zip", cwd=tmp_path)  # its own name and format
    assert r.returncode == 0 and "(torch," in r.stdout, (r.stdout, r.stderr)
    assert sha(tmp_path / file) == want
    loaded = torch.load(tmp_path / file, weights_only=True)
    assert (
        loaded["lm_head.weight"].data_ptr()
        == loaded["embeddings.word_embeddings.weight"].data_ptr()
    )


def test_checkpoints_not_restorable_by_place_are_refused_as_torch(tmp_path: Path) -> None:
    torch = optional_import("torch")
    whole = torch.arange(64, dtype=torch.float32)
    sliced = {"x": whole, "part": whole[8:40]}  # a view of part of a storage
    torch.save(sliced, tmp_path / "s.pt")
    torch.save({"x": whole}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    for name in ("s.pt", "legacy.pt"):
        assert run("compress", name, "-q", cwd=tmp_path).returncode == 0
        r = run("decompress", f"{name}.zarr.zip", "-o", "back.pt", cwd=tmp_path)
        assert r.returncode == 1 and "back.pt" in r.stderr and "whole storages" in r.stderr
        assert not (tmp_path / "back.pt").exists()
        r = run("decompress", f"{name}.zarr.zip", cwd=tmp_path)  # default: safetensors
        assert r.returncode == 0 and ".safetensors" in r.stdout, (r.stdout, r.stderr)
    back = read_safetensors(tmp_path / "s.safetensors")
    assert np.array_equal(back["part"], whole[8:40].numpy())


def test_verify_merge_and_an_empty_first_tensor(tmp_path: Path) -> None:
    torch = optional_import("torch")
    from nncodecs.integrations.torch import load_state_dict

    a = {"empty": torch.empty(0, 4), "w": torch.arange(12.0).reshape(3, 4)}
    a["tied"] = a["w"]
    torch.save(a, tmp_path / "a.pt")
    torch.save({"v": torch.ones(5)}, tmp_path / "b.pt")
    for name in ("a.pt", "b.pt"):
        assert run("compress", name, "-q", cwd=tmp_path).returncode == 0
    r = run("verify", "a.pt.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0 and "3 tensors (1 of them tied" in r.stdout, (r.stdout, r.stderr)
    r = run("decompress", "a.pt.zarr.zip", "-o", "back.pt", cwd=tmp_path)  # empty first
    assert r.returncode == 0, r.stderr
    assert sha(tmp_path / "back.pt") == sha(tmp_path / "a.pt")
    r = run("merge", "a.pt.zarr.zip", "b.pt.zarr.zip", "-o", "ab.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    merged = load_state_dict(tmp_path / "ab.zarr.zip")
    assert set(merged) == {"empty", "w", "tied", "v"} and merged["tied"] is merged["w"]
    assert run("verify", "ab.zarr.zip", cwd=tmp_path).returncode == 0


def test_checkpoints_of_no_bytes_come_back_byte_identical(tmp_path: Path) -> None:
    # Found by review: an empty state dict (or one of empty tensors) had no storage to
    # find the file's map by, and its restore as torch was refused.
    torch = optional_import("torch")
    torch.save({}, tmp_path / "empty.pt")
    torch.save({"z": torch.zeros(0), "n": torch.zeros(0, 3)}, tmp_path / "zero.pt")
    for name in ("empty.pt", "zero.pt"):
        want = sha(tmp_path / name)
        assert run("compress", name, "-q", cwd=tmp_path).returncode == 0
        r = run("decompress", f"{name}.zarr.zip", "-o", "back.pt", "-f", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert sha(tmp_path / "back.pt") == want


def test_a_small_file_that_expands_past_its_size_is_refused(tmp_path: Path) -> None:
    # Found by review: a 1.5 KB checkpoint of one float expanded (stride 0) to 2^40
    # elements made nncodecs ask torch for 4 TiB (a RuntimeError of its allocator);
    # an expand the file could hold is stored as its values.
    torch = optional_import("torch")
    torch.save({"e": torch.zeros(1).expand(1 << 20, 1 << 20)}, tmp_path / "big.pt")
    r = run("compress", "big.pt", cwd=tmp_path)
    assert r.returncode == 1 and "repeats its storage's elements" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "big.pt.zarr.zip").exists()
    small = torch.arange(8, dtype=torch.float32).expand(2, 8)
    torch.save({"e": small}, tmp_path / "small.pt")
    assert run("compress", "small.pt", "-q", cwd=tmp_path).returncode == 0
    with Reader(tmp_path / "small.pt.zarr.zip") as r:
        assert np.array_equal(r.read_tensor("e"), small.numpy())


def test_a_dict_of_other_names_than_strings_is_a_whole_checkpoint(tmp_path: Path) -> None:
    torch = optional_import("torch")
    from nncodecs.integrations.torch import load

    torch.save({1: torch.ones(2)}, tmp_path / "ints.pt")
    assert run("compress", "ints.pt", "-q", cwd=tmp_path).returncode == 0
    back = load(tmp_path / "ints.pt.zarr.zip")
    assert list(back) == [1] and torch.equal(back[1], torch.ones(2))  # (an int key, not "1")


def test_a_checkpoint_of_parameters_comes_back_byte_identical(tmp_path: Path) -> None:
    # Found by fuzzing (a flipped requires_grad bit): torch.save of nn.Parameters, or of
    # tensors that require grad, made nncodecs' .numpy() raise a bare RuntimeError.
    torch = optional_import("torch")
    layer = torch.nn.Linear(16, 8)
    torch.save(dict(layer.named_parameters()), tmp_path / "p.pt")
    want = sha(tmp_path / "p.pt")
    assert run("compress", "p.pt", "-q", cwd=tmp_path).returncode == 0
    r = run("decompress", "p.pt.zarr.zip", "-o", "back.pt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sha(tmp_path / "back.pt") == want
