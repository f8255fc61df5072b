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
    with pytest.raises(FileExistsError, match="no run began it"):
        task_zip.begin(tmp_path / "x.zip")
    assert (mine / "keep").read_text() == "mine"
    with pytest.raises(FileExistsError, match="no run began it"):
        task_zip.begin(tmp_path / "x.zip", overwrite=True)
    with pytest.raises(ValueError, match="local zip"):
        task_zip.begin("s3://bucket/x.zip")
    with pytest.raises(ValueError, match="local zip"):
        task_zip.begin(tmp_path / "x.zarr")


@pytest.mark.parametrize("which", [0, 1])  # (the first part, which is renamed; a later one)
def test_a_cut_forged_or_linked_part_is_refused_and_the_commit_may_be_tried_again(
    tmp_path: Path, which: int
) -> None:
    target = tmp_path / "m.zip"
    plans = _plans()
    folder = task_zip.begin(target)
    jobs = [(p, *s) for p in plans for s in p.slabs()]
    rec_a, part_a = _part(str(folder), jobs[:2])
    rec_b, part_b = _part(str(folder), jobs[2:])
    records, parts = rec_a + rec_b, [part_a, part_b]
    file = folder / "parts" / parts[which].name
    whole = file.read_bytes()
    file.write_bytes(whole[:-3])
    with pytest.raises(CorruptDataError, match="another size"):
        task_zip.commit(target, plans, records, parts)
    file.write_bytes(whole)
    forged = [task_zip.PartRecord(p.name, p.entries, p.size + 5) for p in parts]
    with pytest.raises(CorruptDataError, match="another size"):
        task_zip.commit(target, plans, records, forged)
    swapped = [
        task_zip.PartRecord(p.name, parts[1 - i].entries, p.size) for i, p in enumerate(parts)
    ]
    with pytest.raises(CorruptDataError, match="other entries"):
        task_zip.commit(target, plans, records, swapped)
    for name in ("../../elsewhere.zip", "", ".."):
        renamed = [task_zip.PartRecord(name, p.entries, p.size) if i == which else p
                   for i, p in enumerate(parts)]  # fmt: skip
        with pytest.raises(ValueError, match="distinct parts"):
            task_zip.commit(target, plans, records, renamed)
    victim = tmp_path / "victim"
    victim.write_bytes(b"V" * len(whole))
    file.rename(tmp_path / "aside")
    file.symlink_to(victim)  # (a link in place of a part: never followed)
    with pytest.raises(CorruptDataError, match="not a regular file"):
        task_zip.commit(target, plans, records, parts)
    assert victim.read_bytes() == b"V" * len(whole) and not target.exists()
    file.unlink()
    (tmp_path / "aside").rename(file)
    task_zip.commit(target, plans, records, parts)  # (every refusal left the parts as they were)
    with Reader(target) as r:
        for name, arr in _model().items():
            assert np.array_equal(r.read_tensor(name, check=True).view(arr.dtype), arr)


def test_replacing_asks_for_overwrite_at_both_ends_and_respects_a_writer(tmp_path: Path) -> None:
    from nncodecs import Writer

    target = tmp_path / "m.zip"
    _write(target)
    plans = _plans()
    folder = task_zip.begin(target, overwrite=True)
    records, part = _part(str(folder), [(p, *s) for p in plans for s in p.slabs()])
    with pytest.raises(FileExistsError, match="overwrite=True"):
        task_zip.commit(target, plans, records, [part])  # (and the parts stay: tried again)
    with Writer(target, mode="a"):  # (a Writer appending holds the lock)
        with pytest.raises(BlockingIOError, match="another writer"):
            task_zip.commit(target, plans, records, [part], overwrite=True)
        with pytest.raises(BlockingIOError, match="another writer"):
            task_zip.begin(target, overwrite=True)
    task_zip.commit(target, plans, records, [part], overwrite=True)
    with Reader(target) as r:
        assert list(r) == list(_model())


def test_only_a_container_zip_is_replaced(tmp_path: Path) -> None:
    import json

    fake = tmp_path / "fake.zip"
    with zipfile.ZipFile(fake, "w") as zf:  # (a root document, not a container's)
        zf.writestr("zarr.json", json.dumps({"zarr_format": 3, "node_type": "group"}))
        zf.writestr("precious.txt", "mine")
    link = tmp_path / "link.zip"
    link.symlink_to(tmp_path / "missing.zip")
    for path in (fake, link):
        with pytest.raises(FileExistsError, match="never replaced"):
            task_zip.begin(path, overwrite=True)
    assert zipfile.ZipFile(fake).read("precious.txt") == b"mine" and link.is_symlink()


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


def test_a_link_planted_in_the_folder_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "m.zip"
    a = np.zeros((0, 4), np.float32)  # (a tensor of no rows: its part holds nothing)
    plans = [tasks.plan("e", a.dtype, a.shape)]
    folder = task_zip.begin(target)
    part = task_zip.Part(folder)
    records = [series.write_tensor(str(folder), plans[0], a, put=part.add)]
    closed = part.close()
    victim = tmp_path / "victim"
    victim.write_bytes(b"V" * 100)
    (folder / "joined.zip").symlink_to(victim)
    task_zip.commit(target, plans, records, [closed])
    assert victim.read_bytes() == b"V" * 100 and not target.is_symlink()
    with Reader(target) as r:
        assert r.read_tensor("e").shape == (0, 4)
