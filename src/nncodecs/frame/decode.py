"""Frames decoded on the CPU: the C++ decoder, with the zstd side channel."""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.errors import CorruptDataError
from nncodecs.frame.buffers import as_array, copy_out, host_bytes
from nncodecs.frame.constants import WHOLE_MAGICS, max_ratio_bound
from nncodecs.frame.info import check_frame_element
from nncodecs.frame.threads import get_threads
from nncodecs.frame.zstd import decode_whole_zstd, decode_zstd_chunks, whole_element

__all__ = ["decode_frame"]


def decode_frame(
    buf: Any,
    *,
    out: Any = None,
    max_decoded: int | None = None,
    elements: bool = False,
    layout: str = "none",
    planes: int | None = None,
    threads: int | None = None,
    dtype: str = "bytes",
) -> np.ndarray:
    """Decode a frame into a new uint8 array, or into ``out`` (without a copy when contiguous).

    ``max_decoded`` bounds the size the frame may declare (default: the size
    of ``out``, or the most its length can honestly stand for). With
    ``elements=True`` the output holds elements of ``planes`` bytes: the
    merge (and the inverse reorder of a float ``layout``) runs fused.
    ``dtype``: the element type the caller decodes to; a frame that records
    another raises :class:`nncodecs.CorruptDataError` (``"bytes"``: any).
    """
    src = host_bytes(buf)
    target = None
    limit = max_ratio_bound(src.nbytes) if max_decoded is None else max_decoded
    if out is not None:
        arr = as_array(out)
        if arr.flags.c_contiguous and arr.flags.writeable:
            target = arr.reshape(-1).view(np.uint8)
        limit = min(limit, arr.nbytes)
    if src[:4].tobytes() in WHOLE_MAGICS:
        check_frame_element(whole_element(src), dtype)
        return _decode_whole(src, limit, target, out, elements, layout, planes)
    threads = threads or get_threads()
    if out is None:
        # One call sizes, allocates and decodes (None: zstd chunks to decode first).
        new = _core.frame_decode_new(src, limit, layout, elements, threads, dtype)
        if new is not None:
            return new
    decoded_len, _, zstd_chunks, _ = _core.frame_summary(src, limit, dtype)
    zstd_decoded = decode_zstd_chunks(src, _core.frame_info(src, limit)) if zstd_chunks else None
    direct = target is not None
    if target is None:
        target = np.empty(decoded_len, dtype=np.uint8)
    elif target.nbytes != decoded_len:
        raise CorruptDataError(
            f"frame decodes to {decoded_len} bytes, the output holds {target.nbytes}"
        )
    _core.frame_decode(
        target,
        src,
        limit,
        layout=layout,
        elements=elements,
        zstd_decoded=zstd_decoded,
        threads=threads,
    )
    if out is not None and not direct:
        copy_out(target, as_array(out))
    return target


def _decode_whole(
    src: np.ndarray,
    limit: int,
    target: np.ndarray | None,
    out: Any,
    elements: bool,
    layout: str,
    planes: int | None,
) -> np.ndarray:
    """Decode the whole-input zstd kind: zstd gives the planes, then the merge if asked."""
    decoded = decode_whole_zstd(src, limit)
    if target is not None and target.nbytes != decoded.nbytes:
        raise CorruptDataError(
            f"frame decodes to {decoded.nbytes} bytes, the output holds {target.nbytes}"
        )
    if elements:
        if planes is None:
            raise ValueError("decoding elements needs the element size (planes=)")
        if decoded.nbytes % planes:
            raise CorruptDataError(f"{decoded.nbytes} decoded bytes are not {planes} planes")
        merged = target if target is not None else np.empty(decoded.nbytes, dtype=np.uint8)
        _core.planes_merge(merged, decoded, planes, layout)
        decoded = merged
    elif target is not None:
        np.copyto(target, decoded)
        decoded = target
    if out is not None and target is None:
        copy_out(decoded, as_array(out))
    return decoded
