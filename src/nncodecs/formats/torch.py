"""PyTorch checkpoints as a :class:`Source`: loaded with ``weights_only=True`` (no code
runs), memory-mapped where the file is a zip, so listing reads no tensor."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from nncodecs.dtypes import normalize_dtype
from nncodecs.formats.source import Source, Tensor

__all__ = ["TorchSource", "load_torch_weights"]


class TorchSource(Source):
    """A state dict's tensors, in its order."""

    format = "torch"

    def _list(self) -> list[Tensor]:
        self._ties: dict[str, str] = {}
        seen: dict[tuple, str] = {}
        out = []
        for name, t in load_torch_weights(self.path).items():
            view = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape),
                    tuple(t.stride()), t.dtype)  # fmt: skip
            if t.numel() and view in seen:
                self._ties[name] = seen[view]
            seen.setdefault(view, name)
            out.append(Tensor(name, normalize_dtype(t.dtype), tuple(t.shape), load=lambda t=t: t))
        return out

    def tied(self) -> dict[str, str]:
        """State-dict entries that are the same view of one storage as an earlier one (an
        output layer that is the embedding), as ``torch.save`` keeps them: stored once."""
        self.tensors()
        return dict(self._ties)


def load_torch_weights(path: Path) -> dict[str, Any]:
    """A PyTorch checkpoint's tensors, loaded with ``weights_only=True``: no code runs."""
    import pickle

    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except (pickle.UnpicklingError, RuntimeError, AttributeError, EOFError) as exc:
        raise ValueError(
            f"{path}: refused: not a weights-only PyTorch file ({str(exc).splitlines()[0]})"
        ) from None
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
