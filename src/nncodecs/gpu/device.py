"""The ``weights`` codecs' entry points for arrays on a device.

:func:`encode_weights_on_device` and :func:`decode_weights_on_device` are
what the ``weights`` codecs call for device input (see
:func:`nncodecs.gpu.backend.backend_for`): the frame, or the decoded
tensor, stays on the device.

CuPy has no bfloat16 or float8 dtypes: such tensors go in and come out of
CuPy as their bits (uint16, uint8) with the codec's ``dtype`` saying what
they are; torch tensors keep their dtype.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

from nncodecs.dtypes import ML_DTYPES, dtype_name, float_layout, normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.frame import frame_element
from nncodecs.frame.buffers import host_bytes
from nncodecs.frame.constants import WHOLE_MAGICS, max_ratio_bound
from nncodecs.frame.params import frame_settings, row_length
from nncodecs.gpu.decode import decode_frames
from nncodecs.gpu.encode import encode_on
from nncodecs.gpu.plan import device_plan

__all__ = [
    "decode_weights_on_device",
    "device_dtype",
    "encode_weights_on_device",
    "stated_dtype_on",
]


def device_dtype(obj: Any, configured: str | None) -> np.dtype:
    """The element type of a device tensor: its own, or the codec's ``dtype``
    where set. Under a ``dtype`` the tensor must be of it, uint8 bytes, or
    (bfloat16, float8: CuPy has no such dtypes) unsigned bits of its width."""
    own = normalize_dtype(obj.dtype)
    if configured is None:
        return own
    want = normalize_dtype(configured)
    bits = own.kind == "u" and own.itemsize == want.itemsize and want.name in ML_DTYPES
    if own == want or own == np.uint8 or bits:
        return want
    raise ValueError(f"nncodecs.weights: configured for {configured}, got {own} data")


def stated_dtype_on(backend: Any, frame: Any) -> str | None:
    """The element type a frame (on the device or the host) records; ``None``
    where it states none. A device frame's header comes to the host to be read."""
    if not backend.owns(frame):
        name = frame_element(frame)
    else:
        dev = backend.flat_bytes(frame)
        total = int(dev.size)
        head = backend.to_host(dev[: min(total, 64)])
        if head[:4].tobytes() in WHOLE_MAGICS:
            name = frame_element(backend.to_host(dev))  # small: the whole-input kind
        else:
            name = device_plan(backend, dev, max_ratio_bound(total)).element
    return None if name == "bytes" else name


def _stream(backend: Any, obj: Any) -> Any:
    """The backend's stream context for work on ``obj`` (torch: its current stream)."""
    stream_of = getattr(backend, "stream_of", None)
    return stream_of(obj) if stream_of is not None else contextlib.nullcontext()


def encode_weights_on_device(
    backend: Any, tensor: Any, settings: dict[str, Any], dtype: str | None
) -> Any:
    """The ``weights`` frame of a device tensor, on the device (uint8, the kind
    of array the tensor is), byte for byte the CPU's frame of its elements."""
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
    with _stream(backend, tensor):
        frame = encode_on(
            backend, flat, **frame_settings(settings, target), row_length=row_length(shape)
        )
    return backend.typed(frame, np.dtype(np.uint8), (int(frame.size),), tensor)


def decode_weights_on_device(
    backend: Any,
    frames: list[Any],
    dtype: Any,
    shapes: list[tuple[int, ...] | None],
    like: Any = None,
) -> list[Any]:
    """Elements of ``dtype`` decoded on the device from ``weights`` frames (each
    on the device or the host), in one batch: each shaped as ``shapes[i]``
    (``None``: flat, as many as its frame holds), as the kind of array
    ``like`` is (a torch tensor, or ``"torch"``: torch; else the backend's)."""
    target = normalize_dtype(dtype)
    name = dtype_name(target)
    hosts, devices, limits = [], [], []
    for frame, shape in zip(frames, shapes, strict=True):
        if backend.owns(frame):
            dev = backend.flat_bytes(frame)
            hosts.append(None)
            devices.append(dev)
            total = int(dev.size)
        else:
            host = host_bytes(frame)
            hosts.append(host)
            devices.append(None)
            total = host.nbytes
        limits.append(
            max_ratio_bound(total) if shape is None else math.prod(shape) * target.itemsize
        )
    with _stream(backend, like):
        flats = decode_frames(
            backend,
            hosts,
            max_decoded=limits,
            layouts=[float_layout(target)] * len(frames),
            elements=True,
            device_frames=devices,
            planes=[target.itemsize] * len(frames),
            dtypes=[name] * len(frames),
            as_stored=False,
        )
    out = []
    for flat, shape in zip(flats, shapes, strict=True):
        nbytes = int(flat.size)
        if nbytes % target.itemsize:
            raise CorruptDataError(
                f"nncodecs.weights: {nbytes} decoded bytes are not whole {target}"
            )
        if shape is not None and nbytes != math.prod(shape) * target.itemsize:
            raise CorruptDataError(
                f"nncodecs.weights: a frame holds {nbytes} bytes, expected "
                f"{math.prod(shape) * target.itemsize}"
            )
        flat_shape = (nbytes // target.itemsize,)
        out.append(backend.typed(flat, target, flat_shape if shape is None else shape, like))
    return out
