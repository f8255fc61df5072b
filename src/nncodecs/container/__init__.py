"""The nncodecs container: a whole model as one Zarr v3 group.

One array per tensor (any Zarr reader with nncodecs installed opens it), the
tensor order and the model's metadata in the group's attributes,
consolidated metadata so that opening costs one read. See ``Writer`` and
``Reader``. Each name is imported on first use (:mod:`nncodecs._lazy`): a
process that only reads does not import the Writer, nor Zarr.
"""

from nncodecs._lazy import lazy_exports

_EXPORTS = {
    "Reader": "nncodecs.container.reader",
    "TensorInfo": "nncodecs.container.tensor_info",
    "Writer": "nncodecs.container.writer",
    "merge": "nncodecs.container.merging",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["Reader", "TensorInfo", "Writer", "merge"]
