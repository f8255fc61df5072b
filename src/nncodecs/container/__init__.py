"""The nncodecs container: a whole model as one Zarr v3 group.

One array per tensor (any Zarr reader with nncodecs installed opens it), the
tensor order and the model's metadata in the group's attributes,
consolidated metadata so that opening costs one read. See ``Writer`` and
``Reader``.
"""

from nncodecs.container.merging import merge
from nncodecs.container.reader import Reader, TensorInfo
from nncodecs.container.writer import Writer

__all__ = ["Reader", "TensorInfo", "Writer", "merge"]
