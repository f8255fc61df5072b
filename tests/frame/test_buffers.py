"""The decoder's output cache: blocks of dropped outputs are reused, never shared."""

from __future__ import annotations

import numpy as np
import pytest
from harness import same_bits, weights_like

from nncodecs import NumcodecsWeights, _core

MIB = 1 << 20


@pytest.fixture(autouse=True)
def empty_cache():
    _core.output_cache_clear()
    yield
    _core.output_cache_clear()


def _pointer(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def _frames(count: int, elements: int) -> tuple[list[np.ndarray], list[bytes]]:
    arrays = [weights_like("bfloat16", elements, seed=s) for s in range(count)]
    codec = NumcodecsWeights(dtype="bfloat16")
    return arrays, [codec.encode(a) for a in arrays]


def test_a_dropped_output_is_reused_for_the_next_and_holds_its_data() -> None:
    (a, b), (fa, fb) = _frames(2, 3 * MIB // 2)  # 3 MiB outputs
    codec = NumcodecsWeights(dtype="bfloat16", threads=2)
    out = codec.decode(fa)
    assert same_bits(out, a)
    first = _pointer(out)
    assert _core.output_cache_stats() == (0, 0)
    del out
    blocks, held = _core.output_cache_stats()
    assert blocks == 1 and held >= 3 * MIB
    out = codec.decode(fb)  # lands in A's block: every byte must be B's
    assert _pointer(out) == first
    assert same_bits(out, b)
    assert _core.output_cache_stats() == (0, 0)


def test_live_outputs_never_share_a_block() -> None:
    arrays, frames = _frames(3, MIB)
    codec = NumcodecsWeights(dtype="bfloat16")
    outs = [codec.decode(f) for f in frames]
    assert len({_pointer(o) for o in outs}) == 3
    for o, a in zip(outs, arrays, strict=True):
        assert same_bits(o, a)
    # A view keeps its block out of the cache until it goes too.
    view = outs[0][10:20]
    del outs[0]
    assert _core.output_cache_stats()[0] == 0
    del view
    assert _core.output_cache_stats()[0] == 1


def test_small_and_mismatched_outputs() -> None:
    codec = NumcodecsWeights(dtype="bfloat16")
    _, (fs,) = _frames(1, 1000)
    out = codec.decode(fs)
    del out
    assert _core.output_cache_stats() == (0, 0)  # below 1 MiB: NumPy's own memory
    (_, half), (fb, _) = _frames(2, 4 * MIB)
    fh = NumcodecsWeights(dtype="bfloat16").encode(half[: 2 * MIB])
    out = codec.decode(fb)
    first = _pointer(out)
    del out
    out = codec.decode(fh)  # 4 MiB for a block of 8: not reused
    assert _pointer(out) != first
    assert same_bits(out, half[: 2 * MIB])


def test_the_cache_is_bounded() -> None:
    codec = NumcodecsWeights(dtype="bfloat16")
    arrays, frames = _frames(1, 20 * MIB)  # 40 MiB outputs
    outs = [codec.decode(frames[0]) for _ in range(6)]
    for o in outs:
        assert same_bits(o, arrays[0])
    del o, outs
    blocks, held = _core.output_cache_stats()
    assert 1 <= blocks <= 4 and held <= 128 * MIB
    _core.output_cache_clear()
    assert _core.output_cache_stats() == (0, 0)


def test_an_output_buffer_comes_from_the_cache_and_goes_back() -> None:
    """What a Reader decodes whole tensors into: the cache's memory, reused once dropped."""
    first = _core.output_buffer(3 * MIB)
    assert first.dtype == np.uint8 and first.shape == (3 * MIB,) and first.flags.writeable
    first[:] = 7
    where = _pointer(first)
    del first
    assert _core.output_cache_stats()[0] == 1
    again = _core.output_buffer(3 * MIB)
    assert _pointer(again) == where and _core.output_cache_stats()[0] == 0
    small = _core.output_buffer(100)  # (under 1 MiB: a plain array)
    assert small.shape == (100,) and _core.output_cache_stats()[0] == 0
