"""Frames encoded on the CPU: the C++ encoder, with auto's zstd trials."""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.frame.constants import CHUNK_SYMBOLS
from nncodecs.frame.params import CHECKSUM, MIN_GAIN, PRECISION, SUBBLOCK_LOG2, ZSTD_LEVEL
from nncodecs.frame.threads import get_threads
from nncodecs.frame.zstd import compress_pieces, whole_zstd

__all__ = ["TINY_BYTES", "WHOLE_ZSTD_LIMIT", "encode_frame"]

#: auto tries the whole-input zstd frame on inputs up to this many bytes
#: (always up to TINY_BYTES: biases, norms; above, when zstd chunks could
#: win), and no per-chunk zstd trials up to TINY_BYTES.
WHOLE_ZSTD_LIMIT = CHUNK_SYMBOLS
TINY_BYTES = 1 << 14
#: The zstd level of the whole-input trial on inputs up to TINY_LEVEL_BYTES
#: (the lowest at which no tiny tensor ends larger than zstd of its raw
#: bytes; docs/development.md has the figures).
TINY_LEVEL = 12
TINY_LEVEL_BYTES = 1 << 11


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
    must be ``planes``.
    """
    threads = threads or get_threads()
    settings = {
        "planes": planes,
        "coder": coder,
        "precision": precision,
        "subblock_log2": subblock_log2,
        "checksum": checksum,
        "layout": layout,
        "elements": elements,
        "threads": threads,
        "min_gain_permille": round(min_gain * 1000),
        "row_length": row_length if elements else 0,
        "element": dtype,
    }
    # auto probes for zstd while it encodes (tiny inputs get the whole-input
    # trial below instead: trials per chunk cost more there than they save).
    # When a chunk is worth a trial, the probe returns the plan instead of a
    # frame: zstd runs on those chunks and the frame is made again with them.
    probe = coder == "auto" and data.nbytes > TINY_BYTES
    frame = _core.frame_encode(data, probe_zstd=probe, **settings)
    planned = isinstance(frame, list)
    if planned:
        zstd = compress_pieces(frame, zstd_level, threads)
        frame = _core.frame_encode(data, zstd=zstd, **settings)
    if (
        coder == "auto"
        and data.nbytes <= WHOLE_ZSTD_LIMIT
        and (data.nbytes <= TINY_BYTES or planned)
    ):
        # A small input may do better as one zstd frame, which costs no
        # header, index or chunk lengths of ours (see docs/format.md); worth
        # a trial when tiny, or when the plan saw chunks zstd could win.
        level = max(zstd_level, TINY_LEVEL) if data.nbytes <= TINY_LEVEL_BYTES else zstd_level
        if elements:  # the whole-input kind holds the planes
            split = np.empty(data.nbytes, dtype=np.uint8)
            _core.planes_split(split, data, planes, layout, threads=threads)
            data = split
        whole = whole_zstd(data, level, checksum, dtype)
        if len(whole) < len(frame):
            return whole
    return frame
