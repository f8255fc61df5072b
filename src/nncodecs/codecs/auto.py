"""``nncodecs.auto``: per plane and per chunk, the smallest of every coder.

For each chunk of 2^18 symbols of each plane: rANS, Huffman, zstd (libzstd,
in the C++ frame code), raw and constant are all tried and the smallest
is kept (on a tie the one faster to decode); the choice is recorded in the
chunk index, so decoding never searches. Frame: ``docs/format.md``.

Classes: :class:`Auto` (Zarr v3, bytes -> bytes) and :class:`NumcodecsAuto`,
configuration ``{"planes", "precision", "subblock_log2", "checksum", "zstd_level",
"min_gain"}``.

Examples
--------
>>> import numpy as np
>>> codec = NumcodecsAuto(planes=2)
>>> planes = np.concatenate([np.zeros(4096, np.uint8), np.arange(4096) % 7]).astype(np.uint8)
>>> bytes(codec.decode(codec.encode(planes))) == planes.tobytes()
True
"""

from __future__ import annotations

from nncodecs.codecs._coder import FrameBytesCodec, NumcodecsFrameCodec
from nncodecs.frame.params import AUTO

__all__ = ["Auto", "NumcodecsAuto"]

CODEC_ID = "nncodecs.auto"


class NumcodecsAuto(NumcodecsFrameCodec):
    """numcodecs codec ``nncodecs.auto``.

    Parameters
    ----------
    planes : int, optional
        The input is this many equal planes, each chosen for separately
        (default: the width of ``dtype``, else 1).
    precision : int
        rANS probability bits, 10 to 12.
    subblock_log2 : int
        Symbols per sub-block, 2^12 to 2^16.
    checksum : bool
        Store a CRC32C of the input and check it on decode.
    zstd_level : int
        Level of the zstd candidate.
    min_gain : float
        A chunk is stored raw unless its best coder saves at least this
        fraction of it (raw chunks decode at memcpy speed). Default 0.05.
    dtype : str or dtype, optional
        Element type recorded in the frame, as for
        :class:`nncodecs.codecs.rans.NumcodecsRans`.
    threads : int, optional
        Threads for chunks (default: every core). Not part of the configuration.
    """

    codec_id = CODEC_ID
    coder = "auto"
    schema = AUTO


class Auto(FrameBytesCodec):
    """Zarr v3 codec ``nncodecs.auto`` (bytes -> bytes); ``planes`` defaults to the element size."""

    codec_id = CODEC_ID
    coder = "auto"
    schema = AUTO
