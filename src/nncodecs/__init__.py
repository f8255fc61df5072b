"""nncodecs: lossless compression of neural-network tensors as Zarr / numcodecs codecs.

Every transform is a Zarr v3 codec (``BitReorder``, ``Planes``) and a
numcodecs codec of the same id (``NumcodecsBitReorder``, ``NumcodecsPlanes``);
both are found through entry points, so a Zarr array written with them
opens in any process that has nncodecs installed. ``import nncodecs`` imports
each of its names on first use, so that the command line starts fast; once
a codec or ``nncodecs.dtypes`` is loaded, ``numpy.dtype("bfloat16")`` (and
float8 / float4) work, via ml_dtypes.

Examples
--------
>>> import ml_dtypes, numpy as np, zarr
>>> import nncodecs
>>> w = np.random.default_rng(0).standard_normal((256, 64)).astype(ml_dtypes.bfloat16)
>>> z = zarr.create_array({}, shape=w.shape, chunks=(64, 64), dtype=w.dtype,
...                       filters=[nncodecs.BitReorder()], serializer=nncodecs.Planes(),
...                       compressors=[zarr.codecs.ZstdCodec()])
>>> z[:] = w
>>> bool((z[:].view(np.uint16) == w.view(np.uint16)).all())
True
"""

from nncodecs import _zipfile_fix
from nncodecs._lazy import lazy_exports

_zipfile_fix.apply()  # zip:: readers on threads (CPython gh-127847), see the module

_EXPORTS = {
    **dict.fromkeys(
        [
            "Auto",
            "BitReorder",
            "Huffman",
            "Planes",
            "Rans",
            "Weights",
            "NumcodecsAuto",
            "NumcodecsBitReorder",
            "NumcodecsHuffman",
            "NumcodecsPlanes",
            "NumcodecsRans",
            "NumcodecsWeights",
        ],
        "nncodecs.codecs",
    ),
    **dict.fromkeys(["Reader", "TensorInfo", "Writer", "merge"], "nncodecs.container"),
    **dict.fromkeys(["as_numpy", "to_torch"], "nncodecs.dtypes"),
    **dict.fromkeys(
        [
            "CorruptDataError",
            "NNCodecsError",
            "NotAContainerError",
            "ReferenceNeededError",
            "ReferenceProblemError",
        ],
        "nncodecs.errors",
    ),
    **dict.fromkeys(["ArchiveResult", "archive"], "nncodecs.formats"),
    **dict.fromkeys(["get_threads", "set_threads"], "nncodecs.frame"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__version__ = "0.1.0"

__all__ = [
    "ArchiveResult",
    "Auto",
    "BitReorder",
    "CorruptDataError",
    "Huffman",
    "NNCodecsError",
    "NotAContainerError",
    "NumcodecsAuto",
    "NumcodecsBitReorder",
    "NumcodecsHuffman",
    "NumcodecsPlanes",
    "NumcodecsRans",
    "NumcodecsWeights",
    "Planes",
    "Rans",
    "Reader",
    "ReferenceNeededError",
    "ReferenceProblemError",
    "TensorInfo",
    "Weights",
    "Writer",
    "__version__",
    "archive",
    "as_numpy",
    "get_threads",
    "merge",
    "set_threads",
    "to_torch",
]
