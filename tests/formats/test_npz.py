"""npz entry names are safe names (issue 36): a tensor named ``../../../x`` or ``/abs``
once became an entry that an unzip writes outside its folder."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from nncodecs.formats import compress, convert, decompress


@pytest.mark.parametrize("name", ["../../../x", "/abs", "a/../../b", "a\\b", "a//b", ".", "C:/w"])
def test_unsafe_tensor_names_are_refused_as_npz_entries(tmp_path: Path, name: str) -> None:
    save_file({name: np.ones(3, "f4"), "fine": np.zeros(2, "f4")}, str(tmp_path / "n.safetensors"))
    with pytest.raises(ValueError, match="not a safe npz entry name"):
        convert(tmp_path / "n.safetensors", tmp_path / "n.npz")
    compress(tmp_path / "n.safetensors", tmp_path / "n.zarr")
    with pytest.raises(ValueError, match="not a safe npz entry name"):
        decompress(tmp_path / "n.zarr", tmp_path / "out.npz")
    assert not (tmp_path / "n.npz").exists() and not (tmp_path / "out.npz").exists()


def test_names_with_folders_stay_inside(tmp_path: Path) -> None:
    save_file({"layer.0/w": np.ones(3, "f4")}, str(tmp_path / "n.safetensors"))
    convert(tmp_path / "n.safetensors", tmp_path / "n.npz")
    with zipfile.ZipFile(tmp_path / "n.npz") as z:
        assert z.namelist() == ["layer.0/w.npy"]
