"""Tensors stored against a reference: the transforms, their choice, their documents.

A tensor close to a tensor of another container (the same weight one optimizer step
earlier, a frozen layer of the base model) is stored as the difference of their bit
patterns, coded by the weights codec as unsigned integers of the element's width:

- ``xor``: ``t ^ r``; bits that did not change are zeros.
- ``sub``: ``t - r`` modulo 2^width, zigzag-coded (``(d << 1) ^ (d >> width-1)``, the
  shift arithmetic): a float that moved by k units in the last place differs by about
  k, whatever carries the XOR would show, so small moves leave the high bytes zero.

Which one (or neither: the tensor stored whole) is chosen per tensor by the sizes they
code to (:func:`choose`). The array's document declares the reference through the
``nncodecs.delta`` codec (:mod:`nncodecs.codecs.delta`), which no plain Zarr reader
decodes; :func:`coded_doc` is the document of the coded bits a Reader decodes instead.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from nncodecs.errors import CorruptDataError
from nncodecs.frame.delta import CODEC_ID, TRANSFORMS, check_config

__all__ = [
    "MAX_CHAIN",
    "bits_dtype",
    "check_max_chain",
    "choose",
    "coded_doc",
    "crc32c",
    "delta_config",
    "delta_doc",
    "forward",
    "inverse",
    "record_depth",
    "sha256",
]

#: Longest chain of references a Writer builds by default: a tensor whose reference
#: is this many deltas deep is stored whole (a keyframe), so a read decodes at most
#: this many arrays beside its own.
MAX_CHAIN = 8
#: Deepest chain a Reader follows, and so the largest ``max_chain`` a Writer takes.
MAX_FOLLOW = 64
#: A delta is kept where it codes to at most this share of the tensor stored whole.
MIN_SAVING = 0.97
#: The sample the choice codes: this many bytes of the tensor's first rows.
SAMPLE_BYTES = 1 << 20


def check_max_chain(max_chain: Any) -> int:
    """A ``max_chain`` setting, checked: 1 to MAX_FOLLOW (a Reader follows no deeper)."""
    if isinstance(max_chain, bool) or not isinstance(max_chain, int | np.integer):
        raise TypeError(f"max_chain must be an integer, got {max_chain!r}")
    if not 1 <= int(max_chain) <= MAX_FOLLOW:
        raise ValueError(f"max_chain must be 1 to {MAX_FOLLOW}, got {max_chain}")
    return int(max_chain)


def record_depth(attrs: Any, delta: bool) -> int:
    """A tensor's chain depth from its records, checked (CorruptDataError where damaged):
    0 for a tensor stored whole, 1 to MAX_FOLLOW for a delta."""
    depth = attrs.get("depth", 1 if delta else 0) if isinstance(attrs, dict) else None
    ok = type(depth) is int and (1 <= depth <= MAX_FOLLOW if delta else depth == 0)
    digest = attrs.get("sha256") if isinstance(attrs, dict) else None
    if not ok or not (digest is None or _is_hex64(digest)):
        raise CorruptDataError(f"its depth or sha256 record is damaged ({depth!r}, {digest!r})")
    return depth


def _is_hex64(text: Any) -> bool:
    return isinstance(text, str) and len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def bits_dtype(dtype: np.dtype) -> np.dtype | None:
    """The unsigned type a tensor of ``dtype`` is differenced in (``None``: none is;
    packed float4 and complex tensors are stored whole)."""
    dtype = np.dtype(dtype)
    if dtype.itemsize not in (1, 2, 4, 8) or dtype.kind == "c":
        return None
    from nncodecs.dtypes import dtype_name

    try:
        if dtype_name(dtype) == "float4_e2m1fn":
            return None
    except TypeError:
        return None
    return np.dtype(f"<u{dtype.itemsize}")


def sha256(arr: np.ndarray) -> str:
    """The content hash a container records of a tensor: SHA-256 of its C-order bytes."""
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    return hashlib.sha256(memoryview(flat)).hexdigest()


def crc32c(arr: np.ndarray) -> int:
    """CRC32C of a tensor's C-order bytes (what a delta records of a reference whose
    container records no hashes: checked on every read at ~10 GB/s)."""
    from nncodecs import _core

    return int(_core.crc32c(np.ascontiguousarray(arr).reshape(-1).view(np.uint8)))


def forward(transform: str, target: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The coded bits of ``target`` against ``ref`` (same shape and width)."""
    udt = bits_dtype(target.dtype)
    t = np.ascontiguousarray(target).view(udt)
    r = np.ascontiguousarray(ref).view(udt)
    if transform == "xor":
        return np.bitwise_xor(t, r)
    if transform != "sub":
        raise ValueError(f"transform must be one of {TRANSFORMS}, got {transform!r}")
    d = np.subtract(t, r)  # (modulo 2^width: unsigned)
    sign = d.view(f"<i{udt.itemsize}") >> (8 * udt.itemsize - 1)  # 0 or -1, arithmetic
    np.left_shift(d, 1, out=d)
    np.bitwise_xor(d, sign.view(udt), out=d)
    return d


def inverse(transform: str, coded: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The tensor's bits from its coded bits and its reference's (in place in ``coded``,
    which must be writable: the result, as the unsigned type)."""
    udt = coded.dtype
    flat = coded.reshape(-1)  # (a view, 1-d: ufuncs on 0-d arrays return scalars)
    r = np.ascontiguousarray(ref).view(udt).reshape(-1)
    if transform == "xor":
        np.bitwise_xor(flat, r, out=flat)
        return coded
    if transform != "sub":
        raise CorruptDataError(f"{CODEC_ID}: unknown transform {transform!r}")
    _unzigzag_add(flat, r)
    return coded


def _unzigzag_add(flat: np.ndarray, r: np.ndarray) -> None:
    """``flat`` <- r + unzigzag(flat): one pass in C++ (``_core.unzigzag_add``; NumPy's
    five passes took 4x as long on float32 steps)."""
    from nncodecs import _core

    if flat.size:
        _core.unzigzag_add(
            flat.view(np.uint8), np.ascontiguousarray(r).view(np.uint8), flat.dtype.itemsize
        )


def choose(target: np.ndarray, ref: np.ndarray, bits: Any, plain: Any) -> str | None:
    """The transform whose coded sample (the first SAMPLE_BYTES of rows) is smallest,
    where it beats the sample stored whole; ``None``: store the tensor whole.
    ``bits`` / ``plain``: array -> its coded bytes, for the coded bits / the tensor."""
    rows = max(1, SAMPLE_BYTES // max(1, target[0].nbytes)) if target.ndim else 1
    t, r = (target[:rows], ref[:rows]) if target.ndim else (target, ref)
    whole = len(plain(np.ascontiguousarray(t)))
    sizes = {name: len(bits(forward(name, t, r))) for name in TRANSFORMS}
    best = min(sizes, key=lambda k: sizes[k])
    return best if sizes[best] <= whole * MIN_SAVING else None


def _find(codecs: Any) -> tuple[int, dict[str, Any]] | None:
    """The place and JSON of the delta codec in a codec list (top level, or inside
    sharding)."""
    if not isinstance(codecs, list):
        return None
    for i, c in enumerate(codecs):
        if isinstance(c, dict) and c.get("name") == CODEC_ID:
            return i, c
    return None


def delta_config(doc: Any) -> dict[str, Any] | None:
    """The delta codec's configuration of an array document (``None``: not a delta
    array); malformed ones raise :class:`CorruptDataError`."""
    if not isinstance(doc, dict):
        return None
    codecs = doc.get("codecs")
    found = _find(codecs)
    if found is None and isinstance(codecs, list) and len(codecs) == 1:
        c = codecs[0]
        if isinstance(c, dict) and c.get("name") == "sharding_indexed":
            found = _find((c.get("configuration") or {}).get("codecs"))
    if found is None:
        return None
    try:
        return check_config(found[1])
    except (TypeError, ValueError, KeyError) as exc:
        raise CorruptDataError(f"its {CODEC_ID} codec is malformed ({exc})") from None


def coded_doc(doc: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The document of a delta array's coded bits: the delta codec replaced by the
    weights codec it wraps, the data type by the unsigned type of the bits."""
    from nncodecs.container.declared import doc_dtype

    try:
        udt = bits_dtype(doc_dtype(doc))
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptDataError(f"unreadable data type ({exc})") from None
    if udt is None:
        raise CorruptDataError(f"{CODEC_ID} on a data type it never codes: {doc['data_type']!r}")
    inner = config["codec"]

    def swap(codecs: list[Any]) -> list[Any]:
        return [inner if isinstance(c, dict) and c.get("name") == CODEC_ID else c for c in codecs]

    codecs = doc["codecs"]
    if _find(codecs) is None:  # (inside a shard)
        shard = codecs[0]
        config_s = {**shard["configuration"], "codecs": swap(shard["configuration"]["codecs"])}
        codecs = [{**shard, "configuration": config_s}]
    else:
        codecs = swap(codecs)
    return {**doc, "codecs": codecs, "data_type": udt.name, "fill_value": 0}


def delta_doc(
    doc: dict[str, Any], tensor_doc: dict[str, Any], transform: str, reference: dict[str, str]
) -> dict[str, Any]:
    """A coded-bits array's document made a delta array's: its weights codec wrapped
    in the delta codec that declares ``reference``, its data type and fill value the
    tensor's (``tensor_doc``: a document of the tensor's type)."""
    codecs = doc["codecs"]
    doc = {**doc, "data_type": tensor_doc["data_type"], "fill_value": tensor_doc["fill_value"]}

    def wrap(codecs: list[Any]) -> list[Any]:
        (inner,) = codecs
        config = {"transform": transform, "reference": dict(reference), "codec": inner}
        return [{"name": CODEC_ID, "configuration": config}]

    if codecs[0].get("name") == "sharding_indexed":
        shard = codecs[0]
        return {
            **doc,
            "codecs": [
                {
                    **shard,
                    "configuration": {
                        **shard["configuration"],
                        "codecs": wrap(shard["configuration"]["codecs"]),
                    },
                }
            ],
        }
    return {**doc, "codecs": wrap(codecs)}
