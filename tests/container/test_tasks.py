"""The task API (nncodecs.container.tasks, .series): one container written by several
processes at once, each task returning a record, one commit taking them all."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import zarr
from harness import np_dtype, row_scaled, weights_like

from nncodecs import Reader
from nncodecs.container import series, tasks


def _model() -> dict[str, np.ndarray]:
    return {
        "big": row_scaled("float32", 640, 96, seed=1),  # sharded at a small chunk size
        "bf16": weights_like("bfloat16", 3000, seed=2).reshape(100, 30),
        "e4m3": weights_like("float8_e4m3fn", 999, seed=3),
        "scalar": np.array(3.5, np.float32),
        "empty": np.zeros((0, 4), np.float16),
        "ints": np.arange(77, dtype=">i4"),  # big-endian rows: stored little-endian
    }


def _slab(target: str, p: tasks.TensorPlan, start: int, stop: int) -> tasks.SlabRecord:
    """One task in a worker process: it rebuilds the rows it writes from their name."""
    arr = _model()[p.name]
    return tasks.write_rows(target, p, start, stop, arr[start:stop] if arr.ndim else arr)


def _write(target: Path, codec: str, chunk_bytes: int = 4096) -> list[tasks.TensorPlan]:
    model = _model()
    plans = [tasks.plan(n, a.dtype, a.shape, codec, chunk_bytes) for n, a in model.items()]
    tasks.begin(str(target), {"run": "7"})
    jobs = [(str(target), p, *s) for p in plans for s in p.slabs(task_bytes=1)]
    # (a task a slab: "big" has four shards, but a raw tensor is one chunk; "empty" none)
    assert len(plans[0].slabs(task_bytes=1)) == (1 if codec == "raw" else 4)
    assert not plans[4].slabs()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        records = list(pool.map(_slab, *zip(*jobs, strict=True)))
    tasks.commit(str(target), plans, reversed(records), {"run": "7"})  # (any order)
    return plans


@pytest.mark.parametrize("codec", ["auto", "zstd", "raw"])
def test_processes_write_one_container(tmp_path: Path, codec: str) -> None:
    target = tmp_path / "m.zarr"
    _write(target, codec)
    model = _model()
    with Reader(target) as r:
        assert list(r) == list(model)
        assert r.metadata == {"run": "7"}
        r.verify()  # (every chunk there, CRC32C records where the codec has none)
        for name, arr in model.items():
            got = r.read_tensor(name)
            assert got.shape == arr.shape
            assert got.tobytes() == arr.astype(arr.dtype.newbyteorder("<")).tobytes()
            if codec in ("zstd", "raw"):
                assert r.tensor_attrs(name)["crc32c"] >= 0
    group = zarr.open_group(str(target), mode="r")  # plain Zarr reads it too
    assert np.array_equal(group["big"][:], model["big"])
    assert group["big"].shards is not None or codec == "raw"


def test_nothing_shows_before_the_commit(tmp_path: Path) -> None:
    target = tmp_path / "m.zarr"
    p = tasks.plan("w", np.float32, (64, 8), chunk_bytes=256)
    tasks.begin(str(target))
    records = [tasks.write_rows(str(target), p, a, b, np.ones((b - a, 8), np.float32))
               for a, b in p.slabs(task_bytes=1)]  # fmt: skip
    with Reader(target) as r:
        assert list(r) == []
    with pytest.raises(ValueError, match="never written"):
        tasks.commit(str(target), [p], records[:-1])
    with pytest.raises(ValueError, match="never written"):
        tasks.commit(str(target), [p], records[1:])
    with Reader(target) as r:
        assert list(r) == []  # (a refused commit wrote nothing)
    other = tasks.plan("v", np.float32, (2,))
    with pytest.raises(ValueError, match="no plan names"):
        tasks.commit(str(target), [other], records)
    with pytest.raises(ValueError, match="overlap"):
        tasks.commit(str(target), [p], [records[0], *records, tasks.SlabRecord("w", 0, 16, 0, 0)])
    tasks.commit(str(target), [p], records + records[:1])  # (a retried task: the same record)
    with Reader(target) as r:
        assert np.array_equal(r.read_tensor("w"), np.ones((64, 8), np.float32))


def test_bad_tasks_are_refused(tmp_path: Path) -> None:
    target = str(tmp_path / "m.zarr")
    tasks.begin(target)
    p = tasks.plan("w", np.float32, (64, 8), chunk_bytes=256)  # 8 rows a chunk
    with pytest.raises(ValueError, match="not whole stored objects"):
        tasks.write_rows(target, p, 3, 11, np.zeros((8, 8), np.float32))
    with pytest.raises(ValueError, match="not whole stored objects"):
        tasks.write_rows(target, p, 0, 65, np.zeros((65, 8), np.float32))
    with pytest.raises(ValueError, match="have shape"):
        tasks.write_rows(target, p, 0, 8, np.zeros((8, 7), np.float32))
    with pytest.raises(TypeError, match="plan says dtype"):
        tasks.write_rows(target, p, 0, 8, np.zeros((8, 8), np.float64))
    with pytest.raises(TypeError):
        tasks.plan("c", np.complex64, (2,))
    with pytest.raises(ValueError):
        tasks.plan("w", np.float32, (2,), codec="gzip")
    with pytest.raises(FileExistsError):
        tasks.begin(target)  # (an existing output is never written over)


def test_series_tasks(tmp_path: Path) -> None:
    """Whole-tensor tasks of a series: a duplicate and a difference against the
    checkpoint before, committed with records as the slabs' are."""
    first, second = str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")
    w = row_scaled("bfloat16", 64, 32, seed=4)
    moved = (w.astype(np.float32) + np.float32(1e-3)).astype(np_dtype("bfloat16"))
    same = weights_like("float16", 500, seed=5)
    plans = [tasks.plan("w", w.dtype, w.shape), tasks.plan("s", same.dtype, same.shape)]
    tasks.begin(first)
    before = [series.write_tensor(first, plans[0], w), series.write_tensor(first, plans[1], same)]
    tasks.commit(first, plans, before)
    tasks.begin(second)
    chained = series.Series(second, first, before[0], lambda: w)  # (read only if needed)
    duplicate = series.Series(second, first, same=before[1])
    after = [
        series.write_tensor(second, plans[0], moved, chained),
        series.write_tensor(second, plans[1], same, duplicate),
    ]
    tasks.commit(second, plans, after)
    assert after[1].origin == (first, "s", 0) and after[1].depth == 1
    with Reader(second) as r:
        assert r.references()  # (it reads through the container before it)
        assert r.read_tensor("w").tobytes() == moved.tobytes()
        assert r.read_tensor("s").tobytes() == same.tobytes()
        assert r.tensor_attrs("s")["duplicate"] is True


def test_a_task_after_the_commit_or_without_begin_is_refused(tmp_path: Path) -> None:
    """The container says it is being written by tasks until its commit: a straggler
    task after the commit, a second commit, a commit or task without begin, and a
    Writer appending to an uncommitted container are refused by name."""
    from nncodecs import Writer

    target = str(tmp_path / "m.zarr")
    p = tasks.plan("w", np.float32, (64, 8), chunk_bytes=256)
    rows = np.arange(512, dtype=np.float32).reshape(64, 8)
    with pytest.raises(ValueError, match="no container begun"):
        tasks.write_rows(target, p, 0, 8, rows[:8])
    with pytest.raises(ValueError, match="no container begun"):
        tasks.commit(target, [p], [])
    tasks.begin(target)
    records = [tasks.write_rows(target, p, a, b, rows[a:b]) for a, b in p.slabs(task_bytes=1)]
    with pytest.raises(ValueError, match="not committed"):
        Writer(target, mode="a")
    tasks.commit(target, [p], records)
    with pytest.raises(ValueError, match="committed already"):
        tasks.write_rows(target, p, 0, 8, np.zeros((8, 8), np.float32))
    with pytest.raises(ValueError, match="committed already"):
        series.write_tensor(target, p, rows)
    with pytest.raises(ValueError, match="committed already"):
        tasks.commit(target, [p], records)
    with Reader(target) as r:
        assert np.array_equal(r.read_tensor("w"), rows)  # (as committed)
    with Writer(target, mode="a") as w:  # (committed: a Writer appends)
        w.add_tensor("extra", np.ones(3, np.float32))
    with Reader(target) as r:
        assert list(r) == ["w", "extra"]


def test_two_tasks_for_one_tensor_are_refused(tmp_path: Path) -> None:
    target = str(tmp_path / "m.zarr")
    p = tasks.plan("w", np.float32, (64, 8), chunk_bytes=256)
    a, b = np.zeros((64, 8), np.float32), np.ones((64, 8), np.float32)
    tasks.begin(target)
    first, second = series.write_tensor(target, p, a), series.write_tensor(target, p, b)
    slab = tasks.write_rows(target, p, 0, 8, b[:8])
    for records in ([first, second], [first, slab], [slab, first]):
        with pytest.raises(ValueError, match="written by two tasks"):
            tasks.commit(target, [p], records)
    tasks.commit(target, [p], [second, second])  # (a retried task: the same record)
    with Reader(target) as r:
        r.verify()
        assert np.array_equal(r.read_tensor("w"), b)


def test_plans_refuse_what_a_writer_refuses(tmp_path: Path) -> None:
    for name in ("y" * 300, "a\0b", "a\ud800", 3):
        with pytest.raises((ValueError, TypeError)):
            tasks.plan(name, np.float32, (2,))
    for shape in ((2**62, 2**62), (2**63,)):
        with pytest.raises(ValueError, match="beyond"):
            tasks.plan("h", np.float32, shape)
    with pytest.raises(ValueError, match="not a zip"):
        tasks.begin(str(tmp_path / "m.zarr.zip"))
    assert not (tmp_path / "m.zarr.zip").exists()
    target = str(tmp_path / "s.zarr")
    p = tasks.plan("s", np.float64, ())
    tasks.begin(target)
    # (a 0-d tensor's one slab is rows 0:1: its value, or as a row of one)
    record = tasks.write_rows(target, p, 0, 1, np.array([2.5]))
    tasks.commit(target, [p], [record])
    with Reader(target) as r:
        assert r.read_tensor("s") == np.float64(2.5) and r.read_tensor("s").shape == ()


def test_rows_of_any_layout_are_stored_as_their_values(tmp_path: Path) -> None:
    """Rows as users have them: Fortran-ordered, strided, big-endian; stored as values."""
    target = str(tmp_path / "m.zarr")
    base = row_scaled("float32", 96, 40, seed=7)
    p = tasks.plan("w", np.float32, base.shape, chunk_bytes=2048)
    tasks.begin(target)
    kinds = [np.asfortranarray, lambda a: a.astype(">f4"), lambda a: np.repeat(a, 2, 1)[:, ::2]]
    records = [
        tasks.write_rows(target, p, a, b, kinds[i % 3](base[a:b]))
        for i, (a, b) in enumerate(p.slabs(task_bytes=1))
    ]
    assert len(records) >= 3
    tasks.commit(target, [p], records)
    with Reader(target) as r:
        assert r.read_tensor("w").tobytes() == base.tobytes()
