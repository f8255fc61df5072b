"""Quantized GGUF tensors into formats that cannot hold their type (safetensors, npz).

A ``Q4_0`` tensor is blocks of scales and packed 4-bit quants; safetensors and npz have
no such type. Written as its bytes, it would be a ``U8`` blob no reader knows how to use,
so it is refused with the reason, naming the tensor and its type; from a GGUF file,
``dequantize=True`` (``--dequantize``) writes its values instead, as float32 in its
logical shape, decoded by the ``gguf`` package's own ``gguf.quants.dequantize``. A
container keeps the blocks, not the shapes they stand for: from one, restore the GGUF
file (byte for byte) and convert that.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from nncodecs.extras import need

__all__ = [
    "QUANTIZED_SHAPES",
    "check_no_quantized",
    "dequantized",
    "quantized_in_container",
    "quantized_shapes",
]

#: A GGUF container's record of its quantized tensors' shapes in values (``info``).
QUANTIZED_SHAPES = "source.gguf.shapes"

#: GGUF's types that safetensors and npz hold as they are (BF16 as bfloat16).
TYPED = frozenset({"F32", "F16", "F64", "BF16", "I8", "I16", "I32", "I64"})


def quantized_in_container(metadata: dict[str, str]) -> list[tuple[str, str]]:
    """``(tensor, GGML type)`` of each quantized tensor a GGUF file's container holds
    (from its records of the file's places)."""
    if metadata.get("source.format") != "gguf":
        return []
    try:
        ranges = json.loads(metadata.get("source.gguf.ranges", "[]"))
        return [(str(r[0]), str(r[3])) for r in ranges if str(r[3]) not in TYPED]
    except (ValueError, TypeError, IndexError):
        return []  # (damaged records: the restore itself says so)


def quantized_shapes(metadata: dict[str, str]) -> dict[str, list[int]]:
    """Each quantized tensor's shape in values, as its GGUF file gave it (none where the
    container recorded none, or nothing readable: its byte shape is shown then)."""
    try:
        shapes = json.loads(metadata.get(QUANTIZED_SHAPES, "{}"))
    except (ValueError, TypeError):
        return {}
    if not isinstance(shapes, dict):
        return {}
    return {str(k): v for k, v in shapes.items() if _a_shape(v)}


def _a_shape(v: Any) -> bool:
    return isinstance(v, list) and len(v) <= 8 and all(type(n) is int and n >= 0 for n in v)


def check_no_quantized(items: list[tuple[str, str]], where: str, fmt: str, file: bool) -> None:
    """Refuse quantized tensors (``items``) for ``fmt``, saying what to do instead."""
    if not items:
        return
    name, kind = items[0]
    more = f" (and {len(items) - 1} more quantized tensors)" if len(items) > 1 else ""
    instead = (
        "convert to a container or a GGUF file, or pass --dequantize to write float32 values"
        if file
        else "restore the GGUF file (decompress to .gguf), then convert that with --dequantize"
    )
    raise ValueError(
        f"{where}: tensor {name!r} is {kind} (quantized GGML blocks){more}, a type {fmt} "
        f"cannot hold: {instead}"
    )


def dequantized(tensors: list[Any]) -> Iterator[tuple[str, Any]]:
    """``(name, array)`` of a GGUF source's tensors (``Tensor``), its quantized ones
    dequantized to float32 in their logical shape by ``gguf.quants``."""
    quants = need("gguf.quants", "--dequantize")
    kinds = need("gguf", "--dequantize").GGMLQuantizationType
    for t in tensors:
        if t.quantized is None:
            yield t.name, t.read()
            continue
        kind, shape = t.quantized
        raw = np.asarray(t.rows(0, t.shape[0]), np.uint8)
        try:
            values = quants.dequantize(raw, kinds[kind])
        except NotImplementedError:
            raise ValueError(
                f"tensor {t.name!r} is {kind}, which the gguf package cannot dequantize"
            ) from None
        yield t.name, np.asarray(values, np.float32).reshape(shape)
