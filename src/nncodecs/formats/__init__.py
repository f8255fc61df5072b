"""Readers and writers of model file formats."""

from nncodecs.formats.convert import (
    READ_FORMATS,
    WRITE_FORMATS,
    compress,
    convert_file,
    decompress,
    detect_format,
    iter_source,
    merge_containers,
)
from nncodecs.formats.safetensors import SafetensorsFile, read_safetensors, write_safetensors

__all__ = [
    "READ_FORMATS",
    "WRITE_FORMATS",
    "SafetensorsFile",
    "compress",
    "convert_file",
    "decompress",
    "detect_format",
    "iter_source",
    "merge_containers",
    "read_safetensors",
    "write_safetensors",
]
