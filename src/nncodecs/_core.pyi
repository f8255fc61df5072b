"""Type stub of the compiled kernels module (cpp/bindings/core.cpp)."""

from collections.abc import Buffer
from typing import Literal

import numpy as np

Layout = Literal[
    "none", "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"
]
Variant = Literal["auto", "scalar", "avx2"]

def reorder_encode(
    dst: Buffer, src: Buffer, layout: Layout, variant: Variant = "auto", threads: int = 0
) -> None: ...
def reorder_decode(
    dst: Buffer, src: Buffer, layout: Layout, variant: Variant = "auto", threads: int = 0
) -> None: ...
def planes_split(
    dst: Buffer,
    src: Buffer,
    elemsize: int,
    layout: Layout = "none",
    variant: Variant = "auto",
    threads: int = 0,
) -> None: ...
def planes_merge(
    dst: Buffer,
    src: Buffer,
    elemsize: int,
    layout: Layout = "none",
    variant: Variant = "auto",
    threads: int = 0,
) -> None: ...
def variants() -> list[str]: ...
def best_variant() -> str: ...
def hardware_threads() -> int: ...

#: The SIMD dispatch levels, lowest first (the values NNCODECS_DISPATCH takes).
DISPATCH_LEVELS: tuple[str, str, str]

def dispatch_level() -> Literal["scalar", "avx2", "avx512"]: ...
def cpu_dispatch_level() -> Literal["scalar", "avx2", "avx512"]: ...

# The format's constants (cpp/include/nncodecs: entropy.h, gpu_structs.h).
CHUNK_LOG2: int
FRAME_VERSION: int
CHUNK_MODES: dict[str, int]
#: name: (nnc::Layout code, width in bytes, mantissa bits)
LAYOUTS: dict[str, tuple[int, int, int]]
#: by element code: (name, width in bytes (0: any), float layout name)
ELEMENT_TYPES: tuple[tuple[str, int, str], ...]
WHOLE_MAGIC: bytes
WHOLE_TYPED_MAGIC: bytes
WHOLE_ZSTD_LIMIT: int
TINY_BYTES: int
#: struct name: (size, {field: offset})
GPU_STRUCTS: dict[str, tuple[int, dict[str, int]]]

# One call each (zstd inside): encode, the header of either kind, decode.
def encode(
    src: Buffer,
    planes: int = 1,
    coder: Literal["rans", "huffman", "auto"] = "rans",
    precision: int = 11,
    subblock_log2: int = 16,
    checksum: bool = True,
    layout: Layout = "none",
    elements: bool = False,
    threads: int = 0,
    min_gain_permille: int = 0,
    row_length: int = 0,
    element: str = "bytes",
    zstd_level: int = 3,
    big_endian: bool = False,
) -> bytes: ...
def header(src: Buffer, max_decoded: int) -> dict[str, object]: ...
def element_of(src: Buffer, max_decoded: int) -> tuple[str, bool]: ...
def decode(
    src: Buffer,
    max_decoded: int,
    layout: Layout = "none",
    elements: bool = False,
    planes: int = 0,
    threads: int = 0,
    element: str = "bytes",
    out: Buffer | None = None,
    any_order: bool = False,
) -> np.ndarray | Buffer: ...
def zstd_chunks(
    pieces: list[Buffer | None], level: int, threads: int = 0
) -> list[bytes | None]: ...

# Frames step by step (docs/format.md): encode, inspect, decode.
def frame_bound(src_len: int, planes: int) -> int: ...
def frame_encode(
    src: Buffer,
    planes: int = 1,
    coder: Literal["rans", "huffman", "auto"] = "rans",
    precision: int = 11,
    subblock_log2: int = 16,
    checksum: bool = True,
    layout: Layout = "none",
    elements: bool = False,
    threads: int = 0,
    zstd: list[Buffer | None] | None = None,
    min_gain_permille: int = 0,
    probe_zstd: bool = False,
    row_length: int = 0,
    element: str = "bytes",
) -> bytes | list[bytes | None]: ...
def frame_info(src: Buffer, max_decoded: int) -> dict[str, object]: ...
def frame_index(src: Buffer, max_decoded: int, total_len: int = 0) -> dict[str, object] | None: ...
def crc32c_join(crcs: Buffer, lengths: Buffer) -> int: ...
def layout_code(name: Layout) -> int: ...
def element_types() -> list[tuple[str, int]]: ...
def output_cache_clear() -> None: ...

# The GPU encoder's host: the CPU encoder's decisions from statistics.
def plan_chunks(
    counts: Buffer,
    samples: Buffer,
    lengths: list[int],
    zstd_lens: list[int],
    coder: str,
    precision: int,
    subblock_log2: int,
    min_gain_permille: int,
) -> tuple[bytes, bytes]: ...
def settle_rans(
    lengths: list[int],
    rans_lens: list[int],
    zstd_lens: list[int],
    coder: str,
    min_gain_permille: int,
) -> bytes: ...
def rans_tables(
    counts: Buffer, rows: int, precision: int
) -> tuple[np.ndarray, bytes, list[int]]: ...
def row_shift_pays(
    plain: Buffer, shifted: Buffer, groups: int, n: int, row_length: int
) -> bool: ...
def frame_head(
    src_len: int,
    planes: int,
    coder: str,
    precision: int,
    subblock_log2: int,
    checksum: bool,
    crc: int,
    row_length: int,
    row_offsets: bytes,
    modes: bytes,
    values: bytes,
    lengths: list[int],
    element: str = "bytes",
) -> bytes: ...
def row_shift_field(
    layout: Layout, elements: bool, n: int, row_length: int
) -> tuple[int, int] | None: ...
def output_cache_stats() -> tuple[int, int]: ...
def output_buffer(nbytes: int) -> np.ndarray: ...
def crc32c(data: Buffer, crc: int = 0) -> int: ...
def crc32c_combine(crc_a: int, crc_b: int, len_b: int) -> int: ...
def rans_variants() -> list[str]: ...

# Testing only: force a kernel variant.
def _set_rans_variant(name: Literal["auto", "scalar", "avx2", "avx512"]) -> None: ...
def _set_crc_narrow(narrow: bool) -> None: ...
