"""The GPU sources compile: the rANS lane header's check kernel and the decode
and encode kernels, with nvcc (-arch=sm_90 -cubin) wherever nvcc is, and with NVRTC as
CuPy compiles them (the shared headers inlined)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent


def _nvcc(source: Path, out: Path) -> None:
    result = subprocess.run(
        [
            "nvcc",
            "-arch=sm_90",
            "-cubin",
            "-std=c++17",
            f"-I{ROOT / 'cpp' / 'include'}",
            str(source),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
def test_lane_header_compiles_with_nvcc(tmp_path: Path) -> None:
    _nvcc(ROOT / "tests" / "cuda" / "rans_lane_check.cu", tmp_path / "rans_lane_check.cubin")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("name", ["decode.cu", "encode.cu"])
def test_kernels_compile_with_nvcc(tmp_path: Path, name: str) -> None:
    _nvcc(ROOT / "src" / "nncodecs" / "gpu" / "kernels" / name, tmp_path / "kernels.cubin")


def _nvrtc(source: str, name: bytes) -> None:
    """Compile CUDA source text with NVRTC (as CuPy does) for sm_90."""
    import ctypes

    from conftest import optional_import

    nvrtc = optional_import("nvidia.cuda_nvrtc")
    libdir = Path(next(iter(nvrtc.__path__))) / "lib"
    lib = ctypes.CDLL(str(next(libdir.glob("libnvrtc.so.*"))))
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name, 0, None, None) == 0
    options = (ctypes.c_char_p * 2)(b"--gpu-architecture=sm_90", b"-std=c++17")
    result = lib.nvrtcCompileProgram(prog, 2, options)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    assert result == 0, log.value.decode()
    cubin = ctypes.c_size_t()
    assert lib.nvrtcGetCUBINSize(prog, ctypes.byref(cubin)) == 0
    assert cubin.value > 0
    lib.nvrtcDestroyProgram(ctypes.byref(prog))


def test_lane_header_compiles_with_nvrtc() -> None:
    # As CuPy will compile it: the header's text inlined into the kernel
    # source (CuPy's cache does not hash -I headers), no standard headers.
    header = (ROOT / "cpp" / "include" / "nncodecs" / "rans_lane.h").read_text()
    source = (ROOT / "tests" / "cuda" / "rans_lane_check.cu").read_text()
    source = source.replace('#include "nncodecs/rans_lane.h"', header)
    assert "#include <" not in source.split("__CUDACC_RTC__", 1)[1].split("#else", 1)[0]
    _nvrtc(source, b"lanes.cu")


def test_kernels_compile_with_nvrtc() -> None:
    # The very text CupyBackend hands to cupy.RawModule: both kernel files,
    # common.cuh and the shared headers inlined once.
    from nncodecs.gpu.cupy_backend import kernel_source

    source = kernel_source()
    assert '#include "' not in source
    assert source.count("struct PlaneSource {") == 1
    for kernel in ("rans_decode_merge", "rans_encode_chunks", "assemble_frame", "crc_chunks"):
        assert f"void {kernel}(" in source
    _nvrtc(source, b"nncodecs.cu")
