"""The frame layer: frames of entropy-coded planes, on the CPU, over ``_core``.

Under the codecs and the GPU path (both import it; it imports neither):

- :mod:`~nncodecs.frame.constants`: the format's constants (chunk size,
  chunk modes, magics, element types).
- :mod:`~nncodecs.frame.params`: the frame settings, their checks, and one
  schema per coder codec that both of its shells are built from.
- :mod:`~nncodecs.frame.encode`, :mod:`~nncodecs.frame.decode`,
  :mod:`~nncodecs.frame.info`: frame encode, decode and inspection, one
  call into ``_core`` each (zstd is in C++, against the system libzstd).
- :mod:`~nncodecs.frame.threads`: the kernels' thread setting.
- :mod:`~nncodecs.frame.buffers`: the buffers the codecs take (NumPy,
  CuPy, torch, bytes), told apart by :func:`array_kind`.
"""

from nncodecs.frame.buffers import array_kind, on_cuda
from nncodecs.frame.decode import decode_frame
from nncodecs.frame.encode import encode_frame
from nncodecs.frame.info import (
    check_frame_element,
    element_types,
    frame_decoded_len,
    frame_element,
    frame_info,
)
from nncodecs.frame.threads import get_threads, set_threads

__all__ = [
    "array_kind",
    "check_frame_element",
    "decode_frame",
    "element_types",
    "encode_frame",
    "frame_decoded_len",
    "frame_element",
    "frame_info",
    "get_threads",
    "on_cuda",
    "set_threads",
]
