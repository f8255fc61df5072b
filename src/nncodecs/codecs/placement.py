"""Whole tensors put on a named device, for layers above the codecs.

The container reads a tensor's chunk frames (or its decoded bytes) on the
host and calls one of these: the device work (the backend of the device
name, its device context, the batched decode) stays below it. ``to`` is
``"torch"`` or ``"cupy"``; a CuPy array holds bfloat16 and float8 as their
bits.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

from nncodecs.dtypes import float_layout
from nncodecs.errors import CorruptDataError

__all__ = ["decode_chunks_on_device", "host_to_device"]


@contextlib.contextmanager
def _on(device: str) -> Any:
    """The backend of a device name (ValueError for an unknown one), inside its device context."""
    from nncodecs.gpu.backend import backend_for_device

    backend = backend_for_device(device)
    context = getattr(backend, "device_context", None)
    with context(device) if context is not None else contextlib.nullcontext():
        yield backend


def decode_chunks_on_device(
    device: str, frames: list, dtype: Any, chunk_nbytes: int, shape: tuple, to: str
) -> Any:
    """A tensor of ``dtype`` and ``shape`` decoded on the device from the
    ``weights`` frames of its chunks (on the host, in order, ``chunk_nbytes``
    decoded bytes each), in one batch, straight into the tensor's memory.

    A corrupt frame, or one that decodes to less than a chunk, is a
    :class:`nncodecs.CorruptDataError`."""
    from nncodecs.gpu.decode import decode_frames

    target = np.dtype(dtype)
    count = len(frames)
    with _on(device) as backend:
        out = backend.empty(chunk_nbytes * count)
        decoded = decode_frames(
            backend,
            frames,
            max_decoded=[chunk_nbytes] * count,
            layouts=[float_layout(target)] * count,
            elements=True,
            planes=[target.itemsize] * count,
            out=out,
        )
        short = [i for i, d in enumerate(decoded) if int(d.size) != chunk_nbytes]
        if short:
            raise CorruptDataError(f"chunk {short[0]} holds fewer bytes than a chunk")
        return backend.typed(out[: math.prod(shape) * target.itemsize], target, shape, to)


def host_to_device(device: str, host: np.ndarray, shape: tuple, to: str) -> Any:
    """A host array copied to the device, as a tensor of its dtype and ``shape``."""
    host = np.ascontiguousarray(host)
    with _on(device) as backend:
        flat = backend.to_device(host.reshape(-1).view(np.uint8))
        return backend.typed(flat, host.dtype, shape, to)
