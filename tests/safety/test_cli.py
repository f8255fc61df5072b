"""The CLI and formats against careless and hostile input, run as a user runs them.

Each case snapshots the file system around it and checks that nothing outside
the named output was created or changed, that an existing file was changed
only with --force, and that every error is one line naming the path
(docs/safety.md lists these guarantees with the tests that show them).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import optional_import

from nncodecs import Reader, Writer
from nncodecs.formats import read_safetensors, write_safetensors


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nncodecs", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def tree(root: Path) -> dict[str, str]:
    """Every entry under root: its kind and, for files, its sha256 (links not followed)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def changes(before: dict[str, str], after: dict[str, str]) -> set[str]:
    keys = set(before) | set(after)
    return {k for k in keys if before.get(k) != after.get(k)}


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr  # no traceback, no asyncio noise
    assert lines[0].startswith("nncodecs: "), lines
    for word in words:
        assert word in lines[0], (word, lines[0])


def small_model(path: Path, seed: int = 0, prefix: str = "") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    tensors = {
        f"{prefix}a.weight": rng.standard_normal((64, 32)).astype(np.float32),
        f"{prefix}a.bias": rng.standard_normal(32).astype(np.float16),
        f"{prefix}b.ids": np.arange(10, dtype=np.int64),
    }
    write_safetensors(path, tensors.items())
    return tensors


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    small_model(tmp_path / "m.safetensors")
    return tmp_path


def test_an_existing_directory_is_never_emptied(work: Path) -> None:
    victim = work / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    before = tree(work)
    one_line_error(run("compress", "m.safetensors", "-o", "victim", cwd=work), "victim", "--force")
    assert tree(work) == before
    # --force replaces containers only: a directory of other files stays
    r = run("compress", "m.safetensors", "-o", "victim", "--force", cwd=work)
    one_line_error(r, "victim", "not an nncodecs container")
    assert tree(work) == before
    # the current directory, which holds the input
    one_line_error(run("compress", "m.safetensors", "-o", ".", cwd=work), "overwrite the input")
    one_line_error(run("compress", "m.safetensors", "-o", ".", "-f", cwd=work))
    assert tree(work) == before


def test_an_existing_file_is_replaced_only_with_force(work: Path) -> None:
    (work / "out.zarr.zip").write_bytes(b"not mine to lose")
    before = tree(work)
    one_line_error(run("compress", "m.safetensors", "-o", "out.zarr.zip", cwd=work), "exists")
    assert tree(work) == before
    assert run("compress", "m.safetensors", "-o", "out.zarr.zip", "-f", cwd=work).returncode == 0
    assert changes(before, tree(work)) == {"out.zarr.zip"}
    # a container directory is replaced with --force, and only then
    assert run("compress", "m.safetensors", "-o", "d.zarr", "-q", cwd=work).returncode == 0
    before = tree(work)
    one_line_error(run("compress", "m.safetensors", "-o", "d.zarr", cwd=work), "d.zarr")
    assert tree(work) == before
    assert run("compress", "m.safetensors", "-o", "d.zarr", "-f", "-q", cwd=work).returncode == 0
    assert {c.split("/")[0] for c in changes(before, tree(work))} <= {"d.zarr"}
    assert set(os.listdir(work)) == {"m.safetensors", "out.zarr.zip", "d.zarr"}  # no leftovers


def test_decompress_never_replaces_the_source_or_an_existing_file(work: Path) -> None:
    original = (work / "m.safetensors").read_bytes()
    assert run("compress", "m.safetensors", "-q", cwd=work).returncode == 0
    before = tree(work)
    r = run("decompress", "m.safetensors.zarr.zip", cwd=work)
    one_line_error(r, "m.safetensors", "--force")
    assert tree(work) == before
    r = run("decompress", "m.safetensors.zarr.zip", "-f", "-q", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "m.safetensors").read_bytes() == original
    assert set(os.listdir(work)) == {"m.safetensors", "m.safetensors.zarr.zip"}


def test_a_failed_restore_leaves_the_previous_file(work: Path) -> None:
    """A chunk corrupted on disk: the restore fails and the file it would replace stays."""
    assert run("compress", "m.safetensors", "-o", "m.zarr", "-q", cwd=work).returncode == 0
    chunks = [p for p in (work / "m.zarr").rglob("c/*") if p.is_file()]
    biggest = max(chunks, key=lambda p: p.stat().st_size)
    data = bytearray(biggest.read_bytes())
    data[len(data) // 2] ^= 0x40
    biggest.write_bytes(bytes(data))
    before = tree(work)
    r = run("decompress", "m.zarr", "-o", "m.safetensors", "--force", cwd=work)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert tree(work) == before  # the original is whole; no temporary is left


def test_restore_names_never_collide_with_a_source_of_another_format(tmp_path: Path) -> None:
    onnx = optional_import("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    # (a Constant of 1 KiB or more is a tensor; a smaller one stays in the graph's bytes)
    c = helper.make_node(
        "Constant", [], ["c"], value=numpy_helper.from_array(np.arange(300, dtype=np.float32))
    )
    graph = helper.make_graph(
        [c, helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[w],
    )
    onnx.save(helper.make_model(graph), tmp_path / "model.onnx")
    graph_bytes = (tmp_path / "model.onnx").read_bytes()
    assert run("compress", "model.onnx", "-q", cwd=tmp_path).returncode == 0
    # restored as ONNX by default (its own format): never over the source that is there
    one_line_error(run("decompress", "model.onnx.zarr.zip", cwd=tmp_path), "model.onnx")
    assert (tmp_path / "model.onnx").read_bytes() == graph_bytes  # the graph is not lost
    r = run("decompress", "model.onnx.zarr.zip", "-o", "model.safetensors", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    back = read_safetensors(tmp_path / "model.safetensors")
    assert set(back) == {"w", "c"}  # the Constant node's tensor too
    assert np.array_equal(back["c"], np.arange(300, dtype=np.float32))
    r = run("verify", "model.onnx.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0 and "2 tensors" in r.stdout and "the source had 2" in r.stdout
    # convert by the output's suffix: a safetensors file, not a Zarr directory
    r = run("convert", "model.onnx", "-o", "m2.safetensors", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m2.safetensors").is_file()
    assert set(read_safetensors(tmp_path / "m2.safetensors")) == {"w", "c"}


def test_what_cannot_be_kept_is_refused_by_name(tmp_path: Path) -> None:
    onnx = optional_import("onnx")
    from onnx import TensorProto, helper

    strings = helper.make_node(
        "Constant",
        [],
        ["labels"],
        value=helper.make_tensor("labels", TensorProto.STRING, [300], [b"label"] * 300),
    )
    graph = helper.make_graph([strings], "g", [], [])
    onnx.save(helper.make_model(graph), tmp_path / "s.onnx")
    before = tree(tmp_path)
    one_line_error(run("compress", "s.onnx", cwd=tmp_path), "labels", "nothing was written")
    assert tree(tmp_path) == before
    # under 1 KiB, a Constant of strings is the graph's, kept verbatim with it
    small = helper.make_node("Constant", [], ["l"], value_strings=[b"a", b"b"])
    onnx.save(helper.make_model(helper.make_graph([small], "g", [], [])), tmp_path / "l.onnx")
    assert run("compress", "l.onnx", "-q", cwd=tmp_path).returncode == 0
    r = run("decompress", "l.onnx.zarr.zip", "-o", "back-l.onnx", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back-l.onnx").read_bytes() == (tmp_path / "l.onnx").read_bytes()


def test_torch_checkpoints_with_more_than_weights_are_kept_whole(tmp_path: Path) -> None:
    torch = optional_import("torch")
    from nncodecs.integrations.torch import load

    state = {"w": torch.ones(3)}
    checkpoint = {"state_dict": state, "optimizer": {"m": torch.zeros(3)}, "epoch": 4}
    torch.save(checkpoint, tmp_path / "c.pt")
    assert run("compress", "c.pt", "-q", cwd=tmp_path).returncode == 0
    r = run("decompress", "c.pt.zarr.zip", "-o", "back.pt", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back.pt").read_bytes() == (tmp_path / "c.pt").read_bytes()
    back = load(tmp_path / "c.pt.zarr.zip")  # (nothing lost: the epoch, the optimizer)
    assert back["epoch"] == 4 and torch.equal(back["optimizer"]["m"], torch.zeros(3))
    torch.save(state, tmp_path / "sd.pt")
    assert run("compress", "sd.pt", "-q", cwd=tmp_path).returncode == 0
    # restored as torch by default (byte for byte): never over the source that is there
    one_line_error(run("decompress", "sd.pt.zarr.zip", cwd=tmp_path), "sd.pt", "exists")
    r = run("decompress", "sd.pt.zarr.zip", "-o", "sd.safetensors", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "sd.safetensors").is_file()  # sd.pt untouched
    assert set(read_safetensors(tmp_path / "sd.safetensors")) == {"w"}


def test_url_outputs_never_become_local_paths(work: Path) -> None:
    r = run("compress", "m.safetensors", "-o", "memory://bucket/x.zarr", cwd=work)
    assert r.returncode == 0, r.stderr
    assert run("compress", "m.safetensors", "-o", "c.zarr.zip", "-q", cwd=work).returncode == 0
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # never the network
    for args in (
        ("decompress", "c.zarr.zip", "-o", "s3://b/x.safetensors"),
        ("decompress", "c.zarr.zip", "-o", "memory://x.safetensors"),
        ("convert", "m.safetensors", "-o", "s3://b/y.npz"),
        ("convert", "c.zarr.zip", "-o", "memory://y.npz"),
    ):
        one_line_error(run(*args, cwd=work, env=env), "URL")
    assert set(os.listdir(work)) == {"m.safetensors", "c.zarr.zip"}  # no "memory:", "s3:"


def test_a_container_never_takes_a_model_files_name(work: Path) -> None:
    assert run("compress", "m.safetensors", "-o", "c.zarr.zip", "-q", cwd=work).returncode == 0
    before = tree(work)
    for name in ("y.zarr.zip", "y.zarr", "y.onnx", "y.pt"):  # nor a restored file a container's
        one_line_error(run("decompress", "c.zarr.zip", "-o", name, cwd=work), name)
    assert tree(work) == before
    url = f"file://{work / 'back.SAFETENSORS'}"  # a file:// URL is its path; suffixes any case
    assert run("decompress", "c.zarr.zip", "-o", url, "-q", cwd=work).returncode == 0
    assert (work / "back.SAFETENSORS").read_bytes() == (work / "m.safetensors").read_bytes()
    (work / "back.SAFETENSORS").unlink()
    (work / "c.zarr.zip").unlink()
    before = tree(work)
    one_line_error(run("compress", "m.safetensors", "-o", "y.safetensors", cwd=work), "convert")
    one_line_error(run("convert", "m.safetensors", "-o", "y.onnx", cwd=work), "y.onnx")
    one_line_error(run("convert", "m.safetensors", "-o", "y.pt", cwd=work), "y.pt")
    assert tree(work) == before


def test_a_failed_run_leaves_no_directory_it_made(work: Path) -> None:
    (work / "bad.safetensors").write_bytes(b"\x10" + b"\0" * 7 + b"{}")
    before = tree(work)
    one_line_error(run("compress", "bad.safetensors", "-o", "n1/n2/x.zarr.zip", cwd=work))
    one_line_error(run("convert", "bad.safetensors", "-o", "n1/n2/x.npz", cwd=work))
    assert tree(work) == before
    # a run that fails while the container is written (a dtype nncodecs does not store)
    np.savez(work / "c.npz", ok=np.ones(3, np.float32), bad=np.ones(3, np.complex64))
    before = tree(work)
    # (the command creates no folder for its output, as zstd; the API makes missing parents)
    one_line_error(run("compress", "c.npz", "-o", "n1/n2/x.zarr.zip", cwd=work), "n1/n2")
    from nncodecs.formats import compress

    for out in ("n1/n2/x.zarr.zip", "n1/n2/x.zarr"):
        with pytest.raises(TypeError, match="complex64"):
            compress(work / "c.npz", work / out)
    assert tree(work) == before
    (work / "empty").mkdir()  # a file output onto an (empty) directory
    assert run("compress", "m.safetensors", "-o", "c.zarr.zip", "-q", cwd=work).returncode == 0
    one_line_error(run("decompress", "c.zarr.zip", "-o", "empty", cwd=work), "empty folder")
    r = run("decompress", "c.zarr.zip", "-o", "empty", "--force", cwd=work)
    one_line_error(r, "a directory")


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_an_interrupt_is_one_line(tmp_path: Path, real_weights: dict, signame: str) -> None:
    import shutil
    import signal
    import time

    from nncodecs.datasets import minilm_path

    shutil.copy(minilm_path(), tmp_path / "model.safetensors")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nncodecs", "compress", "model.safetensors", "-o", "k.zarr"],
        cwd=tmp_path, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not any(".k.zarr.nncodecs-" in n for n in os.listdir(tmp_path)):  # writing now
        assert time.monotonic() < deadline and proc.poll() is None, "never started writing"
        time.sleep(0.02)
    time.sleep(0.05)
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=120)
    left = sorted(os.listdir(tmp_path))
    # never a temporary or a lock, whenever the signal lands
    assert left in (["model.safetensors"], ["k.zarr", "model.safetensors"]), left
    if proc.returncode == 130:  # interrupted: one line
        assert err.strip() == "nncodecs: interrupted", err
    else:  # it finished first (a signal during Python's own exit ends it as the signal)
        assert proc.returncode in (0, -getattr(signal, signame)), err
        assert left == ["k.zarr", "model.safetensors"]
    if "k.zarr" in left:  # published: complete (an interrupt after the commit keeps it)
        with Reader(tmp_path / "k.zarr") as r:
            assert r.keys() == list(real_weights)
            for name in ("embeddings.word_embeddings.weight", r.keys()[-1]):
                np.testing.assert_array_equal(r.read_tensor(name), real_weights[name])


def forged_container(path: Path, records: Any, **extra: str) -> None:
    with Writer(path) as w:
        w.add_tensor("a", np.arange(4, dtype=np.float32))
        w.metadata["source.format"] = "safetensors"
        w.metadata["source.files"] = json.dumps(records)
        w.metadata["source.layout"] = "directory"
        w.metadata.update(extra)


def record(name: str, header: Any = None) -> dict[str, Any]:
    header = header or {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}
    return {"file": name, "header": json.dumps(header), "exact": True, "tensors": ["a"]}


@pytest.mark.parametrize(
    "records",
    [
        [record("/tmp/nncodecs-evil.safetensors")],
        [record("../evil.safetensors")],
        [record("sub/../../evil.safetensors")],
        [record("x.safetensors"), record("x.safetensors")],
        [
            record(
                "big.safetensors",
                {"a": {"dtype": "F32", "shape": [4], "data_offsets": [2**40, 2**40 + 16]}},
            )
        ],
        [record("model.safetensors.index.json")],
        "not a list",
    ],
    ids=["absolute", "dotdot", "nested-dotdot", "duplicate", "offset-2^40", "index-name", "junk"],
)
def test_paths_and_offsets_from_a_container_are_data(tmp_path: Path, records: Any) -> None:
    box = tmp_path / "box"
    box.mkdir()
    forged_container(box / "c.zarr", records)
    before = tree(tmp_path)
    r = run("decompress", "c.zarr", "-o", "out", cwd=box)
    one_line_error(r)
    assert tree(tmp_path) == before
    assert not Path("/tmp/nncodecs-evil.safetensors").exists()


def test_shard_index_entries_are_data_and_links_stay_inside(tmp_path: Path) -> None:
    outside = tmp_path / "outside.safetensors"
    small_model(outside)
    snap = tmp_path / "snap"
    snap.mkdir()
    small_model(snap / "part.safetensors", seed=1, prefix="p.")
    index = {"weight_map": {"a.weight": "../outside.safetensors"}}
    (snap / "model.safetensors.index.json").write_text(json.dumps(index))
    before = tree(tmp_path)
    one_line_error(run("compress", "snap", "-o", "s.zarr.zip", cwd=tmp_path), "not a plain")
    assert tree(tmp_path) == before
    # a link that leads outside the input directory
    (snap / "model.safetensors.index.json").unlink()
    (snap / "evil.safetensors").symlink_to(outside)
    before = tree(tmp_path)
    one_line_error(run("compress", "snap", "-o", "s.zarr.zip", cwd=tmp_path), "outside")
    assert tree(tmp_path) == before
    # a link inside the directory is followed
    (snap / "evil.safetensors").unlink()
    (snap / "alias.safetensors").symlink_to("part.safetensors")
    (snap / "part.safetensors").rename(snap / "real.bin")
    (snap / "alias.safetensors").unlink()
    (snap / "alias.safetensors").symlink_to("real.bin")
    assert run("compress", "snap", "-o", "s.zarr.zip", "-q", cwd=tmp_path).returncode == 0


def test_hf_cache_snapshot_links_into_its_blobs_are_followed(tmp_path: Path) -> None:
    repo = tmp_path / "models--org--m"
    (repo / "blobs").mkdir(parents=True)
    small_model(repo / "blobs" / "abc123")
    snap = repo / "snapshots" / "rev1"
    snap.mkdir(parents=True)
    (snap / "model.safetensors").symlink_to("../../blobs/abc123")
    r = run("compress", str(snap), "-o", "m.zarr.zip", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with Reader(tmp_path / "m.zarr.zip") as rd:
        assert len(rd) == 3


def test_mirroring_a_snapshot_follows_no_link_outside(tmp_path: Path) -> None:
    from nncodecs.integrations.transformers import snapshot_to_containers

    (tmp_path / "secret.txt").write_text("not to be copied")
    snap = tmp_path / "snap"
    snap.mkdir()
    small_model(snap / "model.safetensors")
    (snap / "config.json").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(ValueError, match="outside the input directory"):
        snapshot_to_containers(snap, tmp_path / "mirror")
    assert not (tmp_path / "mirror").exists()
    assert sorted(os.listdir(tmp_path)) == ["secret.txt", "snap"]


@pytest.mark.parametrize("kind", ["fifo", "socket", "dangling-link", "dir-link"])
def test_mirroring_a_snapshot_refuses_what_compress_refuses(tmp_path: Path, kind: str) -> None:
    """(issue 36, N8) snapshot_to_containers once skipped these silently: the mirror then
    lacked a file of the snapshot, with no word."""
    import socket

    from nncodecs.integrations.transformers import snapshot_to_containers

    snap = tmp_path / "snap"
    snap.mkdir()
    small_model(snap / "model.safetensors")
    (snap / "sub").mkdir()
    odd = snap / "odd"
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(odd))
        sock.close()
    elif kind == "dangling-link":
        odd.symlink_to("gone.txt")
    else:
        odd.symlink_to("sub")
    match = "a link to a directory" if kind == "dir-link" else "not a regular file"
    with pytest.raises(ValueError, match=match):
        snapshot_to_containers(snap, tmp_path / "mirror")
    assert not (tmp_path / "mirror").exists()
    r = run("compress", str(snap), "-o", "m.zarr.zip", "-q", cwd=tmp_path)  # (compress alike)
    assert r.returncode != 0 and match in r.stderr, r.stderr


def test_merge_of_different_files_restores_both(tmp_path: Path) -> None:
    a = small_model(tmp_path / "a.safetensors", seed=1, prefix="x.")
    b = small_model(tmp_path / "b.safetensors", seed=2, prefix="y.")
    for name in ("a", "b"):
        r = run("compress", f"{name}.safetensors", "-q", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    r = run("merge", "a.safetensors.zarr.zip", "b.safetensors.zarr.zip", "-o", "ab.zarr",
            cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert run("decompress", "ab.zarr", "-o", "restored", cwd=tmp_path).returncode == 0
    for name in ("a", "b"):
        assert (tmp_path / "restored" / f"{name}.safetensors").read_bytes() == (
            tmp_path / f"{name}.safetensors"
        ).read_bytes()
    assert set(read_safetensors(tmp_path / "restored" / "a.safetensors")) == set(a)
    assert set(read_safetensors(tmp_path / "restored" / "b.safetensors")) == set(b)
    r = run("verify", "ab.zarr", cwd=tmp_path)
    assert "6 tensors" in r.stdout and "the source had 6" in r.stdout


def test_dask_containers_restore_byte_identical(work: Path) -> None:
    r = run("compress", "m.safetensors", "--dask", "-o", "m.zarr", "-q", cwd=work)
    assert r.returncode == 0, r.stderr
    r = run("decompress", "m.zarr", "-o", "back.safetensors", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "back.safetensors").read_bytes() == (work / "m.safetensors").read_bytes()
    before = tree(work)  # and an existing output is refused there too
    one_line_error(run("compress", "m.safetensors", "--dask", "-o", "m.zarr", cwd=work), "exists")
    assert tree(work) == before


@pytest.mark.parametrize(
    ("forge", "named"),
    [
        ({"crc32c": "00000000"}, "crc32c"),  # what every container records now
        ({"crc32c": 12345}, "crc32c record"),  # a damaged record must not turn it off
        ({"crc32c": ["0"]}, "crc32c record"),
        ({"crc32c": "not-hex!"}, "crc32c record"),
        ({"crc32c": None, "sha256": "0" * 64}, "sha256"),  # older ones recorded the sha256
    ],
)
def test_a_restore_is_checked_against_the_source_digest(
    work: Path, forge: dict, named: str
) -> None:
    assert run("compress", "m.safetensors", "-o", "m.zarr", "-q", cwd=work).returncode == 0
    meta_path = work / "m.zarr" / "zarr.json"
    doc = json.loads(meta_path.read_text())
    records = json.loads(doc["attributes"]["nncodecs"]["metadata"]["source.files"])
    assert "crc32c" in records[0] and "sha256" not in records[0]
    for key, value in forge.items():
        if value is None:
            del records[0][key]
        else:
            records[0][key] = value
    doc["attributes"]["nncodecs"]["metadata"]["source.files"] = json.dumps(records)
    meta_path.write_text(json.dumps(doc))
    (work / "m.zarr" / "zarr.json").chmod(0o644)
    r = run("decompress", "m.zarr", "-o", "back.safetensors", cwd=work)
    one_line_error(r, named)
    assert not (work / "back.safetensors").exists()


def test_usage_errors_and_version(work: Path) -> None:
    r = run("compress", "m.safetensors", "--chunk-bytes", "-5", cwd=work)
    assert r.returncode == 2 and "--chunk-bytes" in r.stderr
    r = run("compress", "m.safetensors", "--threads", "0", cwd=work)
    assert r.returncode == 2 and "--threads" in r.stderr
    r = run("--version", cwd=work)
    assert r.returncode == 0 and r.stdout.startswith("nncodecs ")
    r = run("compress", "--help", cwd=work)
    for option in ("--codec", "--threads", "--chunk-bytes", "--force", "--dask", "--output"):
        assert option in r.stdout
    for fmt in ("safetensors", "GGUF", "npz", "torch", "ONNX", "ztensor"):
        assert fmt in r.stdout  # the one list of formats
    one_line_error(run("info", "missing.safetensors", cwd=work), "missing.safetensors")
    (work / "junk.zip").write_bytes(b"PK\x03\x04" + b"\0" * 40)
    one_line_error(run("info", "junk.zip", cwd=work), "junk.zip")


def test_info_columns_stay_aligned(tmp_path: Path) -> None:
    with Writer(tmp_path / "c.zarr") as w:  # tiny tensors: ratios far above 100
        w.add_tensor("t", np.zeros(1, np.int8))
        w.add_tensor("a.much.longer.name.of.a.tensor", np.ones((300, 300), np.float32))
    r = run("info", "c.zarr", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()[:3]
    starts = {line.index("nncodecs.") for line in lines[1:]} | {lines[0].index("codec")}
    assert len(starts) == 1, r.stdout
    assert any(float(x) >= 100 for x in lines[1].split() if x.replace(".", "").isdigit())


def test_stale_temporaries_of_dead_writers_only_are_removed(work: Path) -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # a pid that no longer runs
    dead = work / f".out.zarr.zip.nncodecs-{pid}.tmp"
    dead.mkdir()
    (dead / "half.bin").write_bytes(b"x")
    alive = work / f".out.zarr.zip.nncodecs-{os.getpid()}.tmp"  # a live writer's
    alive.write_bytes(b"y")
    other = work / f".other.nncodecs-{pid}.tmp"  # another output's
    other.write_bytes(b"z")
    mine = work / ".out.zarr.zip.nncodecs-x.tmp"  # not the pattern: not nncodecs'
    mine.write_bytes(b"w")
    r = run("compress", "m.safetensors", "-o", "out.zarr.zip", "-q", cwd=work)
    assert r.returncode == 0, r.stderr
    assert not dead.exists() and alive.exists() and other.exists() and mine.exists()


def write_raw_safetensors(path: Path, header: dict, data: bytes, pad: int = 0) -> None:
    raw = json.dumps(header).encode() + b" " * pad
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)


@pytest.mark.parametrize("kind", ["trailing", "leading", "between", "shared"])
def test_safetensors_layouts_that_do_not_tile_come_back_byte_identical(
    tmp_path: Path, kind: str
) -> None:
    a = np.arange(8, dtype=np.float32).tobytes()
    b = np.arange(4, dtype=np.int16).tobytes()
    spans = {"trailing": ([0, 32], [32, 40], 12), "leading": ([16, 48], [48, 56], 0),
             "between": ([0, 32], [40, 48], 0), "shared": ([0, 32], [0, 32], 0)}[kind]  # fmt: skip
    (sa, sb, tail) = spans
    header = {"a": {"dtype": "F32", "shape": [8], "data_offsets": sa}}
    if kind == "shared":
        header["b"] = {"dtype": "F32", "shape": [8], "data_offsets": sb}
        data = a
    else:
        header["b"] = {"dtype": "I16", "shape": [4], "data_offsets": sb}
        data = bytearray(max(sa[1], sb[1]) + tail)
        data[sa[0] : sa[1]] = a
        data[sb[0] : sb[1]] = b
        for i in range(len(data)):  # the bytes outside the tensors are not zeros
            if not (sa[0] <= i < sa[1] or sb[0] <= i < sb[1]):
                data[i] = 0xA5
        data = bytes(data)
    write_raw_safetensors(tmp_path / "h.safetensors", header, data)
    assert run("compress", "h.safetensors", "-q", cwd=tmp_path).returncode == 0
    r = run("decompress", "h.safetensors.zarr.zip", "-o", "back.safetensors", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back.safetensors").read_bytes() == (tmp_path / "h.safetensors").read_bytes()


def test_a_shard_index_must_describe_every_shard(tmp_path: Path) -> None:
    snap = tmp_path / "s"
    snap.mkdir()
    small_model(snap / "one.safetensors", seed=1, prefix="p.")
    small_model(snap / "two.safetensors", seed=2, prefix="q.")
    wm = {f"p.{n}": "one.safetensors" for n in ("a.weight", "a.bias", "b.ids")}
    (snap / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    before = tree(tmp_path)
    one_line_error(run("compress", "s", "-o", "s.zarr.zip", cwd=tmp_path), "two.safetensors")
    wm.update({f"q.{n}": "two.safetensors" for n in ("a.bias", "b.ids")})
    wm["q.a.weight"] = "one.safetensors"  # a tensor mapped to the wrong shard
    (snap / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    before = tree(tmp_path)
    one_line_error(run("compress", "s", "-o", "s.zarr.zip", cwd=tmp_path), "q.a.weight")
    assert tree(tmp_path) == before
    # an index that is a link to a file outside the directory
    (tmp_path / "idx.json").write_text((snap / "model.safetensors.index.json").read_text())
    (snap / "model.safetensors.index.json").unlink()
    (snap / "model.safetensors.index.json").symlink_to(tmp_path / "idx.json")
    one_line_error(run("compress", "s", "-o", "s.zarr.zip", cwd=tmp_path), "outside")


def test_merge_of_files_sharing_a_name_restores_both(tmp_path: Path) -> None:
    for d, seed in (("a", 1), ("b", 2)):
        (tmp_path / d).mkdir()
        small_model(tmp_path / d / "model.safetensors", seed=seed, prefix=f"{d}.")
        r = run("compress", f"{d}/model.safetensors", "-o", f"{d}.zarr.zip", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    r = run("merge", "a.zarr.zip", "b.zarr.zip", "-o", "ab.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert run("decompress", "ab.zarr.zip", "-o", "out", cwd=tmp_path).returncode == 0
    for i, d in ((1, "a"), (2, "b")):
        back = (tmp_path / "out" / f"{i}-model.safetensors").read_bytes()
        assert back == (tmp_path / d / "model.safetensors").read_bytes()


def test_onnx_subgraphs_may_reuse_names(tmp_path: Path) -> None:
    onnx = optional_import("onnx")
    from onnx import TensorProto, helper, numpy_helper

    def branch(value: float) -> Any:
        c = helper.make_node("Constant", [], ["t"], value=numpy_helper.from_array(
            np.full(300, value, np.float32)))  # fmt: skip
        out = helper.make_tensor_value_info("t", TensorProto.FLOAT, [300])
        return helper.make_graph([c], f"b{value}", [], [out])

    node = helper.make_node("If", ["cond"], ["y"], name="choose",
                            then_branch=branch(1.0), else_branch=branch(2.0))  # fmt: skip
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [300])],
    )  # fmt: skip
    onnx.save(helper.make_model(graph), tmp_path / "if.onnx")
    assert run("compress", "if.onnx", "-q", cwd=tmp_path).returncode == 0
    with Reader(tmp_path / "if.onnx.zarr.zip") as r:
        assert sorted(r.keys()) == ["choose.else_branch/t", "choose.then_branch/t"]
        assert r.read_tensor("choose.else_branch/t")[0] == 2.0


def test_a_forged_npz_header_allocates_nothing(tmp_path: Path) -> None:
    import io
    import zipfile

    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        head, {"descr": "<f4", "fortran_order": False, "shape": (10**11,)}
    )
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w") as z:
        z.writestr("w.npy", b"\x93NUMPY\x01\x00" + head.getvalue()[8:] + b"\0" * 16)
    before = tree(tmp_path)
    one_line_error(run("compress", "bomb.npz", cwd=tmp_path), "bomb.npz", "declares")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_a_corrupt_raw_or_zstd_tensor_never_reaches_an_output(work: Path, codec: str) -> None:
    r = run("compress", "m.safetensors", "-o", "f.zarr", "--codec", codec, "-q", cwd=work)
    assert r.returncode == 0, r.stderr
    chunk = max((p for p in (work / "f.zarr" / "a.weight").rglob("*") if p.name != "zarr.json"
                 and p.is_file()), key=lambda p: p.stat().st_size)  # fmt: skip
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x55
    chunk.write_bytes(bytes(data))
    before = tree(work)
    for args in (
        ("decompress", "f.zarr", "-o", "f.npz"),
        ("convert", "f.zarr", "-o", "f2.zarr"),
        ("merge", "f.zarr", "-o", "f3.zarr.zip"),
        ("convert", "f.zarr", "-o", "f.npz"),
    ):
        r = run(*args, cwd=work)
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
        assert "a.weight" in r.stderr or "zstd" in r.stderr, r.stderr
    assert tree(work) == before


def test_a_corrupt_shard_index_is_one_line_every_time(tmp_path: Path) -> None:
    # Zarr's loop is left with pending chunk reads when one fails; at exit their
    # coroutines used to print "Event loop is closed" tracebacks (about one run in
    # three on a 2-core machine), so the run is repeated.
    import ml_dtypes

    big = np.random.default_rng(0).standard_normal((40000, 64)).astype(ml_dtypes.bfloat16)
    with Writer(tmp_path / "c.zarr", chunk_bytes=64 * 1024) as w:
        w.add_tensor("big", big)
    shards = sorted((tmp_path / "c.zarr" / "big" / "c").rglob("*"))
    shard = [p for p in shards if p.is_file()][1]
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1  # the index's CRC32C
    shard.write_bytes(bytes(data))
    for _ in range(6):
        r = run("decompress", "c.zarr", "-o", "x.npz", cwd=tmp_path)
        one_line_error(r, "c.zarr")
        assert not (tmp_path / "x.npz").exists()
