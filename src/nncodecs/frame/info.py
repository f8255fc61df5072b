"""What a frame says about itself: header, chunk index, size and element type."""

from __future__ import annotations

from typing import Any

from nncodecs import _core
from nncodecs.errors import CorruptDataError
from nncodecs.frame.buffers import host_bytes
from nncodecs.frame.constants import (
    ELEMENT_TYPES,
    FRAME_MAGIC,
    WHOLE_TYPED_MAGIC,
    max_ratio_bound,
)

__all__ = [
    "big_endian_frame",
    "check_frame_element",
    "element_types",
    "frame_decoded_len",
    "frame_element",
    "frame_element_order",
    "frame_info",
]


def element_types() -> tuple[str, ...]:
    """Names of the element types a frame can record, by code ("bytes": none)."""
    return tuple(name for name, _ in ELEMENT_TYPES)


def frame_info(buf: Any, max_decoded: int | None = None) -> dict[str, Any]:
    """Header and chunk index of a frame, checked against its length.

    ``kind`` is ``"chunked"`` or ``"zstd"`` (the whole-input kind, which has
    no chunks); ``chunks`` lists ``(plane, index, mode, offset, length,
    symbols)``. Raises :class:`nncodecs.CorruptDataError` for anything
    malformed.
    """
    src = host_bytes(buf)
    return _core.header(src, max_ratio_bound(src.nbytes) if max_decoded is None else max_decoded)


def frame_decoded_len(buf: Any) -> int:
    """The decoded length a (checked) frame declares."""
    return int(frame_info(buf)["decoded_len"])


def frame_element(buf: Any) -> str:
    """The element type a (checked) frame records: a name of :func:`element_types`;
    ``"bytes"`` when it states none (byte coders given no dtype, and every
    frame of the versions before it, 1 and 2, and of the first zstd kind)."""
    return frame_element_order(buf)[0]


def big_endian_frame(buf: Any) -> bool:
    """Whether a frame holds big-endian elements (version 4's bit 6 of the element byte,
    or the whole-input kind's): read from its first bytes alone, no header parse, for
    the decoders' hot path. Exactly what the checked header says of any frame the
    decoder accepts (it refuses the others)."""
    head = host_bytes(buf)[:8]
    if head.size >= 8 and head[:4].tobytes() == FRAME_MAGIC and head[4] == 4:
        return bool(head[7] & 0x40)
    return head.size >= 5 and head[:4].tobytes() == WHOLE_TYPED_MAGIC and bool(head[4] & 0x40)


def frame_element_order(buf: Any) -> tuple[str, bool]:
    """The element type a (checked) frame records, and whether its elements
    are big-endian (a version 4 frame: decoded elements come back so)."""
    src = host_bytes(buf)
    name, big = _core.element_of(src, max_ratio_bound(src.nbytes))
    return str(name), bool(big)


def check_frame_element(found: str, expected: str) -> None:
    """CorruptDataError when a frame states an element type other than the
    caller's ("bytes" on either side: nothing to check), as the C++ decoder."""
    if "bytes" not in (found, expected) and found != expected:
        raise CorruptDataError(f"the frame holds {found} elements, expected {expected}")
