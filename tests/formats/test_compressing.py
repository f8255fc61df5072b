"""Where compress writes for a folder input (issue 36): never inside the folder.

``nncodecs compress sharded/model.safetensors.index.json`` once wrote its
output inside the model folder, and took its own temporary and lock file in as
kept files (140 MiB instead of 71), which decompress then wrote back. The
default output of a folder, or of the index file standing for it, is
``FOLDER.zarr.zip`` beside the folder; an output named inside it is refused;
nothing nncodecs creates is ever taken in as a kept file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from harness import run_cli
from safetensors.numpy import save_file

from nncodecs import Reader
from nncodecs.formats import compress


def _sharded(folder: Path) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(2)
    weight_map = {}
    for i in range(2):
        name = f"model-0000{i + 1}-of-00002.safetensors"
        save_file({f"w{i}": rng.standard_normal((64, 32)).astype("f4")}, str(folder / name))
        weight_map[f"w{i}"] = name
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (folder / "config.json").write_text("{}")
    return folder / "model.safetensors.index.json"


@pytest.mark.parametrize("given", ["index", "folder"])
def test_the_default_output_of_a_folder_is_beside_it(tmp_path: Path, given: str) -> None:
    index = _sharded(tmp_path / "sharded")
    before = sorted(p.name for p in index.parent.iterdir())
    arg = str(index) if given == "index" else str(index.parent)
    r = run_cli("compress", arg, "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "sharded.zarr.zip").is_file()
    assert sorted(p.name for p in index.parent.iterdir()) == before  # nothing written inside
    with Reader(tmp_path / "sharded.zarr.zip") as rd:
        assert rd.files() == ["config.json"]


def test_an_output_inside_the_folder_is_refused(tmp_path: Path) -> None:
    index = _sharded(tmp_path / "sharded")
    for source in (index, index.parent):
        with pytest.raises(ValueError, match="overwrite the input"):
            compress(source, index.parent / "out.zarr.zip")
    assert not (index.parent / "out.zarr.zip").exists()


def test_nncodecs_own_names_are_never_kept_files(tmp_path: Path) -> None:
    index = _sharded(tmp_path / "sharded")
    # a lock and a temporary another run left in the folder (a dead writer's, say)
    (index.parent / ".other.zarr.zip.nncodecs.lock").write_bytes(b"")
    (index.parent / ".other.zarr.zip.nncodecs-99999999.tmp").write_bytes(b"x" * 1000)
    compress(index, tmp_path / "out.zarr.zip")
    with Reader(tmp_path / "out.zarr.zip") as rd:
        assert rd.files() == ["config.json"]


def test_compress_dot_inside_the_folder_writes_beside_it(tmp_path: Path) -> None:
    index = _sharded(tmp_path / "sharded")
    r = run_cli("compress", ".", "-q", cwd=index.parent)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "sharded.zarr.zip").is_file()
