"""The GPU path: CUDA kernels compiled through CuPy on first use.

Nothing here touches a GPU, or imports CuPy, at import time. The kernels
(``kernels/decode.cu``, ``kernels/encode.cu``, ``kernels/common.cuh``) share
the rANS lane arithmetic and the word reorder with the CPU build
(``rans_lane.h``, ``reorder_word.h``). Below the codecs: it imports only
:mod:`nncodecs.frame` (and ``_core``, ``dtypes``, ``errors``).

- :mod:`nncodecs.gpu.backend`: the backend protocol and registry: which
  backend serves an array on a device (CuPy, torch CUDA, registered ones).
- :mod:`nncodecs.gpu.plan`: a frame's header and index parsed on the host
  into the decode kernels' tables.
- :mod:`nncodecs.gpu.decode`: frames decoded on the device, many in one
  launch of each kernel (``decode_frames``).
- :mod:`nncodecs.gpu.encode`: frames encoded on the device with the CPU's
  bytes (``encode_frames``); the host takes every decision with the CPU
  encoder's own functions. :mod:`nncodecs.gpu.payloads`: rANS payloads
  and the frames' assembly.
- :mod:`nncodecs.gpu.structs`: the kernels' tables as NumPy record types.
- :mod:`nncodecs.gpu.device`: the ``weights`` codecs' entry points for
  device arrays.
- :mod:`nncodecs.gpu.cupy_backend`: device arrays and launches through CuPy.

Tested without a GPU under a SIMT emulator (tests/cuda/simt_host.h); not yet
run on a GPU (docs/gpu.md).
"""

from __future__ import annotations

__all__: list[str] = []
