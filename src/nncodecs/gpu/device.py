"""Arrays that live on a device, and the codecs' entry points for them.

:func:`backend_for` says whether an object lives on a device, and which
backend works on it: CuPy arrays and torch CUDA tensors (through DLPack,
without a copy) get :class:`nncodecs.gpu.cupy_backend.CupyBackend`; other
backends can be registered (the tests register the SIMT emulator for an
array type of their own). :func:`encode_weights_on_device` and
:func:`decode_weights_on_device` are what the ``weights`` codecs call for
such input: the frame, or the decoded tensor, stays on the device.

CuPy has no bfloat16 or float8 dtypes: such tensors go in and come out of
CuPy as their bits (uint16, uint8) with the codec's ``dtype`` saying what
they are; torch tensors keep their dtype.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from nncodecs.dtypes import float_layout, normalize_dtype

__all__ = [
    "backend_for",
    "decode_weights_on_device",
    "device_dtype",
    "encode_weights_on_device",
    "register_backend",
    "unregister_backend",
]

_registered: list[Any] = []


def register_backend(backend: Any) -> None:
    """Add a backend; it serves the objects its ``owns(obj)`` accepts."""
    _registered.append(backend)


def unregister_backend(backend: Any) -> None:
    _registered.remove(backend)


def _on_cuda(obj: Any) -> bool:
    module = type(obj).__module__.split(".")[0]
    if module == "cupy":
        return True
    if module == "torch":
        return bool(getattr(obj, "is_cuda", False))
    return False


@functools.cache
def _cupy_backend() -> Any:
    from nncodecs.gpu.cupy_backend import CupyBackend

    return CupyBackend()


def backend_for(obj: Any) -> Any | None:
    """The backend for an object on a device (``None``: it is host memory).

    Never imports CuPy for host objects."""
    if isinstance(obj, bytes | bytearray | memoryview):
        return None
    for backend in reversed(_registered):
        if backend.owns(obj):
            return backend
    return _cupy_backend() if _on_cuda(obj) else None


def device_dtype(obj: Any, configured: str | None) -> np.dtype:
    """The element type of a device tensor: the codec's ``dtype`` where set
    (CuPy holds bfloat16 and float8 as their bits), else the tensor's own."""
    if configured is not None:
        return normalize_dtype(configured)
    return normalize_dtype(obj.dtype)


def encode_weights_on_device(
    backend: Any, tensor: Any, settings: dict[str, Any], dtype: str | None
) -> Any:
    """The ``weights`` frame of a device tensor, on the device (a uint8 array
    there), byte for byte the CPU's frame of the same elements."""
    from nncodecs.codecs.weights import row_length
    from nncodecs.gpu.encode import encode_on

    target = device_dtype(tensor, dtype)
    flat = backend.flat_bytes(tensor)
    if int(flat.size) % target.itemsize:
        raise ValueError(
            f"nncodecs.weights: {int(flat.size)} bytes is not a whole number of {target} "
            f"elements ({target.itemsize} bytes each)"
        )
    shape = (
        tuple(tensor.shape) if int(flat.size) == math.prod(tensor.shape) * target.itemsize else ()
    )
    return encode_on(
        backend,
        flat,
        planes=target.itemsize,
        coder=settings["coder"],
        precision=settings["precision"],
        subblock_log2=settings["subblock_log2"],
        checksum=settings["checksum"],
        zstd_level=settings["zstd_level"],
        min_gain=settings["min_gain"],
        elements=True,
        layout=float_layout(target),
        row_length=row_length(shape),
    )


def decode_weights_on_device(
    backend: Any, frame: Any, dtype: Any, shape: tuple[int, ...] | None, like: Any = None
) -> Any:
    """Elements of ``dtype`` decoded on the device from a frame (on the device
    or the host), shaped ``shape`` (``None``: flat, as many as the frame
    holds), as the kind of array ``like`` is (torch or CuPy; default CuPy)."""
    from nncodecs.codecs._frame import WHOLE_MAGIC, decode_frame, max_ratio_bound
    from nncodecs.errors import CorruptDataError
    from nncodecs.gpu.decode import decode_on

    target = normalize_dtype(dtype)
    count = None if shape is None else math.prod(shape)
    host_frame, device_frame = backend.frame_for_parsing(frame)
    limit = max_ratio_bound(host_frame.nbytes) if count is None else count * target.itemsize
    if host_frame[:4].tobytes() == WHOLE_MAGIC:
        # A whole-input zstd frame (small inputs only): no GPU kernel for zstd.
        flat = backend.to_device(decode_frame(backend.to_host(frame), max_decoded=limit,
                                              elements=True, layout=float_layout(target),
                                              planes=target.itemsize))  # fmt: skip
    else:
        flat = decode_on(backend, host_frame, max_decoded=limit, layout=float_layout(target),
                         elements=True, device_frame=device_frame)  # fmt: skip
    nbytes = int(flat.size)
    if nbytes % target.itemsize:
        raise CorruptDataError(f"nncodecs.weights: {nbytes} decoded bytes are not whole {target}")
    if count is not None and nbytes != count * target.itemsize:
        raise CorruptDataError(
            f"nncodecs.weights: the frame holds {nbytes} bytes, expected {count * target.itemsize}"
        )
    return backend.typed(
        flat, target, shape if shape is not None else (nbytes // target.itemsize,), like
    )
