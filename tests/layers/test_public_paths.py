"""The paths users import stay where they are while the inside moves: the root package's
names, ``nncodecs.formats``', the integrations, the command's entry point, and every
codec and data type registered with numcodecs and Zarr, under the ids containers name."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util

import pytest

import nncodecs
import nncodecs.formats

ROOT_NAMES = [
    "ArchiveResult", "Auto", "BitReorder", "CorruptDataError", "Huffman", "NNCodecsError",
    "NotAContainerError", "NumcodecsAuto", "NumcodecsBitReorder", "NumcodecsHuffman",
    "NumcodecsPlanes", "NumcodecsRans", "NumcodecsWeights", "Planes", "Rans", "Reader",
    "ReferenceNeededError", "ReferenceProblemError", "TensorInfo", "Weights", "Writer",
    "__version__", "archive", "as_numpy", "get_threads", "merge", "set_threads", "to_torch",
]  # fmt: skip
FORMATS_NAMES = [
    "ArchiveResult", "READ_FORMATS", "SafetensorsFile", "Source", "Tensor", "WRITE_FORMATS",
    "archive", "check_container_name", "compress", "convert", "convert_file", "decompress",
    "default_output", "detect_format", "iter_source", "merge_containers", "open_source",
    "read_safetensors", "restored_name", "write_safetensors",
]  # fmt: skip
MODULES = [
    "nncodecs.cli", "nncodecs.sizes", "nncodecs.extras", "nncodecs.datasets",
    "nncodecs.integrations.torch", "nncodecs.integrations.safetensors",
    "nncodecs.integrations.transformers",
]  # fmt: skip
CODECS = {"bitreorder", "planes", "rans", "huffman", "auto", "weights"}
DATA_TYPES = {"bfloat16", "float8_e5m2", "nncodecs.float8_e4m3fn", "float4_e2m1fn"}


def test_the_root_and_formats_names_stay() -> None:
    assert sorted(nncodecs.__all__) == sorted(ROOT_NAMES)
    assert sorted(nncodecs.formats.__all__) == sorted(FORMATS_NAMES)
    for name in ROOT_NAMES:
        assert getattr(nncodecs, name) is not None
    for name in FORMATS_NAMES:
        assert getattr(nncodecs.formats, name) is not None


@pytest.mark.parametrize("module", MODULES)
def test_the_public_modules_stay(module: str) -> None:
    # (found, not imported: an integration imports its optional package)
    assert importlib.util.find_spec(module) is not None


def _entry_points(group: str) -> dict[str, str]:
    eps = importlib.metadata.entry_points(group=group)
    return {ep.name: ep.value for ep in eps if ep.value.startswith("nncodecs.")}


def test_the_command_and_the_registered_codecs_stay() -> None:
    scripts = _entry_points("console_scripts")
    assert scripts.get("nncodecs") == "nncodecs.cli:main"
    numcodecs_ids = _entry_points("numcodecs.codecs")
    zarr_ids = _entry_points("zarr.codecs")
    assert set(numcodecs_ids) == {f"nncodecs.{c}" for c in CODECS}
    assert set(zarr_ids) == {f"nncodecs.{c}" for c in CODECS | {"delta"}}  # (Zarr's only)
    assert set(_entry_points("zarr.data_type")) == DATA_TYPES
    for group in ("numcodecs.codecs", "zarr.codecs", "zarr.data_type"):
        for name, value in _entry_points(group).items():
            module, _, attr = value.partition(":")
            cls = getattr(importlib.import_module(module), attr)
            if group == "numcodecs.codecs":
                assert cls.codec_id == name  # (the id a stored array names)
