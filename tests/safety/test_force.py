"""``--force`` replaces only what nncodecs wrote (issue 36, N3 and N7).

A directory is replaced only when every entry in it is a Zarr document or a
chunk key of the container's own nodes, or nncodecs' own temporary or lock
name: a user's file or a ``.git`` inside is named in the refusal, and nothing
is deleted. ``decompress --force`` never replaces a container the input is
stored against (its reference chain): both would be lost.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from nncodecs import Reader, Writer
from nncodecs.formats import compress, decompress
from nncodecs.outputs import check_output, foreign_entries


def _container(path: Path) -> Path:
    with Writer(path) as w:
        w.add_tensor("a", np.ones((30, 20), "f4"))
        w.add_tensor("b", np.arange(100))
        w.add_tensor("s", np.array(3.5, "f4"))  # (0-d: its one chunk is the file s/c)
        w.add_file("notes/readme.txt", b"hi")
    return path


def test_only_a_container_of_nothing_but_its_own_entries_is_replaced(tmp_path: Path) -> None:
    box = _container(tmp_path / "m.zarr")
    assert foreign_entries(box) == []
    check_output(box, force=True)  # its own documents and chunks: replaceable
    (box / ".m.zarr.nncodecs-12345.tmp").write_bytes(b"")  # (nncodecs' own names: too)
    assert foreign_entries(box) == []
    for extra in (".git/config", "mine.txt", "a/notes.md", "a/c/0/x", "sub/zarr.json"):
        path = box / extra
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("the user's own")
        found = foreign_entries(box)
        assert found, extra
        with pytest.raises(FileExistsError, match="which the container does not"):
            check_output(box, force=True)
        # and compress --force over it deletes nothing
        src = tmp_path / "x.safetensors"
        save_file({"w": np.zeros(4, "f4")}, str(src))
        with pytest.raises(FileExistsError, match=extra.split("/")[0]):
            compress(src, box, force=True)
        assert path.read_text() == "the user's own"
        path.unlink()
        if path.parent != box and not any(path.parent.iterdir()) and extra != "a/c/0/x":
            path.parent.rmdir()
    # a root that merely claims to be a container, among other files: refused
    fake = tmp_path / "fake.zarr"
    fake.mkdir()
    (fake / "zarr.json").write_text((box / "zarr.json").read_text())
    (fake / "thesis.tex").write_text("years of work")
    with pytest.raises(FileExistsError, match=r"thesis\.tex"):
        check_output(fake, force=True)
    assert (fake / "thesis.tex").exists()


def test_decompress_force_never_replaces_the_inputs_reference(tmp_path: Path) -> None:
    """A folder of shards restores as a folder: ``-o base --force`` once replaced the
    container ``base`` that the input is stored against, losing both."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 64)).astype("f4")
    for name, value in (("base_src", w), ("step1_src", w + np.float32(1e-3))):
        (tmp_path / name).mkdir()
        save_file({"w": value}, str(tmp_path / name / "model.safetensors"))
    compress(tmp_path / "base_src", tmp_path / "base")
    compress(tmp_path / "step1_src", tmp_path / "step1.zarr", reference=tmp_path / "base")
    with Reader(tmp_path / "step1.zarr") as r:
        assert r.references()  # (stored against base)
        assert r.metadata.get("source.layout") == "directory"
    before = sorted(str(p) for p in (tmp_path / "base").rglob("*"))
    with pytest.raises(ValueError, match="chain of references"):
        decompress(tmp_path / "step1.zarr", tmp_path / "base", force=True)
    assert sorted(str(p) for p in (tmp_path / "base").rglob("*")) == before
    with Reader(tmp_path / "step1.zarr") as r:
        assert np.array_equal(r.read_tensor("w"), w + np.float32(1e-3))
    # a restore elsewhere still works
    decompress(tmp_path / "step1.zarr", tmp_path / "restored")
    assert (tmp_path / "restored" / "model.safetensors").is_file()
