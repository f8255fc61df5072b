"""Constants of the frame format (docs/format.md) as Python sees them.

Each stated once here for the Python side; the C++ headers state them for
the kernels (``entropy.h``, ``common.cuh``). The element types already come
from ``_core``.
"""

from __future__ import annotations

from nncodecs import _core

__all__ = [
    "CHUNK_LOG2",
    "CHUNK_SYMBOLS",
    "ELEMENT_CODES",
    "ELEMENT_TYPES",
    "FRAME_MAGIC",
    "MAX_EXPANSION",
    "MODES",
    "MODE_CONSTANT",
    "MODE_HUFFMAN",
    "MODE_RANS",
    "MODE_RAW",
    "MODE_ZSTD",
    "WHOLE_MAGIC",
    "WHOLE_MAGICS",
    "WHOLE_TYPED_MAGIC",
    "ZSTD_MAGIC",
    "max_ratio_bound",
]

#: Symbols in a chunk of a plane: each chunk is coded (and decoded) on its own.
CHUNK_LOG2 = 18
CHUNK_SYMBOLS = 1 << CHUNK_LOG2

#: Magic of the chunked frame.
FRAME_MAGIC = b"NNCF"
#: Magic of the second frame kind: a zstd frame of the whole input, its own
#: magic replaced by this one (auto writes it for small inputs when smaller).
#: Read, no longer written: WHOLE_TYPED_MAGIC says the element type too.
WHOLE_MAGIC = b"NNCZ"
#: The whole-input kind that records its element type: this magic, the
#: element code (one byte, the table of ``_core.element_types()``), then the
#: zstd frame. What auto writes now.
WHOLE_TYPED_MAGIC = b"NNCW"
WHOLE_MAGICS = (WHOLE_MAGIC, WHOLE_TYPED_MAGIC)
#: zstd's own magic, which the frames leave out.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

#: nnc::ChunkMode, the modes of a frame's chunk index.
MODE_RAW, MODE_CONSTANT, MODE_RANS, MODE_HUFFMAN, MODE_ZSTD = 0, 1, 2, 3, 4
MODES = {"raw": MODE_RAW, "constant": MODE_CONSTANT, "rans": MODE_RANS,
         "huffman": MODE_HUFFMAN, "zstd": MODE_ZSTD}  # fmt: skip

#: The element types frames record, by code: (name, width in bytes; 0 any).
#: From the C++ table (nnc::kElements): the one place the codes live.
ELEMENT_TYPES: tuple[tuple[str, int], ...] = tuple(_core.element_types())
ELEMENT_CODES = {name: code for code, (name, _) in enumerate(ELEMENT_TYPES)}

# The most one frame byte can expand to: a constant chunk (2 index bytes)
# stands for a whole chunk. Bounds the allocation of a decoder told no size.
MAX_EXPANSION = CHUNK_SYMBOLS // 2


def max_ratio_bound(frame_len: int) -> int:
    """The largest decoded size a frame of ``frame_len`` bytes can honestly declare."""
    return frame_len * MAX_EXPANSION + CHUNK_SYMBOLS
