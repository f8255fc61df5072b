"""The zstd side channel of frames, through the ``zstandard`` package.

``auto`` may store a chunk as zstd (the C++ probe picks the chunks worth a
trial, :func:`compress_pieces` compresses them) or a small input as one
zstd frame of the whole input (the second frame kind, docs/format.md); the
decoders here read both back. zstd frames are stored magicless.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import zstandard

from nncodecs.errors import CorruptDataError
from nncodecs.frame.constants import (
    ELEMENT_CODES,
    ELEMENT_TYPES,
    WHOLE_MAGIC,
    WHOLE_TYPED_MAGIC,
    ZSTD_MAGIC,
)

__all__ = [
    "compress_pieces",
    "decode_whole_zstd",
    "decode_zstd_chunks",
    "whole_element",
    "whole_zstd",
    "whole_zstd_size",
]

_local = threading.local()


def _compressor(level: int, size: int, whole: bool = False, checksum: bool = False) -> Any:
    """A zstd compressor for these settings, kept per thread: making one
    allocates zstd's context (hundreds of KiB at high levels), which cost
    more than compressing a bias. Small tensors repeat a few sizes."""
    cache = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    key = (level, size, whole, checksum)
    c = cache.get(key)
    if c is None:
        if len(cache) >= 64:
            cache.clear()
        params = _zstd_params(level, size, whole, checksum)
        c = cache[key] = zstandard.ZstdCompressor(compression_params=params)
    return c


def _decompressor() -> Any:
    """This thread's magicless zstd decompressor (its context is reused)."""
    d = getattr(_local, "decompressor", None)
    if d is None:
        d = _local.decompressor = zstandard.ZstdDecompressor(
            format=zstandard.FORMAT_ZSTD1_MAGICLESS
        )
    return d


def _zstd_params(level: int, size: int, whole: bool = False, checksum: bool = False) -> Any:
    """zstd frames as nncodecs stores them: magicless, no dictionary id. A chunk's
    frame has no size or checksum either (the chunk index and CRC32C say that);
    the whole-input kind has its content size, and zstd's checksum if asked."""
    return zstandard.ZstdCompressionParameters.from_level(
        level,
        source_size=size,
        format=zstandard.FORMAT_ZSTD1_MAGICLESS,
        write_content_size=whole,
        write_checksum=whole and checksum,
        write_dict_id=False,
    )


def compress_pieces(pieces: list[bytes | None], level: int, threads: int) -> list[bytes | None]:
    """zstd of the (plane, chunk) pieces of a plan, in index order (None elsewhere).

    The C++ probe picks them: every small chunk, and larger ones in which a
    quick search finds long repeats (docs/format.md); on other chunks an
    order-0 coder beats zstd and the trial would be wasted work.
    """
    work = [i for i, piece in enumerate(pieces) if piece is not None]

    def compress(i: int) -> bytes:
        piece = pieces[i]
        return _compressor(level, len(piece)).compress(piece)

    out: list[bytes | None] = [None] * len(pieces)
    if len(work) > 1 and threads > 1 and sum(len(pieces[i]) for i in work) >= 1 << 20:
        # zstd releases the GIL; each worker thread keeps its own compressors.
        with ThreadPoolExecutor(min(threads, len(work))) as pool:
            for i, z in zip(work, pool.map(compress, work), strict=True):
                out[i] = z
    else:
        for i in work:
            out[i] = compress(i)
    return out


def decode_zstd_chunks(src: np.ndarray, info: dict[str, Any]) -> np.ndarray | None:
    """The zstd chunks of a frame (``info``: its ``_core.frame_info``) decoded,
    one after another in index order, for the C++ decoder to take."""
    chunks = [c for c in info["chunks"] if c[2] == "zstd"]
    if not chunks:
        return None
    out = np.empty(sum(c[5] for c in chunks), dtype=np.uint8)
    at = 0
    decompressor = _decompressor()
    for plane, index, _, offset, length, symbols in chunks:
        piece = src[offset : offset + length]
        where = f"plane {plane} chunk {index}"
        try:
            raw = decompressor.decompress(piece, max_output_size=symbols)
        except zstandard.ZstdError as exc:
            raise CorruptDataError(f"{where}: corrupt zstd data ({exc})") from exc
        if len(raw) != symbols:
            raise CorruptDataError(f"{where}: zstd gave {len(raw)} bytes, not {symbols}")
        out[at : at + symbols] = np.frombuffer(raw, dtype=np.uint8)
        at += symbols
    return out


# -- the whole-input kind ----------------------------------------------------------------


def whole_zstd(data: np.ndarray, level: int, checksum: bool, dtype: str) -> bytes:
    """The whole-input frame (typed kind) of ``data``, recording element type ``dtype``."""
    head = WHOLE_TYPED_MAGIC + bytes([ELEMENT_CODES[dtype]])
    return head + _compressor(level, data.nbytes, True, checksum).compress(data)


def whole_element(src: np.ndarray) -> str:
    """The element type a whole-input zstd frame records ("bytes" for the first kind)."""
    if src[:4].tobytes() == WHOLE_MAGIC:
        return "bytes"
    if src.nbytes < 5 or src[4] >= len(ELEMENT_TYPES):
        code = "missing" if src.nbytes < 5 else int(src[4])
        raise CorruptDataError(
            f"whole-input zstd frame: element type code {code}, this build knows "
            f"0..{len(ELEMENT_TYPES) - 1}"
        )
    return ELEMENT_TYPES[int(src[4])][0]


def _whole_payload(src: np.ndarray) -> np.ndarray:
    """The zstd frame (magicless) of a whole-input frame of either kind."""
    return src[4:] if src[:4].tobytes() == WHOLE_MAGIC else src[5:]


def whole_zstd_size(src: np.ndarray, limit: int) -> int:
    """The decoded size a whole-input zstd frame declares, checked against ``limit``."""
    whole_element(src)  # a bad element code first: nothing else is read then
    try:
        declared = zstandard.frame_content_size(ZSTD_MAGIC + _whole_payload(src)[:18].tobytes())
    except zstandard.ZstdError as exc:
        raise CorruptDataError(f"whole-input zstd frame: bad zstd header ({exc})") from exc
    if declared < 0:
        raise CorruptDataError("whole-input zstd frame: no decoded size in its zstd header")
    if declared > limit:
        raise CorruptDataError(
            f"whole-input zstd frame declares {declared} decoded bytes, expected at most {limit}"
        )
    return int(declared)


def decode_whole_zstd(src: np.ndarray, limit: int) -> np.ndarray:
    """The bytes of a whole-input zstd frame (the planes, for elements)."""
    size = whole_zstd_size(src, limit)
    # libzstd stops a frame whose output passes its declared size (checked
    # against `limit` above), so this allocates at most one block more; the
    # stream object also tells truncation and trailing bytes apart.
    stream = _decompressor().decompressobj()
    try:
        raw = stream.decompress(_whole_payload(src).tobytes())
    except zstandard.ZstdError as exc:
        raise CorruptDataError(f"whole-input zstd frame: corrupt zstd data ({exc})") from exc
    if not stream.eof:
        raise CorruptDataError("whole-input zstd frame: truncated zstd data")
    if stream.unused_data:
        raise CorruptDataError(
            f"whole-input zstd frame: {len(stream.unused_data)} bytes after its zstd frame"
        )
    if len(raw) != size:
        raise CorruptDataError(f"whole-input zstd frame: {len(raw)} bytes, declared {size}")
    return np.frombuffer(raw, dtype=np.uint8)
