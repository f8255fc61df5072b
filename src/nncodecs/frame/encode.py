"""Frames encoded on the CPU: the C++ encoder, auto's zstd trials included."""

from __future__ import annotations

from typing import Any

from nncodecs import _core
from nncodecs.frame.params import CHECKSUM, MIN_GAIN, PRECISION, SUBBLOCK_LOG2, ZSTD_LEVEL
from nncodecs.frame.threads import get_threads

__all__ = ["encode_frame"]


def encode_frame(
    data: Any,
    *,
    planes: int,
    coder: str,
    precision: int = PRECISION.default,
    subblock_log2: int = SUBBLOCK_LOG2.default,
    checksum: bool = CHECKSUM.default,
    zstd_level: int = ZSTD_LEVEL.default,
    min_gain: float = MIN_GAIN.default,
    elements: bool = False,
    layout: str = "none",
    threads: int | None = None,
    row_length: int = 0,
    dtype: str = "bytes",
    big_endian: bool = False,
) -> bytes:
    """Encode a flat uint8 array of ``planes`` planes as a frame.

    With ``elements=True`` the input holds ``planes``-byte elements and the
    split (and the reorder of a float ``layout``) runs fused, chunk by chunk
    (``auto`` copies out only the chunks it tries zstd on). The bytes equal
    those of encoding the planes. ``min_gain`` (auto only): a chunk is
    stored raw unless its best coder saves at least this fraction of it.
    ``row_length`` (elements of a float layout only): elements per row; the
    encoder then shifts each row's exponents by the row's mean where that
    pays, and writes the row section (docs/format.md, "Row shift").
    ``dtype`` is the element type the frame records (a name of
    :func:`nncodecs.frame.element_types`; ``"bytes"``: none), whose width
    must be ``planes``. ``big_endian`` (elements of two or more bytes,
    given little-endian): they were big-endian; the frame (version 4) says
    so and decoding to elements swaps them back.
    """
    # One call: with auto, the C++ encoder probes for chunks worth a zstd
    # trial, compresses them (libzstd) and makes the frame with them, and
    # tries the whole-input kind on small inputs (encoder policy:
    # docs/format.md; the levels' figures: docs/development.md).
    return _core.encode(
        data,
        planes=planes,
        coder=coder,
        precision=precision,
        subblock_log2=subblock_log2,
        checksum=checksum,
        layout=layout,
        elements=elements,
        threads=threads or get_threads(),
        min_gain_permille=round(min_gain * 1000),
        row_length=row_length if elements else 0,
        element=dtype,
        zstd_level=zstd_level,
        big_endian=big_endian,
    )
