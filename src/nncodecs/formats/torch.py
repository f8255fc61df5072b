"""PyTorch checkpoints as a :class:`Source`: loaded with ``weights_only=True`` (no code
runs), memory-mapped where the file is a zip, so listing reads no tensor.

A zip checkpoint whose every tensor is a whole storage (as ``torch.save`` of a model's
state dict writes it; tied tensors share one) comes back byte for byte (``decompress``
to ``.pt`` / ``.bin`` / ``.pth``): each storage's bytes lie verbatim in its zip entry, so
its tensor is put back there, and every other byte (the pickle, the zip's headers and
directory, alignment) is kept (:mod:`nncodecs.formats.spliced`). The memory map tells
where: a storage's address less the map's start is its entry's offset in the file.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import Any

from nncodecs.dtypes import dtype_name, normalize_dtype
from nncodecs.errors import CorruptDataError, plain_message
from nncodecs.extras import need
from nncodecs.formats.source import Source, Tensor
from nncodecs.formats.spliced import Place, spliced_metadata

__all__ = ["TorchSource", "load_torch_weights"]


class TorchSource(Source):
    """A state dict's tensors, in its order."""

    format = "torch"

    def _list(self) -> list[Tensor]:
        self._ties: dict[str, str] = {}
        seen: dict[tuple, str] = {}
        out = []
        self._loaded = load_torch_weights(self.path)
        self._entries: dict[int, int] = {}  # data offset -> size of each stored storage record
        self._base: int | None = None
        size = self.path.stat().st_size
        for name, t in self._loaded.items():
            if t.layout != _strided():
                raise TypeError(
                    f"{self.path}: tensor {name!r} is {str(t.layout).removeprefix('torch.')} "
                    "(nncodecs stores dense tensors: save its indices and values apart)"
                )
            if t.numel() * t.element_size() > max(t.untyped_storage().nbytes(), size):
                raise ValueError(  # (1.5 KB of file may expand 4 bytes to terabytes)
                    f"{self.path}: tensor {name!r} repeats its storage's elements to more "
                    f"bytes than the file holds (an expand: {t.numel() * t.element_size()} "
                    f"bytes of a storage of {t.untyped_storage().nbytes()}): save it "
                    ".contiguous()"
                )
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
        if zipfile.is_zipfile(self.path):
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
                    self._entries[info.header_offset + 30 + name_len + extra_len] = info.file_size
        storages = {}
        for t in self._loaded.values():
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
            if all(self._entries.get(p - base, -1) >= n for p, n in storages.items()):
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
        if places is not None:
            tensors = meta.pop("source.tensors")
            meta.update(spliced_metadata(self.path, "torch", places))
            meta["source.tensors"] = tensors
        return meta

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
            if not whole or t.numel() * t.element_size() != nbytes or entries.pop(at, -1) != nbytes:
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


def load_torch_weights(path: Path) -> dict[str, Any]:
    """A PyTorch checkpoint's tensors, loaded with ``weights_only=True``: no code runs.

    Whatever the loader raises on a damaged or hostile file (its unpickler's IndexError,
    a SafetensorError for a file it takes for safetensors, ...) is a ``ValueError``."""
    torch = need("torch", "reading a PyTorch checkpoint")

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except MemoryError:
        raise
    except Exception as exc:  # (a third-party loader: its failures have no fixed class)
        why = _reason(str(exc)) or type(exc).__name__
        raise ValueError(f"{path}: refused: not a weights-only PyTorch file ({why})") from None
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        others = sorted(str(k) for k in obj if k != "state_dict")
        if others:  # an optimizer state, an epoch ...: not kept, so refused by name
            raise ValueError(
                f"{path}: the checkpoint holds more than a state dict ({', '.join(others[:8])}"
                f"{', ...' if len(others) > 8 else ''}), which nncodecs would not keep: "
                "save the state dict alone"
            )
        obj = obj["state_dict"]
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: not a state dict of tensors")
    odd = [repr(k) for k in obj if not isinstance(k, str)]
    if odd:
        raise ValueError(f"{path}: a state dict's names are strings, not {', '.join(odd[:8])}")
    bad = sorted(str(k) for k, v in obj.items() if not isinstance(v, torch.Tensor))
    if bad:
        raise ValueError(
            f"{path}: not a state dict of tensors ({', '.join(bad[:8])} "
            f"{'is' if len(bad) == 1 else 'are'} not tensors), which nncodecs would not keep"
        )
    return {k: v.detach() for k, v in obj.items()}  # (a Parameter's too: the same storage)


def _strided() -> Any:
    import torch

    return torch.strided
