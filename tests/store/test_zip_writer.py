"""The zip container's own zip writer (``nncodecs.store.zip_writer``).

Every zip it writes is read back by Python's ``zipfile`` (``testzip``: every
entry's CRC-32), by Info-ZIP's ``unzip -t`` where it is installed, and by the
container's :class:`ZipEntries` (each local header against the central directory,
entries contiguous).
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from nncodecs.errors import CorruptDataError
from nncodecs.store import zip_writer
from nncodecs.store.zip_entries import ZipEntries
from nncodecs.store.zip_writer import ZipWriter


def _entries(n: int = 40) -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    out = {f"t{i}/c/{i}/0": rng.integers(0, 256, int(rng.integers(0, 5000)), np.uint8).tobytes()
           for i in range(n)}  # fmt: skip
    out["t0/zarr.json"] = b'{"zarr_format": 3, "node_type": "array"}' * 20
    out["pi\u00f1a/\u5f20\u91cf/zarr.json"] = b"{}"  # (a UTF-8 name)
    out["empty"] = b""
    return out


def _check(path: Path, want: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        assert {i.filename: zf.read(i) for i in zf.infolist()} == want
        entries = ZipEntries(path, zf, own=False)
        for info in zf.infolist():
            start, length = entries.span(info.filename)  # type: ignore[misc]
            if info.compress_type == zipfile.ZIP_STORED:
                assert entries.read(start, length) == want[info.filename]
            assert oct(info.external_attr >> 16) == oct(0o100644)
        entries.close()
    if shutil.which("unzip"):
        run = subprocess.run(["unzip", "-tqq", str(path)], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr


def _write(path: Path, items: dict[str, bytes]) -> None:
    w = ZipWriter(path)
    for name, data in items.items():
        w.add(name, data, deflate=name.endswith("zarr.json"))
    w.close()


def test_entries_read_back_by_every_reader(tmp_path: Path) -> None:
    items = _entries()
    _write(tmp_path / "a.zip", items)
    _check(tmp_path / "a.zip", items)
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        kinds = {i.filename: i.compress_type for i in zf.infolist()}
    assert kinds["t0/zarr.json"] == zipfile.ZIP_DEFLATED
    assert kinds["t1/c/1/0"] == zipfile.ZIP_STORED


def test_zip64_records_where_sizes_offsets_or_counts_overflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the limits forced down, as zipfile's own tests do: every record takes its ZIP64 form)
    monkeypatch.setattr(zip_writer, "ZIP64_LIMIT", 1)
    monkeypatch.setattr(zip_writer, "ZIP_FILECOUNT_LIMIT", 3)
    items = _entries(10)
    _write(tmp_path / "z.zip", items)
    _check(tmp_path / "z.zip", items)


def test_more_entries_than_a_plain_zip_counts(tmp_path: Path) -> None:
    items = {f"e{i}": bytes([i % 256]) for i in range(70_000)}
    _write(tmp_path / "many.zip", items)
    with zipfile.ZipFile(tmp_path / "many.zip") as zf:
        assert len(zf.infolist()) == 70_000 and zf.read("e69999") == bytes([69999 % 256])


def test_a_snapshot_is_a_whole_zip_and_the_file_grows_on(tmp_path: Path) -> None:
    items = _entries(6)
    w = ZipWriter(tmp_path / "grow.zip")
    for name, data in items.items():
        w.add(name, data)
    w.snapshot(tmp_path / "snap.zip", {"zarr.json": (b'{"root": 1}', True)})
    w.add("later", b"x" * 100)
    w.snapshot(tmp_path / "snap2.zip", {"zarr.json": (b'{"root": 2}', True)})
    w.close()
    _check(tmp_path / "snap.zip", {**items, "zarr.json": b'{"root": 1}'})
    _check(tmp_path / "snap2.zip", {**items, "later": b"x" * 100, "zarr.json": b'{"root": 2}'})
    _check(tmp_path / "grow.zip", {**items, "later": b"x" * 100})


def test_a_write_that_fails_leaves_no_part_of_its_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = ZipWriter(tmp_path / "f.zip")
    w.add("first", b"a" * 1000)
    real = w.file.write
    calls = []

    def failing(data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 2:  # (the header went out, the data did not)
            raise OSError(28, "No space left on device")
        return real(data)

    monkeypatch.setattr(w.file, "write", failing)
    with pytest.raises(OSError, match="No space"):
        w.add("second", b"b" * 5000)
    monkeypatch.undo()
    w.add("second", b"c" * 10)  # (a retry: the entry written again)
    w.close()
    _check(tmp_path / "f.zip", {"first": b"a" * 1000, "second": b"c" * 10})


def test_a_name_written_twice_is_read_as_the_last(tmp_path: Path) -> None:
    w = ZipWriter(tmp_path / "d.zip")
    w.add("k", b"old")
    w.add("k", b"new")
    w.close()
    with zipfile.ZipFile(tmp_path / "d.zip") as zf:
        assert zf.testzip() is None and zf.read("k") == b"new" and len(zf.infolist()) == 2


def test_zipfile_appends_to_it(tmp_path: Path) -> None:
    items = _entries(5)
    _write(tmp_path / "ap.zip", items)
    with zipfile.ZipFile(tmp_path / "ap.zip", "a") as zf:
        zf.writestr("added", b"more")
    with zipfile.ZipFile(tmp_path / "ap.zip") as zf:
        assert zf.testzip() is None and zf.read("added") == b"more"
        assert all(zf.read(n) == d for n, d in items.items())


def test_a_damaged_entry_met_while_appending_is_corrupt_data(tmp_path: Path) -> None:
    import nncodecs
    from nncodecs import CorruptDataError

    target = tmp_path / "m.zarr.zip"
    with nncodecs.Writer(target) as w:
        w.add_tensor("a", np.arange(4096, dtype=np.float32))
    clean = target.read_bytes()
    with zipfile.ZipFile(target) as zf:
        info = zf.getinfo("a/c/0")
    data = bytearray(clean)
    data[info.header_offset + 30 + len(info.filename) + 100] ^= 0xFF  # (its zip CRC fails)
    target.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError, match=r"entry 'a/c/0'"):
        nncodecs.Writer(target, mode="a")
    assert target.read_bytes() == bytes(data)  # (untouched)
    assert not list(tmp_path.glob(".m.zarr.zip.*"))


def test_every_commit_of_a_zip_container_is_a_whole_zip(tmp_path: Path) -> None:
    import nncodecs

    target = tmp_path / "f.zarr.zip"
    with nncodecs.Writer(target) as w:
        for i in range(3):
            w.add_tensor(f"t{i}", np.full((300, 50), i, np.float16))
            w.flush()
            with zipfile.ZipFile(target) as zf:
                assert zf.testzip() is None
                assert {n.split("/")[0] for n in zf.namelist()} >= {f"t{j}" for j in range(i + 1)}
            with nncodecs.Reader(target) as r:
                assert r.keys() == [f"t{j}" for j in range(i + 1)]
    with zipfile.ZipFile(target) as zf:
        assert zf.testzip() is None and zf.namelist().count("zarr.json") == 1
    if shutil.which("unzip"):
        run = subprocess.run(["unzip", "-tqq", str(target)], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_parts_joined_into_one_zip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_copy: bool
) -> None:
    """Files of entries written apart (parts: no central directory) joined after a first
    one, their offsets moved; by ``copy_file_range``, or by reads and writes where the
    kernel copy is refused."""
    items = _entries(30)
    names = list(items)
    shares = [names[0:10], names[10:11], names[11:]]
    parts = []
    for i, share in enumerate(shares):
        w = ZipWriter(tmp_path / f"p{i}")
        for name in share:
            w.add(name, items[name])
        w.discard()
        parts.append((tmp_path / f"p{i}", w.entries, w.tell()))
    if not kernel_copy:

        def refused(*args: object) -> int:
            raise OSError(18, "Invalid cross-device link")

        monkeypatch.setattr(zip_writer.os, "copy_file_range", refused)
    first, entries, size = parts[0]
    out = ZipWriter(first, entries, size)
    for part in parts[1:]:
        out.join(*part)
    out.add("zarr.json", b"{}", deflate=True)
    out.close()
    _check(first, {**items, "zarr.json": b"{}"})
    cut, entries, size = parts[2]
    cut.write_bytes(cut.read_bytes()[:-1])
    again = ZipWriter(tmp_path / "again.zip")
    with pytest.raises(CorruptDataError, match="another size"):
        again.join(cut, entries, size)
    again.discard()
