"""A whole torch checkpoint (model and optimizer state, a scheduler, an epoch: anything
``torch.load(..., weights_only=True)`` takes) as the storage records of its zip.

The unit stored is torch's storage record (``archive/data/<key>``), typed by the dtype
of the tensors that use it and named by the first path that reaches one of them
(``model.encoder.layer.0.attention.self.query.weight``, ``optimizer.state.0.exp_avg``).
Names are for people. The way back is the checkpoint's own pickle, kept as the hidden
file :data:`PICKLE_FILE`: it maps every path to (storage, offset, shape, stride), so
views, slices and tensors sharing a storage come back as they were, and ``{"a.b": t}``
and ``{"a": {"b": t}}``, or an int key ``0`` and a str ``"0"``, stay apart whatever
their names. :func:`replay` runs that pickle through torch's weights-only unpickler
(never :mod:`pickle`), each storage read from the container as the pickle asks for it.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

from nncodecs.dtypes import normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.extras import need

__all__ = [
    "FULL",
    "PICKLE_FILE",
    "STORAGES",
    "path_name",
    "replay",
    "select",
    "storage_names",
    "tensor_paths",
    "whole_storage",
]

#: The kept file holding a torch checkpoint's pickle (``data.pkl``).
PICKLE_FILE = ".nncodecs/torch-pickle"
#: Metadata: ``{storage key: tensor name}`` of every stored storage record.
STORAGES = "source.torch.storages"
#: Metadata: ``"full"`` where the checkpoint holds more than a state dict (its tensors
#: are then storage records, read back through :func:`replay`).
FULL = "source.torch.checkpoint"

#: A name is cut to this many characters (escaped for Zarr it must fit a file name).
_NAME_CHARS = 120


def tensor_paths(obj: Any) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """``(path, tensor)`` of every tensor in a loaded checkpoint, depth first in the
    order of its dicts, lists and tuples (the first path to a storage names it). A
    container seen twice (a list that holds itself) is walked once."""
    torch = need("torch", "reading a PyTorch checkpoint")
    stack: list[tuple[tuple[Any, ...], Any]] = [((), obj)]
    seen: set[int] = set()
    while stack:
        path, item = stack.pop()
        if isinstance(item, torch.Tensor):
            yield path, item
            continue
        if isinstance(item, dict):
            children = list(item.items())
        elif isinstance(item, list | tuple | set | frozenset):
            children = list(enumerate(item))
        else:
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        stack.extend(((*path, k), v) for k, v in reversed(children))


def path_name(path: tuple[Any, ...]) -> str:
    """A path as people read it: its keys joined by dots (``"tensor"`` for the root)."""
    name = ".".join(str(k) for k in path) or "tensor"
    name = name.encode("utf-8", "backslashreplace").decode("utf-8").replace("\0", "\\0")
    return name if len(name) <= _NAME_CHARS else name[:_NAME_CHARS]


def storage_names(paths: list[tuple[tuple[Any, ...], Any]]) -> list[tuple[str, Any]]:
    """``(name, first tensor)`` of each storage the tensors of ``paths`` use, in the order
    first reached, named by that path; a name already taken gets ``~<n>`` (the n-th
    storage). A storage of no bytes is not listed: there is nothing to store."""
    firsts: dict[int, tuple[str, Any]] = {}
    taken: set[str] = set()
    for path, t in paths:
        storage = t.untyped_storage()
        if not storage.nbytes() or storage.data_ptr() in firsts:
            continue
        name = path_name(path)
        if name in taken:
            name = f"{name}~{len(firsts)}"
        taken.add(name)
        firsts[storage.data_ptr()] = (name, t)
    return list(firsts.values())


def whole_storage(t: Any) -> Any:
    """All of the storage under ``t``: ``t`` itself where it covers it in order, else
    a 1-D tensor of its dtype over every byte (of bytes, where its dtype is one nncodecs
    does not store, or the storage no whole number of its elements)."""
    import torch

    nbytes = t.untyped_storage().nbytes()
    dtype = t.dtype
    try:
        normalize_dtype(dtype)
    except TypeError:
        dtype = torch.uint8
    item = torch.empty(0, dtype=dtype).element_size()
    whole = t.storage_offset() == 0 and t.is_contiguous() and t.numel() * item == nbytes
    if whole and dtype == t.dtype:
        return t.detach()  # (a Parameter's too: the same storage)
    if nbytes % item:
        dtype, item = torch.uint8, 1
    return torch.empty(0, dtype=dtype).set_(t.untyped_storage(), 0, (nbytes // item,), (1,))


def replay(
    pickle: bytes, storages: dict[str, Any], read: Callable[[str], Any], prefix: Any = None
) -> Any:
    """The object a checkpoint's ``pickle`` builds, through torch's weights-only
    unpickler; ``storages``: ``{storage key: tensor name}``, ``read(name)``: that stored
    tensor (torch, CPU). ``prefix`` (see :func:`select`): only that part, and only the
    storages its tensors use are read (the pickle is first replayed with storages on the
    ``meta`` device, which hold no bytes, to learn which)."""
    if prefix is None:
        return _replay(pickle, _reading(storages, read))
    keys: dict[int, tuple[Any, str]] = {}  # (a storage's Python object is kept: one per storage)
    part = select(_replay(pickle, _meta(keys)), prefix)
    wanted = {keys[id(t.untyped_storage())][1] for _, t in tensor_paths(part)}
    wanted.discard("")  # (a storage of no bytes)
    reading = _reading(storages, read)
    placeholder = _meta({})

    def load(key: str, dtype: Any, numel: int) -> Any:
        return (reading if key in wanted else placeholder)(key, dtype, numel)

    return select(_replay(pickle, load), prefix)


def select(obj: Any, prefix: Any) -> Any:
    """The part of ``obj`` at ``prefix``: a tuple of keys (indexes for lists), or a str
    of keys joined by dots, each key the longest run of parts that names one
    (``"model"``, ``"optimizer.state.0"``; int keys match their digits)."""
    keys = list(prefix) if isinstance(prefix, tuple | list) else None
    parts = str(prefix).split(".") if keys is None else []
    at: Any = obj
    while keys if keys is not None else parts:
        if keys is not None:
            key, keys = keys[0], keys[1:]
            at = _child(at, key, prefix, exact=True)
            continue
        for n in range(len(parts), 0, -1):
            found = _child(at, ".".join(parts[:n]), prefix, exact=False, missing=None)
            if found is not _MISSING:
                at, parts = found, parts[n:]
                break
        else:
            raise KeyError(f"no part {prefix!r} in the checkpoint (at {parts[0]!r})")
    return at


_MISSING = object()


def _child(at: Any, key: Any, prefix: Any, exact: bool, missing: Any = KeyError) -> Any:
    if isinstance(at, dict):
        if key in at:
            return at[key]
        if not exact:
            for k in at:
                if not isinstance(k, str) and str(k) == key:
                    return at[k]
    elif isinstance(at, list | tuple):
        try:
            return at[int(key)]
        except (ValueError, IndexError, TypeError):
            pass
    if missing is None:
        return _MISSING
    raise KeyError(f"no part {prefix!r} in the checkpoint (at {key!r})")


def _reading(storages: dict[str, Any], read: Callable[[str], Any]) -> Callable[..., Any]:
    """Storages read from the container, each once and checked against what the pickle
    declares of it."""
    import torch

    done: dict[str, Any] = {}

    def load(key: str, dtype: Any, numel: int) -> Any:
        nbytes = numel * torch.empty(0, dtype=dtype).element_size()
        if key not in done:
            if not nbytes:
                untyped = torch.UntypedStorage(0)
            else:
                name = storages.get(key)
                if not isinstance(name, str):
                    raise CorruptDataError(f"the checkpoint's storage {key!r} is not stored")
                untyped = read(name).reshape(-1).view(torch.uint8).untyped_storage()
            if untyped.nbytes() < nbytes:
                raise CorruptDataError(
                    f"the checkpoint's storage {key!r} holds {untyped.nbytes()} bytes, "
                    f"not the {nbytes} its pickle declares"
                )
            done[key] = untyped
        return done[key]

    return load


def _meta(keys: dict[int, tuple[Any, str]]) -> Callable[..., Any]:
    """Storages of no bytes on the ``meta`` device, each recorded in ``keys``."""
    import torch

    made: dict[str, Any] = {}

    def load(key: str, dtype: Any, numel: int) -> Any:
        if key not in made:
            nbytes = numel * torch.empty(0, dtype=dtype).element_size()
            made[key] = torch.UntypedStorage(nbytes, device="meta")
            keys[id(made[key])] = (made[key], key if nbytes else "")
        return made[key]

    return load


def _replay(pickle: bytes, load: Callable[[str, Any, int], Any]) -> Any:
    torch = need("torch", "loading a PyTorch checkpoint")
    from torch import _weights_only_unpickler  # (what torch.load(weights_only=True) runs)

    def persistent_load(saved: Any) -> Any:
        if not (isinstance(saved, tuple) and len(saved) == 5 and saved[0] == "storage"):
            raise CorruptDataError(f"the checkpoint's pickle names {saved!r}, not a storage")
        kind, key, _location, numel = saved[1:]
        dtype = torch.uint8 if kind is torch.UntypedStorage else getattr(kind, "dtype", None)
        if not isinstance(dtype, torch.dtype) or type(numel) is not int or numel < 0:
            raise CorruptDataError(f"the checkpoint's pickle names a damaged storage {key!r}")
        untyped = load(str(key), dtype, numel)
        return torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)

    unpickler = _weights_only_unpickler.Unpickler(io.BytesIO(pickle), encoding="utf-8")
    unpickler.persistent_load = persistent_load  # type: ignore[method-assign]
    try:
        return unpickler.load()
    except CorruptDataError:
        raise
    except Exception as exc:  # (torch's unpickler: its refusals have no fixed class)
        raise CorruptDataError(f"the checkpoint's kept pickle is refused ({exc})") from None
