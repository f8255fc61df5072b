"""The habits users bring from zstd, tar and huggingface-cli, tried as whole processes of
the ``nncodecs`` command: outputs into missing folders, onto empty folders and ``-o -``;
a Hugging Face cache repository given for its snapshot; ``--json`` on every command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nncodecs.cli.report import JSON_VERSION
from nncodecs.sizes import human, ratio_text


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nncodecs", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(2)
    tensors = {"w": rng.standard_normal((64, 32)).astype(np.float32), "b": np.ones(32, "f2")}
    save_file(tensors, str(tmp_path / "m.safetensors"))
    assert run("compress", "m.safetensors", "-q", cwd=tmp_path).returncode == 0
    return tmp_path


def refused(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr


COMMANDS = [
    ("compress", "m.safetensors"),
    ("decompress", "m.safetensors.zarr.zip"),
    ("convert", "m.safetensors"),
    ("merge", "m.safetensors.zarr.zip"),
]


@pytest.mark.parametrize(("command", "source"), COMMANDS)
def test_no_folder_is_made_for_an_output(work: Path, command: str, source: str) -> None:
    before = tree(work)
    out = "new/sub/out.npz" if command == "convert" else "new/sub/out.zarr.zip"
    if command == "decompress":
        out = "new/sub/out.safetensors"
    refused(run(command, source, "-o", out, cwd=work), "new/sub", "no such directory")
    assert tree(work) == before


@pytest.mark.parametrize(("command", "source"), [c for c in COMMANDS if c[0] != "decompress"])
def test_standard_output_is_refused_by_name(work: Path, command: str, source: str) -> None:
    before = tree(work)
    refused(run(command, source, "-o", "-", cwd=work), "-o -", "standard output")
    assert tree(work) == before


def test_decompress_streams_a_safetensors_file_to_standard_output(work: Path) -> None:
    """As zstd -dc: the very file on stdout, checked against its CRC32C as it goes;
    what cannot stream (a GGUF's own layout, --json) is refused by name, nothing out."""
    cmd = [sys.executable, "-m", "nncodecs", "decompress", "m.safetensors.zarr.zip", "-o", "-"]
    r = subprocess.run(cmd, cwd=work, capture_output=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (work / "m.safetensors").read_bytes()
    piped = subprocess.run(f"{' '.join(cmd)} | cat > piped.safetensors", shell=True, cwd=work)
    assert piped.returncode == 0
    assert (work / "piped.safetensors").read_bytes() == (work / "m.safetensors").read_bytes()
    r = run("decompress", "m.safetensors.zarr.zip", "-o", "-", "--json", cwd=work)
    refused(r, "-o -", "--json")
    assert r.stdout == ""
    # a container of tensors alone (no source file recorded) streams as a safetensors file
    from safetensors.numpy import load

    from nncodecs import Writer

    with Writer(work / "t.zarr") as w:
        w.add_tensor("x", np.arange(6, dtype=np.float32).reshape(2, 3))
    r = subprocess.run([*cmd[:4], "t.zarr", "-o", "-"], cwd=work, capture_output=True)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(load(r.stdout)["x"], np.arange(6, dtype=np.float32).reshape(2, 3))


def test_an_empty_folder_is_an_existing_output(work: Path) -> None:
    (work / "empty").mkdir()
    refused(run("compress", "m.safetensors", "-o", "empty", cwd=work), "empty", "--force")
    assert not any((work / "empty").iterdir())
    r = run("compress", "m.safetensors", "-o", "empty", "--force", "-q", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "empty" / "zarr.json").is_file()


def test_a_cache_repository_names_its_snapshot(work: Path) -> None:
    repo = work / "hub" / "models--org--tiny"
    snapshot = repo / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abc")
    (repo / "blobs" / "f00d").write_bytes((work / "m.safetensors").read_bytes())
    (snapshot / "model.safetensors").symlink_to("../../blobs/f00d")
    refused(run("compress", str(repo), cwd=work), "Hugging Face cache", str(snapshot))
    r = run("compress", str(snapshot), "-o", "snap.zarr.zip", "-q", cwd=work)
    assert r.returncode == 0, r.stderr


def json_of(r: subprocess.CompletedProcess, command: str) -> dict:
    assert r.returncode == 0, r.stderr
    record = json.loads(r.stdout)  # (one object: nothing else on stdout)
    assert record["version"] == JSON_VERSION and record["command"] == command
    return record


def test_every_command_speaks_json(work: Path) -> None:
    r = run("compress", "m.safetensors", "-o", "j.zarr.zip", "--json", cwd=work)
    record = json_of(r, "compress")
    assert record["format"] == "safetensors" and record["output"] == "j.zarr.zip"
    assert record["original_bytes"] == (work / "m.safetensors").stat().st_size
    assert record["stored_bytes"] == (work / "j.zarr.zip").stat().st_size
    record = json_of(run("verify", "j.zarr.zip", "--json", cwd=work), "verify")
    assert record["ok"] and record["tensors"] == 2 and record["source_tensors"] == 2
    assert record["source_format"] == "safetensors" and record["source_exact"] is True
    r = run("decompress", "j.zarr.zip", "-o", "back.safetensors", "--json", cwd=work)
    record = json_of(r, "decompress")
    assert record["original_bytes"] == (work / "back.safetensors").stat().st_size
    assert record["stored_bytes"] == (work / "j.zarr.zip").stat().st_size
    assert record["beside"] == [] and record["format"] == "safetensors"
    r = run("convert", "m.safetensors", "-o", "c.npz", "--json", cwd=work)
    assert json_of(r, "convert")["format"] == "npz"
    r = run("convert", "m.safetensors", "-o", "c.zarr.zip", "--json", cwd=work)
    assert json_of(r, "convert")["format"] == "container"  # (what was written, not the source)
    r = run("merge", "j.zarr.zip", "-o", "merged.zarr.zip", "--json", cwd=work)
    assert json_of(r, "merge") == {
        "version": JSON_VERSION,
        "command": "merge",
        "inputs": ["j.zarr.zip"],
        "output": "merged.zarr.zip",
    }
    r = run("verify", "nothing.zarr.zip", "--json", cwd=work)
    assert r.returncode == 1 and r.stdout == "" and "nothing.zarr.zip" in r.stderr


def test_messages_are_plain_whole_sentences(work: Path) -> None:
    """Another package's message cleaned: no terminal escapes, no ``[Errno N]``, a whole
    sentence; the command's flag named, not the API's keyword."""
    from nncodecs.output_lock import OutputLock

    r = run("compress", "m.safetensors", cwd=work)  # (its container is there already)
    refused(r, "exists", "--force")
    assert "overwrite=True" not in r.stderr
    lock = OutputLock(work / "held.zarr.zip").acquire()
    try:
        r = run("compress", "m.safetensors", "-o", "held.zarr.zip", cwd=work)
    finally:
        lock.release()
    refused(r, "another writer", f"pid {os.getpid()}")
    assert "Errno" not in r.stderr


def test_torchs_refusal_is_one_clean_sentence(work: Path) -> None:
    from conftest import optional_import

    torch = optional_import("torch")
    code = "import torch, sys\nclass Foo: pass\ntorch.save({'a': Foo()}, sys.argv[1])\n"
    subprocess.run([sys.executable, "-c", code, str(work / "foo.pt")], check=True)
    assert torch is not None
    r = run("compress", "foo.pt", cwd=work)
    refused(r, "not a weights-only PyTorch file", "Unsupported global")
    line = r.stderr.strip()
    assert "\x1b" not in line and line.endswith("by default.)"), line


def test_several_inputs_in_one_call(work: Path) -> None:
    """Each to its default output, beside it or in --output-dir; one that fails is named
    and the others go on; the exit status says one failed; --json names each result."""
    import shutil

    shutil.copy(work / "m.safetensors", work / "n.safetensors")
    (work / "bad.safetensors").write_bytes(b"\x10" + bytes(7) + b"{}")
    r = run("compress", "m.safetensors", "bad.safetensors", "n.safetensors", "-f", cwd=work)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[0].startswith("nncodecs: ")
    assert "bad.safetensors" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "2 of 3 inputs done; 1 failed" in r.stdout
    assert (work / "n.safetensors.zarr.zip").is_file()
    assert not (work / "bad.safetensors.zarr.zip").exists()
    (work / "out").mkdir()
    args = ("m.safetensors", "n.safetensors", "--output-dir", "out", "--json")
    r = run("compress", *args, cwd=work)
    assert r.returncode == 0, r.stderr
    results = json_of(r, "compress")["results"]
    outputs = [x["output"] for x in results]
    assert outputs == ["out/m.safetensors.zarr.zip", "out/n.safetensors.zarr.zip"]
    assert all(x["ok"] for x in results)
    containers = [f"out/{n}.safetensors.zarr.zip" for n in "mn"]
    r = run("decompress", *containers, "--output-dir", "out", "--json", cwd=work)
    outputs = [x["output"] for x in json_of(r, "decompress")["results"]]
    assert outputs == ["out/m.safetensors", "out/n.safetensors"]
    assert (work / "out/n.safetensors").read_bytes() == (work / "n.safetensors").read_bytes()
    r = run("compress", "m.safetensors", "n.safetensors", "-o", "x.zarr", cwd=work)
    refused(r, "-o names one output", "--output-dir")
    r = run("compress", "m.safetensors", "--output-dir", "nowhere", cwd=work)
    refused(r, "nowhere", "no such directory")


def test_sizes_count_every_input_file(tmp_path: Path) -> None:
    """An ONNX model's external data is part of what was compressed: its files count in
    the original size the command prints, and in --json."""
    from conftest import optional_import
    from formats.test_onnx import external_model

    onnx = optional_import("onnx")
    files = external_model(onnx, tmp_path / "e.onnx", one_file=False)
    total = (tmp_path / "e.onnx").stat().st_size + sum(f.stat().st_size for f in files)
    assert total > 4 * (tmp_path / "e.onnx").stat().st_size  # (the data is most of it)
    record = json_of(run("compress", "e.onnx", "--json", cwd=tmp_path), "compress")
    assert record["original_bytes"] == total
    assert record["stored_bytes"] == (tmp_path / "e.onnx.zarr.zip").stat().st_size
    # info tells the same sizes and the same ratio as compress printed, in the same words
    shutil.rmtree(tmp_path / "e.onnx.zarr.zip", ignore_errors=True)
    (tmp_path / "e.onnx.zarr.zip").unlink(missing_ok=True)
    said = run("compress", "e.onnx", cwd=tmp_path).stdout.strip().split(": ", 1)[1]
    stored = (tmp_path / "e.onnx.zarr.zip").stat().st_size
    assert said == f"{human(stored)}, {ratio_text(total, stored)}"
    assert "x larger" in said or "x smaller" in said
    info = run("info", "e.onnx.zarr.zip", cwd=tmp_path).stdout.splitlines()[-1]
    assert info.endswith(f" tensors (container): {said}; the source had 5 tensors")
    record = json_of(run("info", "e.onnx.zarr.zip", "--json", cwd=tmp_path), "info")
    assert (record["original_bytes"], record["stored_bytes"]) == (total, stored)


def test_info_without_a_recorded_source_size_says_so(tmp_path: Path) -> None:
    """A container written through the API records no source: info's ratio is of its
    tensors, and says so; a merge adds its inputs' recorded sizes."""
    from safetensors.numpy import save_file

    from nncodecs import Writer

    with Writer(tmp_path / "api.zarr.zip") as w:
        w.add_tensor("w", np.zeros((256, 256), np.float32))
    line = run("info", "api.zarr.zip", cwd=tmp_path).stdout.splitlines()[-1]
    assert "of 256.0 KiB of tensors (no source size recorded)" in line
    for name in "ab":
        save_file({name: np.ones(1000, np.float32)}, str(tmp_path / f"{name}.safetensors"))
        assert run("compress", f"{name}.safetensors", cwd=tmp_path).returncode == 0
    inputs = ("a.safetensors.zarr.zip", "b.safetensors.zarr.zip")
    r = run("merge", *inputs, "-o", "ab.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    record = json_of(run("info", "ab.zarr.zip", "--json", cwd=tmp_path), "info")
    assert record["original_bytes"] == 2 * (tmp_path / "a.safetensors").stat().st_size


def test_quantized_gguf_is_shown_as_such_and_never_written_as_blobs(tmp_path: Path) -> None:
    """info shows a GGML type and its logical shape; converting a quantized GGUF to a
    format that cannot hold its type is refused with the reason, or dequantized on
    --dequantize (by gguf.quants); from a container, the refusal says what to do."""
    from conftest import optional_import
    from formats.test_gguf import write_gguf

    gguf = optional_import("gguf")
    from safetensors.numpy import load_file

    rng = np.random.default_rng(4)
    weight = rng.standard_normal((8, 64)).astype(np.float32)
    blocks = gguf.quants.quantize(weight, gguf.GGMLQuantizationType.Q4_0)
    write_gguf(tmp_path / "q.gguf", {"w": (blocks, "Q4_0"), "n": (np.ones(64, np.float32), "F32")})
    record = json.loads(run("info", "q.gguf", "--json", cwd=tmp_path).stdout)
    rows = {row["name"]: row for row in record["tensors"]}
    assert (rows["w"]["dtype"], rows["w"]["shape"]) == ("Q4_0", [8, 64])
    assert (rows["n"]["dtype"], rows["n"]["shape"]) == ("float32", [64])
    table = run("info", "q.gguf", cwd=tmp_path).stdout
    assert "Q4_0" in table and "8x64" in table
    before = tree(tmp_path)
    r = run("convert", "q.gguf", "-o", "q.safetensors", cwd=tmp_path)
    refused(r, "'w' is Q4_0", "safetensors cannot hold", "--dequantize")
    assert tree(tmp_path) == before
    r = run("convert", "q.gguf", "-o", "q.safetensors", "--dequantize", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    back = load_file(str(tmp_path / "q.safetensors"))
    want = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.Q4_0)
    assert back["w"].shape == (8, 64) and np.array_equal(back["w"], want)
    assert np.array_equal(back["n"], np.ones(64, np.float32))
    assert run("compress", "q.gguf", "-q", cwd=tmp_path).returncode == 0
    table = run("info", "q.gguf.zarr.zip", cwd=tmp_path).stdout
    assert "Q4_0" in table and "8x64" in table  # (the container shows what the file did)
    record = json.loads(run("info", "q.gguf.zarr.zip", "--json", cwd=tmp_path).stdout)
    rows = {row["name"]: row for row in record["tensors"]}
    w = rows["w"]
    assert (w["dtype"], w["shape"], w["layout"]) == ("Q4_0", [8, 64], "ggml")
    r = run("decompress", "q.gguf.zarr.zip", "-o", "c.safetensors", cwd=tmp_path)
    refused(r, "'w' is Q4_0", "restore the GGUF file")
    assert not (tmp_path / "c.safetensors").exists()
    r = run("decompress", "q.gguf.zarr.zip", "-o", "-", cwd=tmp_path)  # (its own format: no)
    refused(r, "-o -", "restores as gguf")
    assert r.stdout == ""


def test_mode_and_times_are_kept(work: Path) -> None:
    """As zstd and tar: the source's mode and modification time on the container and on
    every file restored or converted from it; a read-only source too; a container made
    through the API restores with the umask's mode."""
    import stat

    from nncodecs import Writer
    from nncodecs.outputs import created_mode
    from nncodecs.store.zip_writer import ZipWriter

    source = work / "m.safetensors"
    when = 1_600_000_000_123_456_789
    for mode in (0o600, 0o440):
        source.chmod(mode)
        os.utime(source, ns=(when, when))
        r = run("compress", "m.safetensors", "-o", f"{mode:o}.zarr.zip", "-q", cwd=work)
        assert r.returncode == 0, r.stderr
        outputs = [work / f"{mode:o}.zarr.zip"]
        for name, command in (("back.safetensors", "decompress"), ("c.npz", "convert")):
            given = f"{mode:o}.zarr.zip" if command == "decompress" else "m.safetensors"
            r = run(command, given, "-o", f"{mode:o}-{name}", "-q", cwd=work)
            assert r.returncode == 0, r.stderr
            outputs.append(work / f"{mode:o}-{name}")
        for out in outputs:
            st = out.stat()
            assert (stat.S_IMODE(st.st_mode), st.st_mtime_ns) == (mode, when), out.name
    source.chmod(0o644)
    umask = os.umask(0o022)
    os.umask(umask)
    with Writer(work / "api.zarr.zip") as w:
        w.add_tensor("x", np.ones(4, np.float32))
    assert run("decompress", "api.zarr.zip", "-o", "api.safetensors", cwd=work).returncode == 0
    assert stat.S_IMODE((work / "api.safetensors").stat().st_mode) == 0o666 & ~umask
    # the file a container is written into is private from its first byte
    with created_mode(0o600):
        zw = ZipWriter(work / "first-byte.zip")
        assert stat.S_IMODE((work / "first-byte.zip").stat().st_mode) == 0o600
        zw.file.close()


def test_dask_compress_prints_the_ratio_info_prints(work: Path) -> None:
    """compress --dask records the source's size as compress does: info gives the
    sentence the command printed, and --json both sizes."""
    from conftest import optional_import

    from nncodecs.sizes import path_bytes

    optional_import("dask")
    r = run("compress", "m.safetensors", "--dask", "-o", "d.zarr", cwd=work)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 1  # (dask's progress bar on stderr: stdout is the line)
    said = r.stdout.strip().split("; ", 1)[1]
    original, stored = (work / "m.safetensors").stat().st_size, path_bytes(work / "d.zarr")
    assert said == f"{human(stored)}, {ratio_text(original, stored)}"
    info = run("info", "d.zarr", cwd=work).stdout.splitlines()[-1]
    assert info.endswith(f" tensors (container): {said}; the source had 2 tensors")
    # (--dask before the input: the input is not taken for a scheduler address)
    r = run("compress", "--dask", "m.safetensors", "-o", "e.zarr", "--json", cwd=work)
    record = json_of(r, "compress")
    assert record["original_bytes"] == original
    assert record["stored_bytes"] == path_bytes(work / "e.zarr")
