"""The task API into a zip (nncodecs.container.task_zip): processes each write a part of
their own, one commit joins them into one zip container, renamed into place."""

from __future__ import annotations

import multiprocessing
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from harness import row_scaled, weights_like

from nncodecs import Reader
from nncodecs.container import series, task_zip, tasks
from nncodecs.errors import CorruptDataError


def _model() -> dict[str, np.ndarray]:
    return {
        "big": row_scaled("float32", 640, 96, seed=1),  # (sharded at a small chunk size)
        "bf16": weights_like("bfloat16", 3000, seed=2).reshape(100, 30),
        "scalar": np.array(3.5, np.float32),
        "empty": np.zeros((0, 4), np.float16),
    }


def _plans() -> list[tasks.TensorPlan]:
    return [tasks.plan(n, a.dtype, a.shape, "auto", 4096) for n, a in _model().items()]


def _part(folder: str, jobs: list[tuple[tasks.TensorPlan, int, int]]) -> tuple[list, object]:
    """One process's part: the slabs it was given, encoded into a part of its own."""
    model, part, records = _model(), task_zip.Part(folder), []
    for p, a, b in jobs:
        rows = model[p.name][a:b] if p.shape else model[p.name]
        objects, record = tasks.encode_rows(p, a, b, rows)
        part.add(objects)
        records.append(record)
    return records, part.close()


def _write(target: Path, workers: int = 2, overwrite: bool = False, drop: int = 0) -> None:
    plans = _plans()
    folder = str(task_zip.begin(target, overwrite))
    jobs = [(p, *s) for p in plans for s in p.slabs(task_bytes=1)]
    shares = [jobs[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(_part, [folder] * workers, shares))
    records = [r for rs, _ in done for r in rs][drop:]
    task_zip.commit(target, plans, records, [part for _, part in done], {"run": "7"}, overwrite)


def test_processes_write_parts_joined_into_one_zip(tmp_path: Path) -> None:
    target = tmp_path / "model.zip"
    _write(target, workers=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.zip"]  # (the folder gone)
    with zipfile.ZipFile(target) as zf:
        assert zf.testzip() is None  # (every entry's CRC-32 right, offsets moved right)
        assert zf.namelist()[-1] == "zarr.json"
    with Reader(target) as r:
        assert r.metadata["run"] == "7" and list(r) == list(_model())
        for name, arr in _model().items():
            assert np.array_equal(r.read_tensor(name, check=True).view(arr.dtype), arr)


def test_a_commit_refused_leaves_the_target_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "model.zip"
    _write(target)
    before = target.read_bytes()
    with pytest.raises(FileExistsError, match="overwrite"):
        task_zip.begin(target)
    with pytest.raises(ValueError, match="never written"):  # (a slab's record missing)
        _write(target, overwrite=True, drop=1)
    assert target.read_bytes() == before
    leftover = task_zip.parts_folder(target)
    assert leftover.is_dir()  # (what the refused run left) ...
    _write(target, overwrite=True)  # ... removed by the next run, which replaces the zip
    assert not leftover.exists() and target.read_bytes() != b""


def test_what_is_never_replaced_nor_removed(tmp_path: Path) -> None:
    notes = tmp_path / "notes.zip"
    notes.write_bytes(b"not a container")
    with pytest.raises(FileExistsError, match="not a container"):
        task_zip.begin(notes, overwrite=True)
    assert notes.read_bytes() == b"not a container"
    mine = task_zip.parts_folder(tmp_path / "x.zip")
    mine.mkdir()
    (mine / "keep").write_text("mine")  # (a folder of that name that no run began)
    with pytest.raises(FileExistsError):
        task_zip.begin(tmp_path / "x.zip")
    assert (mine / "keep").read_text() == "mine"
    with pytest.raises(ValueError, match="local zip"):
        task_zip.begin("s3://bucket/x.zip")
    with pytest.raises(ValueError, match="local zip"):
        task_zip.begin(tmp_path / "x.zarr")


def test_a_cut_or_foreign_part_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "m.zip"
    plans = _plans()
    folder = str(task_zip.begin(target))
    jobs = [(p, *s) for p in plans for s in p.slabs()]
    rec_a, part_a = _part(folder, jobs[:2])
    rec_b, part_b = _part(folder, jobs[2:])
    cut = Path(folder) / "parts" / part_b.name
    cut.write_bytes(cut.read_bytes()[:-3])
    with pytest.raises(CorruptDataError, match="another size"):
        task_zip.commit(target, plans, rec_a + rec_b, [part_a, part_b])
    assert not target.exists()
    folder = str(task_zip.begin(target))
    rec_a, part_a = _part(folder, jobs)
    forged = task_zip.PartRecord("../../elsewhere.zip", part_a.entries, part_a.size)
    with pytest.raises(ValueError, match="distinct files"):
        task_zip.commit(target, plans, rec_a, [forged])
    assert not target.exists()


def test_series_tensors_into_zips(tmp_path: Path) -> None:
    """Whole tensors of a series (series.write_tensor), their objects put into a part: a
    zip stored against the zip before it."""
    first, second = tmp_path / "a.zip", tmp_path / "b.zip"
    w = row_scaled("float32", 64, 32, seed=4)
    moved = w + np.float32(1e-3)
    plans = [tasks.plan("w", w.dtype, w.shape)]

    def step(target: Path, arr: np.ndarray, s: series.Series | None) -> tasks.TensorRecord:
        folder = str(task_zip.begin(target))
        part = task_zip.Part(folder)
        record = series.write_tensor(folder, plans[0], arr, s, put=part.add)
        task_zip.commit(target, plans, [record], [part.close()])
        return record

    before = step(first, w, series.Series(str(first)))
    step(second, moved, series.Series(str(second), str(first), before, lambda: w))
    with Reader(second) as r:
        assert r.references()  # (it reads through the zip before it)
        assert r.read_tensor("w", check=True).tobytes() == moved.tobytes()
