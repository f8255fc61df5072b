"""Files kept beside the tensors: a snapshot directory comes back whole (config, tokenizer,
subdirectories), in the Hugging Face cache layout too, and loads into transformers from
the container alone."""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import optional_import
from harness import same_bits

from nncodecs import CorruptDataError, Reader, Writer
from nncodecs.container import merge
from nncodecs.datasets import minilm_path


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nncodecs", *args], cwd=cwd, capture_output=True, text=True
    )


def tree(root: Path) -> dict[str, str]:
    """Every regular file under ``root`` (links followed) by relative path: its sha256."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_writer_keeps_files_and_reader_reads_them(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"m{suffix}"
    big = np.random.default_rng(0).integers(0, 256, 5 << 20, dtype=np.uint8).tobytes()
    files = {"config.json": b'{"a": 1}', "sub/dir/vocab.txt": b"x\n" * 1000, "empty": b"",
             "big.bin": big, ".gitattributes": b"*.bin lfs"}  # fmt: skip
    with Writer(path) as w:
        w.add_tensor("w", np.ones((8, 8), np.float32))
        for name, data in files.items():
            w.add_file(name, data)
        with pytest.raises(ValueError, match="already"):
            w.add_file("config.json", b"again")
        for bad in ("", "/abs", "../up", "a/../b", "a//b", "a\\b", "./a", "nul\0"):
            with pytest.raises(ValueError, match="kept file"):
                w.add_file(bad, b"x")
    with Reader(path) as r:
        assert r.keys() == ["w"] and len(r) == 1  # not tensors
        assert r.files() == list(files)
        for name, data in files.items():
            assert r.read_file(name) == data
        with pytest.raises(KeyError):
            r.read_file("missing.json")
        r.verify()
    with Writer(path, mode="a") as w:  # appended to, the kept files stay
        w.add_file("added.txt", b"later")
        w.add_tensor("v", np.zeros(3, np.float32))
    with Reader(path) as r:
        assert r.keys() == ["w", "v"] and r.files() == [*files, "added.txt"]
        assert r.read_file("big.bin") == big


def test_other_zarr_readers_see_tensors_only(tmp_path: Path) -> None:
    xr = optional_import("xarray")
    path = tmp_path / "m.zarr"
    with Writer(path) as w:
        w.add_tensor("w", np.arange(12, dtype=np.float32).reshape(3, 4))
        w.add_file("config.json", b"{}")
    assert set(xr.open_zarr(path, consolidated=True).data_vars) == {"w"}


def test_a_damaged_kept_file_is_reported_by_name(tmp_path: Path) -> None:
    path = tmp_path / "m.zarr"
    with Writer(path, codec="raw") as w:
        w.add_tensor("w", np.ones(4, np.float32))
        w.add_file("tokenizer.json", b"t" * 4096)
    chunk = path / "_files" / "0" / "c" / "0"
    chunk.chmod(0o644)
    raw = bytearray(chunk.read_bytes())
    raw[100] ^= 1
    chunk.write_bytes(bytes(raw))
    with Reader(path) as r, pytest.raises(CorruptDataError, match=r"tokenizer\.json"):
        r.verify()


@pytest.mark.parametrize(
    "files", [{"../x": "_files/0"}, {"a": "w"}, {"a": "_files/7"}, ["a"], {"a": "_files/x"}]
)
def test_forged_records_of_kept_files_are_refused(tmp_path: Path, files: object) -> None:
    path = tmp_path / "m.zarr"
    with Writer(path) as w:
        w.add_tensor("w", np.ones(4, np.float32))
        w.add_file("a", b"data")
    meta = path / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["nncodecs"]["files"] = files
    meta.chmod(0o644)
    meta.write_text(json.dumps(doc))
    with pytest.raises(CorruptDataError):
        Reader(path)


def test_merge_keeps_files_once_and_refuses_different_ones(tmp_path: Path) -> None:
    for name, tensor, cfg in (("a", "x", b"{}"), ("b", "y", b"{}"), ("c", "z", b"{1}")):
        with Writer(tmp_path / f"{name}.zarr") as w:
            w.add_tensor(tensor, np.ones(2, np.float32))
            w.add_file("config.json", cfg)
    merge([tmp_path / "a.zarr", tmp_path / "b.zarr"], tmp_path / "ab.zarr")
    with Reader(tmp_path / "ab.zarr") as r:
        assert r.keys() == ["x", "y"] and r.files() == ["config.json"]
    with pytest.raises(ValueError, match=r"config\.json"):
        merge([tmp_path / "a.zarr", tmp_path / "c.zarr"], tmp_path / "ac.zarr")


def snapshot(tmp_path: Path) -> Path:
    """A copy of the model's directory as the package ships it (config, tokenizer,
    1_Pooling/, a hidden .gitattributes, model.safetensors)."""
    snap = tmp_path / "all-MiniLM-L6-v2"
    shutil.copytree(minilm_path().parent, snap, ignore=shutil.ignore_patterns("__pycache__"))
    return snap


def test_cli_restores_a_snapshot_directory_whole(real_weights: dict, tmp_path: Path) -> None:
    snap = snapshot(tmp_path)
    want = tree(snap)
    assert {"config.json", "tokenizer.json", "1_Pooling/config.json"} <= set(want)
    r = run("compress", snap.name, "-o", "m.zarr.zip", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run("info", "m.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0 and f"{len(want) - 1} kept files" in r.stdout, r.stdout
    assert run("verify", "m.zarr.zip", cwd=tmp_path).returncode == 0
    r = run("decompress", "m.zarr.zip", "-o", "back", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert tree(tmp_path / "back") == want


def test_huggingface_cache_layout(real_weights: dict, tmp_path: Path) -> None:
    """A model in the Hugging Face cache (blobs, and a snapshot of links to them), found
    by huggingface_hub's own cache lookup with nothing downloaded, comes back whole."""
    hub = optional_import("huggingface_hub")
    src = snapshot(tmp_path)
    repo = tmp_path / "cache" / "models--sentence-transformers--all-MiniLM-L6-v2"
    rev = "0123456789abcdef0123456789abcdef01234567"
    snap = repo / "snapshots" / rev
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    for file in sorted(src.rglob("*")):
        if file.is_file():
            data = file.read_bytes()
            blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
            blob.write_bytes(data)
            link = snap / file.relative_to(src)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
    found = hub.snapshot_download(
        "sentence-transformers/all-MiniLM-L6-v2", cache_dir=tmp_path / "cache",
        local_files_only=True,
    )  # fmt: skip
    assert Path(found) == snap
    r = run("compress", found, "-o", "m.zarr.zip", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert run("decompress", "m.zarr.zip", "-o", "back", cwd=tmp_path).returncode == 0
    assert tree(tmp_path / "back") == tree(src)
    assert not any(p.is_symlink() for p in (tmp_path / "back").rglob("*"))


def test_from_pretrained_from_the_container_alone(real_weights: dict, tmp_path: Path) -> None:
    th = optional_import("torch")
    transformers = optional_import("transformers")
    from nncodecs.formats import compress
    from nncodecs.integrations.transformers import from_pretrained

    snap = snapshot(tmp_path)
    compress(snap, tmp_path / "m.zarr.zip")
    shutil.rmtree(snap)  # nothing but the container
    model = from_pretrained(tmp_path / "m.zarr.zip")
    original = transformers.AutoModel.from_pretrained(minilm_path().parent, local_files_only=True)
    ids = th.tensor([[101, 7570, 2003, 1037, 6251, 102]])
    with th.no_grad():
        assert th.equal(model(input_ids=ids).last_hidden_state,
                        original.eval()(input_ids=ids).last_hidden_state)  # fmt: skip
    state = model.state_dict()
    assert same_bits(state["encoder.layer.0.attention.self.query.weight"].numpy(),
                     real_weights["encoder.layer.0.attention.self.query.weight"])  # fmt: skip
    # config attributes among the keyword arguments go to the config, as in transformers
    hidden = from_pretrained(tmp_path / "m.zarr.zip", output_hidden_states=True)
    assert hidden.config.output_hidden_states
    with Writer(tmp_path / "bare.zarr") as w:
        w.add_tensor("w", np.ones(2, np.float32))
    with pytest.raises(ValueError, match=r"no config\.json"):
        from_pretrained(tmp_path / "bare.zarr")


def test_what_the_second_review_found(tmp_path: Path) -> None:
    """Names that could never be restored side by side refused when added; a directory
    link, a FIFO, an unreadable file refused before anything is written; a kept-file map
    that lost entries refused at restore; errors name a kept file as one."""
    with Writer(tmp_path / "n.zarr") as w:
        w.add_tensor("t", np.ones(2, np.float32))
        w.add_file("a", b"1")
        for bad in ("a/b", "x" * 256, "d/" + "y" * 256):
            with pytest.raises(ValueError, match="kept file"):
                w.add_file(bad, b"2")
        w.add_file("b/c", b"3")
        with pytest.raises(ValueError, match="kept file"):
            w.add_file("b", b"4")
    with Reader(tmp_path / "n.zarr") as r:
        assert ("file", "a") not in r and r.files() == ["a", "b/c"]

    snap = tmp_path / "snap"
    snap.mkdir()
    from nncodecs.formats.safetensors import write_safetensors

    write_safetensors(snap / "model.safetensors", [("w", np.ones((4, 4), np.float32))])
    (snap / "config.json").write_text("{}")
    (snap / "sub").mkdir()
    (snap / "sub" / "x.txt").write_text("x")
    (snap / "linked").symlink_to("sub")
    r = run("compress", "snap", "-o", "s.zarr.zip", cwd=tmp_path)
    assert r.returncode == 1 and "a link to a directory" in r.stderr, r.stderr
    (snap / "linked").unlink()
    os.mkfifo(snap / "fifo")
    r = run("compress", "snap", "-o", "s.zarr.zip", cwd=tmp_path)
    assert r.returncode == 1 and "not a regular file" in r.stderr, r.stderr
    (snap / "fifo").unlink()
    assert not (tmp_path / "s.zarr.zip").exists()
    r = run("compress", "snap", "-o", "s.zarr", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run("verify", "s.zarr", cwd=tmp_path)
    assert r.returncode == 0 and "2 kept files" in r.stdout, r.stdout
    meta = tmp_path / "s.zarr" / "zarr.json"
    original = meta.read_text()
    doc = json.loads(original)
    files = doc["attributes"]["nncodecs"]["files"]
    files.pop("config.json")
    meta.chmod(0o644)
    meta.write_text(json.dumps(doc))
    # (issue 36, N4: the array whose record is gone is found, by verify and decompress,
    # and with the file count edited too, nothing is dropped silently)
    for edit_count in (False, True):
        if edit_count:
            doc["attributes"]["nncodecs"]["metadata"]["source.kept_files"] = "1"
            meta.write_text(json.dumps(doc))
        for cmd in (("verify", "s.zarr"), ("decompress", "s.zarr", "-o", "back")):
            r = run(*cmd, cwd=tmp_path)
            assert r.returncode == 1 and "has no record" in r.stderr, (cmd, r.stderr)
        assert not (tmp_path / "back").exists()
    meta.write_text(original)
    chunk = tmp_path / "s.zarr" / "_files" / "1" / "c" / "0"
    chunk.chmod(0o644)
    chunk.write_bytes(b"\0" * len(chunk.read_bytes()))
    with Reader(tmp_path / "s.zarr") as rd, pytest.raises(CorruptDataError, match="kept file"):
        rd.read_file("sub/x.txt")


def test_archive_keeps_a_snapshot_s_other_files(tmp_path: Path) -> None:
    """``archive`` of a snapshot directory keeps its config and tokenizer as compress
    does: the directory comes back whole."""
    from nncodecs import archive
    from nncodecs.formats import decompress
    from nncodecs.formats.safetensors import write_safetensors

    snap = tmp_path / "snap"
    (snap / "sub").mkdir(parents=True)
    write_safetensors(snap / "model.safetensors", [("w", np.arange(12, dtype=np.float32))])
    (snap / "config.json").write_text('{"model_type": "bert"}')
    (snap / "sub" / "tok.txt").write_bytes(b"a b c\n" * 100)
    archive(str(snap), str(tmp_path / "c.zarr"), scheduler="sync", progress=False)
    decompress(tmp_path / "c.zarr", tmp_path / "back")
    for rel in ("model.safetensors", "config.json", "sub/tok.txt"):
        assert (tmp_path / "back" / rel).read_bytes() == (snap / rel).read_bytes(), rel


def test_a_large_kept_file_restores_and_verifies_in_bounded_memory(tmp_path: Path) -> None:
    """(issue 36, N2) Kept files were restored and verified whole in memory: a small
    container holding a large kept file peaked at that file's size. They now stream a
    window of chunks at a time, as tensors do. Peaks measured in fresh processes."""
    snap = tmp_path / "snap"
    snap.mkdir()
    from nncodecs.formats.safetensors import write_safetensors

    write_safetensors(snap / "model.safetensors", [("w", np.ones((4, 4), np.float32))])
    size = 384 << 20
    with (snap / "blob.bin").open("wb") as f:  # (incompressible: stored as it is)
        for i in range(size >> 24):
            f.write(np.random.default_rng(i).integers(0, 256, 1 << 24, np.uint8).tobytes())
    assert run("compress", "snap", "-o", "s.zarr", "-q", cwd=tmp_path).returncode == 0
    peaks = {}
    for cmd in (("verify", "s.zarr", "-q"), ("decompress", "s.zarr", "-o", "back", "-q")):
        # (the peak of anonymous memory, sampled: chunk files read through a mapping
        # count in the resident size as page cache, which the kernel takes back at will)
        code = (
            "import runpy, sys, threading, time\n"
            "peak, done = [0], threading.Event()\n"
            "def anon():\n"
            "    for line in open('/proc/self/status'):\n"
            "        if line.startswith('RssAnon:'):\n"
            "            return int(line.split()[1])\n"
            "    return 0\n"
            "def watch():\n"
            "    while not done.is_set():\n"
            "        peak[0] = max(peak[0], anon())\n"
            "        time.sleep(0.002)\n"
            "t = threading.Thread(target=watch, daemon=True)\n"
            "t.start()\n"
            f"sys.argv = ['nncodecs', *{list(cmd)!r}]\n"
            "try:\n"
            "    runpy.run_module('nncodecs', run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    assert not e.code, e.code\n"
            "done.set()\n"
            "t.join()\n"
            "print(max(peak[0], anon()) // 1024)\n"
        )
        r = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert r.returncode == 0, r.stderr
        peaks[cmd[0]] = int(r.stdout.split()[-1])
    assert filecmp.cmp(tmp_path / "back" / "blob.bin", snap / "blob.bin", shallow=False)
    assert max(peaks.values()) < 250, f"peak MiB {peaks} for a {size >> 20} MiB kept file"
