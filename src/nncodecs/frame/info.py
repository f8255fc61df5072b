"""What a frame says about itself: header, chunk index, size and element type."""

from __future__ import annotations

from typing import Any

from nncodecs import _core
from nncodecs.errors import CorruptDataError
from nncodecs.frame.buffers import host_bytes
from nncodecs.frame.constants import ELEMENT_TYPES, WHOLE_MAGICS, max_ratio_bound
from nncodecs.frame.zstd import whole_element, whole_zstd_size

__all__ = [
    "check_frame_element",
    "element_types",
    "frame_decoded_len",
    "frame_element",
    "frame_info",
]


def element_types() -> tuple[str, ...]:
    """Names of the element types a frame can record, by code ("bytes": none)."""
    return tuple(name for name, _ in ELEMENT_TYPES)


def frame_info(buf: Any, max_decoded: int | None = None) -> dict[str, Any]:
    """Header and chunk index of a frame, checked against its length.

    ``chunks`` lists ``(plane, index, mode, offset, length, symbols)``.
    Raises :class:`nncodecs.CorruptDataError` for anything malformed.
    """
    src = host_bytes(buf)
    bound = max_ratio_bound(src.nbytes) if max_decoded is None else max_decoded
    if src[:4].tobytes() in WHOLE_MAGICS:
        size = whole_zstd_size(src, bound)
        return {"kind": "zstd", "decoded_len": size, "element": whole_element(src), "chunks": []}
    return {"kind": "chunked", **_core.frame_info(src, bound)}


def frame_decoded_len(buf: Any) -> int:
    """The decoded length a (checked) frame declares."""
    src = host_bytes(buf)
    if src[:4].tobytes() in WHOLE_MAGICS:
        return whole_zstd_size(src, max_ratio_bound(src.nbytes))
    return int(_core.frame_summary(src, max_ratio_bound(src.nbytes))[0])


def frame_element(buf: Any) -> str:
    """The element type a (checked) frame records: a name of :func:`element_types`;
    ``"bytes"`` when it states none (byte coders given no dtype, and every
    frame of the versions before it, 1 and 2, and of the first zstd kind)."""
    src = host_bytes(buf)
    if src[:4].tobytes() in WHOLE_MAGICS:
        whole_zstd_size(src, max_ratio_bound(src.nbytes))
        return whole_element(src)
    return str(_core.frame_summary(src, max_ratio_bound(src.nbytes))[3])


def check_frame_element(found: str, expected: str) -> None:
    """CorruptDataError when a frame states an element type other than the
    caller's ("bytes" on either side: nothing to check), as the C++ decoder."""
    if "bytes" not in (found, expected) and found != expected:
        raise CorruptDataError(f"the frame holds {found} elements, expected {expected}")
