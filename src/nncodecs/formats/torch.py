"""PyTorch checkpoints as a :class:`Source`: loaded with ``weights_only=True`` (no code
runs), memory-mapped where the file is a zip, so listing reads no tensor.

A zip checkpoint whose every tensor is a whole storage (as ``torch.save`` of a model's
state dict writes it; tied tensors share one) comes back byte for byte (``decompress``
to ``.pt`` / ``.bin`` / ``.pth``): each storage's bytes lie verbatim in its zip entry, so
its tensor is put back there, and every other byte (the pickle, the zip's headers and
directory, alignment) is kept (:mod:`nncodecs.formats.spliced`). The memory map tells
where: a storage's address less the map's start is its entry's offset in the file.

A checkpoint holding more than a state dict (model and optimizer state, an epoch, a
scheduler: ``torch.save({"model": ..., "optimizer": ...})``) is stored as its storage
records instead (:mod:`nncodecs.formats.torch_full`), and comes back byte for byte the
same way. Where a zip's tensors are placed, its pickle is kept too, so that
``nncodecs.integrations.torch.load`` gives back the very object ``torch.load`` does.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path
from typing import Any

from nncodecs.dtypes import dtype_name, normalize_dtype
from nncodecs.errors import CorruptDataError, plain_message
from nncodecs.extras import need
from nncodecs.formats.source import Source, Tensor
from nncodecs.formats.spliced import Place, spliced_metadata
from nncodecs.formats.torch_full import (
    FULL,
    PICKLE_FILE,
    STORAGES,
    path_name,
    storage_names,
    tensor_paths,
    whole_storage,
)

__all__ = ["TorchSource", "load_torch_object", "state_dict_in"]


class TorchSource(Source):
    """A state dict's tensors, in its order; a checkpoint holding more, its storage
    records (``full``)."""

    format = "torch"

    def _list(self) -> list[Tensor]:
        self._ties: dict[str, str] = {}
        seen: dict[tuple, str] = {}
        out = []
        obj = load_torch_object(self.path)
        self._entries: dict[int, tuple[int, str]] = {}  # data offset -> (size, key) of a record
        self._base: int | None = None
        self._pickle: bytes | None = None
        is_zip = zipfile.is_zipfile(self.path)
        loaded = state_dict_in(obj)
        self.full = loaded is None
        if loaded is None:  # (more than a state dict: its storage records are the tensors)
            if not is_zip:
                raise ValueError(
                    f"{self.path}: a legacy (not zip) torch file holding more than a state "
                    "dict: nncodecs reads such checkpoints from the zip torch.save writes"
                )
            paths = list(tensor_paths(obj))
            named = [(path_name(p), t) for p, t in paths]
        else:
            named = list(loaded.items())
        size = self.path.stat().st_size
        for name, t in named:
            _check_view(self.path, name, t, size)
        self._all = [t for _, t in named]
        if self.full:
            loaded = {name: whole_storage(t) for name, t in storage_names(paths)}
        self._loaded = loaded
        for name, t in loaded.items():
            view = (
                t.untyped_storage().data_ptr(),
                t.storage_offset(),
                tuple(t.shape),
                tuple(t.stride()),
                t.dtype,
            )
            if t.numel() and view in seen:
                self._ties[name] = seen[view]
            seen.setdefault(view, name)
            out.append(Tensor(name, normalize_dtype(t.dtype), tuple(t.shape), load=lambda t=t: t))
        if is_zip:
            self._map()
        return out

    def _map(self) -> None:
        """Where the file is mapped (``_base``): the address at which every storage that
        torch mapped starts one of the zip's stored records and fits in it. torch reads a
        record by the size the pickle declares: one the record cannot hold would be the
        bytes that follow it, so it is refused."""
        with zipfile.ZipFile(self.path) as z, self.path.open("rb") as f:
            for info in z.infolist():
                parts = info.filename.split("/")
                if len(parts) >= 3 and parts[-2] == "data" and info.compress_type == 0:
                    f.seek(info.header_offset + 26)
                    name_len, extra_len = struct.unpack("<HH", f.read(4))
                    at = info.header_offset + 30 + name_len + extra_len
                    self._entries[at] = (info.file_size, parts[-1])
                elif len(parts) == 2 and parts[1] == "data.pkl":
                    self._pickle = z.read(info)
                elif len(parts) == 2 and parts[1] == "byteorder" and z.read(info) != b"little":
                    self._pickle = None  # (its storages are swapped as they load: not replayed)
                    self._entries.clear()
                    if self.full:
                        raise ValueError(
                            f"{self.path}: a big-endian torch checkpoint holding more than "
                            "a state dict is not read: load it and save it again here"
                        )
                    return
        storages = {}
        for t in self._all:
            storage = t.untyped_storage()
            if storage.nbytes():
                storages[storage.data_ptr()] = max(
                    storage.nbytes(), storages.get(storage.data_ptr(), 0)
                )
        if not storages:  # (no bytes to place: the file is kept whole)
            self._base = 0
            return
        low = min(storages)
        for start in sorted(self._entries):  # (the lowest storage: the first record, mostly)
            base = low - start
            if all(self._entries.get(p - base, (-1,))[0] >= n for p, n in storages.items()):
                self._base = base
                return
        raise CorruptDataError(
            f"{self.path}: a damaged torch file (a storage the pickle declares larger than "
            "its record, or not a stored record)"
        )

    def metadata(self) -> dict[str, str]:
        """Besides the CRC32C: where each storage lies in the zip, and every other byte,
        where the checkpoint comes back byte for byte (see the module)."""
        meta = super().metadata()
        places = self._places()
        if self.full:
            meta[FULL] = "full"
        if places is not None:
            tensors = meta.pop("source.tensors")
            meta.update(spliced_metadata(self.path, "torch", places))
            meta["source.tensors"] = tensors
            if self._pickle is not None:  # (the way back to the object: hidden_files)
                keys = {self._entries[at][1]: name for name, at, _, _ in places}
                meta[STORAGES] = json.dumps(keys)
        elif self.full:  # (no way back to the object without every storage placed)
            raise ValueError(
                f"{self.path}: a checkpoint holding more than a state dict whose storages "
                "are not each a whole stored record of its zip (as torch.save writes them)"
            )
        return meta

    def hidden_files(self) -> dict[str, bytes]:
        """The checkpoint's pickle, where its storages are placed: what
        ``nncodecs.integrations.torch.load`` replays."""
        self.tensors()
        if self._pickle is None or self._places() is None:
            return {}
        return {PICKLE_FILE: self._pickle}

    def _places(self) -> list[Place] | None:
        """Each stored tensor's place in the file, or ``None`` where some tensor is not
        a whole storage (a slice, a transpose of another), or the file not a zip."""
        self.tensors()
        entries, base = dict(self._entries), self._base
        if base is None:
            return None
        stored = [(n, t) for n, t in self._loaded.items() if n not in self._ties]
        places: list[Place] = []
        for name, t in stored:
            storage = t.untyped_storage()
            nbytes, at = storage.nbytes(), storage.data_ptr() - base
            if not nbytes:
                continue
            whole = t.storage_offset() == 0 and t.is_contiguous()
            size = entries.pop(at, (-1,))[0]
            if not whole or t.numel() * t.element_size() != nbytes or size != nbytes:
                return None  # (popped: a storage seen twice is not one place per tensor)
            places.append((name, at, nbytes, dtype_name(normalize_dtype(t.dtype))))
        return places

    def tied(self) -> dict[str, str]:
        """State-dict entries that are the same view of one storage as an earlier one (an
        output layer that is the embedding), as ``torch.save`` keeps them: stored once."""
        self.tensors()
        return dict(self._ties)


def _reason(message: str) -> str:
    """What torch's loader says is wrong, as one whole sentence: its weights-only
    refusal is paragraphs of advice around one line (``WeightsUnpickler error: ...``)."""
    text = plain_message(message)
    _, found, rest = text.partition("WeightsUnpickler error: ")
    if found:
        text = rest
    end = text.find(". ")
    return text[: end + 1] if end >= 0 else text


def load_torch_object(path: Path) -> Any:
    """A PyTorch checkpoint's object, loaded with ``weights_only=True``: no code runs.

    Whatever the loader raises on a damaged or hostile file (its unpickler's IndexError,
    a SafetensorError for a file it takes for safetensors, ...) is a ``ValueError``."""
    torch = need("torch", "reading a PyTorch checkpoint")

    try:
        return torch.load(
            path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path)
        )
    except MemoryError:
        raise
    except Exception as exc:  # (a third-party loader: its failures have no fixed class)
        why = _reason(str(exc)) or type(exc).__name__
        raise ValueError(f"{path}: refused: not a weights-only PyTorch file ({why})") from None


def state_dict_in(obj: Any) -> dict[str, Any] | None:
    """The state dict ``obj`` is (a dict of str to tensors, or one under ``state_dict``
    alone), its tensors detached; ``None`` for a checkpoint holding more (stored as
    its storage records)."""
    import torch

    if isinstance(obj, dict) and list(obj) == ["state_dict"]:
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()
    ):
        return None
    return {k: v.detach() for k, v in obj.items()}  # (a Parameter's too: the same storage)


def _check_view(path: Path, name: str, t: Any, size: int) -> None:
    """A tensor nncodecs can store: dense, and no larger than its storage or the file."""
    if t.layout != _strided():
        raise TypeError(
            f"{path}: tensor {name!r} is {str(t.layout).removeprefix('torch.')} "
            "(nncodecs stores dense tensors: save its indices and values apart)"
        )
    if t.numel() * t.element_size() > max(t.untyped_storage().nbytes(), size):
        raise ValueError(  # (1.5 KB of file may expand 4 bytes to terabytes)
            f"{path}: tensor {name!r} repeats its storage's elements to more "
            f"bytes than the file holds (an expand: {t.numel() * t.element_size()} "
            f"bytes of a storage of {t.untyped_storage().nbytes()}): save it "
            ".contiguous()"
        )


def _strided() -> Any:
    import torch

    return torch.strided
