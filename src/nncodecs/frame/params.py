"""Frame settings and their checks: one schema per coder codec.

A :class:`Param` is a setting's name, default and check; a :class:`Schema`
is a codec's settings in order. Both shells of a codec (numcodecs and Zarr
v3, ``nncodecs.codecs._shell``) are built from its schema: constructor
signature, validation, configuration and repr.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nncodecs.dtypes import dtype_name, float_layout, normalize_dtype
from nncodecs.frame.constants import ELEMENT_CODES, ELEMENT_TYPES

__all__ = [
    "AUTO",
    "CHECKSUM",
    "CODER",
    "CODERS",
    "DTYPE",
    "ENCODER_PARAMS",
    "FRAME_PARAMS",
    "HUFFMAN",
    "MIN_GAIN",
    "PLANES",
    "PRECISION",
    "RANS",
    "SUBBLOCK_LOG2",
    "WEIGHTS",
    "ZSTD_LEVEL",
    "Param",
    "Schema",
    "check_settings",
    "element_width",
    "encoder_settings",
    "frame_settings",
    "row_length",
]

CODERS = ("rans", "huffman", "auto")


@dataclass(frozen=True)
class Param:
    """A setting: its name, its default, and the check that returns its canonical value
    (``ValueError`` / ``TypeError`` naming it otherwise)."""

    name: str
    default: Any
    check: Callable[[Any], Any]


def _integer(name: str, low: int, high: int, optional: bool = False) -> Callable[[Any], Any]:
    def check(value: Any) -> int | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if not low <= value <= high:
            raise ValueError(f"{name} must be between {low} and {high}, got {value}")
        return int(value)

    return check


def _boolean(name: str) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if not isinstance(value, bool | np.bool_):
            raise TypeError(f"{name} must be True or False, got {value!r}")
        return bool(value)

    return check


def _min_gain(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise TypeError(f"min_gain must be a number, got {value!r}")
    if not 0 <= value <= 1:
        raise ValueError(f"min_gain must be between 0 and 1, got {value}")
    return float(value)


def _coder(value: Any) -> str:
    if value not in CODERS:
        raise ValueError(f"coder must be one of {', '.join(CODERS)}, got {value!r}")
    return str(value)


def _dtype(value: Any) -> str | None:
    return None if value is None else dtype_name(value)


PLANES = Param("planes", None, _integer("planes", 1, 255, optional=True))
PRECISION = Param("precision", 12, _integer("precision", 10, 12))
SUBBLOCK_LOG2 = Param("subblock_log2", 16, _integer("subblock_log2", 12, 16))
CHECKSUM = Param("checksum", True, _boolean("checksum"))
ZSTD_LEVEL = Param("zstd_level", 3, _integer("zstd_level", 1, 22))
#: auto keeps a chunk raw unless coding saves at least this fraction of it
#: (the encoder takes it in permille): a raw chunk decodes at memcpy speed
#: (docs/development.md has the figures behind 5%).
MIN_GAIN = Param("min_gain", 0.05, _min_gain)
CODER = Param("coder", "auto", _coder)
DTYPE = Param("dtype", None, _dtype)

FRAME_PARAMS = {
    p.name: p
    for p in (PLANES, PRECISION, SUBBLOCK_LOG2, CHECKSUM, ZSTD_LEVEL, MIN_GAIN, CODER, DTYPE)
}


#: The precision field of Huffman frames (the Huffman codec has none): no chunk reads
#: it, and it keeps the value those frames always carried (the default was 11
#: until 12 measured smaller on every dtype), so they stay the same bytes.
UNUSED_PRECISION = 11

#: The settings :func:`nncodecs.frame.encode_frame` takes from a codec beside
#: ``planes``, ``coder`` and ``dtype``.
ENCODER_PARAMS = (PRECISION, SUBBLOCK_LOG2, CHECKSUM, ZSTD_LEVEL, MIN_GAIN)


def encoder_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The encoder's settings from a codec's (defaults for those its schema lacks:
    Huffman has no precision, only auto and weights a zstd level or min_gain)."""
    out = {p.name: settings.get(p.name, p.default) for p in ENCODER_PARAMS}
    if PRECISION.name not in settings or settings.get("coder") == "huffman":
        out[PRECISION.name] = UNUSED_PRECISION
    return out


def check_settings(**values: Any) -> dict[str, Any]:
    """The named frame settings checked, as canonical values."""
    return {name: FRAME_PARAMS[name].check(value) for name, value in values.items()}


def element_width(name: str) -> int:
    """Bytes of an element type frames record (0: any, for ``"bytes"``)."""
    return ELEMENT_TYPES[ELEMENT_CODES[name]][1]


def _dtype_fits_planes(values: dict[str, Any]) -> None:
    dtype, planes = values.get("dtype"), values.get("planes")
    if dtype is not None and planes is not None:
        width = normalize_dtype(dtype).itemsize
        if width != planes:
            raise ValueError(f"dtype {dtype} has {width}-byte elements, planes is {planes}")


@dataclass(frozen=True)
class Schema:
    """A codec's settings in order (its configuration), and the checks across them.

    ``threads``: whether the numcodecs shell also takes the run-time
    ``threads`` setting (never part of the configuration).
    """

    params: tuple[Param, ...]
    relate: Callable[[dict[str, Any]], None] | None = None
    threads: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def check(self, values: dict[str, Any]) -> dict[str, Any]:
        """Every setting checked, defaults filled in for those not given."""
        out = {p.name: p.check(values.get(p.name, p.default)) for p in self.params}
        if self.relate is not None:
            self.relate(out)
        return out

    def signature(self, kind: Any, threads: bool = False) -> inspect.Signature:
        """A constructor's signature: the settings as parameters of ``kind``
        (an ``inspect.Parameter`` kind), then ``threads`` (keyword-only) if asked."""
        params = [inspect.Parameter(p.name, kind, default=p.default) for p in self.params]
        if threads:
            params.append(
                inspect.Parameter("threads", inspect.Parameter.KEYWORD_ONLY, default=None)
            )
        return inspect.Signature(params)


def _coder_schema(*params: Param) -> Schema:
    return Schema(params, relate=_dtype_fits_planes, threads=True)


RANS = _coder_schema(PLANES, PRECISION, SUBBLOCK_LOG2, CHECKSUM, DTYPE)
HUFFMAN = _coder_schema(PLANES, SUBBLOCK_LOG2, CHECKSUM, DTYPE)
AUTO = _coder_schema(PLANES, PRECISION, SUBBLOCK_LOG2, CHECKSUM, ZSTD_LEVEL, MIN_GAIN, DTYPE)
WEIGHTS = Schema(
    (CODER, DTYPE, PRECISION, SUBBLOCK_LOG2, CHECKSUM, ZSTD_LEVEL, MIN_GAIN), threads=True
)


def frame_settings(settings: dict[str, Any], dtype: Any) -> dict[str, Any]:
    """The frame encoder's keywords for a ``weights`` codec's settings and an
    element type (the CPU's encode_frame and the GPU's encode_on take the same)."""
    return {
        "planes": np.dtype(dtype).itemsize,
        "coder": settings["coder"],
        **encoder_settings(settings),
        "elements": True,
        "layout": float_layout(dtype),
        "dtype": dtype_name(dtype),
    }


def row_length(shape: tuple[int, ...]) -> int:
    """Elements per output channel (every axis but the first) of a chunk's shape;
    0 for fewer than two axes. Rows share a scale in most weights, and the
    encoder's row shift (docs/format.md) works on them."""
    return math.prod(shape[1:]) if len(shape) >= 2 else 0
