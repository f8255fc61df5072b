"""GPU decoding of nncodecs frames: CUDA kernels compiled through CuPy on first use.

Nothing here touches a GPU, or imports CuPy, at import time. The kernels
(``kernels/decode.cu``) share the rANS lane arithmetic and the word reorder
with the CPU build (``rans_lane.h``, ``reorder_word.h``); the host side
(:mod:`nncodecs.gpu.decode`) parses the frame with the CPU's parser and
launches them through a backend: :class:`nncodecs.gpu.cupy_backend.CupyBackend`
on a GPU, a SIMT emulator in the tests.

Status (issue 7, in progress): decoding (rANS chunks, fused with the plane
merge and inverse reorder where the exponent plane is the only coded one,
version 2 row offsets, the frame's CRC32C) is written and tested under the
emulator; encoding and the codecs' CuPy dispatch are not there yet.
"""

from __future__ import annotations

__all__: list[str] = []
