"""The nncodecs codecs: each a Zarr v3 codec and a numcodecs codec of one id.

Each name is imported on first use (PEP 562, :mod:`nncodecs._lazy`): zarr and
numcodecs load a codec by its own module (their entry points), and zarr's
start-up hook loads only :mod:`nncodecs.codecs.zarr_dtypes`, so none of them
pays for the others. The ML data types are registered with Zarr here, for a
process where that hook did not run (that module is small).
"""

from nncodecs._lazy import lazy_exports
from nncodecs.codecs.zarr_dtypes import register_data_types

register_data_types()

_EXPORTS = {
    **dict.fromkeys(["Auto", "NumcodecsAuto"], "nncodecs.codecs.auto"),
    **dict.fromkeys(["BitReorder", "NumcodecsBitReorder"], "nncodecs.codecs.bitreorder"),
    **dict.fromkeys(["Huffman", "NumcodecsHuffman"], "nncodecs.codecs.huffman"),
    **dict.fromkeys(["NumcodecsPlanes", "Planes"], "nncodecs.codecs.planes"),
    **dict.fromkeys(["NumcodecsRans", "Rans"], "nncodecs.codecs.rans"),
    **dict.fromkeys(["NumcodecsWeights", "Weights"], "nncodecs.codecs.weights"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

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
