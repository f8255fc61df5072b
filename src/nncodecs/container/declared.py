"""A dense tensor's array as its consolidated ``zarr.json`` declares it, for whole reads.

A Reader reads a whole tensor of the weights codec straight from storage
(:mod:`nncodecs.container.decoding`); what it needs of the array is its shape,
data type, chunk and shard shapes, codecs and attributes. Zarr's array object
holds those too, but making one (its metadata parsed and checked, its
codecs evolved) cost about 0.15 ms a tensor: a third of a second on a model of
2,472 tensors. :func:`declared` takes them from the document, and only where
the document is laid out exactly as nncodecs writes it (Zarr v3, the default
chunk key encoding, a regular grid, the weights codec alone or in shards of
it); any other document gets ``None`` and goes through Zarr's own parser.
What Zarr's parser would refuse in such a document (a data type, codec
settings or a fill value it does not read, a codec configured for another
data type, shards that do not tile into chunks) is refused here too, as
:class:`nncodecs.CorruptDataError`.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nncodecs.dtypes import SUPPORTED_DTYPES, dtype_name, normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.frame.params import WEIGHTS
from nncodecs.frame.weights import CODEC_ID
from nncodecs.store import storage, zarr_nodes

__all__ = ["Declared", "codec_label", "declared"]

_KEY_ENCODING = {"name": "default", "configuration": {"separator": "/"}}
_SHARDING_KEYS = frozenset(("chunk_shape", "codecs", "index_codecs", "index_location"))


@dataclass(frozen=True, eq=False)
class Declared:
    """What a whole read needs of a dense array (the names are Zarr's ``Array``'s)."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[int, ...]
    shards: tuple[int, ...] | None
    fill_value: Any
    attrs: dict[str, Any]
    codec_dicts: list[dict[str, Any]]  # its codecs' JSON
    store: Any

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def chunk_key(self, coords: tuple[int, ...]) -> str:
        """The store key of a chunk (of a shard, where sharded)."""
        return "/".join([self.path, "c", *map(str, coords)])


def _ints(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        return None
    return tuple(value)


def _plain(fill: Any) -> bool:
    """Whether a fill value is a JSON number, a boolean or a non-finite float's name (the
    fill values nncodecs writes; a hex or list form goes through Zarr's own parser)."""
    return isinstance(fill, int | float) or fill in ("NaN", "Infinity", "-Infinity")


def declared(store: Any, path: str, doc: dict[str, Any]) -> Declared | None:
    """The array document ``doc`` of node ``path`` as a :class:`Declared`, where it is laid
    out as nncodecs writes the weights codec's arrays; ``None`` for any other."""
    if doc.keys() - zarr_nodes.DOC_KEYS or doc.get("zarr_format") != 3:
        return None
    if doc.get("node_type") != "array" or doc.get("storage_transformers") not in (None, []):
        return None
    if doc.get("chunk_key_encoding") != _KEY_ENCODING:
        return None
    grid, codecs, attrs = doc.get("chunk_grid"), doc.get("codecs"), doc.get("attributes", {})
    if not (isinstance(grid, dict) and grid.keys() == {"name", "configuration"}):
        return None
    config = grid["configuration"]
    if (
        grid["name"] != "regular"
        or not isinstance(config, dict)
        or config.keys() != {"chunk_shape"}
    ):
        return None
    shape, outer = _ints(doc.get("shape")), _ints(config["chunk_shape"])
    if shape is None or outer is None or len(outer) != len(shape) or 0 in outer:
        return None
    names = doc.get("dimension_names")
    if names is not None and not (
        isinstance(names, list)
        and len(names) == len(shape)
        and all(n is None or isinstance(n, str) for n in names)
    ):
        return None
    if not (isinstance(codecs, list) and len(codecs) == 1 and isinstance(codecs[0], dict)):
        return None
    if codecs[0].keys() - {"name", "configuration"} or not _plain(doc.get("fill_value")):
        return None
    if not isinstance(attrs, dict):
        return None
    chunks, shards, inner = outer, None, codecs
    if codecs[0].get("name") == "sharding_indexed":
        config = codecs[0].get("configuration")
        if not isinstance(config, dict) or config.keys() - _SHARDING_KEYS:
            return None
        if config.get("index_location", "end") != "end":
            return None
        chunks, inner = _ints(config.get("chunk_shape")), config.get("codecs")
        if chunks is None or len(chunks) != len(shape) or 0 in chunks:
            return None
        if config.get("index_codecs") != storage.SHARD_INDEX or any(
            s % c for s, c in zip(outer, chunks, strict=True)
        ):
            return None  # (Zarr's parser says what is wrong)
        shards = outer
    if chunks[1:] != tuple(max(1, d) for d in shape[1:]) or (
        shards is not None and shards[1:] != chunks[1:]
    ):
        return None  # (not chunked along the first axis only, as nncodecs writes them)
    if not (
        isinstance(inner, list)
        and len(inner) == 1
        and isinstance(inner[0], dict)
        and inner[0].get("name") == CODEC_ID
    ):
        return None
    try:
        dtype = doc_dtype(doc)
        name = dtype_name(dtype)  # (TypeError: not a data type the weights codec holds)
        configured = _weights_dtype(json.dumps(inner[0], sort_keys=True))
        if configured is not None and configured != name:
            raise ValueError(f"its codec is configured for {configured}, it holds {dtype}")
        fill = _fill_value(
            json.dumps(doc["data_type"], sort_keys=True), json.dumps(doc["fill_value"])
        )
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:  # (Zarr's parse)
        raise CorruptDataError(f"tensor node {path!r}: unreadable metadata ({exc})") from None
    return Declared(path, shape, dtype, chunks, shards, fill, attrs, codecs, store)


#: The data types of the weights codec by their Zarr v3 JSON names (Zarr's own, and
#: those of :mod:`nncodecs.codecs.zarr_dtypes`), read here without Zarr.
_DATA_TYPES = {
    **{n: n for n in SUPPORTED_DTYPES if n != "float8_e4m3fn"},
    "nncodecs.float8_e4m3fn": "float8_e4m3fn",
}


def doc_dtype(doc: dict[str, Any]) -> np.dtype:
    """The NumPy dtype of an array document: read here for the types nncodecs writes,
    by Zarr's parser for any other (``ValueError`` and kin where it names none)."""
    name = doc["data_type"]
    if isinstance(name, str) and name in _DATA_TYPES:
        return normalize_dtype(_DATA_TYPES[name])
    return zarr_nodes.doc_dtype(doc)


@functools.lru_cache(maxsize=64)
def _weights_dtype(text: str) -> str | None:
    """The data type a weights codec's JSON is configured for, its settings checked as
    Zarr checks them (``ValueError`` and kin): settings that pass the codec's schema
    are read here, any other by the codec itself (which says what is wrong)."""
    data = json.loads(text)
    config = data.get("configuration", {})
    fits = data.keys() <= {"name", "configuration"} and isinstance(config, dict)
    if fits and config.keys() <= set(WEIGHTS.names):
        try:
            return WEIGHTS.check(config)["dtype"]
        except (TypeError, ValueError):
            pass
    from nncodecs.codecs.weights import Weights

    return Weights.from_dict(data).dtype


@functools.lru_cache(maxsize=256)
def _fill_value(dtype_text: str, fill_text: str) -> Any:
    """A fill value (``fill_text``: its JSON, a number, a boolean or a non-finite float's
    name: see :func:`_plain`) read as Zarr reads it for the data type: here where the
    value is exact in that type, by Zarr's parser otherwise. (Keyed by the JSON texts:
    0, 0.0, -0.0 and false are equal as Python keys, not as fill values.)"""
    name, fill = json.loads(dtype_text), json.loads(fill_text)
    if isinstance(name, str) and name in _DATA_TYPES:
        dtype = normalize_dtype(_DATA_TYPES[name])
        kind = "b" if name == "bool" else "i" if name in _INTEGER_TYPES else "f"
        exact = _exact(dtype, kind, fill)
        if exact is not None:
            return exact
    return zarr_nodes.data_type(dtype_text).from_json_scalar(fill, zarr_format=3)


_INTEGER_TYPES = frozenset(
    ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
)
_NAMED = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _exact(dtype: np.dtype, kind: str, fill: int | float | str) -> Any:
    """``fill`` as a scalar of ``dtype`` where it is exactly that value there (``None``:
    leave it to Zarr, which rounds, refuses or converts as it does)."""
    if kind == "b":
        return dtype.type(fill) if type(fill) is bool else None
    if kind == "i":
        info = np.iinfo(dtype)
        if type(fill) is int and info.min <= fill <= info.max:
            return dtype.type(fill)
        return None
    if isinstance(fill, str):
        fill = _NAMED[fill]
    elif type(fill) not in (int, float) or abs(fill) > 2**53:
        return None
    with np.errstate(over="ignore"):  # (1e300 as float16: inf, not the value: Zarr's)
        value = dtype.type(float(fill))
    back = float(value)
    same = back == fill or (math.isnan(back) and math.isnan(fill))
    return value if same and math.copysign(1, back) == math.copysign(1, fill) else None


def codec_label(codecs: Any) -> str:
    """The codecs of an array (``z.metadata.codecs``, or a document's list) as one name,
    naming what is inside shards: ``sharding_indexed(nncodecs.weights)``."""
    names = []
    for c in (c if isinstance(c, dict) else c.to_dict() for c in codecs):
        if c["name"] == "sharding_indexed":
            inner = "+".join(i["name"] for i in c["configuration"]["codecs"])
            names.append(f"sharding_indexed({inner})")
        else:
            names.append(c["name"])
    return "+".join(names)
