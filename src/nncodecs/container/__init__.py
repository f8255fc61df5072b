"""The nncodecs container: a whole model as one Zarr v3 group.

One array per tensor (any Zarr reader with nncodecs installed opens it), the
tensor order and the model's metadata in the group's attributes,
consolidated metadata so that opening costs one read. See ``Writer`` and
``Reader``; for many processes writing one container together, the task API
(:mod:`nncodecs.container.tasks`, :mod:`nncodecs.container.series`).

These names (and those two modules) are the container's face: the layers
above it (formats, integrations, the command line) use nothing else of it,
and an import-linter contract says so. Each name is imported on first use
(:mod:`nncodecs._lazy`): a process that only reads does not import the
Writer, nor Zarr.
"""

from nncodecs._lazy import lazy_exports

_EXPORTS = {
    "Reader": "nncodecs.container.reader",
    "TensorInfo": "nncodecs.container.tensor_info",
    "Writer": "nncodecs.container.writer",
    "merge": "nncodecs.container.merging",
    # the model's terms the formats need: chunk size and codecs, kept files, records,
    # the longest delta chain, and the check that an output is on no chain it breaks
    "CHUNK_BYTES": "nncodecs.container.layout",
    "check_codec": "nncodecs.container.layout",
    "HIDDEN": "nncodecs.container.kept",
    "check_file_name": "nncodecs.container.kept",
    "kept_key": "nncodecs.container.kept",
    "Records": "nncodecs.container.composite",
    "MAX_CHAIN": "nncodecs.container.delta",
    "not_on_a_chain": "nncodecs.container.delta_writes",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "CHUNK_BYTES",
    "HIDDEN",
    "MAX_CHAIN",
    "Reader",
    "Records",
    "TensorInfo",
    "Writer",
    "check_codec",
    "check_file_name",
    "kept_key",
    "merge",
    "not_on_a_chain",
]
