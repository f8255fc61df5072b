"""Merge several containers into one."""

from __future__ import annotations

import hashlib
from typing import Any

from nncodecs.container.kept import HIDDEN, kept_key
from nncodecs.container.reader import Reader
from nncodecs.container.writer import Writer
from nncodecs.store.opening import describe_target

__all__ = ["merge"]


def merge(
    sources: list[Any],
    target: Any,
    codec: str = "auto",
    metadata: dict[str, str] | None = None,
    overwrite: bool = False,
    keep_hidden: bool = True,
    references: Any = None,
) -> None:
    """Write the tensors of several containers into one (names must not repeat), and
    their kept files (one of each name: the same bytes in every container that has it);
    their hidden ones (nncodecs' records of a source) only with ``keep_hidden``.

    ``metadata``: the merged container's metadata; by default the sources'
    metadata, which must then agree key by key. Tensors stored against other
    containers are written whole (``references``: as :class:`Reader` takes them).
    """
    seen: dict[str, str] = {}  # tensor name -> the source it came from
    kept: dict[str, bytes] = {}  # kept files written: their sha256, by name
    with Writer(target, mode="w", codec=codec, overwrite=overwrite) as w:
        if metadata is not None:
            w.metadata.update(metadata)
        for source in sources:
            where = describe_target(source)
            with Reader(source, references=references) as r:
                for key, value in r.metadata.items() if metadata is None else ():
                    if w.metadata.get(key, value) != value:
                        raise ValueError(f"metadata {key!r} differs between the containers")
                    w.metadata[key] = value
                for name in r:
                    if name in seen:
                        raise ValueError(
                            f"{where}: tensor {name!r} is in {seen[name]} too "
                            "(merged names must not repeat)"
                        )
                    seen[name] = where
                    try:
                        _copy(r, w, name)
                    except (ValueError, TypeError) as exc:  # (the source named, not the first)
                        if type(exc) not in (ValueError, TypeError) or where in str(exc):
                            raise
                        raise type(exc)(f"{where}: {exc}") from None
                for file in r.files(hidden=keep_hidden):
                    data = r.read_tensor(kept_key(file), check=True)  # type: ignore[arg-type]
                    digest = hashlib.sha256(data).digest()  # (not the bytes: memory stays flat)
                    if file in kept and kept[file] != digest:
                        raise ValueError(f"{where}: kept file {file!r} differs between them")
                    if file not in kept:
                        keep = w.add_hidden_file if file.startswith(HIDDEN) else w.add_file
                        keep(file, data)  # (hidden ones too: a source's records)
                        kept[file] = digest
                    del data


def _copy(r: Reader, w: Writer, name: str) -> None:
    """One tensor from ``r`` into ``w``: sparse and quantized ones by their parts, as
    stored (their index dtypes kept; a COO tensor of any rank)."""
    kind = r.layout(name)
    value = r.read_tensor(name, check=True)
    if kind in ("mxfp4", "nvfp4"):
        w.add_quantized(name, *value, scheme=kind)
    elif kind == "records":  # (its bytes, split again by the fields recorded)
        w.add_records(name, value, r.tensor_attrs(name)["fields"])
    elif kind == "coo":
        w.add_sparse_coo(name, value["coords"], value["data"], value["shape"])
    elif kind in ("csr", "csc"):
        add = w.add_sparse_csr if kind == "csr" else w.add_sparse_csc
        add(name, value["data"], value["indices"], value["indptr"], value["shape"])
    else:
        w.add_tensor(name, value)
