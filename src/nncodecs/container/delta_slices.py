"""A delta tensor sliced: the chunks of its coded bits and of its reference that hold
the rows asked for, decoded, the difference undone, and every chunk checked.

A delta tensor records the CRC32C of each of its chunks' values (``chunk_crc32c``,
chunks along the first axis as the writer lays them out): a slice decodes the whole
chunks holding its rows (as Zarr does anyway), checks each against its record, then
takes the rows asked for. A reference whose chunks were swapped by a rename decodes
frame by frame intact, but not into the values recorded: refused, at the cost of the
chunks read only. Deltas written before this record are checked whole only (a read of
the whole tensor in order against its ``crc32c``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nncodecs.container import delta
from nncodecs.errors import CorruptDataError, ReferenceProblemError

__all__ = ["DeltaArray", "chunk_crcs"]


def chunk_crcs(arr: np.ndarray, rows: int) -> tuple[list[int], int]:
    """The CRC32C of each chunk of ``rows`` rows of ``arr`` (C order), first axis, and
    of the whole (joined from theirs: one pass over the tensor)."""
    from nncodecs import _core

    if arr.ndim == 0 or rows < 1:
        whole = delta.crc32c(arr)
        return [whole], whole
    parts = [arr[i : i + rows] for i in range(0, max(arr.shape[0], 1), rows)]
    crcs = [delta.crc32c(p) for p in parts]
    lengths = np.array([p.nbytes for p in parts], np.uint64)
    return crcs, int(_core.crc32c_join(np.array(crcs, np.uint32), lengths))


class DeltaArray:
    """A delta tensor sliced as a NumPy-style array: ``a[i:j]`` decodes the chunks of
    its coded bits and of its reference that hold rows ``i:j``, no others, and checks
    each against its record."""

    def __init__(
        self,
        coded: Any,
        reference: Any,
        transform: str,
        dtype: np.dtype,
        fail: Any,
        crc: int | None = None,
        chunk_records: Any = None,
    ) -> None:
        self._coded, self._ref, self._transform, self._fail = coded, reference, transform, fail
        self._crc = crc
        self.dtype, self.shape = np.dtype(dtype), tuple(coded.shape)
        self.ndim, self.chunks = len(self.shape), tuple(coded.chunks)
        self._chunk_crcs = None
        if chunk_records is not None:
            count = -(-self.shape[0] // self.chunks[0]) if self.ndim and self.shape[0] else 1
            ok = isinstance(chunk_records, list) and len(chunk_records) == count
            if not ok or not all(isinstance(c, int) and 0 <= c < 1 << 32 for c in chunk_records):
                raise fail(f"its chunk_crc32c record is damaged (expected {count} CRC32Cs)")
            self._chunk_crcs = chunk_records

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def _decode(self, index: Any) -> np.ndarray:
        coded = np.array(self._coded[index], copy=True)
        try:
            base = np.asarray(self._ref[index])
        except ReferenceProblemError:
            raise
        except (CorruptDataError, OSError) as exc:
            raise self._fail(f"its reference is unreadable there: {exc}") from None
        return delta.inverse(self._transform, coded, base).view(self.dtype)

    def __getitem__(self, index: Any) -> np.ndarray:
        if self._chunk_crcs is not None and self.ndim and self.size:
            # (an index whose rows cannot be told, a mask of the whole array: every chunk)
            span = _row_span(index, self.shape[0], self.chunks[0])
            if span is _NOTHING:  # (no rows, or none there: NumPy's answer, nothing decoded)
                return np.broadcast_to(np.zeros((), self.dtype), self.shape)[index].copy()
            lo, hi, rest = span or (0, self.shape[0], index)
            block = self._decode(slice(lo, hi))
            rows = self.chunks[0]
            for c in range(lo // rows, -(-hi // rows)):
                part = block[c * rows - lo : min((c + 1) * rows, hi) - lo]
                if delta.crc32c(part) != self._chunk_crcs[c]:
                    raise self._fail(
                        f"chunk {c} of its bits differs from the CRC32C recorded at write"
                    )
            return block[rest]
        out = self._decode(index)
        whole = self._crc is not None and _whole(index, self.shape)
        if whole and delta.crc32c(np.ascontiguousarray(out)) != self._crc:
            raise self._fail("its bits differ from the CRC32C recorded at write")
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype)


#: What _row_span says of an index that selects no row (or one NumPy refuses).
_NOTHING: Any = object()


def _tuple(index: Any) -> tuple[Any, ...]:
    return index if isinstance(index, tuple) else (index,)


def _row_span(index: Any, n: int, rows: int) -> Any:
    """(first, end) rows of the whole chunks holding the rows ``index`` selects along the
    first axis, and ``index`` rewritten for that block; ``_NOTHING`` where it selects
    no row (or one past the end: NumPy's error); ``None`` where it cannot be told (a
    mask of more than one axis): the caller then decodes and checks every chunk."""
    idx = index if isinstance(index, tuple) else (index,)
    if not idx or idx[0] is Ellipsis:
        return 0, n, index
    first, tail = idx[0], idx[1:]
    if first is None:  # (a new axis first: the rows of what follows)
        inner = _row_span(tail, n, rows)
        if inner is None or inner is _NOTHING:
            return inner
        return inner[0], inner[1], (None, *_tuple(inner[2]))
    if isinstance(first, int | np.integer) and not isinstance(first, bool):
        i = int(first)
        if not -n <= i < n:
            return _NOTHING  # (NumPy's IndexError, from the plain read)
        i %= n
        lo = i // rows * rows
        return lo, min(lo + rows, n), (i - lo, *tail)
    if isinstance(first, slice):
        picked = np.arange(n)[first]
        if not picked.size:
            return _NOTHING
        lo = int(picked.min()) // rows * rows
        hi = min(-(-(int(picked.max()) + 1) // rows) * rows, n)
        start, stop = int(picked[0]) - lo, int(picked[-1]) - lo
        step = first.step or 1
        end = stop + 1 if step > 0 else (stop - 1 if stop > 0 else None)
        return lo, hi, (slice(start, end, step), *tail)
    if np.size(first) == 0:  # (an empty list or mask: no rows)
        return _NOTHING
    try:
        picked = np.arange(n)[np.asarray(first)]
    except (IndexError, TypeError, ValueError):
        return None
    if picked.ndim == 1 and not picked.size:
        return _NOTHING
    if picked.ndim != 1:
        return None
    lo = int(picked.min()) // rows * rows
    hi = min(-(-(int(picked.max()) + 1) // rows) * rows, n)
    return lo, hi, (picked - lo, *tail)


def _whole(index: Any, shape: tuple[int, ...]) -> bool:
    """Whether ``index`` selects a whole array of ``shape`` in order (``[...]``, ``[:]``,
    ``[0:n]``): a slice its CRC32C record checks."""
    idx = index if isinstance(index, tuple) else (index,)
    dots = [k for k, i in enumerate(idx) if i is Ellipsis]
    if len(dots) > 1:
        return False
    if dots:
        at = dots[0]
        idx = idx[:at] + (slice(None),) * (len(shape) - len(idx) + 1) + idx[at + 1 :]
    if len(idx) > len(shape):
        return False
    for i, dim in zip(idx, shape, strict=False):
        if isinstance(i, slice):
            if i.indices(dim) != (0, dim, 1):
                return False
        elif not (isinstance(i, int | np.integer) and dim == 1 and int(i) in (0, -1)):
            return False
    return True
