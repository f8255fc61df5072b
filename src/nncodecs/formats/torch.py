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
        for name, t in self._loaded.items():
            view = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape),
                    tuple(t.stride()), t.dtype)  # fmt: skip
            if t.numel() and view in seen:
                self._ties[name] = seen[view]
            seen.setdefault(view, name)
            out.append(Tensor(name, normalize_dtype(t.dtype), tuple(t.shape), load=lambda t=t: t))
        return out

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
        if not zipfile.is_zipfile(self.path):
            return None
        entries: dict[int, int] = {}  # data offset -> size of each stored storage record
        with zipfile.ZipFile(self.path) as z, self.path.open("rb") as f:
            for info in z.infolist():
                parts = info.filename.split("/")
                if len(parts) >= 3 and parts[-2] == "data" and info.compress_type == 0:
                    f.seek(info.header_offset + 26)
                    name_len, extra_len = struct.unpack("<HH", f.read(4))
                    entries[info.header_offset + 30 + name_len + extra_len] = info.file_size
        stored = [(n, t) for n, t in self._loaded.items() if n not in self._ties]
        ptrs = {t.untyped_storage().data_ptr() for _, t in stored if t.untyped_storage().nbytes()}
        if not ptrs or not entries:
            return None
        sized = [at for at, n in entries.items() if n]
        if not sized:
            return None
        base = min(ptrs) - min(sized)  # (the map of the whole file starts there)
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


def load_torch_weights(path: Path) -> dict[str, Any]:
    """A PyTorch checkpoint's tensors, loaded with ``weights_only=True``: no code runs.

    Whatever the loader raises on a damaged or hostile file (its unpickler's IndexError,
    a SafetensorError for a file it takes for safetensors, ...) is a ``ValueError``."""
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except Exception as exc:  # (a third-party loader: its failures have no fixed class)
        why = (str(exc).splitlines() or [type(exc).__name__])[0]
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
    bad = sorted(str(k) for k, v in obj.items() if not isinstance(v, torch.Tensor))
    if bad:
        raise ValueError(
            f"{path}: not a state dict of tensors ({', '.join(bad[:8])} "
            f"{'is' if len(bad) == 1 else 'are'} not tensors), which nncodecs would not keep"
        )
    return obj
