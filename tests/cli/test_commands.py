"""The nncodecs command, run as a user runs it: in a subprocess."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nncodecs.datasets import minilm_path


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nncodecs", *args], cwd=cwd, capture_output=True, text=True
    )


@pytest.fixture()
def model(real_weights: dict, tmp_path: Path) -> Path:
    path = tmp_path / "model.safetensors"
    shutil.copy(minilm_path(), path)
    return path


def test_compress_info_verify_decompress(model: Path, tmp_path: Path) -> None:
    original = hashlib.sha256(model.read_bytes()).hexdigest()
    r = run("compress", "model.safetensors", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "model.safetensors.zarr.zip: " in r.stdout and "x smaller, 81.9% of 86.7 MiB" in r.stdout
    assert r.stderr == ""  # not a terminal: no progress bar
    said = r.stdout.strip().split(": ", 1)[1]  # ('71.0 MiB, 1.22x smaller, 81.9% of 86.7 MiB')
    r = run("info", "model.safetensors.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0 and f"104 tensors (container): {said};" in r.stdout
    assert "the source had 104 tensors" in r.stdout
    assert "pooler.dense.weight" in r.stdout and "MiB" in r.stdout
    r = run("info", "model.safetensors.zarr.zip", "--json", cwd=tmp_path)
    info = json.loads(r.stdout)
    assert len(info["tensors"]) == 104 and info["stored_bytes"] < info["nbytes"]
    assert info["original_bytes"] == model.stat().st_size  # (the source's file, recorded)
    assert info["stored_bytes"] == (tmp_path / "model.safetensors.zarr.zip").stat().st_size
    r = run("info", "model.safetensors", cwd=tmp_path)  # a model file too
    assert r.returncode == 0 and "104 tensors (safetensors)" in r.stdout
    assert run("verify", "model.safetensors.zarr.zip", cwd=tmp_path).returncode == 0
    model.unlink()
    r = run("decompress", "model.safetensors.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert hashlib.sha256(model.read_bytes()).hexdigest() == original


def test_merge_convert_and_quiet(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", x=np.arange(5, dtype=np.float32))
    np.savez(tmp_path / "b.npz", y=np.ones(3, np.int16))
    assert run("convert", "a.npz", "-o", "a.zarr.zip", "-q", cwd=tmp_path).returncode == 0
    r = run("compress", "b.npz", "-o", "b.zarr", "--codec", "zstd", "-q", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == ""
    assert run("merge", "a.zarr.zip", "b.zarr", "-o", "ab.zarr.zip", cwd=tmp_path).returncode == 0
    r = run("convert", "ab.zarr.zip", "-o", "ab.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "ab.npz") as ab:
        assert ab["x"].tolist() == [0, 1, 2, 3, 4] and ab["y"].tolist() == [1, 1, 1]


def test_sparse_and_quantized_tensors_are_refused_by_name_not_densified(tmp_path: Path) -> None:
    from nncodecs import Writer

    with Writer(tmp_path / "sp.zarr") as w:
        w.add_tensor("dense", np.arange(6, dtype=np.float32))
        w.add_sparse_csr("s", np.array([1.0, 2.0], np.float32), np.array([0, 2]),
                         np.array([0, 1, 2]), (2, 3))  # fmt: skip
        w.add_quantized("q", np.zeros((4, 16), np.uint8), np.full((4, 1), 127, np.uint8), "mxfp4")
    for out in ("sp.safetensors", "sp.npz"):
        r = run("decompress", "sp.zarr", "-o", out, cwd=tmp_path)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert "tensor 's' is csr (and 1 more)" in r.stderr and "dense tensors only" in r.stderr
        assert not (tmp_path / out).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sp.zarr"]


def test_errors_are_one_line_with_an_exit_code(model: Path, tmp_path: Path) -> None:
    r = run("compress", "missing.safetensors", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and "no such file" in r.stderr
    (tmp_path / "trunc.safetensors").write_bytes(model.read_bytes()[:3000])
    r = run("compress", "trunc.safetensors", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("nncodecs: corrupt data:")
    (tmp_path / "notes.txt").write_text("not a model")
    r = run("info", "notes.txt", cwd=tmp_path)
    assert r.returncode == 1 and "not a format nncodecs reads" in r.stderr
    r = run("verify", "notes.txt", cwd=tmp_path)
    assert r.returncode == 1
    # A container with a flipped byte in a chunk fails verify.
    assert run("compress", "model.safetensors", "-o", "m.zarr", "-q", cwd=tmp_path).returncode == 0
    chunk = max(
        (p for p in (tmp_path / "m.zarr").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size
    )
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 1
    chunk.write_bytes(bytes(raw))
    r = run("verify", "m.zarr", cwd=tmp_path)
    assert r.returncode == 1 and "corrupt data" in r.stderr
    assert run("frobnicate", cwd=tmp_path).returncode == 2  # usage error


def test_a_reader_that_stops_reading_is_no_error(tmp_path: Path) -> None:
    """``nncodecs info ... | head``: the pipe closes early; no error line, no traceback."""
    import os

    import nncodecs

    with nncodecs.Writer(tmp_path / "m.zarr") as w:
        for i in range(3000):
            w.add_tensor(f"layer.{i}.weight", np.full((4, 4), i, np.float32))
    read, write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nncodecs", "info", "m.zarr"],
        cwd=tmp_path,
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        assert pipe.read(200)  # (then closed, as head does)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert err == ""


def test_help_shows_an_example_for_every_command(tmp_path: Path) -> None:
    r = run("--help", cwd=tmp_path)
    assert r.returncode == 0
    for command in ("compress", "decompress", "info", "verify", "merge", "convert"):
        assert f"nncodecs {command}" in r.stdout
        sub = run(command, "--help", cwd=tmp_path)
        assert (
            sub.returncode == 0 and "example:" in sub.stdout and f"nncodecs {command}" in sub.stdout
        )


def test_progress_bar_on_a_terminal(model: Path, tmp_path: Path) -> None:
    import os
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: the command on a pseudo-terminal
        os.chdir(tmp_path)
        os.execv(
            sys.executable, [sys.executable, "-m", "nncodecs", "compress", "model.safetensors"]
        )
    out = b""
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0
    assert "compress: " in text and "B/s" in text
    assert "compress: 100%" in text  # the bar ends full
    assert "\nmodel.safetensors (safetensors" in text.replace("\r\n", "\n")  # on its own line
