"""The CuPy backend of :mod:`nncodecs.gpu.decode`: device arrays and launches.

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
    (``common.cuh``) and shared header inlined once, in order."""
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
                        out.append(_header(name.removeprefix("nncodecs/")))
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
    """Device arrays on the current CuPy device, launches on its current stream."""

    def __init__(self) -> None:
        import cupy

        self.cp = cupy

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
