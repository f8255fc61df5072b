"""URL outputs work or are refused by name, never a local file named after a URL;
``zip::`` inputs open (issue 36, N6)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from harness import run_cli
from safetensors.numpy import save_file

from nncodecs import Reader, Writer
from nncodecs.formats import compress, decompress

CHAINED = [
    "zip::o.zarr.zip",
    "simplecache::o.zarr",
    "simplecache::file:///tmp/o.zarr",
    "zip::file://o.zarr.zip",
]


@pytest.mark.parametrize("target", CHAINED)
def test_chained_urls_are_refused_as_targets(
    tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    save_file({"w": np.ones((8, 8), "f4")}, "x.safetensors")
    with pytest.raises(ValueError, match="chained URL"):
        compress("x.safetensors", target)
    with pytest.raises(ValueError, match="chained URL"):
        Writer(target)
    r = run_cli("compress", "x.safetensors", "-o", target, cwd=tmp_path)
    assert r.returncode != 0 and "chained URL" in r.stderr, r.stderr
    compress("x.safetensors", "x.zarr.zip")
    with pytest.raises(ValueError, match="not a URL"):
        decompress("x.zarr.zip", target.replace("zarr", "safetensors"))
    assert sorted(os.listdir(tmp_path)) == ["x.safetensors", "x.zarr.zip"]


def test_zip_inputs_open(tmp_path: Path) -> None:
    save_file({"w": np.arange(64, dtype="f4").reshape(8, 8)}, str(tmp_path / "x.safetensors"))
    compress(tmp_path / "x.safetensors", tmp_path / "x.zarr.zip")
    for spelling in (f"zip::{tmp_path / 'x.zarr.zip'}", f"zip::file://{tmp_path / 'x.zarr.zip'}"):
        with Reader(spelling) as r:
            assert np.array_equal(r.read_tensor("w"), np.arange(64, dtype="f4").reshape(8, 8))
    for cmd in (
        ("info", "zip::x.zarr.zip"),
        ("verify", "zip::x.zarr.zip"),
        ("decompress", "zip::x.zarr.zip", "-o", "back.safetensors"),
    ):
        r = run_cli(*cmd, cwd=tmp_path)
        assert r.returncode == 0, (cmd, r.stderr)
    assert (tmp_path / "back.safetensors").read_bytes() == (tmp_path / "x.safetensors").read_bytes()
