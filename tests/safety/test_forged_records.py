"""What a container records of its source (size, mode, times, counts, file records) is
its word, checked before it is used: a forged record never crashes a command, prints
nonsense, grants permissions, leaves a half-done output, or passes ``verify`` while
``decompress`` refuses it. And what a source's files withhold (a private ONNX data file,
private containers merged) stays withheld."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nncodecs.formats.file_modes import MODE, MTIME, SIZE, recorded, recorded_bytes


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nncodecs", *args], capture_output=True, text=True, cwd=cwd
    )


def umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr
    assert "Traceback" not in r.stderr


@pytest.fixture
def work(tmp_path: Path) -> Path:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(3)
    save_file(
        {"w": rng.standard_normal((64, 32)).astype(np.float32)}, str(tmp_path / "m.safetensors")
    )
    assert run("compress", "m.safetensors", "-o", "m.zarr", "-q", cwd=tmp_path).returncode == 0
    return tmp_path


def forge(container: Path, **records: str) -> None:
    from nncodecs import Writer

    with Writer(container, mode="a") as w:
        for key, value in records.items():
            w.metadata[key.replace("_", ".", 1)] = value


@pytest.mark.parametrize(
    ("text", "mode"),
    [("644", 0o644), ("600", 0o600), ("6777", 0o777), ("0", 0), ("-1", None), ("-5", None),
     (" 76 ", None), ("٧٦", None), ("8", None), ("12345", None), ("", None), ("0x1ff", None)],
)  # fmt: skip
def test_a_recorded_mode_is_octal_permission_bits_less_the_umask(
    text: str, mode: int | None
) -> None:
    got = recorded({MODE: text})[0]
    assert got == (None if mode is None else mode & ~umask())
    assert recorded({MODE: ["644"]})[0] is None  # type: ignore[dict-item]


@pytest.mark.parametrize("text", ["9" * 60, "-5", "1e9", " 5", "\u0665", "9" * 5000])
def test_a_forged_time_or_size_is_no_record(text: str) -> None:
    assert recorded({MTIME: text})[1] is None
    assert recorded_bytes({SIZE: text}) is None
    assert recorded({MTIME: "1700000000000000000"})[1] == 1700000000000000000
    assert recorded_bytes({SIZE: "1024"}) == 1024


def test_forged_records_never_crash_nor_leave_an_output(work: Path) -> None:
    forge(work / "m.zarr", source_mtime_ns="9" * 60, source_mode="-1",
          source_bytes="9" * 60, source_tensors="-5")  # fmt: skip
    r = run("decompress", "m.zarr", "-o", "back.safetensors", cwd=work)
    assert r.returncode == 0, r.stderr  # (the time and mode ignored, the file restored)
    back = work / "back.safetensors"
    assert back.read_bytes() == (work / "m.safetensors").read_bytes()
    assert stat.S_IMODE(back.stat().st_mode) == 0o666 & ~umask()
    line = run("info", "m.zarr", cwd=work).stdout.splitlines()[-1]
    assert "(no source size recorded)" in line and "the source had" not in line
    record = json.loads(run("info", "m.zarr", "--json", cwd=work).stdout)
    assert record["original_bytes"] == 64 * 32 * 4 and record["source_tensors"] is None
    forge(work / "m.zarr", source_bytes="0")  # (a source with tensors is not empty)
    assert "no source size recorded" in run("info", "m.zarr", cwd=work).stdout


def test_verify_refuses_the_file_records_decompress_refuses(work: Path) -> None:
    r = run("verify", "m.zarr", "--json", cwd=work)
    assert json.loads(r.stdout)["source_exact"] is True  # (the file rebuilt into its digest)
    from nncodecs import Reader

    with Reader(work / "m.zarr") as reader:
        records = json.loads(reader.metadata["source.files"])
    forged = [{**records[0], "crc32c": "0" * 8}]
    forge(work / "m.zarr", source_files=json.dumps(forged))
    one_line_error(run("verify", "m.zarr", cwd=work), "crc32c differs")
    for files in ("garbage", json.dumps([{**records[0], "file": "../../evil.safetensors"}])):
        forge(work / "m.zarr", source_files=files)
        one_line_error(run("verify", "m.zarr", cwd=work), "m.zarr")
        one_line_error(run("decompress", "m.zarr", "-o", "x.safetensors", cwd=work), "m.zarr")
    assert not (work / "x.safetensors").exists()


def test_force_never_replaces_a_fifo(work: Path) -> None:
    fifo = work / "pipe.safetensors"
    os.mkfifo(fifo)
    r = run("decompress", "m.zarr", "-o", "pipe.safetensors", "--force", cwd=work)
    one_line_error(r, "pipe.safetensors", "not a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_folder_source_is_not_restored_under_a_files_name(work: Path) -> None:
    from safetensors.numpy import save_file

    (work / "shards").mkdir()
    for i in range(2):
        save_file({f"t{i}": np.ones(10, np.float32)}, str(work / "shards" / f"s{i}.safetensors"))
    assert run("compress", "shards", "-o", "s.zarr.zip", cwd=work).returncode == 0
    r = run("decompress", "s.zarr.zip", "-o", "one.safetensors", cwd=work)
    one_line_error(r, "one.safetensors", "a folder of 2 safetensors files")
    assert not (work / "one.safetensors").exists()
    assert run("decompress", "s.zarr.zip", "-o", "back", cwd=work).returncode == 0
    assert sorted(p.name for p in (work / "back").iterdir()) == ["s0.safetensors", "s1.safetensors"]


def test_merged_private_containers_stay_private(work: Path) -> None:
    from safetensors.numpy import save_file

    for name in "ab":
        path = work / f"{name}.safetensors"
        save_file({name: np.ones(100, np.float32)}, str(path))
        path.chmod(0o600)
        assert run("compress", path.name, cwd=work).returncode == 0
        assert stat.S_IMODE((work / f"{path.name}.zarr.zip").stat().st_mode) == 0o600
    r = run("merge", "a.safetensors.zarr.zip", "b.safetensors.zarr.zip", "-o", "ab.zarr.zip",
            cwd=work)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE((work / "ab.zarr.zip").stat().st_mode) == 0o600
    assert run("decompress", "ab.zarr.zip", "-o", "ab", cwd=work).returncode == 0
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 or p.is_dir()
               for p in (work / "ab").iterdir())  # fmt: skip


def test_a_private_onnx_data_file_keeps_the_container_and_its_restore_private(
    tmp_path: Path,
) -> None:
    from conftest import optional_import
    from formats.test_onnx import external_model

    onnx = optional_import("onnx")
    files = external_model(onnx, tmp_path / "e.onnx", one_file=True)
    (tmp_path / "e.onnx").chmod(0o644)
    for f in files:
        f.chmod(0o600)
    assert run("compress", "e.onnx", cwd=tmp_path).returncode == 0
    assert stat.S_IMODE((tmp_path / "e.onnx.zarr.zip").stat().st_mode) == 0o600
    (tmp_path / "out").mkdir()
    r = run("decompress", "e.onnx.zarr.zip", "-o", str(tmp_path / "out" / "e.onnx"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    restored = [p for p in (tmp_path / "out").iterdir()]
    assert len(restored) == 1 + len(files)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in restored)


def test_hostile_names_are_shown_written_out(tmp_path: Path) -> None:
    """A tensor or file name with terminal escapes or line breaks can neither colour the
    screen nor break a table or an error's one line; one tensor is '1 tensor'."""
    from safetensors.numpy import save_file

    name = "w\x1b[31mred\nline"
    save_file({name: np.ones(4, np.float32)}, str(tmp_path / "h.safetensors"))
    out = run("info", "h.safetensors", cwd=tmp_path).stdout
    assert "\x1b" not in out and "w\\x1b[31mred\\nline" in out
    from nncodecs.sizes import human

    size = (tmp_path / "h.safetensors").stat().st_size  # (the file's own bytes, not the line's)
    assert out.splitlines()[-1] == f"1 tensor (safetensors): 16 B in {human(size)}"
    assert run("compress", "h.safetensors", cwd=tmp_path).returncode == 0
    out = run("info", "h.safetensors.zarr.zip", cwd=tmp_path).stdout
    assert "\x1b" not in out and "; the source had 1 tensor" in out
    r = run("info", "\x1b[31mgone\nfile.safetensors", cwd=tmp_path)
    one_line_error(r, "gone file.safetensors", "no such file")
    assert "\x1b" not in r.stderr
    r = run("decompress", "h.safetensors.zarr.zip", "-o", "/proc/x.safetensors", cwd=tmp_path)
    assert r.returncode == 1 and ".nncodecs-" not in r.stderr  # (the name given, not the temporary)
