"""Constants of the frame format (docs/format.md) as Python sees them.

Read from ``_core``, never restated: the C++ headers (``format.h``, ``frame.h``,
``gpu_structs.h``) state each once, for the CPU code and the GPU kernels.
This is the one module of the Python side that reads them.
"""

from __future__ import annotations

from nncodecs import _core

__all__ = [
    "CHUNK_LOG2",
    "CHUNK_SYMBOLS",
    "ELEMENT_CODES",
    "ELEMENT_TYPES",
    "FRAME_MAGIC",
    "GPU_STRUCTS",
    "LAYOUTS",
    "MAX_EXPANSION",
    "MODES",
    "MODE_CONSTANT",
    "MODE_HUFFMAN",
    "MODE_RANS",
    "MODE_RAW",
    "MODE_ZSTD",
    "TINY_BYTES",
    "WHOLE_MAGIC",
    "WHOLE_MAGICS",
    "WHOLE_TYPED_MAGIC",
    "WHOLE_ZSTD_LIMIT",
    "ZSTD_MAGIC",
    "max_ratio_bound",
]

#: Symbols in a chunk of a plane: each chunk is coded (and decoded) on its own.
CHUNK_LOG2: int = _core.CHUNK_LOG2
CHUNK_SYMBOLS = 1 << CHUNK_LOG2

#: Magic of the chunked frame.
FRAME_MAGIC = b"NNCF"
#: Magics of the second frame kind, a zstd frame of the whole input: the
#: first (read, no longer written), and the one that records the element
#: type after it (what auto writes).
WHOLE_MAGIC: bytes = _core.WHOLE_MAGIC
WHOLE_TYPED_MAGIC: bytes = _core.WHOLE_TYPED_MAGIC
WHOLE_MAGICS = (WHOLE_MAGIC, WHOLE_TYPED_MAGIC)
#: zstd's own magic, which the frames leave out.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: auto tries the whole-input zstd frame on inputs up to this many bytes, and
#: no zstd trials per chunk up to TINY_BYTES (encoder policy, in C++).
WHOLE_ZSTD_LIMIT: int = _core.WHOLE_ZSTD_LIMIT
TINY_BYTES: int = _core.TINY_BYTES

#: nnc::ChunkMode, the modes of a frame's chunk index.
MODES: dict[str, int] = dict(_core.CHUNK_MODES)
MODE_RAW, MODE_CONSTANT, MODE_RANS, MODE_HUFFMAN, MODE_ZSTD = (
    MODES[name] for name in ("raw", "constant", "rans", "huffman", "zstd")
)

#: The element types frames record, by code: (name, width in bytes; 0 any).
ELEMENT_TYPES: tuple[tuple[str, int], ...] = tuple(
    (name, width) for name, width, _ in _core.ELEMENT_TYPES
)
ELEMENT_CODES = {name: code for code, (name, _) in enumerate(ELEMENT_TYPES)}

#: The float layouts: name -> (nnc::Layout code, width in bytes, mantissa bits).
LAYOUTS: dict[str, tuple[int, int, int]] = dict(_core.LAYOUTS)

#: The GPU kernels' structs (gpu_structs.h): name -> (size, {field: offset}).
GPU_STRUCTS: dict[str, tuple[int, dict[str, int]]] = dict(_core.GPU_STRUCTS)

# The most one frame byte can expand to: a constant chunk (2 index bytes)
# stands for a whole chunk. Bounds the allocation of a decoder told no size.
MAX_EXPANSION = CHUNK_SYMBOLS // 2


def max_ratio_bound(frame_len: int) -> int:
    """The largest decoded size a frame of ``frame_len`` bytes can honestly declare."""
    return frame_len * MAX_EXPANSION + CHUNK_SYMBOLS
