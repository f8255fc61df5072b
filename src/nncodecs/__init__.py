"""nncodecs: lossless compression of neural-network tensors as Zarr / numcodecs codecs.

Every transform is a Zarr v3 codec (``BitReorder``, ``Planes``) and a
numcodecs codec of the same id (``NumcodecsBitReorder``, ``NumcodecsPlanes``);
both are found through entry points, so a Zarr array written with them
opens in any process that has nncodecs installed. Importing nncodecs also
makes ``numpy.dtype("bfloat16")`` (and float8 / float4) work, via ml_dtypes.

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

from nncodecs import _core
from nncodecs.codecs import (
    Auto,
    BitReorder,
    Huffman,
    NumcodecsAuto,
    NumcodecsBitReorder,
    NumcodecsHuffman,
    NumcodecsPlanes,
    NumcodecsRans,
    NumcodecsWeights,
    Planes,
    Rans,
    Weights,
)
from nncodecs.container import Reader, TensorInfo, Writer, merge
from nncodecs.dtypes import as_numpy, to_torch
from nncodecs.errors import CorruptDataError, NNCodecsError, NotAContainerError
from nncodecs.formats import ArchiveResult, archive
from nncodecs.frame import get_threads, set_threads

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

del _core
