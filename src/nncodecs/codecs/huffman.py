"""``nncodecs.huffman``: canonical Huffman coding of byte planes.

Code lengths limited to 11 bits (the decode table fits L1), one code per
chunk of 2^18 symbols of a plane, four interleaved bit streams per
sub-block; a chunk that Huffman would not shrink by 5% is stored raw, a
one-byte chunk as a constant. Faster to decode than rANS, a little larger. The frame and
bitstream are in ``docs/format.md``.

Classes: :class:`Huffman` (Zarr v3, bytes -> bytes) and :class:`NumcodecsHuffman`,
configuration ``{"planes", "subblock_log2", "checksum"}``.

Examples
--------
>>> import numpy as np
>>> codec = NumcodecsHuffman(planes=1)
>>> data = np.repeat(np.arange(8, dtype=np.uint8), 5000)
>>> frame = codec.encode(data)
>>> len(frame) < data.nbytes // 2, bytes(codec.decode(frame)) == data.tobytes()
(True, True)
"""

from __future__ import annotations

from nncodecs.codecs._coder import FrameBytesCodec, NumcodecsFrameCodec
from nncodecs.frame.params import HUFFMAN

__all__ = ["Huffman", "NumcodecsHuffman"]

CODEC_ID = "nncodecs.huffman"


class NumcodecsHuffman(NumcodecsFrameCodec):
    """numcodecs codec ``nncodecs.huffman``.

    Parameters
    ----------
    planes : int, optional
        The input is this many equal planes, each coded with its own tables
        (default: the width of ``dtype``, else 1).
    subblock_log2 : int
        Symbols per sub-block (its own four streams), 2^12 to 2^16.
    checksum : bool
        Store a CRC32C of the input and check it on decode.
    dtype : str or dtype, optional
        Element type recorded in the frame, as for :class:`NumcodecsRans`.
    threads : int, optional
        Threads for chunks (default: every core). Not part of the configuration.
    """

    codec_id = CODEC_ID
    coder = "huffman"
    schema = HUFFMAN


class Huffman(FrameBytesCodec):
    """Zarr v3 codec ``nncodecs.huffman`` (bytes -> bytes); ``planes``: the element size."""

    codec_id = CODEC_ID
    coder = "huffman"
    schema = HUFFMAN
