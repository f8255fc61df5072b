"""A Writer's tensors stored against references: deltas and duplicates.

Given ``reference=`` (one container, or several: the first is the one whose tensors
of the same name are differenced against), a Writer records each dense tensor's
SHA-256 and its chain depth, and stores a tensor

- **as a duplicate** where a tensor of any reference (or of theirs, by the hashes they
  recorded) has the same bits, dtype and shape: a delta array of zeros against it
  (a few bytes a chunk), without reading it;
- **as a delta** against the first reference's tensor of the same name, dtype and
  shape, where the transform :func:`nncodecs.container.delta.choose` picks codes to
  under 97% of the tensor stored whole;
- **whole** otherwise, and where the reference is already ``max_chain`` deltas deep
  (a keyframe).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs.container import delta, layout, records
from nncodecs.container.delta_slices import chunk_crcs
from nncodecs.container.references import recorded_location, resolve_reference
from nncodecs.errors import CorruptDataError, ReferenceProblemError
from nncodecs.store import documents, encoding

__all__ = ["DeltaWriter", "against", "delta_objects", "not_on_a_chain"]

_WEIGHTS_CODECS = ("auto", "rans", "huffman")


class _Ref:
    """A reference container, opened for reading on first use."""

    def __init__(self, target: Any, recorded: str, named: list[Any]) -> None:
        self.target, self.recorded, self.named = target, recorded, named
        self._reader: Any = None

    @property
    def reader(self) -> Any:
        if self._reader is None:
            from nncodecs.container.reader import Reader

            try:  # (the other references named stand for its own, moved: as a Reader's)
                self._reader = Reader(self.target, references=self.named)
            except (OSError, ValueError) as exc:
                raise ReferenceProblemError(f"reference {self.target}: {exc}") from None
        return self._reader

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()


class DeltaWriter:
    """What a Writer holds to store tensors against references: the references,
    opened on first use, and the index of their tensors' hashes. It writes nothing
    itself: :meth:`against_reference` hands the Writer the objects and document."""

    def __init__(
        self,
        target: Any,
        reference: Any,
        max_chain: int,
        hashes: bool,
        dedup: bool = True,
        chunk_bytes: int = layout.CHUNK_BYTES,
    ) -> None:
        self.chunk_bytes = int(chunk_bytes)
        if reference is None:
            refs: list[Any] = []
        elif isinstance(reference, list | tuple):
            refs = list(reference)
        else:
            refs = [reference]
        self.max_chain = delta.check_max_chain(max_chain)
        self._named = refs
        self._refs = [_Ref(r, recorded_location(target, r), refs) for r in refs]
        for ref in self._refs:
            if _same_place(target, ref.target):
                raise ValueError(f"{target}: a container cannot be its own reference")
        not_on_a_chain(target, refs)
        self._more: list[_Ref] = []  # (the containers duplicates were followed to)
        self._target = target
        self._index: dict[str, tuple[_Ref, str, int]] | None = None if dedup else {}
        self.hashes = bool(hashes) or bool(self._refs)

    def close(self) -> None:
        """Close the references' Readers."""
        for ref in self._refs + self._more:
            ref.close()

    def _dedup_index(self) -> dict[str, tuple[_Ref, str, int]]:
        """sha256 -> (reference, tensor, chain depth) over the references' records,
        the shallowest of equal tensors kept."""
        if self._index is None:
            index: dict[str, tuple[_Ref, str, int]] = {}
            for ref in self._refs:
                r = ref.reader
                for name in r:
                    attrs = r.tensor_attrs(name)
                    digest = attrs.get("sha256") if isinstance(attrs, dict) else None
                    if not isinstance(digest, str):
                        continue
                    self._depth(ref, name)  # (checked: a damaged record is refused)
                    found = self._origin(ref, name)
                    if digest not in index or found[2] < index[digest][2]:
                        index[digest] = found
            self._index = index
        return self._index

    def _origin(self, ref: _Ref, name: str) -> tuple[_Ref, str, int]:
        """(container, tensor, depth) holding a tensor's bits: a duplicate followed to
        the tensor it refers to (so duplicates of duplicates never chain)."""
        for _ in range(delta.MAX_CHAIN):
            r = ref.reader
            info = r.info(name)
            if not (info.reference and info.reference.get("duplicate")):
                break
            try:
                where = resolve_reference(
                    ref.target, info.reference["container"], r.reference_roots
                )
                if not self._recordable(where):
                    break  # (not beside the output, nor named: the duplicate it follows)
                origin = self._ref_at(where)
                if info.reference["tensor"] not in origin.reader:
                    break
            except (ReferenceProblemError, OSError, ValueError):
                break
            ref, name = origin, info.reference["tensor"]
        return ref, name, info.depth

    def _depth(self, ref: _Ref, name: str) -> int:
        """A reference tensor's chain depth, its records checked."""
        info = ref.reader.info(name)
        try:
            return delta.record_depth(ref.reader.tensor_attrs(name), info.reference is not None)
        except CorruptDataError as exc:
            raise ReferenceProblemError(f"reference {ref.target}: tensor {name!r}: {exc}") from None

    def _recordable(self, where: Any) -> bool:
        """Whether the output may record ``where``: beside it (a relative place, which a
        Reader follows by itself), or a reference the writer named."""
        place = recorded_location(self._target, where)
        named = {str(r) for r in self._named}
        return ("://" not in place and not place.startswith("/")) or str(where) in named

    def _ref_at(self, where: Any) -> _Ref:
        """The reference container at ``where`` (one Reader a place)."""
        for ref in self._refs + self._more:
            if str(ref.target) == str(where):
                return ref
        self._more.append(_Ref(where, recorded_location(self._target, where), self._named))
        return self._more[-1]

    def tensor_hash(self, arr: np.ndarray, attrs: dict[str, Any]) -> str | None:
        """Record ``arr``'s SHA-256 and depth 0 in ``attrs`` where hashes are kept."""
        if not self.hashes or delta.bits_dtype(arr.dtype) is None:
            return None
        attrs["sha256"] = digest = delta.sha256(arr)
        attrs["depth"] = 0
        return digest

    def against_reference(
        self, name: str, node: str, arr: np.ndarray, codec: str, attrs: dict, dims: Any
    ) -> tuple[Any, dict[str, Any]] | None:
        """``arr`` as a duplicate or delta where that pays: its objects (an iterator of
        (key, bytes)) and document, for the Writer to write; else ``None``."""
        digest = attrs.get("sha256")
        if digest is None or codec not in _WEIGHTS_CODECS or not self._refs:
            return None
        found = self._dedup_index().get(digest)
        if found is not None and found[2] < self.max_chain:
            ref, tname, depth = found
            other = ref.reader.info(tname)
            if tuple(other.shape) == arr.shape and other.dtype == arr.dtype:
                coded = np.zeros(arr.shape, delta.bits_dtype(arr.dtype))
                attrs["duplicate"] = True
                where: dict[str, Any] = {"container": ref.recorded, "tensor": tname}
                where["sha256"] = digest
                oattrs = ref.reader.tensor_attrs(tname)
                if not (isinstance(oattrs, dict) and isinstance(oattrs.get("sha256"), str)):
                    where["crc32c"] = delta.crc32c(arr)  # (no record there: a read checks this)
                return self._delta(node, arr, coded, "xor", where, codec, attrs, dims, depth)
        first = self._refs[0]
        r = first.reader
        if name not in r or r.layout(name) != "dense":
            return None
        rattrs = r.tensor_attrs(name)
        depth = self._depth(first, name)
        info = r.info(name)
        if depth >= self.max_chain or tuple(info.shape) != arr.shape or info.dtype != arr.dtype:
            return None
        ref_hash = rattrs.get("sha256") if isinstance(rattrs, dict) else None
        where = {"container": first.recorded, "tensor": name}
        base = None if ref_hash == digest else r.read_tensor(name)  # (the same: not read)
        if base is not None and not isinstance(ref_hash, str):  # (no hashes there: its CRC too)
            ref_hash, where["crc32c"] = delta.sha256(base), delta.crc32c(base)  # type: ignore[assignment]
        where["sha256"] = ref_hash
        if ref_hash == digest:
            attrs["duplicate"] = True
            transform, coded = "xor", np.zeros(arr.shape, delta.bits_dtype(arr.dtype))
        else:
            found_delta = against(arr, base, codec)
            if found_delta is None:
                return None
            transform, coded = found_delta
        return self._delta(node, arr, coded, transform, where, codec, attrs, dims, depth)

    def _delta(
        self,
        node: str,
        arr: np.ndarray,
        coded: np.ndarray,
        transform: str,
        where: dict[str, str],
        codec: str,
        attrs: dict,
        dims: Any,
        depth: int,
    ) -> tuple[Any, dict[str, Any]]:
        attrs["depth"] = depth + 1
        args = (where, codec, self.chunk_bytes, attrs, dims)
        return delta_objects(node, arr, coded, transform, *args)


def against(arr: np.ndarray, base: np.ndarray, codec: str) -> tuple[str, np.ndarray] | None:
    """(transform, coded bits) of ``arr`` against ``base`` where a difference codes
    smaller than ``arr`` whole (:func:`nncodecs.container.delta.choose`), else ``None``."""
    bits = documents.template(delta.bits_dtype(arr.dtype), arr.ndim, codec, False).encode
    plain = documents.template(arr.dtype, arr.ndim, codec, False).encode
    transform = delta.choose(arr, base, bits, plain)
    return None if transform is None else (transform, delta.forward(transform, arr, base))


def delta_objects(
    node: str,
    arr: np.ndarray,
    coded: np.ndarray,
    transform: str,
    where: dict[str, str],
    codec: str,
    chunk_bytes: int,
    attrs: dict[str, Any],
    dims: Any,
) -> tuple[Any, dict[str, Any]]:
    """The store objects (an iterator of (key, bytes)) and document of a delta array:
    ``coded`` (the bits of ``arr`` against the reference ``where``) chunked as ``arr``
    would be, coded by the weights codec, declared through the delta codec."""
    grid = layout.chunking(arr.shape, arr.dtype.itemsize, chunk_bytes, codec)
    chunks, shards = tuple(grid["chunks"]), grid.get("shards")
    tmpl = documents.template(coded.dtype, arr.ndim, codec, shards is not None)
    recorded = {**attrs, **records.tensor_records(arr, codec)}
    # (what a Reader checks a whole read against: the transform, as the delta's document
    # also declares it, and the tensor's CRC32C)
    # (and each chunk's: a slice checks the chunks it decodes, delta_slices.py)
    recorded["chunk_crc32c"], recorded["crc32c"] = chunk_crcs(arr, chunks[0] if chunks else 0)
    recorded["transform"] = transform
    doc = documents.array_doc(tmpl, arr.shape, chunks, shards, dims, {layout.ATTRS_KEY: recorded})
    tensor_doc = documents.template(arr.dtype, arr.ndim, codec, shards is not None).doc
    objects = ((f"{node}/{k}", v) for k, v in encoding.objects(coded, tmpl, chunks, shards))
    return objects, delta.delta_doc(doc, tensor_doc, transform, where)


def not_on_a_chain(target: Any, refs: list[Any]) -> None:
    """Refuse to write ``target`` where a reference's chain (its references, theirs, and
    the places its duplicates lead) passes through it: written over, it would leave
    both unreadable."""
    from nncodecs.container.reader import Reader
    from nncodecs.store.files import local_target

    here = local_target(target)
    if here is None or not refs:
        return
    if not here.exists():
        return  # (nothing there to lose)
    mine = here.resolve()
    todo, seen = [(r, r) for r in refs], set()
    while todo and len(seen) < 4 * delta.MAX_FOLLOW:
        place, named = todo.pop()
        local = local_target(place)
        key = str(local.resolve()) if local is not None else str(place)
        if key in seen:
            continue
        seen.add(key)
        if local is not None and local.resolve() == mine:
            raise ValueError(
                f"{target}: it is on the chain of references of {named} (a reference of "
                "a reference): written over, both would be unreadable"
            )
        try:
            with Reader(place, references=refs) as r:
                recorded = {v["container"] for v in r.references().values()}
                for rec in recorded:
                    try:
                        todo.append((resolve_reference(place, rec, r.reference_roots), named))
                    except ReferenceProblemError:
                        continue
        except (OSError, ValueError):  # (a broken link of the chain: a read says so)
            continue


def _same_place(a: Any, b: Any) -> bool:
    """Whether two targets name one container (local paths resolved; URLs as given)."""
    from nncodecs.store.files import local_target

    here, there = local_target(a), local_target(b)
    if here is not None and there is not None:
        return here.resolve() == there.resolve()
    return str(a).rstrip("/") == str(b).rstrip("/")
