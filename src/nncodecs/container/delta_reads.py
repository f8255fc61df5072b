"""A Reader's tensors stored against references (see
:mod:`nncodecs.container.delta_writes`): followed, checked, sliced.

A delta tensor reads as its coded bits (the weights codec's frames, checked by their
CRC32C), its reference read the same way (itself perhaps a delta, down its chain),
and the transform undone. Before its bits are used, the reference must be the tensor
the delta was written against: its recorded SHA-256 (or, where its container records
none, its bits' hash) equals the one the delta records. ``check=True`` (and
``verify``) also hashes the result against the tensor's own record. A reference that
is missing, unreadable, not allowed (:mod:`nncodecs.container.references`) or not
the same tensor is a :class:`nncodecs.ReferenceProblemError` naming both tensors.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from nncodecs.container import delta, layout
from nncodecs.container.arrays import convert
from nncodecs.container.declared import Declared, declared, doc_dtype
from nncodecs.container.delta_slices import DeltaArray
from nncodecs.container.references import allowed_references, resolve_reference
from nncodecs.dtypes import dtype_name
from nncodecs.errors import CorruptDataError, ReferenceProblemError
from nncodecs.store.files import local_target
from nncodecs.store.zarr_nodes import array_from_doc

__all__ = ["DeltaArray", "DeltaReader"]

#: Deepest chain a Reader follows (a container's own bound is its writer's max_chain;
#: this stops a forged or cyclic one).
MAX_FOLLOW = delta.MAX_FOLLOW


class DeltaReader:
    """What a Reader holds to follow its tensors' references: the references allowed,
    the Readers of the containers they lead to, each delta tensor's configuration.

    It reaches its Reader (``host``) only through the Reader's internal interface
    (``member``, ``corrupt``, ``as_corrupt``, ``chunk_reads``, ``is_strict``,
    ``zarr_store``, ``tensor_attrs``, ``read_link``), never its private state."""

    def __init__(self, host: Any, target: Any, references: Any, chain: tuple[str, ...]) -> None:
        self._r = host
        self._target = target
        self.allowed = allowed_references(references)
        self._references_arg = references
        self._chain = chain if chain else (_place(target),)
        self._ref_readers: dict[str, Any] = {}
        self._deltas: dict[str, dict[str, Any] | None] = {}
        self._places: dict[str, str] = {}

    def config(self, name: Any) -> dict[str, Any] | None:
        """A dense tensor's delta configuration (``None``: stored whole)."""
        if name not in self._deltas:
            member = self._r.member(name)
            found = None
            if member.layout == "dense":
                doc = member.doc if member.doc is not None else _doc_of(member.node)
                try:
                    found = delta.delta_config(doc)
                except CorruptDataError as exc:
                    raise self._r.corrupt(name, exc) from None
                if found is not None:
                    try:
                        depth = delta.record_depth(member.attrs, True)
                    except CorruptDataError as exc:
                        raise self._r.corrupt(name, exc) from None
                    found = {**found, "doc": doc, "depth": depth}
            self._deltas[name] = found
        return self._deltas[name]

    def _reference_reader(self, name: str, config: dict[str, Any]) -> tuple[Any, str]:
        """The Reader of a delta tensor's reference container, and the tensor's name."""
        ref = config["reference"]
        recorded, tensor = ref["container"], ref["tensor"]
        what = f"its reference {tensor!r} of {recorded!r}"
        try:
            if recorded not in self._places:  # (resolved once a place: paths resolve by stat)
                self._places[recorded] = resolve_reference(self._target, recorded, self.allowed)
            where = self._places[recorded]
        except ReferenceProblemError as exc:
            raise self._fail(name, str(exc)) from None
        if where not in self._ref_readers:
            try:
                key = _place(where)
            except (OSError, RuntimeError) as exc:  # (a loop of links: 3.11 raises RuntimeError)
                raise self._fail(name, f"{what} cannot be opened ({exc})") from None
            if key in self._chain:
                raise self._fail(
                    name, f"{what}: a cycle (that container is already on this chain of references)"
                )
            if len(self._chain) > MAX_FOLLOW:
                raise self._fail(name, f"{what}: a chain of references over {MAX_FOLLOW} deep")
            try:  # (a Reader like its own: type(host), not an import of reader.py)
                self._ref_readers[where] = type(self._r)(
                    where, references=self._references_arg, _chain=(*self._chain, key)
                )
            except (OSError, ValueError) as exc:
                raise self._fail(name, f"{what} cannot be opened ({exc})") from None
        reader = self._ref_readers[where]
        if tensor not in reader:
            raise self._fail(name, f"{what} is not in that container")
        return reader, tensor

    def _fail(self, name: str, why: str) -> ReferenceProblemError:
        err = self._r.corrupt(name, CorruptDataError(why))
        return ReferenceProblemError(str(err))

    def _checked_reference(self, name: str, config: dict[str, Any]) -> tuple[Any, str]:
        """The reference, its record checked against the hash the delta recorded."""
        reader, tensor = self._reference_reader(name, config)
        want = config["reference"]["sha256"]
        attrs = reader.tensor_attrs(tensor)
        recorded = attrs.get("sha256") if isinstance(attrs, dict) else None
        if isinstance(recorded, str) and recorded != want:
            raise self._fail(
                name,
                f"its reference {tensor!r} of {config['reference']['container']!r} is not the "
                "tensor it was written against (another SHA-256)",
            )
        return reader, tensor

    def _coded(self, name: str, config: dict[str, Any]) -> Declared:
        """A delta tensor's coded bits, as their array's document declares them."""
        if "coded" not in config:
            coded_doc = delta.coded_doc(config["doc"], config)
            try:
                own = declared(self._r.chunk_reads, self._r.member(name).path, coded_doc)
            except CorruptDataError as exc:
                raise self._r.corrupt(name, exc) from None
            if own is None:
                raise self._fail(name, "its coded bits are not laid out as nncodecs writes them")
            config["coded"] = own
        return config["coded"]

    def _decode_against(self, name: str, own: Declared, transform: str, base: Any) -> Any:
        """A delta tensor's bits: its coded bits decoded a window at a time, each window
        undone against the reference's rows while it is in cache."""
        from nncodecs.container.checks import check_size
        from nncodecs.container.decoding import read_weights

        flat = base.reshape(len(base) if base.ndim else 1, -1) if base.size else base
        rows_of = base.reshape(1, -1) if not base.ndim else flat

        def undo(rows: np.ndarray, first: int) -> None:
            delta.inverse(transform, rows, rows_of[first : first + len(rows)])

        if not math.prod(own.shape):
            return np.empty(own.shape, own.dtype)
        with self._r.as_corrupt(name):
            check_size(own, self._r.chunk_reads)
            value = read_weights(own, self._r.is_strict(own.path), undo)
        if value is None:
            raise self._fail(name, "its coded bits are not laid out as nncodecs writes them")
        return value

    def as_declared(self, name: str) -> Declared | None:
        """For a delta tensor's checks: its coded bits' array with the tensor's dtype."""
        config = self.config(name)
        if config is None:
            return None
        return dataclasses.replace(self._coded(name, config), dtype=doc_dtype(config["doc"]))

    def read(
        self, name: str, config: dict[str, Any], to: str, check: bool, top: bool = True
    ) -> Any:
        """A delta tensor read whole; ``top``: the one asked for (not a link of the chain
        under it), whose result is checked against its CRC32C record (SHA-256 with
        ``check``)."""
        doc = config["doc"]
        own = self._coded(name, config)
        record = self._r.member(name).attrs
        self._check_records(name, config, record)
        reader, tensor = self._checked_reference(name, config)
        self._check_kind(name, config, reader, tensor, own.shape)
        try:
            base = reader.read_link(tensor, check)
        except ReferenceProblemError:
            raise
        except (CorruptDataError, OSError) as exc:
            raise self._fail(name, f"its reference {tensor!r} is unreadable: {exc}") from None
        base = np.asarray(base)
        attrs = reader.tensor_attrs(tensor)
        recorded = isinstance(attrs, dict) and isinstance(attrs.get("sha256"), str)
        bad = _base_mismatch(config["reference"], base, check, recorded)
        if bad is not None:
            raise self._fail(
                name,
                f"its reference {tensor!r} is not the tensor it was "
                f"written against (another {bad})",
            )
        own_hash = record.get("sha256") if isinstance(record, dict) else None
        if not check and _duplicate(record, config, own_hash, base, own):
            # (its bits are the reference's, checked above: its frames of zeros not decoded;
            # a read's result is its caller's own, unless read-only: a memory-mapped file)
            bits = base if base.flags.writeable else base.copy()
        else:
            bits = self._decode_against(name, own, config["transform"], base)
        value = bits.view(doc_dtype(doc))
        if check and isinstance(own_hash, str) and delta.sha256(value) != own_hash:
            raise self._fail(name, "its bits differ from the SHA-256 recorded at write")
        crc = record.get("crc32c") if isinstance(record, dict) else None
        if top and not check and isinstance(crc, int) and delta.crc32c(value) != crc:
            raise self._fail(name, "its bits differ from the CRC32C recorded at write")
        return convert(value, to, owned=True)

    def _check_records(self, name: str, config: dict[str, Any], record: Any) -> None:
        """A delta tensor's records against its document: the transform both declare,
        and its CRC32C record a number (a whole read checks its result against it)."""
        found = record.get("transform") if isinstance(record, dict) else None
        if found != config["transform"]:
            raise self._fail(
                name,
                f"its transform {config['transform']!r} is not the one recorded ({found!r:.40})",
            )
        crc = record.get("crc32c")
        if not isinstance(crc, int) or isinstance(crc, bool):
            raise self._fail(name, f"its crc32c record {crc!r:.40} is damaged")

    def _check_kind(
        self, name: str, config: dict[str, Any], reader: Any, tensor: str, shape: Any
    ) -> None:
        """The reference's dtype and shape against the delta's (its records say them)."""
        dtype = dtype_name(doc_dtype(config["doc"]))
        info = reader.info(tensor)
        if tuple(info.shape) != tuple(shape) or info.dtype != dtype:
            raise self._fail(
                name,
                f"its reference {tensor!r} is {info.dtype}"
                f"{list(info.shape)}, it is {dtype}{list(shape)}",
            )

    def array(self, name: str, config: dict[str, Any]) -> DeltaArray:
        member = self._r.member(name)
        coded = array_from_doc(
            self._r.zarr_store, member.path, delta.coded_doc(config["doc"], config)
        )
        self._check_records(name, config, member.attrs)
        reader, tensor = self._checked_reference(name, config)
        self._check_kind(name, config, reader, tensor, coded.shape)
        attrs = reader.tensor_attrs(tensor)
        hashed = isinstance(attrs, dict) and isinstance(attrs.get("sha256"), str)
        try:
            if not hashed and not config.get("verified"):
                # (no hash recorded to stand for its bits: checked whole once, then sliced)
                self.read(name, config, "numpy", False)
                config["verified"] = True
            base = reader[tensor]
        except ReferenceProblemError:
            raise
        except (CorruptDataError, OSError) as exc:
            raise self._fail(name, f"its reference {tensor!r} is unreadable: {exc}") from None
        crc, chunk_crcs = member.attrs.get("crc32c"), member.attrs.get("chunk_crc32c")
        return DeltaArray(
            coded,
            base,
            config["transform"],
            doc_dtype(config["doc"]),
            lambda why: self._fail(name, why),
            crc,
            chunk_crcs,
        )

    def to_device(self, name: str, to: str, device: str) -> Any:
        from nncodecs.codecs.placement import host_to_device

        value = self._r.read_tensor(name, check=True)
        return host_to_device(device, value, value.shape, to)

    def close(self) -> None:
        """Close the Readers of the references."""
        for reader in self._ref_readers.values():
            reader.close()

    def references(self) -> dict[str, dict[str, Any]]:
        """Each tensor stored against another container's: {name: {"container",
        "tensor", "transform", "depth"}} (the container as recorded)."""
        out = {}
        for name in self._r:
            config = self.config(name)
            if config is not None:
                depth = config["depth"]
                out[name] = {
                    "container": config["reference"]["container"],
                    "tensor": config["reference"]["tensor"],
                    "transform": config["transform"],
                    "depth": depth,
                }
        return out


def _place(target: Any) -> str:
    """A container's place, as chains compare them (local paths resolved)."""
    local = local_target(target)
    return str(local.resolve()) if local is not None else str(target)


def _base_mismatch(
    ref: dict[str, Any], base: np.ndarray, check: bool, recorded: bool
) -> str | None:
    """Which hash of a reference's bits differs from what the delta recorded (``None``:
    none). Its container's SHA-256 record, already compared, stands for its bits unless
    ``check``; without one, the CRC32C the delta recorded is checked (fast), or the
    SHA-256 (with ``check``, or where no CRC was recorded)."""
    crc = ref.get("crc32c")
    if not check and not recorded and isinstance(crc, int):
        return "CRC32C" if delta.crc32c(base) != crc else None
    if (check or not recorded) and delta.sha256(base) != ref["sha256"]:
        return "SHA-256"
    return None


def _duplicate(
    record: Any, config: dict[str, Any], own_hash: Any, base: np.ndarray, own: Declared
) -> bool:
    """Whether a delta tensor is recorded as a duplicate of its (checked) reference: the
    XOR of zeros against it, its SHA-256 the one it recorded of the reference."""
    return (
        isinstance(record, dict)
        and record.get("duplicate") is True
        and config["transform"] == "xor"
        and isinstance(own_hash, str)
        and own_hash == config["reference"]["sha256"]
        and base.dtype.itemsize == np.dtype(own.dtype).itemsize
    )


def _doc_of(node: Any) -> dict[str, Any]:
    doc = node.metadata.to_dict()
    doc.setdefault("attributes", {layout.ATTRS_KEY: dict(node.attrs.get(layout.ATTRS_KEY, {}))})
    return doc
