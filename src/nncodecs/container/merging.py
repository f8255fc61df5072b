"""Merge several containers into one."""

from __future__ import annotations

from typing import Any

from nncodecs.container.reader import Reader
from nncodecs.container.writer import Writer

__all__ = ["merge"]


def merge(
    sources: list[Any],
    target: Any,
    codec: str = "auto",
    metadata: dict[str, str] | None = None,
    overwrite: bool = False,
) -> None:
    """Write the tensors of several containers into one (names must not repeat).

    ``metadata``: the merged container's metadata; by default the sources'
    metadata, which must then agree key by key.
    """
    with Writer(target, mode="w", codec=codec, overwrite=overwrite) as w:
        if metadata is not None:
            w.metadata.update(metadata)
        for source in sources:
            with Reader(source) as r:
                for key, value in r.metadata.items() if metadata is None else ():
                    if w.metadata.get(key, value) != value:
                        raise ValueError(f"metadata {key!r} differs between the containers")
                    w.metadata[key] = value
                for name in r:
                    kind = r.layout(name)
                    if kind in ("mxfp4", "nvfp4"):
                        w.add_quantized(name, *r.read_tensor(name, check=True), scheme=kind)
                    else:
                        to = "scipy" if kind != "dense" else "numpy"
                        w.add_tensor(name, r.read_tensor(name, to=to, check=True))
