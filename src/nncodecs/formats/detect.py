"""What a path holds, and the lists of formats nncodecs reads and writes."""

from __future__ import annotations

import zipfile
from pathlib import Path

from nncodecs.errors import CorruptDataError

__all__ = ["EXACT_FORMATS", "INDEX", "READ_FORMATS", "WRITE_FORMATS", "detect_format"]

#: What nncodecs reads (compress, info, convert): the one list that help, errors and docs show.
READ_FORMATS = ("safetensors", "GGUF", "npz", "torch", "ONNX", "ztensor", "DCP directories")
#: What a container is restored to (decompress, convert): the output suffix picks one.
WRITE_FORMATS = {
    ".safetensors": "safetensors",
    ".npz": "npz",
    ".gguf": "gguf",
    ".onnx": "onnx",
    ".pt": "torch",
    ".pth": "torch",
    ".bin": "torch",
}
#: Formats restored byte-identical from a container made from them.
EXACT_FORMATS = ("safetensors", "gguf", "onnx", "torch")
#: The shard index of a safetensors snapshot directory.
INDEX = "model.safetensors.index.json"


def detect_format(path: str | Path) -> str:
    """What a path holds, from its content: ``container``, ``safetensors``,
    ``safetensors-dir`` (shards or a snapshot directory), ``npz``, ``torch``, ``gguf``,
    ``ztensor``, ``dcp`` (a torch.distributed.checkpoint directory) or ``onnx`` (by its
    suffix: protobuf has no magic).

    Raises ``FileNotFoundError`` for a missing path and ``ValueError`` for
    anything else.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_dir():
        if (path / "zarr.json").is_file():
            return "container"
        if (path / ".metadata").is_file():  # (torch.distributed.checkpoint's FileSystemWriter)
            return "dcp"
        if path.joinpath(INDEX).is_file() or any(path.glob("*.safetensors")):
            return "safetensors-dir"
        raise ValueError(
            f"{path}: a directory with no container and no .safetensors files{_cache_hint(path)}"
        )
    if path.name.endswith(".index.json"):
        return "safetensors-dir"
    with path.open("rb") as f:
        head = f.read(16)
    if head[:4] == b"GGUF":
        return "gguf"
    if head[:3] == b"\x89ZT":
        return "ztensor"
    if head[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        # (zipfile raises more than BadZipFile on a forged directory: a name not UTF-8,
        # a compression method it lacks)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
            raise CorruptDataError(f"{path}: a damaged zip file ({exc})") from None
        if "zarr.json" in names:
            return "container"
        if any(n.endswith("data.pkl") for n in names):
            return "torch"
        if names and all(n.endswith(".npy") for n in names):
            return "npz"
        raise ValueError(f"{path}: a zip file that is not a container, npz or torch file")
    if len(head) >= 9 and head[8:9] == b"{":
        return "safetensors"
    if head[:1] == b"\x80":  # a legacy (non-zip) torch pickle
        return "torch"
    if path.suffix == ".onnx":  # protobuf has no magic: the suffix decides
        return "onnx"
    raise ValueError(
        f"{path}: not a format nncodecs reads ({', '.join(READ_FORMATS)}, or a container)"
    )


def _cache_hint(path: Path) -> str:
    """A Hugging Face cache repository (``models--org--name``: ``blobs/``, ``refs/``,
    ``snapshots/<revision>/``) holds its model in a snapshot: name one."""
    snapshots = path / "snapshots"
    if not (snapshots.is_dir() and (path / "blobs").is_dir()):
        return ""
    revisions = sorted(p.name for p in snapshots.iterdir() if p.is_dir())
    main = path / "refs" / "main"
    try:
        current = main.read_text().strip() if main.is_file() else ""
    except (OSError, UnicodeDecodeError):
        current = ""
    pick = current if current in revisions else (revisions[-1] if revisions else "<revision>")
    return f"; it is a Hugging Face cache repository: give one of its snapshots, {snapshots / pick}"
