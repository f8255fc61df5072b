"""The CuPy backend of the GPU path: device arrays and launches.

The kernel source is compiled by NVRTC through ``cupy.RawModule`` on first
use, with the shared headers' text inlined into it: CuPy's kernel cache
hashes the source string, not headers found through ``-I``, so an edited
header would otherwise load a stale binary.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.frame import array_kind, on_cuda

__all__ = ["CupyBackend", "kernel_source"]

_HERE = Path(__file__).parent


def _header(name: str) -> str:
    """A header the kernels share with the CPU build (cpp/include/nncodecs)."""
    # Installed: copied next to the kernels (CMake); a source tree: cpp/include.
    for base in (_HERE / "include" / "nncodecs", _HERE.parents[2] / "cpp" / "include" / "nncodecs"):
        path = base / name
        if path.is_file():
            return path.read_text()
    raise FileNotFoundError(f"nncodecs GPU kernels: shared header {name} is missing")


#: The kernel files of the one module CuPy compiles (decode and encode).
KERNELS = ("decode.cu", "encode.cu")


def kernel_source(names: tuple[str, ...] = KERNELS) -> str:
    """The module's source: the kernel files, each local ``#include``
    (``common.cuh``) and shared header (and the headers it includes) inlined
    once, in order."""
    done: set[str] = set()

    def inline(text: str) -> str:
        out = []
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith('#include "'):
                name = stripped.split('"')[1]
                if name not in done:
                    done.add(name)
                    if name.startswith("nncodecs/"):
                        out.append(inline(_header(name.removeprefix("nncodecs/"))))
                    else:
                        out.append(inline((_HERE / "kernels" / name).read_text()))
                continue
            if stripped == "#pragma once":
                continue
            out.append(line)
        return "\n".join(out)

    return "\n".join(inline((_HERE / "kernels" / name).read_text()) for name in names)


@functools.cache
def _module() -> Any:
    import cupy

    return cupy.RawModule(code=kernel_source(), options=("-std=c++17",))


class CupyBackend:
    """Device arrays on the current CuPy device, launches on its current stream.

    Serves CuPy arrays and torch CUDA tensors (zero-copy through DLPack; a
    torch tensor's work runs on torch's current stream, see ``stream_of``).
    """

    def __init__(self) -> None:
        import cupy

        self.cp = cupy

    def owns(self, obj: Any) -> bool:
        return on_cuda(obj)

    def flat_bytes(self, obj: Any) -> Any:
        """A device array or tensor as a flat uint8 CuPy array (a view where contiguous)."""
        if array_kind(obj) == "torch":
            import torch

            t = obj.detach()
            t = t if t.is_contiguous() else t.contiguous()
            return self.cp.from_dlpack(t.reshape(-1).view(torch.uint8))
        return self.cp.ascontiguousarray(obj).reshape(-1).view(self.cp.uint8)

    def typed(self, flat: Any, dtype: np.dtype, shape: tuple[int, ...], like: Any) -> Any:
        """Decoded bytes as elements: a torch tensor where ``like`` is one (or
        ``"torch"``), else a CuPy array (bfloat16 and float8 as their bits,
        which CuPy has no dtype for)."""
        if like == "torch" or array_kind(like) == "torch":
            import torch

            from nncodecs.dtypes import torch_dtype

            return torch.from_dlpack(flat).view(torch_dtype(dtype)).reshape(shape)
        try:
            as_cupy = self.cp.dtype(dtype)
        except TypeError:
            as_cupy = self.cp.dtype(f"uint{8 * dtype.itemsize}")
        return flat.view(as_cupy).reshape(shape)

    def device_context(self, device: str) -> Any:
        """A context making ``"cuda:N"`` CuPy's current device (``"cuda"``: as it is)."""
        import contextlib

        if device.startswith("cuda:"):
            return self.cp.cuda.Device(int(device[5:]))
        return contextlib.nullcontext()

    def device_array(self, host: np.ndarray) -> Any:
        return self.cp.asarray(host)

    def stream_of(self, obj: Any) -> Any:
        """A context that runs this backend's work on torch's current stream
        for torch tensors (the caller's stream), a no-op otherwise."""
        import contextlib

        if array_kind(obj) == "torch":
            import torch

            stream = torch.cuda.current_stream(obj.device)
            return self.cp.cuda.ExternalStream(stream.cuda_stream, obj.device.index or 0)
        return contextlib.nullcontext()

    def to_device(self, host: np.ndarray) -> Any:
        return self.cp.asarray(np.ascontiguousarray(host))

    def empty(self, nbytes: int) -> Any:
        return self.cp.empty(max(nbytes, 0), dtype=self.cp.uint8)

    def zeros_int32(self, count: int) -> Any:
        return self.cp.zeros(count, dtype=self.cp.int32)

    def to_host(self, arr: Any) -> np.ndarray:
        return self.cp.asnumpy(arr)

    def concat(self, arrays: list[Any]) -> Any:
        return self.cp.concatenate([a.reshape(-1) for a in arrays])

    def launch(self, name: str, grid: int, block: int, args: tuple) -> None:
        _module().get_function(name)((grid,), (block,), args)
