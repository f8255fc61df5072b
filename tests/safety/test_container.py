"""Issue 15, the container's part: nncodecs writes only the output named, never
destroys what it did not create, and every byte it returns is exact or an error."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import signal
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nncodecs import CorruptDataError, NotAContainerError, Reader, Writer

FIXTURES = Path(__file__).parent.parent / "fixtures" / "containers"
# Writers are forked (zarr resets its IO thread in the child; nncodecs' pool starts on use).
pytestmark = pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).tobytes()).hexdigest()


@pytest.mark.parametrize("name", ["v1.zarr", "v1.zarr.zip"])
def test_containers_of_version_1_read_bit_exact(name: str) -> None:
    expected = json.loads((FIXTURES / "expected.json").read_text())
    with Reader(FIXTURES / name) as r:
        assert sorted(r.keys()) == sorted(expected)
        for tname, want in expected.items():
            assert r.layout(tname) == want["layout"]
            got = r.read_tensor(tname)
            if want["layout"] == "dense":
                assert str(got.dtype) == want["dtype"] and list(got.shape) == want["shape"]
                assert _sha(got) == want["sha256"], tname
            else:
                assert list(got["shape"]) == want["shape"]
                assert {p: _sha(got[p]) for p in want["sha256"]} == want["sha256"]
        r.verify()


# -- helpers ---------------------------------------------------------------------------


def snapshot(root: Path, skip: Path | None = None) -> dict[str, tuple[int, int]]:
    """Every file under root (but skip): its size and modification time."""
    out = {}
    for path in root.rglob("*"):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        if path.is_file() or path.is_symlink():
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def beside(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if p != target)


def edit_metadata(path: Path, node: str, change: Any) -> None:
    """Apply change(dict) to a node's metadata, in its zarr.json and in the root's
    consolidated copy."""
    doc = json.loads((path / node / "zarr.json").read_text())
    change(doc)
    (path / node / "zarr.json").write_text(json.dumps(doc))
    root = json.loads((path / "zarr.json").read_text())
    if root.get("consolidated_metadata"):
        change(root["consolidated_metadata"]["metadata"][node])
        (path / "zarr.json").write_text(json.dumps(root))


def small_model() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "w": (rng.standard_normal((64, 16)) * 0.1).astype(np.float32),
        "ids": rng.integers(0, 1000, 40).astype(np.int64),
        "r": rng.standard_normal((8, 4)).astype(np.float32),
    }


def write(target: Path, chunk_bytes: int = 2 << 20, **kwargs: Any) -> dict[str, np.ndarray]:
    model = small_model()
    with Writer(target, chunk_bytes=chunk_bytes, **kwargs) as w:
        w.add_tensor("w", model["w"])
        w.add_tensor("ids", model["ids"], codec="zstd")
        w.add_tensor("r", model["r"], codec="raw")
    return model


# -- output safety ----------------------------------------------------------------------


def test_mode_w_refuses_an_existing_output(tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"meow")
    file = tmp_path / "notes.zarr.zip"
    file.write_bytes(b"my notes")
    before = snapshot(tmp_path)
    for target in (folder, file):
        with pytest.raises(FileExistsError, match="exists"):
            Writer(target)
    with pytest.raises(FileExistsError, match="not an nncodecs container"):
        Writer(folder, overwrite=True)
    assert snapshot(tmp_path) == before
    # overwrite: a file is replaced by rename, a container directory replaced whole.
    write(file, overwrite=True)
    with Reader(file) as r:
        assert r.keys() == ["w", "ids", "r"]
    container = tmp_path / "m.zarr"
    write(container)
    with Writer(container, overwrite=True) as w:
        w.add_tensor("new", np.ones(3, np.float32))
    with Reader(container) as r:
        assert r.keys() == ["new"]
    assert (folder / "cat.jpg").read_bytes() == b"meow"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.zarr", "notes.zarr.zip", "photos"]


def test_a_url_zip_is_refused_and_nothing_local_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("s3://b/m.zarr.zip", "memory://x/m.zarr.zip"):
        with pytest.raises(ValueError, match="zip container on an object store"):
            Writer(url)
    assert list(tmp_path.iterdir()) == []


def test_a_url_target_in_mode_w_refuses_other_data() -> None:
    import fsspec

    url = f"memory://nncodecs-safety-{uuid.uuid4().hex}"
    fsspec.filesystem("memory").pipe(f"{url}/m.zarr/keep.txt", b"keep")
    with pytest.raises(FileExistsError, match="holds data"):
        Writer(f"{url}/m.zarr")
    with pytest.raises(FileExistsError, match="not an nncodecs container"):
        Writer(f"{url}/m.zarr", overwrite=True)
    assert fsspec.filesystem("memory").cat(f"{url}/m.zarr/keep.txt") == b"keep"


def test_a_link_is_never_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real.zarr"
    write(real)
    link = tmp_path / "link.zarr"
    link.symlink_to(real)
    before = snapshot(tmp_path)
    for mode in ("w", "a"):
        with pytest.raises(FileExistsError, match="a link"):
            Writer(link, mode=mode)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", ["m.zarr", "m.zarr.zip"])
def test_a_new_container_appears_only_at_its_commit(name: str, tmp_path: Path) -> None:
    target = tmp_path / name
    w = Writer(target)
    w.add_tensor("big", np.ones((600, 1024), np.float32))  # written through (>= 1 MiB)
    assert not target.exists()
    assert beside(target) == [f".{name}.nncodecs-{os.getpid()}.tmp", f".{name}.nncodecs.lock"]
    w.flush()
    with Reader(target) as r:
        assert r.keys() == ["big"]
    w.add_tensor("small", np.ones(3, np.float32))
    w.close()
    assert beside(target) == []
    with Reader(target) as r:
        assert r.keys() == ["big", "small"]


@pytest.mark.parametrize("name", ["m.zarr", "m.zarr.zip"])
def test_an_error_in_the_with_block_leaves_the_last_commit(name: str, tmp_path: Path) -> None:
    target = tmp_path / name
    write(target)
    before = snapshot(tmp_path)
    with pytest.raises(RuntimeError), Writer(target, mode="a") as w:
        w.add_tensor("lost", np.ones(3, np.float32))
        raise RuntimeError("boom")
    assert beside(target) == []
    if name.endswith(".zip"):
        assert snapshot(tmp_path) == before
    with Reader(target) as r:
        assert r.keys() == ["w", "ids", "r"]
    with pytest.raises(RuntimeError), Writer(tmp_path / ("new-" + name)) as w:
        w.add_tensor("lost", np.ones(3, np.float32))
        raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


@pytest.mark.parametrize("name", ["m.zarr", "m.zarr.zip"])
@pytest.mark.parametrize("ending", ["close", "abandon"])
def test_an_interrupt_while_the_writer_stops_still_releases_the_lock(
    name: str, ending: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C landing while close() (after its commit) or abandon() waits for the writing
    # thread: the lock and every temporary go all the same (a CLI run interrupted as it
    # finished had left the lock file behind).
    target = tmp_path / name
    w = Writer(target)
    w.add_tensor("a", np.arange(6, dtype=np.float32))
    stop = w._objects.stop

    def interrupted(drop: bool = False) -> None:
        stop(drop)
        raise KeyboardInterrupt

    monkeypatch.setattr(w._objects, "stop", interrupted)
    with pytest.raises(KeyboardInterrupt):
        getattr(w, ending)()
    assert beside(target) == []
    if ending == "close":  # committed before the interrupt: complete
        with Reader(target) as r:
            assert r.read_tensor("a").tolist() == list(range(6))
    else:
        assert not target.exists()


@pytest.mark.parametrize("name", ["m.zarr", "m.zarr.zip"])
def test_an_interrupt_while_the_lock_is_taken_leaves_no_lock(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (Ctrl-C between flock and recording the pid had left the lock file behind)
    def interrupted(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "pwrite", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Writer(tmp_path / name)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    with Writer(tmp_path / name) as w:  # and the next writer takes it at once
        w.add_tensor("a", np.ones(3, np.float32))
    assert beside(tmp_path / name) == []


def test_an_interrupt_while_a_zip_writer_tidies_up_still_removes_its_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (Ctrl-C in close() after the zip was published: its temporary folder had stayed)
    from nncodecs.store import zip_output

    calls = []
    remove = zip_output.remove_settled

    def interrupted_once(path: Path) -> None:
        calls.append(path)
        if len(calls) == 1:
            raise KeyboardInterrupt
        remove(path)

    monkeypatch.setattr(zip_output, "remove_settled", interrupted_once)
    target = tmp_path / "m.zarr.zip"
    w = Writer(target)
    w.add_tensor("a", np.arange(6, dtype=np.float32))
    with pytest.raises(KeyboardInterrupt):
        w.close()
    assert len(calls) == 2 and beside(target) == []
    with Reader(target) as r:
        assert r.read_tensor("a").tolist() == list(range(6))


def test_a_zip_container_over_an_empty_directory_says_so(tmp_path: Path) -> None:
    # (it had failed at the end with "appeared while it was written")
    (tmp_path / "m.zarr.zip").mkdir()
    with pytest.raises(FileExistsError, match=r"a directory.*a zip container is a file"):
        Writer(tmp_path / "m.zarr.zip")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.zarr.zip"]
    with Writer(tmp_path / "m.zarr.zip", overwrite=True) as w:  # replaced when told
        w.add_tensor("a", np.ones(2, np.float32))
    assert (tmp_path / "m.zarr.zip").is_file()


def test_a_failed_batch_stops_the_batches_after_it() -> None:
    # Two batches may be in flight: a tensor's document (the next batch) must never be
    # written once its chunks (this one) failed, a full disk say.
    import threading

    from nncodecs.store.batches import Batches

    written, gate = [], threading.Event()

    def write(items: dict[str, bytes]) -> None:
        gate.wait(10)
        if "chunk" in items:
            raise OSError(28, "No space left on device")
        written.append(items)

    b = Batches(write)
    b.put({"chunk": b"x"})
    b.put({"doc": b"y"})  # (handed over before the first has failed)
    gate.set()
    with pytest.raises(OSError, match="No space"):
        b.wait()
    with pytest.raises(RuntimeError, match="a batch before it failed"):
        b.put({"doc2": b"z"})
        b.wait()
    b.stop()
    assert written == []


def test_uninterrupted_finishes_then_raises_the_interrupt() -> None:
    from nncodecs.outputs import uninterrupted

    runs = []

    def step() -> str:
        runs.append(1)
        if len(runs) < 3:
            raise KeyboardInterrupt
        return "done"

    with pytest.raises(KeyboardInterrupt):
        uninterrupted(step)
    assert len(runs) == 3
    runs.clear()
    runs.extend([1, 1])
    assert uninterrupted(step) == "done"  # (no interrupt: its result)


# -- one writer at a time ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["m.zarr", "m.zarr.zip"])
def test_a_second_writer_is_refused_naming_the_holder(name: str, tmp_path: Path) -> None:
    target = tmp_path / name
    write(target)
    with Writer(target, mode="a") as w:
        for mode, kwargs in (("a", {}), ("w", {"overwrite": True})):
            with pytest.raises(BlockingIOError, match=f"pid {os.getpid()}"):
                Writer(target, mode=mode, **kwargs)
        w.add_tensor("mine", np.ones(2, np.float32))
    with Reader(target) as r:
        assert r.keys() == ["w", "ids", "r", "mine"]
    assert beside(target) == []


def test_a_lock_left_by_a_dead_writer_is_taken_over(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    write(target)
    pid = os.fork()
    if pid == 0:  # a writer that dies holding the lock, with a temporary
        Writer(target, mode="a").add_tensor("x", np.ones((600, 1024), np.float32))
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    assert ".m.zarr.nncodecs.lock" in beside(target)
    with Writer(target, mode="a") as w:
        w.add_tensor("y", np.ones(2, np.float32))
    assert beside(target) == []
    with Reader(target) as r:
        assert r.keys()[:3] == ["w", "ids", "r"] and "y" in r


@pytest.mark.parametrize("name", ["m.zarr", "m.zarr.zip"])
def test_two_concurrent_appenders_one_refused_nothing_lost(name: str, tmp_path: Path) -> None:
    target = tmp_path / name
    write(target)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            with Writer(target, mode="a") as w:
                w.add_tensor("child", np.full(5, 7, np.int32))
                os.write(ready_w, b"1")
                os.read(go_r, 1)  # hold the lock until the parent has tried
        finally:
            os._exit(0)
    os.read(ready_r, 1)
    with pytest.raises(BlockingIOError, match=f"pid {pid}"):
        Writer(target, mode="a")
    os.write(go_w, b"1")
    os.waitpid(pid, 0)
    with Writer(target, mode="a") as w:
        w.add_tensor("parent", np.full(5, 8, np.int32))
    with Reader(target) as r:
        assert r.keys() == ["w", "ids", "r", "child", "parent"]
        assert (r.read_tensor("child") == 7).all() and (r.read_tensor("parent") == 8).all()
    assert beside(target) == []


# -- kills ---------------------------------------------------------------------------------


def test_writers_killed_at_random_moments() -> None:
    """A few trials per mode of scripts/stress_kill.py (make stress runs 60)."""
    import importlib.util

    path = Path(__file__).parent.parent.parent / "scripts" / "stress_kill.py"
    spec = importlib.util.spec_from_file_location("stress_kill", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--trials", "3", "--seed", str(os.getpid())]) == 0


def test_a_killed_append_is_listed_despite_the_consolidated_metadata(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    write(target)
    big = np.arange(600 * 1024, dtype=np.float32).reshape(600, 1024)
    pid = os.fork()
    if pid == 0:
        w = Writer(target, mode="a")
        w.add_tensor("big", big)  # committed when add_tensor returns (directory, in place)
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    with Reader(target) as r:
        assert r.keys() == ["w", "ids", "r", "big"]
        assert np.array_equal(r.read_tensor("big"), big)


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


@pytest.mark.parametrize("name", ["m.zarr", "m.zarr.zip"])
def test_a_replace_killed_between_its_renames_keeps_the_previous_output(
    name: str, tmp_path: Path
) -> None:
    """publish renames the old output to .NAME.nncodecs-PID.old, then the new one in: a
    kill between the two leaves nothing at the path. The next run puts the previous
    output back instead of deleting it as a dead writer's leftover."""
    from nncodecs import archive
    from nncodecs.outputs import remove_stale, temp_path

    target = tmp_path / name
    write(target)
    pid = _dead_pid()
    old = temp_path(target, "old", pid)
    target.rename(old)  # the state a kill between the two renames leaves
    temp_path(target, "tmp", pid).mkdir()  # and the new container, not yet renamed in
    with pytest.raises(FileExistsError, match="exists"):
        Writer(target)  # the previous container is back, so this is refused
    assert beside(target) == []
    with Reader(target) as r:
        assert r.keys() == ["w", "ids", "r"]
    # remove_stale itself, and archive, which runs it too
    target.rename(old)
    assert remove_stale(target) == [] and beside(target) == []
    if name.endswith(".zarr"):
        target.rename(old)
        with pytest.raises(FileExistsError, match="exists"):
            archive({"x": np.ones(3, np.float32)}, target, progress=False)
        assert beside(target) == []
    # A dead writer's .old beside an output that is there is still removed.
    shutil.copytree(target, old) if target.is_dir() else shutil.copy(target, old)
    assert remove_stale(target) == [old] and beside(target) == []
    with Reader(target) as r:
        assert r.keys() == ["w", "ids", "r"]


def _write_big_tensors(target: Path) -> None:
    rng = np.random.default_rng(0)
    big = rng.standard_normal((2048, 2048)).astype(np.float32)  # 16 MiB, 8 shards
    with Writer(target, chunk_bytes=64 << 10) as w:
        for i in range(40):
            w.add_tensor(f"t{i}", big, codec="zstd" if i % 2 else "auto")


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5])
def test_an_error_raised_mid_write_leaves_no_temporary(delay: float, tmp_path: Path) -> None:
    """An exception raised inside the with block while large tensors are being written
    (here from a timer signal, as Ctrl-C would): the writes still running are waited for,
    then the temporary is removed; nothing is left beside the target."""

    def boom(*_: Any) -> None:
        raise RuntimeError("boom")

    target = tmp_path / "m.zarr"
    previous = signal.signal(signal.SIGALRM, boom)
    # (a handler that runs inside a gc callback, as hypothesis installs one once its
    # tests have run, has its exception ignored by Python: none while this runs)
    callbacks = gc.callbacks[:]
    gc.callbacks.clear()
    try:
        signal.setitimer(signal.ITIMER_REAL, delay)
        with pytest.raises(RuntimeError, match="boom"):
            _write_big_tensors(target)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        gc.callbacks[:] = callbacks
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["m.zarr", "m.zarr.zip"])
def test_sigint_mid_write_leaves_no_temporary(name: str, tmp_path: Path) -> None:
    import time

    target = tmp_path / name
    for delay in (0.1, 0.4):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                _write_big_tensors(target)
            except KeyboardInterrupt:
                code = 3
            finally:
                os._exit(code)
        temp = tmp_path / f".{name}.nncodecs-{pid}.tmp"
        deadline = time.monotonic() + 30
        while not temp.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(delay)
        os.kill(pid, signal.SIGINT)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 3
        assert os.listdir(tmp_path) == [], os.listdir(tmp_path)


# -- integrity -------------------------------------------------------------------------------


def test_a_missing_chunk_is_an_error_not_fill_values(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    write(target, chunk_bytes=1024)  # "w": 64 rows of 64 bytes, 16 rows a chunk
    (target / "w" / "c" / "1" / "0").unlink()
    with Reader(target) as r:
        with pytest.raises(CorruptDataError, match=r"tensor 'w': chunk w/c/1/0 is missing"):
            r.read_tensor("w")
        with pytest.raises(CorruptDataError, match="tensor 'w'"):
            r["w"][16:20]
        with pytest.raises(CorruptDataError, match="tensor 'w'"):
            r.verify()
    shutil.rmtree(target / "ids" / "c")
    with Reader(target) as r, pytest.raises(CorruptDataError, match="tensor 'ids'"):
        r.read_tensor("ids")
    (target / "r" / "c" / "0" / "0").unlink()
    with Reader(target) as r, pytest.raises(CorruptDataError, match="tensor 'r'"):
        r.read_tensor("r")


def test_an_empty_shard_index_entry_is_an_error(tmp_path: Path) -> None:
    from nncodecs import _core

    target = tmp_path / "m.zarr"
    with Writer(target, chunk_bytes=256) as w:  # 4 rows a chunk, 64 a shard
        w.add_tensor("s", np.arange(200 * 64, dtype=np.float32).reshape(200, 64) % 7)
    shard = target / "s" / "c" / "0" / "0"
    raw = bytearray(shard.read_bytes())
    per = 16
    index = raw[-(16 * per + 4) :]
    index[16:32] = b"\xff" * 16  # chunk 1: "empty"
    index[-4:] = _core.crc32c(bytes(index[:-4])).to_bytes(4, "little")
    raw[-(16 * per + 4) :] = index
    shard.write_bytes(bytes(raw))
    with Reader(target) as r:
        with pytest.raises(CorruptDataError, match="tensor 's': chunk 1 of shard"):
            r.read_tensor("s")
        with pytest.raises(CorruptDataError, match="tensor 's'"):
            r["s"][4:8]


@pytest.mark.parametrize("name", ["m.zarr", "m.zarr.zip"])
def test_raw_and_zstd_tensors_carry_a_crc32c_that_verify_checks(name: str, tmp_path: Path) -> None:
    import numcodecs

    target = tmp_path / name
    model = write(target)
    if name.endswith(".zip"):
        import zipfile

        data = bytearray(target.read_bytes())
        with zipfile.ZipFile(target) as z:
            info = z.getinfo("r/c/0/0")
        # The local header's extra length + 4: the raw tensor's bytes would shift.
        at = info.header_offset + 28
        data[at] += 4
        target.write_bytes(bytes(data))
        with Reader(target) as r, pytest.raises(CorruptDataError, match="tensor 'r'"):
            r.verify()
        return
    chunk = target / "r" / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[5] ^= 0x10
    chunk.write_bytes(bytes(data))
    with Reader(target) as r:
        assert r.read_tensor("r").shape == (8, 4)  # a lazy map: checked by verify
        with pytest.raises(CorruptDataError, match=r"tensor 'r': CRC32C"):
            r.verify()
    other = model["ids"].copy()
    other[3] += 1
    (target / "ids" / "c" / "0").write_bytes(numcodecs.Zstd(level=3).encode(other))
    with Reader(target) as r, pytest.raises(CorruptDataError, match=r"tensor 'ids': CRC32C"):
        r.verify()


def test_raw_and_zstd_crcs_are_checked_on_whole_reads_and_merge(tmp_path: Path) -> None:
    """A flipped byte in a zstd tensor (or a zstd part of a sparse one) is an error on
    read_tensor; in a memory-mapped raw tensor on read_tensor(check=True), and in
    merge, which never re-encodes damaged bytes under a fresh CRC."""
    import numcodecs
    import scipy.sparse

    from nncodecs import merge

    target = tmp_path / "m.zarr"
    model = write(target)
    sparse = scipy.sparse.random(30, 20, density=0.2, format="csr", random_state=3)
    with Writer(target, mode="a") as w:
        w.add_tensor("sp", sparse, codec="zstd")
    other = model["ids"].copy()
    other[3] += 1
    (target / "ids" / "c" / "0").write_bytes(numcodecs.Zstd(level=3).encode(other))
    data = sparse.data.copy()
    data[0] += 1
    (target / "sp" / "data" / "c" / "0").write_bytes(numcodecs.Zstd(level=3).encode(data))
    chunk = target / "r" / "c" / "0" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[5] ^= 0x10
    chunk.write_bytes(bytes(raw))
    where = str(target)
    with Reader(target) as r:
        with pytest.raises(CorruptDataError, match=rf"^{where}: tensor 'ids': CRC32C"):
            r.read_tensor("ids")
        with pytest.raises(CorruptDataError, match=rf"^{where}: tensor 'sp' \(data\): CRC32C"):
            r.read_tensor("sp", to="scipy")
        assert r.read_tensor("r").shape == (8, 4)  # lazy by default
        with pytest.raises(CorruptDataError, match=rf"^{where}: tensor 'r': CRC32C"):
            r.read_tensor("r", check=True)
        with pytest.raises(CorruptDataError, match="tensor 'r'"):
            r.read_into("r", np.empty((8, 4), np.float32))
        assert np.array_equal(r.read_tensor("w"), model["w"])
    source = tmp_path / "raw.zarr"
    write(source)
    (source / "r" / "c" / "0" / "0").write_bytes(bytes(raw))
    out = tmp_path / "merged.zarr"
    with pytest.raises(CorruptDataError, match=rf"^{source}: tensor 'r': CRC32C"):
        merge([source], out)
    assert not out.exists() and beside(out) == ["m.zarr", "raw.zarr"]


def _zip_with_raw_x(target: Path) -> np.ndarray:
    x = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
    with Writer(target, codec="raw") as w:
        w.add_tensor("x", x)
        w.add_tensor("z", x[:8] + 1, codec="zstd")
    return x


def test_a_tampered_local_zip_header_is_an_error_not_shifted_data(tmp_path: Path) -> None:
    """Issue 15: a local header's extra-field length grown by 8 must not shift a raw
    tensor's bytes; a local name that differs, or a bad zip CRC, is an error too."""
    import io
    import zipfile

    target = tmp_path / "raw.zarr.zip"
    x = _zip_with_raw_x(target)
    clean = target.read_bytes()
    with zipfile.ZipFile(target) as z:
        at = {n: z.getinfo(n).header_offset for n in ("x/c/0/0", "z/c/0/0")}
    where = str(target)

    data = bytearray(clean)
    data[at["x/c/0/0"] + 28] += 8  # the extra field's length (little-endian u16)
    target.write_bytes(bytes(data))
    with Reader(target) as r:
        for read in (lambda: r.read_tensor("x"), lambda: r["x"][:], r.verify):
            with pytest.raises(CorruptDataError, match=rf"^{where}: (tensor 'x': )?x/c/0/0: "):
                read()
        with pytest.raises(CorruptDataError, match=r"next entry starts .*local zip header"):
            r.read_tensor("x")
        assert np.array_equal(r.read_tensor("z"), x[:8] + 1)

    data = bytearray(clean)
    data[at["x/c/0/0"] + 30] = ord("y")  # the local header's name: y/c/0/0
    target.write_bytes(bytes(data))
    with Reader(target) as r, pytest.raises(CorruptDataError, match="names another entry"):
        r.read_tensor("x")

    data = bytearray(clean)
    name_len = int.from_bytes(clean[at["z/c/0/0"] + 26 : at["z/c/0/0"] + 28], "little")
    data[at["z/c/0/0"] + 30 + name_len + 10] ^= 0xFF  # a byte of the zstd chunk: zip CRC fails
    target.write_bytes(bytes(data))
    with Reader(target) as r:
        for read in (lambda: r.read_tensor("z"), lambda: r["z"][:]):
            with pytest.raises(CorruptDataError, match=rf"^{where}: (tensor 'z': )?z/c/0/0: a dam"):
                read()

    # A zip written to a stream (entries with data descriptors, flag bit 3) still reads.
    class Stream(io.RawIOBase):
        def __init__(self, f: Any) -> None:
            self.f = f

        def writable(self) -> bool:
            return True

        def write(self, b: Any) -> int:
            return self.f.write(b)

    streamed = tmp_path / "streamed.zarr.zip"
    target.write_bytes(clean)
    with (
        zipfile.ZipFile(target) as src,
        open(streamed, "wb") as f,
        zipfile.ZipFile(Stream(f), "w") as dst,
    ):
        for info in src.infolist():
            with src.open(info) as a, dst.open(info.filename, "w") as b:
                b.write(a.read())
    with zipfile.ZipFile(streamed) as z:
        assert all(i.flag_bits & 0x08 for i in z.infolist())
    with Reader(streamed) as r:
        assert np.array_equal(r.read_tensor("x"), x)
        r.verify()


def test_a_shape_or_dtype_edited_in_zarr_json_is_an_error(tmp_path: Path) -> None:
    """Shrinking a tensor's shape (or changing its dtype) in its zarr.json must not cut
    it silently: its records (Writer and archive) say what the metadata must say."""
    import scipy.sparse

    from nncodecs import archive

    x = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
    sparse = scipy.sparse.random(30, 20, density=0.2, format="csr", random_state=3)
    written = tmp_path / "w.zarr"
    with Writer(written) as w:
        for codec in ("raw", "zstd", "auto"):
            w.add_tensor(codec, x, codec=codec)
        w.add_tensor("sp", sparse)
    archived = tmp_path / "a.zarr"
    archive({"raw": x, "zstd": x, "auto": x}, archived, codec="zstd", progress=False)

    def shrink(doc: dict) -> None:
        doc["shape"] = [64, 16]

    def retype(doc: dict) -> None:
        doc["data_type"] = "int32"

    for target in (written, archived):
        for name, change in (("raw", shrink), ("zstd", retype), ("auto", shrink)):
            edit_metadata(target, name, change)
        with Reader(target) as r:
            shrunk = r"shape \[64, 16\]"
            for name, what in (("raw", shrunk), ("zstd", "dtype int32"), ("auto", shrunk)):
                for read in (r.read_tensor, r.__getitem__, lambda n: r.read_tensor(n, check=True)):
                    with pytest.raises(CorruptDataError, match=rf"^{target}: tensor '{name}'"):
                        read(name)
                    with pytest.raises(CorruptDataError, match=what):
                        read(name)
            with pytest.raises(CorruptDataError, match="tensor 'raw'"):
                r.verify()
    edit_metadata(written, "sp/indptr", lambda doc: doc.update(shape=[20]))
    with (
        Reader(written) as r,
        pytest.raises(CorruptDataError, match=r"tensor 'sp' \(indptr\): .*shape \[20\]"),
    ):
        r.read_tensor("sp", to="scipy")


RESERVED_NAMES = ["zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata", "c", "__init__",
                  "", ".", "..", "%2E", "zarr%2Ejson", "zarr.json/zarr.json", "a/zarr.json",
                  "x.0123456789abcdef0123456789abcdef.partial", "ZARR.JSON"]  # fmt: skip


@pytest.mark.parametrize("container", ["m.zarr", "m.zarr.zip", "memory"])
def test_names_zarr_reserves_round_trip(container: str, tmp_path: Path) -> None:
    """A tensor named zarr.json (or .zarray, c, ...) is stored and read back under its
    name; names escaped before are escaped as they were (old containers read)."""
    from nncodecs.container.names import escape

    target: Any = f"memory://nncodecs-names-{uuid.uuid4().hex}" if container == "memory" else (
        tmp_path / container)  # fmt: skip
    tensors = {n: np.full((3, 2), i, np.int32) for i, n in enumerate(RESERVED_NAMES)}
    with Writer(target) as w:
        for n, t in tensors.items():
            w.add_tensor(n, t, codec="raw" if len(n) % 2 else "auto")
        w.add_sparse_coo("zarr.json.sparse", np.array([[0], [1]]), np.ones(1, np.float32), (2, 2))
    with Reader(target) as r:
        assert r.keys() == [*RESERVED_NAMES, "zarr.json.sparse"]
        for n, t in tensors.items():
            assert np.array_equal(r.read_tensor(n), t), n
        r.verify()
    with Writer(target, mode="a") as w:
        w.add_tensor("more", np.ones(2, np.float32))
    with Reader(target) as r:
        assert len(r) == len(RESERVED_NAMES) + 2
    assert [escape(n) for n in ("", ".", "..", "__init__", "a/b", "50%", ".zarray")] == [
        "%00", "%2E", "%2E.", "%5F_init__", "a%2Fb", "50%25", "%2Ezarray"]  # fmt: skip


def test_a_forged_shape_allocates_nothing(tmp_path: Path) -> None:
    import resource

    target = tmp_path / "m.zarr"
    write(target)

    def forge(doc: dict) -> None:
        doc["shape"] = [2**31, 1]
        doc["chunk_grid"]["configuration"]["chunk_shape"] = [2**31, 1]
        doc["dimension_names"] = ["a", "b"]

    edit_metadata(target, "w", forge)
    edit_metadata(target, "r", forge)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with Reader(target) as r:
        for name in ("w", "r"):
            with pytest.raises(CorruptDataError, match=f"tensor '{name}'"):
                r.read_tensor(name)
        with pytest.raises(CorruptDataError):
            r.verify()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 512 << 10  # KiB


def test_a_deflated_chunk_entry_in_a_zip_is_refused(tmp_path: Path) -> None:
    import zipfile

    target = tmp_path / "bomb.zarr.zip"
    write(tmp_path / "m.zarr.zip")
    with zipfile.ZipFile(tmp_path / "m.zarr.zip") as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "w/c/0/0":
                data = data + bytes(50 << 20)  # inflates past what is stored
            dst.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
    assert target.stat().st_size < 1 << 20
    with Reader(target) as r, pytest.raises(CorruptDataError, match="compressed chunk entry"):
        r.read_tensor("w")
    with pytest.raises(CorruptDataError, match="compressed chunk entry"):
        Writer(target, mode="a")


def test_a_zero_element_tensor_of_any_shape_is_constant_time(tmp_path: Path) -> None:
    import time

    start = time.perf_counter()
    for name in ("m.zarr", "m.zarr.zip"):
        with Writer(tmp_path / name) as w:
            w.add_tensor("huge_empty", np.empty((2**60, 0), np.float32))
            w.add_tensor("raw_empty", np.empty((0, 2**40), np.uint8), codec="raw")
        with Reader(tmp_path / name) as r:
            assert r.read_tensor("huge_empty").shape == (2**60, 0)
            assert r.read_tensor("raw_empty").shape == (0, 2**40)
            r.verify()
    assert time.perf_counter() - start < 10


def test_two_nodes_claiming_one_name_are_an_error(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    write(target)

    def rename(doc: dict) -> None:
        doc["attributes"]["nncodecs"]["name"] = "w"

    edit_metadata(target, "ids", rename)
    with pytest.raises(CorruptDataError, match=r"nodes 'w' and 'ids'|nodes 'ids' and 'w'"):
        Reader(target)


def test_a_chunk_linked_outside_the_container_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    model = write(target)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(model["r"].tobytes())
    chunk = target / "r" / "c" / "0" / "0"
    chunk.unlink()
    chunk.symlink_to(secret)
    with Reader(target) as r, pytest.raises(CorruptDataError, match="outside the container"):
        r.read_tensor("r")
    (target / "w" / "c").rename(tmp_path / "elsewhere")
    (target / "w" / "c").symlink_to(tmp_path / "elsewhere")
    with Reader(target) as r, pytest.raises(CorruptDataError, match="outside the container"):
        r.read_tensor("w")


def test_reader_errors_are_one_line_with_the_path(tmp_path: Path) -> None:
    text = tmp_path / "notes.zip"
    text.write_text("hello")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "zarr.json").write_text("{broken")
    cases = [
        (tmp_path / "missing.zarr", FileNotFoundError),
        (text, NotAContainerError),
        (tmp_path, NotAContainerError),
        (plain, CorruptDataError),
    ]
    for path, error in cases:
        with pytest.raises(error) as info:
            Reader(path)
        message = str(info.value)
        assert str(path) in message and "\n" not in message, message
        assert "LocalStore" not in message and "No group found" not in message


def test_an_old_container_takes_appends(tmp_path: Path) -> None:
    target = tmp_path / "v1.zarr"
    shutil.copytree(FIXTURES / "v1.zarr", target)
    with Writer(target, mode="a") as w:
        w.add_tensor("new", np.arange(5, dtype=np.float32), codec="zstd")
    expected = json.loads((FIXTURES / "expected.json").read_text())
    with Reader(target) as r:
        assert set(r.keys()) == {*expected, "new"}
        r.verify()


def test_archive_records_crcs_of_raw_tensors_and_takes_the_lock(tmp_path: Path) -> None:
    """archive: a raw or zstd tensor's CRC32C joined from its slabs (verify catches a flipped
    byte); the container's lock held while it runs; nothing at the path until it is whole."""
    from nncodecs import archive
    from nncodecs.outputs import OutputLock

    rng = np.random.default_rng(5)
    tensors = {
        "big": rng.standard_normal((4096, 256)).astype(np.float32),
        "small": np.arange(7, dtype=np.int16),
        "empty": np.zeros((0, 3), np.float32),
    }
    target = tmp_path / "a.zarr"
    with OutputLock(target), pytest.raises(BlockingIOError, match="another writer"):
        archive(tensors, target, codec="raw", chunk_bytes=1 << 16, progress=False)
    assert sorted(os.listdir(tmp_path)) == []
    archive(tensors, target, codec="raw", chunk_bytes=1 << 16, progress=False)
    assert sorted(os.listdir(tmp_path)) == ["a.zarr"]
    with Reader(target) as r:
        r.verify()
        for name, arr in tensors.items():
            assert np.array_equal(r.read_tensor(name), arr)
    chunk = max((p for p in (target / "big").rglob("*") if p.is_file() and p.name != "zarr.json"),
                key=lambda p: p.stat().st_size)  # fmt: skip
    data = bytearray(chunk.read_bytes())
    data[len(data) // 3] ^= 1
    chunk.write_bytes(bytes(data))
    with Reader(target) as r, pytest.raises(CorruptDataError, match="big"):
        r.verify()
