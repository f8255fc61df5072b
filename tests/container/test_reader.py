"""Edges a review of the zarr-free Reader found: names Zarr cannot address, chunk files
that are not files, shard indexes declared otherwise than written, a device load's
host memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nncodecs

RNG = np.random.default_rng(5)


def _doc(target: Path, node: str) -> Path:
    return target / node / "zarr.json"


def _rewrite_root(target: Path, change: object) -> None:
    root = target / "zarr.json"
    doc = json.loads(root.read_text())
    change(doc["consolidated_metadata"]["metadata"])  # type: ignore[operator]
    root.write_text(json.dumps(doc))


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_a_backslash_in_a_name_reads_through_zarr_too(tmp_path: Path, suffix: str) -> None:
    """Zarr reads a backslash in a path as "/": a node holding one read fill values
    through a slice. Names are escaped so that slices and other codecs read right."""
    target = tmp_path / f"m{suffix}"
    w_arr = (RNG.standard_normal((64, 16)) * 0.1).astype(np.float32)
    z_arr = np.arange(300, dtype=np.float32).reshape(30, 10)
    with nncodecs.Writer(target) as w:
        w.add_tensor("x\\a", w_arr)
        w.add_tensor("x\\z", z_arr, codec="zstd")
    with nncodecs.Reader(target) as r:
        assert r.keys() == ["x\\a", "x\\z"]
        assert r["x\\a"][1:3].tobytes() == w_arr[1:3].tobytes()
        assert r.read_tensor("x\\z").tobytes() == z_arr.tobytes()
        r.verify()


def test_an_older_containers_backslash_node_reads_whole_and_refuses_zarr(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    arr = (RNG.standard_normal((64, 16)) * 0.1).astype(np.float32)
    with nncodecs.Writer(target) as w:
        w.add_tensor("x\\a", arr)
    (target / "x%5Ca").rename(target / "x\\a")  # (as nncodecs named the node before)

    def rename(meta: dict) -> None:
        meta["x\\a"] = meta.pop("x%5Ca")

    _rewrite_root(target, rename)
    with nncodecs.Reader(target) as r:
        assert r.read_tensor("x\\a").tobytes() == arr.tobytes()
        with pytest.raises(nncodecs.CorruptDataError, match="cannot address"):
            r["x\\a"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_chunk_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    with nncodecs.Writer(target) as w:
        w.add_tensor("z", np.arange(300, dtype=np.float32).reshape(30, 10), codec="zstd")
        w.add_tensor("w", (RNG.standard_normal((30, 10)) * 0.1).astype(np.float32))
    for node in ("z", "w"):
        chunk = next(p for p in (target / node / "c").rglob("*") if p.is_file())
        chunk.unlink()
        os.mkfifo(chunk)
    child = (
        "import sys, nncodecs\n"
        "r = nncodecs.Reader(sys.argv[1])\n"
        "reads = [lambda: r.read_tensor('z'), lambda: r['z'][0:2], lambda: r.read_tensor('w')]\n"
        "for read in reads:\n"
        "    try:\n"
        "        read()\n"
        "    except nncodecs.CorruptDataError as exc:\n"
        "        print('refused:', exc)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", child, str(target)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("refused:") == 3, run.stdout


@pytest.mark.parametrize("codec", ["auto", "zstd"])
def test_a_shard_index_declared_otherwise_than_written_is_refused(
    tmp_path: Path, codec: str
) -> None:
    """nncodecs reads a shard's index as it wrote it (little-endian); Zarr would read it
    as a forged document declares it (big-endian: offsets past the shard, fill values).
    Both are refused, so no reader gets numbers the data does not hold."""
    target = tmp_path / "m.zarr"
    arr = (RNG.standard_normal((4000, 8)) * 0.1).astype(np.float32)
    with nncodecs.Writer(target, chunk_bytes=1024) as w:
        w.add_tensor("s", arr, codec=codec)

    def forge(doc: dict) -> None:
        index = doc["codecs"][0]["configuration"]["index_codecs"]
        index[0]["configuration"]["endian"] = "big"

    node = _doc(target, "s")
    doc = json.loads(node.read_text())
    assert doc["codecs"][0]["name"] == "sharding_indexed"
    forge(doc)
    node.write_text(json.dumps(doc))
    _rewrite_root(target, lambda meta: forge(meta["s"]))
    with nncodecs.Reader(target) as r:
        for read in (lambda: r.read_tensor("s"), lambda: r["s"][3000:3002], r.verify):
            with pytest.raises(nncodecs.CorruptDataError, match="index"):
                read()


def test_a_device_load_holds_a_few_tensors_on_the_host(tmp_path: Path) -> None:
    """load_state_dict reads ahead a few tensors only: a load to another device must
    not hold the whole model in host memory first."""
    torch = pytest.importorskip("torch")
    from nncodecs.integrations.torch import save_state_dict

    state = {f"t{i}": torch.full((1024, 1024), float(i)) for i in range(60)}  # 4 MiB each
    save_state_dict(state, tmp_path / "m.zarr")
    child = (
        "import resource, sys\n"
        "from nncodecs.integrations.torch import load_state_dict\n"
        "import torch\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "sd = load_state_dict(sys.argv[1], device='meta')\n"
        "assert len(sd) == 60 and sd['t5'].device.type == 'meta'\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path / "m.zarr")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert int(run.stdout.split()[-1]) < 100  # (MiB; the model is 240)
    with pytest.raises(RuntimeError):
        from nncodecs.integrations.torch import load_state_dict

        load_state_dict(tmp_path / "m.zarr", device="no-such-device")


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_a_name_no_file_can_hold_is_refused_when_added(tmp_path: Path, suffix: str) -> None:
    """Refused by add_tensor, not at close() (which abandoned the whole container)."""
    target = tmp_path / f"m{suffix}"
    with nncodecs.Writer(target) as w:
        w.add_tensor("kept", np.ones(4, np.float32))
        for bad in ("a\x00b", "x" * 256, "\udc80"):
            with pytest.raises(ValueError, match=r"cannot be stored|not valid Unicode"):
                w.add_tensor(bad, np.ones(4, np.float32))
        w.add_tensor("y" * 255, np.ones(4, np.float32))
    with nncodecs.Reader(target) as r:
        assert r.keys() == ["kept", "y" * 255]


def test_an_entry_flagged_encrypted_is_corrupt_data_not_a_password_prompt(
    tmp_path: Path,
) -> None:
    # Found by review: zipfile raises a bare RuntimeError ("password required") for an
    # entry whose flags say it is encrypted; nncodecs never writes one.
    path = tmp_path / "enc.zarr.zip"
    with nncodecs.Writer(path) as w:
        w.add_tensor("t", np.ones((50, 30), np.float32))
    data = bytearray(path.read_bytes())
    data[data.index(b"PK\x01\x02") + 8] |= 1  # (the first central record: t's chunk)
    path.write_bytes(bytes(data))
    with (
        nncodecs.Reader(path) as r,
        pytest.raises(nncodecs.CorruptDataError, match="t/c/0/0: an encrypted entry"),
    ):
        r.read_tensor("t")
    with pytest.raises(nncodecs.CorruptDataError, match="an encrypted entry"):
        nncodecs.Writer(path, mode="a")


def test_a_tensor_without_its_chunk_record_is_corrupt_where_all_have_one(
    tmp_path: Path,
) -> None:
    # Found by review: with its "chunks" record removed (as in a container written before
    # records) and a chunk deleted, a tensor read the missing rows as zeros, and verify
    # passed; a container whose root says every tensor has its records refuses it.
    path = tmp_path / "c.zarr"
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    with nncodecs.Writer(path, chunk_bytes=4096) as w:
        w.add_tensor("dense", x)
    for doc in (_doc(path, "dense"),):
        d = json.loads(doc.read_text())
        del d["attributes"]["nncodecs"]["chunks"]
        doc.write_text(json.dumps(d))
    _rewrite_root(path, lambda m: m["dense"]["attributes"]["nncodecs"].pop("chunks"))
    (path / "dense" / "c" / "2" / "0").unlink()
    with nncodecs.Reader(path) as r:
        with pytest.raises(nncodecs.CorruptDataError, match="no record of its chunks"):
            r.read_tensor("dense")
        with pytest.raises(nncodecs.CorruptDataError, match="no record of its chunks"):
            r.verify()


@pytest.mark.parametrize(
    ("kind", "shape", "match"),
    [("coo", [-50, 40], "negative"), ("csr", [5, 4], "needs indptr"), ("csr", [7], "2 dim")],
)
def test_a_sparse_tensor_whose_shape_contradicts_its_parts_is_corrupt(
    tmp_path: Path, kind: str, shape: list, match: str
) -> None:
    # Found by review: verify and numpy reads passed a COO tensor of a negative shape and
    # a CSR one whose shape contradicts its indptr (only SciPy's reads refused them).
    scipy_sparse = pytest.importorskip("scipy.sparse")
    path = tmp_path / "s.zarr"
    m = scipy_sparse.random(50, 40, density=0.1, format=kind, random_state=1, dtype=np.float32)
    with nncodecs.Writer(path) as w:
        if kind == "coo":
            w.add_sparse_coo("s", np.vstack([m.row, m.col]), m.data, m.shape)
        else:
            w.add_sparse_csr("s", m.data, m.indices, m.indptr, m.shape)
    d = json.loads(_doc(path, "s").read_text())
    d["attributes"]["nncodecs"]["shape"] = shape
    _doc(path, "s").write_text(json.dumps(d))
    _rewrite_root(path, lambda m: m["s"]["attributes"]["nncodecs"].__setitem__("shape", shape))
    with nncodecs.Reader(path) as r:
        for call in (lambda: r.read_tensor("s"), r.verify):
            with pytest.raises(nncodecs.CorruptDataError, match=match):
                call()


def test_a_name_of_two_zip_entries_is_corrupt(tmp_path: Path) -> None:
    # Found by review: a zip holding t/c/1/0 twice (the second a copy of another chunk)
    # read whichever the zip library took, and verify passed.
    import zipfile

    path = tmp_path / "d.zarr.zip"
    with nncodecs.Writer(path, chunk_bytes=4096) as w:
        w.add_tensor("t", RNG.standard_normal((64, 64)).astype(np.float32))
    with zipfile.ZipFile(path) as z:
        entries = [(i, z.read(i)) for i in z.infolist()]
    out = tmp_path / "dup.zarr.zip"
    with zipfile.ZipFile(out, "w") as z:
        for info, data in entries:
            z.writestr(info, data)
        z.writestr("t/c/1/0", dict((i.filename, d) for i, d in entries)["t/c/0/0"])
    with (
        nncodecs.Reader(out) as r,
        pytest.raises(nncodecs.CorruptDataError, match="t/c/1/0: two entries of this name"),
    ):
        r.verify()
