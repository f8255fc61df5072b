"""Readers and writers of model file formats."""

from nncodecs.formats.safetensors import read_safetensors

__all__ = ["read_safetensors"]
