"""``nncodecs.rans``: rANS coding of byte planes, one format for CPU and GPU.

32 interleaved lanes, 31-bit states, 16-bit renormalisation, one frequency
table per chunk of 2^18 symbols of a plane; a chunk that rANS would not
shrink by 5% is stored raw, a one-byte chunk as a constant. The frame and
bitstream are in ``docs/format.md``.

Classes: :class:`Rans` (Zarr v3, bytes -> bytes) and :class:`NumcodecsRans`,
configuration ``{"planes", "precision", "subblock_log2", "checksum"}``.

Examples
--------
>>> import numpy as np
>>> codec = NumcodecsRans(planes=1)
>>> data = np.repeat(np.arange(8, dtype=np.uint8), 5000)
>>> frame = codec.encode(data)
>>> len(frame) < data.nbytes // 2, bytes(codec.decode(frame)) == data.tobytes()
(True, True)
"""

from __future__ import annotations

from nncodecs.codecs._coder import FrameBytesCodec, NumcodecsFrameCodec
from nncodecs.frame.params import RANS

__all__ = ["NumcodecsRans", "Rans"]

CODEC_ID = "nncodecs.rans"


class NumcodecsRans(NumcodecsFrameCodec):
    """numcodecs codec ``nncodecs.rans``.

    Parameters
    ----------
    planes : int, optional
        The input is this many equal planes, each coded with its own tables
        (default: the width of ``dtype``, else 1).
    precision : int
        Probability bits, 10 to 12.
    subblock_log2 : int
        Symbols per sub-block (its own 32 lane states), 2^12 to 2^16.
    checksum : bool
        Store a CRC32C of the input and check it on decode.
    dtype : str or dtype, optional
        Element type of the array whose planes these are, recorded in the
        frame (as the fused ``weights`` codec records it); decoding refuses a
        frame of another. ``None``: the frame records ``bytes``.
    threads : int, optional
        Threads for chunks (default: every core). Not part of the configuration.
    """

    codec_id = CODEC_ID
    coder = "rans"
    schema = RANS


class Rans(FrameBytesCodec):
    """Zarr v3 codec ``nncodecs.rans`` (bytes -> bytes); ``planes`` defaults to the element size."""

    codec_id = CODEC_ID
    coder = "rans"
    schema = RANS
