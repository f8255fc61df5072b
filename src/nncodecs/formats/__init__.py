"""Readers and writers of model file formats."""

from nncodecs.formats.convert import compress, decompress, detect_format, iter_source
from nncodecs.formats.safetensors import SafetensorsFile, read_safetensors, write_safetensors

__all__ = [
    "SafetensorsFile",
    "compress",
    "decompress",
    "detect_format",
    "iter_source",
    "read_safetensors",
    "write_safetensors",
]
