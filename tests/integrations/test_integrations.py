"""safe_open over a container, and torch state dicts with their dtypes and ties."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import same_bits
from zarr.storage import LocalStore

from nncodecs.datasets import minilm_path
from nncodecs.formats import compress
from nncodecs.integrations.safetensors import safe_open


@pytest.fixture(scope="module")
def container(real_weights: dict, tmp_path_factory: Any) -> Path:
    path = tmp_path_factory.mktemp("c") / "minilm.zarr"
    compress(minilm_path(), path)
    return path


def test_safe_open_matches_safetensors(container: Path) -> None:
    from safetensors import safe_open as st_open

    with (
        st_open(str(minilm_path()), framework="np") as ref,
        safe_open(container, framework="np") as f,
    ):
        assert sorted(f.keys()) == sorted(ref.keys())
        assert f.metadata() == ref.metadata()
        for name in ref.keys():  # noqa: SIM118 (safetensors' handle has no __iter__)
            assert same_bits(f.get_tensor(name), ref.get_tensor(name)), name
        big = "embeddings.word_embeddings.weight"
        s, rs = f.get_slice(big), ref.get_slice(big)
        assert s.get_shape() == rs.get_shape() and s.get_dtype() == rs.get_dtype()
        assert same_bits(s[100:103, 5:9], rs[100:103, 5:9])


def test_get_slice_reads_only_the_chunks_it_needs(container: Path) -> None:
    from container.test_container import CountingStore

    store = CountingStore(LocalStore(container, read_only=True))
    with safe_open(store, framework="np") as f:
        store.gets.clear()
        f.get_slice("embeddings.word_embeddings.weight")[20000:20002]
        chunks = [k for k in store.gets if not k.endswith("zarr.json")]
        assert 1 <= len(chunks) <= 3


def test_safe_open_torch(torch: Any, container: Path) -> None:
    import torch as th
    from safetensors import safe_open as st_open

    with st_open(str(minilm_path()), framework="pt") as ref, safe_open(container) as f:
        for name in ("pooler.dense.weight", "embeddings.position_ids"):
            got, want = f.get_tensor(name), ref.get_tensor(name)
            assert got.dtype == want.dtype and th.equal(got, want)


def test_torch_state_dict_keeps_dtypes_and_ties(torch: Any, tmp_path: Path) -> None:
    import torch as th

    from nncodecs.integrations.torch import load_state_dict, save_state_dict

    emb = th.randn(100, 16).to(th.bfloat16)
    state = {
        "embed.weight": emb,
        "head.weight": emb,  # tied to the embedding
        "scale": th.randn(16).to(th.float8_e4m3fn),
        "step": th.tensor(7),
    }
    save_state_dict(state, tmp_path / "sd.zarr.zip")
    back = load_state_dict(tmp_path / "sd.zarr.zip")
    assert list(back) == list(state)
    assert back["head.weight"] is back["embed.weight"]
    for name, tensor in state.items():
        assert back[name].dtype == tensor.dtype and back[name].shape == tensor.shape
        as_bits = th.uint8 if tensor.dtype == th.float8_e4m3fn else tensor.dtype
        assert th.equal(back[name].view(as_bits), tensor.view(as_bits))
    model = th.nn.Linear(16, 4)
    save_state_dict(model.state_dict(), tmp_path / "lin.zarr")
    fresh = th.nn.Linear(16, 4)
    fresh.load_state_dict(load_state_dict(tmp_path / "lin.zarr"))
    x = th.randn(3, 16)
    assert th.equal(fresh(x), model(x))
    np.testing.assert_array_equal(fresh.bias.detach().numpy(), model.bias.detach().numpy())


def test_a_corrupt_tensor_fails_a_load_by_name_and_stops_the_reads(
    torch: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_state_dict reads two tensors at once: the order and every byte are kept, and
    the first corrupt tensor is the error (no tensor read after the pool saw it)."""
    import torch as th

    import nncodecs
    from nncodecs.container.reader import Reader
    from nncodecs.integrations.torch import load_state_dict, save_state_dict

    nncodecs.set_threads(2)
    state = {f"layer.{i}.weight": th.randn(64, 8) * (i + 1) for i in range(200)}
    save_state_dict(state, tmp_path / "m.zarr")
    back = load_state_dict(tmp_path / "m.zarr")
    assert list(back) == list(state)
    assert all(th.equal(back[n], t) for n, t in state.items())
    node = tmp_path / "m.zarr" / "layer.20.weight"
    chunk = next(p for p in (node / "c").rglob("*") if p.is_file())
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    seen: list[str] = []
    after: list[str] = []  # reads begun once the corrupt one had failed
    failed = threading.Event()
    real = Reader.read_tensor

    def counted(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        (after if failed.is_set() else seen).append(name)
        try:
            return real(self, name, *args, **kwargs)
        except nncodecs.CorruptDataError:
            failed.set()
            raise

    monkeypatch.setattr(Reader, "read_tensor", counted)
    with pytest.raises(nncodecs.CorruptDataError, match=r"'layer\.20\.weight'"):
        load_state_dict(tmp_path / "m.zarr")
    # (the other thread's reads while layer.20 decoded are timing; none may begin after)
    assert "layer.20.weight" in seen and after == [] and len(seen) < 200


def test_transformers_model_from_a_container_gives_the_same_outputs(
    torch: Any, tmp_path: Path
) -> None:
    import torch as th
    from conftest import optional_import

    transformers = optional_import("transformers")
    from nncodecs.integrations.transformers import (
        containers_to_snapshot,
        load_model,
        snapshot_to_containers,
    )

    model_dir = minilm_path().parent  # config, tokenizer and weights ship in the package
    packed = snapshot_to_containers(model_dir, tmp_path / "packed")
    assert (packed / "model.safetensors.zarr.zip").is_file()
    assert not (packed / "model.safetensors").exists()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    batch = tokenizer(
        ["nncodecs stores weights", "a second sentence"], padding=True, return_tensors="pt"
    )
    original = transformers.AutoModel.from_pretrained(model_dir, local_files_only=True).eval()
    ours = load_model(packed / "model.safetensors.zarr.zip", packed)
    with th.no_grad():
        want = original(**batch).last_hidden_state
        got = ours(**batch).last_hidden_state
    assert th.equal(got, want)
    restored = containers_to_snapshot(packed, tmp_path / "restored")
    import hashlib

    for file in model_dir.rglob("*"):
        if file.is_file() and "__pycache__" not in file.parts:
            back = restored / file.relative_to(model_dir)
            assert (
                hashlib.sha256(back.read_bytes()).digest()
                == hashlib.sha256(file.read_bytes()).digest()
            )


@pytest.mark.parametrize("call", ["load_state_dict", "decompress", "compress"])
def test_bulk_calls_pause_the_garbage_collector(tmp_path: Path, call: str) -> None:
    """No automatic collection while a model's tensors are read or written (full
    collections scanned torch's whole heap: 14% of a load), and the collector is back
    on afterwards."""
    import gc

    if call == "load_state_dict":
        pytest.importorskip("torch")

    import nncodecs
    from nncodecs.formats import decompress
    from nncodecs.formats.safetensors import write_safetensors
    from nncodecs.integrations.torch import load_state_dict

    tensors = {f"t{i}": np.full((8, 8), i, np.float32) for i in range(300)}
    source = tmp_path / "m.safetensors"
    write_safetensors(source, tensors.items())
    compress(source, tmp_path / "m.zarr")
    inside = {"now": False, "collections": 0}
    read, add = nncodecs.Reader.read_tensor, nncodecs.Writer.add_tensor

    def during(method: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            inside["now"] = True
            try:
                return method(*args, **kwargs)
            finally:
                inside["now"] = False

        return wrapped

    def count(phase: str, info: dict) -> None:
        if phase == "start" and inside["now"]:
            inside["collections"] += 1

    before = gc.get_threshold()
    gc.set_threshold(50)  # (a collection every 50 allocations while it is on)
    gc.callbacks.append(count)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(nncodecs.Reader, "read_tensor", during(read))
            mp.setattr(nncodecs.Writer, "add_tensor", during(add))
            if call == "load_state_dict":
                assert len(load_state_dict(tmp_path / "m.zarr")) == 300
            elif call == "decompress":
                decompress(tmp_path / "m.zarr", tmp_path / "back.safetensors")
            else:
                compress(source, tmp_path / "again.zarr")
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*before)
    assert inside["collections"] == 0


@pytest.mark.parametrize("kind", ["zarr", "zarr.zip"])
def test_opening_a_container_sets_off_no_collection(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The zip's directory and the root document of a model of thousands of tensors make
    # hundreds of thousands of objects: the full collections they set off rescanned
    # them (opening 5,000 tensors: 0.17-0.35 s against 0.10-0.13 s without).
    import gc

    import nncodecs
    from nncodecs.container.reader import Reader

    path = tmp_path / f"m.{kind}"
    with nncodecs.Writer(path) as w:
        for i in range(300):
            w.add_tensor(f"t{i}", np.full(4, i, np.float32))
    inside = {"now": False, "collections": 0}
    real = Reader._open

    def opening(self: Any, *args: Any) -> None:
        inside["now"] = True
        try:
            real(self, *args)
        finally:
            inside["now"] = False

    def count(phase: str, info: dict) -> None:
        if phase == "start" and inside["now"]:
            inside["collections"] += 1

    monkeypatch.setattr(Reader, "_open", opening)
    before = gc.get_threshold()
    gc.set_threshold(50)  # (a collection every 50 allocations while it is on)
    gc.callbacks.append(count)
    try:
        with Reader(path) as r:
            assert len(r) == 300 and gc.isenabled()
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*before)
    assert inside["collections"] == 0
