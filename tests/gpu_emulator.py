"""A backend for nncodecs.gpu (decode and encode) that runs the CUDA kernels on the CPU.

tests/cuda/emulate.cpp compiles the kernel source as host C++ under the
SIMT emulator (tests/cuda/simt_host.h: a thread per CUDA thread, warp
collectives by barriers) into a shared library loaded with ctypes. Arrays
are NumPy arrays. Small inputs only: it checks logic, not speed.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).parent.parent
SOURCES = [
    ROOT / "tests" / "cuda" / "emulate.cpp",
    ROOT / "tests" / "cuda" / "simt_host.h",
    ROOT / "src" / "nncodecs" / "gpu" / "kernels" / "common.cuh",
    ROOT / "src" / "nncodecs" / "gpu" / "kernels" / "decode.cu",
    ROOT / "src" / "nncodecs" / "gpu" / "kernels" / "encode.cu",
    ROOT / "cpp" / "include" / "nncodecs" / "rans_lane.h",
    ROOT / "cpp" / "include" / "nncodecs" / "reorder_word.h",
]


def build(directory: Path) -> Path:
    """Compile the emulated kernels (g++, C++20 for std::barrier)."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise RuntimeError("no C++ compiler")
    lib = directory / "nncodecs_gpu_emulated.so"
    cmd = [cxx, "-std=c++20", "-O1", "-g", "-shared", "-fPIC", "-pthread",
           f"-I{ROOT / 'cpp' / 'include'}", str(SOURCES[0]), "-o", str(lib)]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return lib


class DeviceArray(np.ndarray):
    """What the tests treat as device memory: the emulator backend serves
    these (the codecs' device paths), as CupyBackend serves CuPy arrays."""


class EmulatorBackend:
    """nncodecs.gpu's Backend protocol over NumPy arrays and the emulator.

    Registered (nncodecs.gpu.backend.register_backend), it serves DeviceArray
    objects and the device named "emulator"."""

    name = "emulator"

    #: The split kernel strides over what one small grid does not cover:
    #: every emulated thread is an OS thread.
    max_grid = 2
    #: Threads of a CRC block (the kernel joins however many pieces there are).
    crc_block = 64

    def __init__(self, lib: Path) -> None:
        self.lib = ctypes.CDLL(str(lib))
        self.launches: list[tuple[str, int, int]] = []
        # One launch at a time: the emulator's grid size and __shared__
        # variables are process-wide (Zarr encodes chunks on threads).
        self.lock = threading.Lock()

    def to_device(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, dtype=host.dtype, copy=True).reshape(-1)

    def empty(self, nbytes: int) -> np.ndarray:
        out = np.empty(max(nbytes, 0), np.uint8)
        out[:] = 0xA5  # as uninitialised device memory might hold anything
        return out

    def zeros_int32(self, count: int) -> np.ndarray:
        return np.zeros(count, np.int32)

    def to_host(self, arr: Any) -> np.ndarray:
        return np.asarray(arr)

    def owns(self, obj: Any) -> bool:
        return isinstance(obj, DeviceArray)

    def flat_bytes(self, obj: Any) -> np.ndarray:
        return np.asarray(obj).reshape(-1).view(np.uint8)

    def typed(self, flat: Any, dtype: np.dtype, shape: tuple[int, ...], like: Any) -> Any:
        return np.asarray(flat).view(dtype).reshape(shape).view(DeviceArray)

    def device_array(self, host: np.ndarray) -> DeviceArray:
        return np.array(host, copy=True).view(DeviceArray)

    def concat(self, arrays: list[Any]) -> np.ndarray:
        return np.concatenate([np.asarray(a).reshape(-1) for a in arrays])

    def launch(self, name: str, grid: int, block: int, args: tuple) -> None:
        self.launches.append((name, grid, block))
        converted: list[Any] = [ctypes.c_uint(grid), ctypes.c_uint(block)]
        for a in args:
            if isinstance(a, np.ndarray):
                converted.append(ctypes.c_void_p(a.ctypes.data))
            elif isinstance(a, np.uint64):
                converted.append(ctypes.c_uint64(int(a)))
            elif isinstance(a, np.uint32):
                converted.append(ctypes.c_uint32(int(a)))
            else:
                raise TypeError(f"kernel argument of type {type(a).__name__}")
        with self.lock:
            getattr(self.lib, "emu_" + name)(*converted)
