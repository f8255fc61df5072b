"""The nncodecs codecs: each a Zarr v3 codec and a numcodecs codec of one id."""

from nncodecs.codecs.auto import Auto, NumcodecsAuto
from nncodecs.codecs.bitreorder import BitReorder, NumcodecsBitReorder
from nncodecs.codecs.huffman import Huffman, NumcodecsHuffman
from nncodecs.codecs.planes import NumcodecsPlanes, Planes
from nncodecs.codecs.rans import NumcodecsRans, Rans
from nncodecs.codecs.weights import NumcodecsWeights, Weights
from nncodecs.codecs.zarr_dtypes import register_data_types

register_data_types()

__all__ = [
    "Auto",
    "BitReorder",
    "Huffman",
    "NumcodecsAuto",
    "NumcodecsBitReorder",
    "NumcodecsHuffman",
    "NumcodecsPlanes",
    "NumcodecsRans",
    "NumcodecsWeights",
    "Planes",
    "Rans",
    "Weights",
]
