"""The kernels' tables as NumPy record types, and the launch constants.

Each record type mirrors a struct of ``cpp/include/nncodecs/gpu_structs.h``
byte for byte (checked at import against the sizes and offsets the C++
build reports, ``frame.constants.GPU_STRUCTS``); the kernels take the tables as raw bytes.
"""

from __future__ import annotations

import numpy as np

from nncodecs.frame.constants import GPU_STRUCTS

__all__ = [
    "CONSTANT",
    "CRC_BLOCK",
    "CRC_TASK",
    "ENCODE_CHUNK",
    "ENCODE_DESC",
    "ENCODE_TASK",
    "FRAME_DESC",
    "FRAME_PIECE",
    "FROM_EXTERNAL",
    "FROM_FRAME",
    "FROM_PLANES",
    "MERGE_BLOCK",
    "MERGE_TASK",
    "PIECE_FROM_HOST",
    "PIECE_FROM_PLANES",
    "PIECE_RANS",
    "PLANE_SOURCE",
    "RANS_BLOCK",
    "RANS_CHUNK",
    "ROWS_BLOCK",
    "STATS_BLOCK",
    "STATUS_MESSAGES",
]

#: Threads of a rANS block: 4 warps, one sub-block each (2^18 / 2^16).
RANS_BLOCK = 128
MERGE_BLOCK = 256
CRC_BLOCK = 256
STATS_BLOCK = 256
ROWS_BLOCK = 256

# -- decoding ------------------------------------------------------------------------------

#: Where a (plane, chunk) of the merge comes from (PlaneSource.kind).
FROM_FRAME, CONSTANT, FROM_PLANES, FROM_EXTERNAL = 0, 1, 2, 3

#: nnc::gpu::RansChunk, PlaneSource, FrameDesc, MergeTask and CrcTask, byte for byte.
RANS_CHUNK = np.dtype(
    [
        ("payload", "<u8"),
        ("out", "<u8"),
        ("first", "<u8"),
        ("length", "<u4"),
        ("symbols", "<u4"),
        ("shifted", "<u4"),
        ("desc", "<u4"),
    ]
)
PLANE_SOURCE = np.dtype([("offset", "<u8"), ("kind", "<u4"), ("value", "<u4")])
FRAME_DESC = np.dtype(
    [
        ("frame", "<u8"),
        ("out", "<u8"),
        ("planes", "<u8"),
        ("external", "<u8"),
        ("rows", "<u8"),
        ("row_length", "<u8"),
        ("n", "<u8"),
        ("k", "<u4"),
        ("chunks", "<u4"),
        ("layout", "<u4"),
        ("sources", "<u4"),
        ("precision", "<u4"),
        ("subblock_log2", "<u4"),
        ("to_planes", "<u4"),
        ("pad", "<u4"),
    ]
)
MERGE_TASK = np.dtype([("desc", "<u4"), ("chunk", "<u4")])
CRC_TASK = np.dtype([("desc", "<u4"), ("plane", "<u4"), ("chunk", "<u4"), ("from_elements", "<u4")])

#: The rANS kernels' status codes per chunk.
STATUS_MESSAGES = {
    1: "malformed rANS table",
    2: "rANS sub-block headers do not add up to the payload",
    3: "a rANS lane state outside [2^15, 2^31)",
    4: "corrupt rANS stream (words left over or missing, or a final state not 2^15)",
    5: "a rANS sub-block declares more words than symbols",
    6: "more rANS sub-blocks than a thread block handles",
}

# -- encoding ------------------------------------------------------------------------------

#: nnc::gpu::EncodeChunk and FramePiece, byte for byte.
ENCODE_CHUNK = np.dtype(
    [
        ("input", "<u8"),
        ("words", "<u8"),
        ("symbols", "<u4"),
        ("first_sub", "<u4"),
        ("freqs", "<u4"),
        ("pad", "<u4"),
    ]
)
FRAME_PIECE = np.dtype(
    [
        ("dst", "<u8"),
        ("src", "<u8"),
        ("words", "<u8"),
        ("length", "<u4"),
        ("kind", "<u4"),
        ("first_sub", "<u4"),
        ("subblocks", "<u4"),
    ]
)
#: Where a frame piece comes from (FramePiece.kind).
PIECE_FROM_PLANES, PIECE_FROM_HOST, PIECE_RANS = 0, 1, 2
#: nnc::gpu::EncodeDesc and EncodeTask, byte for byte.
ENCODE_DESC = np.dtype(
    [
        ("input", "<u8"),
        ("planes", "<u8"),
        ("rows", "<u8"),
        ("row_length", "<u8"),
        ("n", "<u8"),
        ("k", "<u4"),
        ("layout", "<u4"),
        ("elements", "<u4"),
        ("shift", "<u4"),
        ("bits", "<u4"),
        ("pad", "<u4"),
    ]
)
ENCODE_TASK = np.dtype([("desc", "<u4"), ("plane", "<u4"), ("index", "<u4"), ("pad", "<u4")])


def _check_layouts() -> None:
    """Each record type against its C++ struct: size and field offsets."""
    for dtype, name in (
        (RANS_CHUNK, "RansChunk"),
        (PLANE_SOURCE, "PlaneSource"),
        (FRAME_DESC, "FrameDesc"),
        (MERGE_TASK, "MergeTask"),
        (CRC_TASK, "CrcTask"),
        (ENCODE_CHUNK, "EncodeChunk"),
        (FRAME_PIECE, "FramePiece"),
        (ENCODE_DESC, "EncodeDesc"),
        (ENCODE_TASK, "EncodeTask"),
    ):
        size, offsets = GPU_STRUCTS[name]
        ours = {field: dtype.fields[field][1] for field in dtype.names}
        if dtype.itemsize != size or ours != offsets:
            raise ImportError(
                f"nncodecs.gpu: {name} is {size} bytes with fields at {offsets} in C++, "
                f"the NumPy record {dtype.itemsize} bytes at {ours}"
            )


_check_layouts()
