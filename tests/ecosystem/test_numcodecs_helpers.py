"""numcodecs' own test helpers (``numcodecs/tests/common.py``) over every codec (issue 36).

Our own harness shares our blind spots; these are the checks every numcodecs
codec passes. On numcodecs >= 0.17 (Python 3.12) the helpers come from the
release's source distribution, fetched by ``make`` into the environment
(tests/numcodecs_helpers.py). ``check_backwards_compatibility`` writes any
fixture it does not find: it runs here on the committed fixtures under
tests/fixtures/numcodecs, and a missing one fails the test first.

Helpers left out, and why:

- ``check_max_buffer_size``: nncodecs codecs have no ``max_buffer_size``
  attribute; a frame bounds what it decodes by its own checked header and
  the caller's expected size (docs/format.md), which tests/hostile/test_frames.py checks.
- ``check_encode_decode_array`` (object arrays): no nncodecs codec is an object
  codec; ``check_err_encode_object_buffer`` and
  ``check_err_decode_object_buffer`` check that they refuse object arrays.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from numcodecs_cases import (
    FIXTURE_SETS,
    _slug,
    byte_codecs,
    fixture_arrays,
    missing_fixtures,
    transform_codecs,
    weights_codecs,
)
from numcodecs_helpers import load_common

import nncodecs

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "numcodecs")


@pytest.fixture(scope="module")
def common() -> Any:
    module = load_common()  # FileNotFoundError (a failure, not a skip) when make did not fetch it
    # check_repr evaluates the constructor call in the helpers' own namespace: ours in scope too.
    for name in nncodecs.__all__:
        setattr(module, name, getattr(nncodecs, name))
    return module


def _arrays(kinds: str) -> list[np.ndarray]:
    """The arrays numcodecs' tests use for a codec: C and F order, both byte orders."""
    rng = np.random.default_rng(36)
    base = (rng.standard_normal((40, 25)) * 0.02).astype("<f4")
    out = [
        base.ravel(),
        base,
        np.asfortranarray(base),
        base.astype(">f4"),
        np.asfortranarray(base.astype(">f4")),
        np.linspace(-1e3, 1e3, 1001, dtype="<f8"),
        np.linspace(-1e3, 1e3, 1000, dtype=">f8").reshape(10, 10, 10, order="F"),
        rng.integers(-(2**15), 2**15, 999).astype("<i2"),
        rng.integers(0, 2**31, (30, 20)).astype(">u4"),
        rng.integers(-128, 128, 4000).astype("i1"),
        rng.random(100) < 0.5,
        np.zeros(0, "<f4"),
        np.array(3.5, "<f4"),
    ]
    if kinds == "bytes":  # byte coders take any fixed-size buffer
        out += [
            np.array(["¡Hola mundo!", "Hej Världen!", "こんにちは世界"] * 30, "U14"),
            np.array([b"abc", b"de"] * 50, "S3"),
            np.frombuffer(rng.bytes(400), "V8"),
            np.zeros(10, [("a", "<i4"), ("b", ">f8")]),
            np.arange(24, dtype="<c8").reshape(4, 6, order="F"),
        ]
    return out


def _codecs_and_arrays() -> list[tuple[Any, np.ndarray]]:
    # (a coder set to k planes takes buffers of whole planes: k divides their size)
    cases = [
        (codec, arr)
        for codec in byte_codecs()
        for arr in _arrays("bytes")
        if arr.nbytes % codec.planes == 0
    ]
    cases += [(codec, arr) for codec in weights_codecs() for arr in _arrays("numbers")]
    for arr in _arrays("numbers"):  # the transforms, configured for each array
        dt = arr.dtype
        ordered = dt.str if dt.byteorder == ">" else dt.name
        cases.append((nncodecs.NumcodecsPlanes(elementsize=dt.itemsize), arr))
        cases.append((nncodecs.NumcodecsBitReorder(dtype=ordered), arr))
        cases.append((nncodecs.NumcodecsWeights(dtype=ordered), arr))
    return cases


_CASES = _codecs_and_arrays()


@pytest.mark.parametrize(
    ("codec", "arr"),
    _CASES,
    ids=[
        f"{c!r}-{a.dtype.str}-{a.shape}-{'F' if a.flags.f_contiguous and a.ndim > 1 else 'C'}"
        for c, a in _CASES
    ],
)
def test_check_encode_decode(common: Any, codec: Any, arr: np.ndarray) -> None:
    common.check_encode_decode(arr, codec)


_ALL = [
    *byte_codecs(),
    *weights_codecs(),
    *transform_codecs(),
    nncodecs.NumcodecsBitReorder(dtype=">f4"),
    nncodecs.NumcodecsWeights(dtype="bfloat16"),
    nncodecs.NumcodecsRans(threads=2),
]


@pytest.mark.parametrize("codec", _ALL, ids=repr)
def test_check_config_and_repr(common: Any, codec: Any) -> None:
    common.check_config(codec)
    common.check_repr(repr(codec))


@pytest.mark.parametrize("codec", [*byte_codecs(), *weights_codecs()], ids=repr)
def test_object_buffers_are_refused(common: Any, codec: Any) -> None:
    common.check_err_encode_object_buffer(codec)
    if not isinstance(codec, nncodecs.NumcodecsWeights):
        common.check_err_decode_object_buffer(codec)
    else:  # (weights of int64 elements into an object out: refused as well)
        enc = codec.encode(np.arange(10))
        with pytest.raises(TypeError):
            codec.decode(enc, out=np.empty(10, dtype=object))


@pytest.mark.parametrize(
    ("prefix", "codec"),
    [(prefix, codec) for prefix, make in FIXTURE_SETS.items() for codec in make()],
    ids=lambda x: x if isinstance(x, str) else _slug(x),
)
def test_check_backwards_compatibility(
    common: Any, prefix: str, codec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Frames written by the main of 2026-12-06 still decode to the same bytes."""
    name = f"{prefix}-{_slug(codec)}"
    missing = missing_fixtures(codec.codec_id, name, len(fixture_arrays()), 1)
    assert not missing, f"fixtures missing (python tests/numcodecs_cases.py writes them): {missing}"
    monkeypatch.chdir(FIXTURES)
    common.check_backwards_compatibility(codec.codec_id, fixture_arrays(), [codec], prefix=name)
