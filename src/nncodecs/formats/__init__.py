"""Model file formats: each one a :class:`Source` (its tensors from the header, what it
needs to come back), and what is built on them: ``compress``, ``decompress``,
``convert``, ``merge_containers`` and ``archive``."""

from nncodecs._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["ArchiveResult", "archive"], "nncodecs.formats.archiving"),
    "compress": "nncodecs.formats.compressing",
    **dict.fromkeys(["convert", "convert_file"], "nncodecs.formats.converting"),
    **dict.fromkeys(["READ_FORMATS", "WRITE_FORMATS", "detect_format"], "nncodecs.formats.detect"),
    "merge_containers": "nncodecs.formats.merge",
    "check_container_name": "nncodecs.formats.paths",
    **dict.fromkeys(["decompress", "default_output", "restored_name"], "nncodecs.formats.restore"),
    **dict.fromkeys(
        ["SafetensorsFile", "read_safetensors", "write_safetensors"], "nncodecs.formats.safetensors"
    ),
    **dict.fromkeys(["Source", "Tensor"], "nncodecs.formats.source"),
    **dict.fromkeys(["iter_source", "open_source"], "nncodecs.formats.opening"),
}
# Imported on first use: the command line's parser needs only the format lists.
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "READ_FORMATS",
    "WRITE_FORMATS",
    "ArchiveResult",
    "SafetensorsFile",
    "Source",
    "Tensor",
    "archive",
    "check_container_name",
    "compress",
    "convert",
    "convert_file",
    "decompress",
    "default_output",
    "detect_format",
    "iter_source",
    "merge_containers",
    "open_source",
    "read_safetensors",
    "restored_name",
    "write_safetensors",
]
