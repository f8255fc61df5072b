"""Arrays into and out of a container: host NumPy from what a Writer is given,
and what a Reader read as the kind of array the caller asked for."""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs.dtypes import array_kind, as_numpy, to_torch
from nncodecs.extras import need

__all__ = ["convert", "dask_array", "to_host_array"]


def to_host_array(tensor: Any) -> np.ndarray:
    """A NumPy array from NumPy, CuPy or torch (CPU or CUDA) input, bits unchanged."""
    kind = array_kind(tensor)
    if kind == "cupy":
        return tensor.get()
    device = getattr(tensor, "device", None)
    if kind == "torch" and device is not None and device.type != "cpu":
        tensor = tensor.detach().cpu()
    return np.asarray(as_numpy(tensor)) if not isinstance(tensor, np.ndarray) else tensor


def convert(arr: np.ndarray, to: str, owned: bool = False) -> Any:
    """``arr`` as ``"numpy"``, ``"torch"`` or ``"cupy"``; ``owned``: nothing else holds
    ``arr`` (a tensor just decoded), so a torch tensor may share its memory (copying a
    model's worth of tensors into fresh memory took longer than decoding them)."""
    if to == "numpy":
        return arr
    if to == "torch":
        return to_torch(arr, copy=not owned)
    if to == "cupy":
        import cupy

        return cupy.asarray(arr)
    raise ValueError(f"to must be 'numpy', 'torch' or 'cupy', got {to!r}")


def dask_array(node: Any, delta: bool) -> Any:
    """A tensor's Zarr array as a dask array (a delta one through its decoded reads:
    ``from_array``, never Zarr's own chunk reads, which cannot fetch the reference)."""
    da = need("dask.array", "Reader.to_dask")
    return da.from_array(node, node.chunks) if delta else da.from_zarr(node)
