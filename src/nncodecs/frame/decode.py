"""Frames decoded on the CPU: the C++ decoder, in one call (zstd included)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.frame.buffers import copy_out, host_bytes, writable_bytes
from nncodecs.frame.constants import max_ratio_bound
from nncodecs.frame.threads import get_threads

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
    any_order: bool = False,
) -> np.ndarray:
    """Decode a frame into a new uint8 array, or into ``out`` (without a copy when contiguous).

    ``max_decoded`` bounds the size the frame may declare (default: the size
    of ``out``, or the most its length can honestly stand for). With
    ``elements=True`` the output holds elements of ``planes`` bytes: the
    merge (and the inverse reorder of a float ``layout``) runs fused.
    ``dtype``: the element type the caller decodes to; a frame that records
    another raises :class:`nncodecs.CorruptDataError` (``"bytes"``: any).
    A big-endian frame (version 4) decodes to elements only (``ValueError``
    otherwise: its planes are of the little-endian words), unless
    ``any_order`` (the GPU host, which merges them and swaps back itself).
    """
    src = host_bytes(buf)
    limit = max_ratio_bound(src.nbytes) if max_decoded is None else max_decoded
    target = None
    if out is not None:
        target = writable_bytes(out)  # (in out's memory order: numcodecs' rule)
        size = target.nbytes if target is not None else getattr(out, "nbytes", None)
        limit = min(limit, memoryview(out).nbytes if size is None else int(size))
    # One call parses the header once (either kind), checks the element
    # type, sizes and allocates the output (unless given) and decodes,
    # zstd chunks included.
    decoded = _core.decode(
        src,
        limit,
        layout=layout,
        elements=elements,
        planes=planes or 0,
        threads=threads or get_threads(),
        element=dtype,
        out=target,
        any_order=any_order,
    )
    if out is not None and target is None:
        copy_out(decoded, out)
    return target if target is not None else decoded
