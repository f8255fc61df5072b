"""The torch files of a model folder (a Hugging Face Trainer checkpoint: ``optimizer.pt``,
``scheduler.pt``, ``rng_state.pth`` beside ``model.safetensors``), stored typed.

Each kept file of the folder that is a zip checkpoint the weights-only loader takes,
with its storages placed (:class:`nncodecs.formats.torch.TorchSource`), becomes a
*member*: its storage records are tensors named ``<file>/<name>``
(``optimizer.pt/state.0.exp_avg``), its other bytes and its pickle hidden files, and
its record (``source.torch.members``: file, ranges, gap sizes, storages, CRC32C) what
restores it byte for byte (:func:`restore_members`) and what
``nncodecs.integrations.torch.load(container, file=...)`` replays. A file the loader
refuses (``training_args.bin``, a pickle of a class) stays a kept file, as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nncodecs.container import HIDDEN
from nncodecs.errors import CorruptDataError
from nncodecs.formats.source import Tensor
from nncodecs.formats.spliced import check_files, keep_gaps_apart, restore_files
from nncodecs.formats.torch import TorchSource
from nncodecs.formats.torch_full import PICKLE_FILE, STORAGES

__all__ = [
    "MEMBERS",
    "Members",
    "check_members",
    "member_record",
    "member_records",
    "restore_members",
]

#: Metadata: the records of a folder's torch files stored typed.
MEMBERS = "source.torch.members"
#: Suffixes of the files tried as torch checkpoints.
_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


class Members:
    """The torch files among a folder's kept files ``kept`` (``(name, path)``)."""

    def __init__(self, kept: list[tuple[str, Path]]) -> None:
        self.sources: list[tuple[str, TorchSource, dict[str, str]]] = []
        self.kept: list[tuple[str, Path]] = []
        self._made: tuple[dict[str, str], dict[str, Any]] | None = None
        for rel, path in kept:
            found = _member(path) if path.suffix.lower() in _SUFFIXES else None
            if found is None:
                self.kept.append((rel, path))
            else:
                self.sources.append((rel, *found))

    def tensors(self) -> list[Tensor]:
        return [
            Tensor(f"{rel}/{t.name}", t.dtype, t.shape, load=t.load)
            for rel, source, _ in self.sources
            for t in source.tensors()
        ]

    def metadata_and_files(self) -> tuple[dict[str, str], dict[str, Any]]:
        """The members' record (:data:`MEMBERS`) and their hidden files (each one's bytes
        around its storages, and its pickle), made once."""
        if self._made is not None:
            return self._made
        records, files = [], {}
        for i, (rel, source, meta) in enumerate(self.sources):
            meta = dict(meta)
            gaps = keep_gaps_apart(meta, source.path)[f"{HIDDEN}source-gaps"]
            record = {
                "file": rel,
                "crc32c": meta["source.crc32c"],
                "ranges": [
                    [f"{rel}/{name}", *rest]
                    for name, *rest in json.loads(meta["source.torch.ranges"])
                ],
                "gap_sizes": json.loads(meta["source.torch.gap_sizes"]),
                "gaps_file": f"{HIDDEN}external-gaps-{i}",
                "storages": {k: f"{rel}/{n}" for k, n in json.loads(meta[STORAGES]).items()},
                "pickle_file": f"{PICKLE_FILE}-{i}",
            }
            files[record["gaps_file"]] = gaps
            files[record["pickle_file"]] = source.hidden_files()[PICKLE_FILE]
            records.append(record)
        self._made = ({MEMBERS: json.dumps(records)} if records else {}), files
        return self._made

    def close(self) -> None:
        for _, source, _ in self.sources:
            source.close()


def _member(path: Path) -> tuple[TorchSource, dict[str, str]] | None:
    """``path`` as a torch checkpoint whose every storage is placed, and its metadata;
    else ``None`` (a file the weights-only loader refuses, a legacy pickle: kept)."""
    source = TorchSource(path)
    try:
        source.tensors()
        meta = source.checked_metadata()
    except (ValueError, TypeError, CorruptDataError, OSError, ImportError):
        return None  # (ImportError: no torch here, so the file is kept as it was before)
    if STORAGES not in meta or "source.torch.ranges" not in meta:
        return None
    return source, meta


def member_records(r: Any) -> list[dict[str, Any]]:
    """A container's member records, checked: plain file names, tensors of the container."""
    try:
        records = json.loads(r.metadata.get(MEMBERS, "[]"))
    except ValueError:
        records = None
    if not isinstance(records, list) or not all(
        isinstance(rec, dict)
        and isinstance(rec.get("file"), str)
        and isinstance(rec.get("storages"), dict)
        and isinstance(rec.get("pickle_file"), str)
        and rec["pickle_file"].startswith(PICKLE_FILE)
        for rec in records
    ):
        raise CorruptDataError("the container's records of its torch files are damaged")
    return records


def member_record(r: Any, file: str) -> dict[str, Any]:
    """The record of the torch file ``file`` of a folder's container."""
    for rec in member_records(r):
        if rec["file"] == file:
            return rec
    names = ", ".join(rec["file"] for rec in member_records(r)) or "none"
    raise KeyError(f"no torch file {file!r} stored typed in the container (it has: {names})")


def restore_members(r: Any, tmp: Path, taken: set[str]) -> set[str]:
    """Write each member under the folder ``tmp``, byte for byte (checked against its
    CRC32C), never over a file of ``taken`` (the shards); returns their names."""
    return restore_files(r, member_records(r), tmp, taken, "torch file")


def check_members(r: Any) -> int:
    """Each member restored into its digest only and checked (what ``verify`` does)."""
    return check_files(r, member_records(r), "torch file")
