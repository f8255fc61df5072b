"""Model file formats: each one a :class:`Source` (its tensors from the header, what it
needs to come back), and what is built on them: ``compress``, ``decompress``,
``convert``, ``merge_containers`` and ``archive``."""

from nncodecs.formats.archive import ArchiveResult, archive
from nncodecs.formats.compress import compress
from nncodecs.formats.convert import convert, convert_file
from nncodecs.formats.detect import READ_FORMATS, WRITE_FORMATS, detect_format
from nncodecs.formats.merge import merge_containers
from nncodecs.formats.paths import check_container_name
from nncodecs.formats.restore import decompress, default_output, restored_name
from nncodecs.formats.safetensors import SafetensorsFile, read_safetensors, write_safetensors
from nncodecs.formats.source import Source, Tensor
from nncodecs.formats.sources import iter_source, open_source

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
