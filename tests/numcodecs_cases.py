"""The codecs and arrays that numcodecs' own test helpers run on
(tests/ecosystem/test_numcodecs_helpers.py).

``python tests/numcodecs_cases.py`` writes the fixtures of
``check_backwards_compatibility`` that are missing under
``tests/fixtures/numcodecs`` (numcodecs' helper writes any fixture it does
not find; the test fails instead). The committed ones were written by the
main of 2026-12-06, before the byte-order rule (frame version 4): run with
that release's package first on the path to write more from it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

FIXTURES = Path(__file__).parent / "fixtures" / "numcodecs"


def byte_codecs() -> list[Any]:
    """The byte coders in their main configurations."""
    from nncodecs import NumcodecsAuto, NumcodecsHuffman, NumcodecsRans

    return [
        NumcodecsRans(),
        NumcodecsRans(planes=4, precision=11, checksum=False),
        NumcodecsHuffman(),
        NumcodecsHuffman(planes=2, subblock_log2=12),
        NumcodecsAuto(),
        NumcodecsAuto(planes=4, dtype="float32", zstd_level=9, min_gain=0.1),
    ]


def weights_codecs() -> list[Any]:
    from nncodecs import NumcodecsWeights

    return [
        NumcodecsWeights(),
        NumcodecsWeights(coder="rans"),
        NumcodecsWeights(coder="huffman", checksum=False),
    ]


def transform_codecs() -> list[Any]:
    from nncodecs import NumcodecsBitReorder, NumcodecsPlanes

    return [NumcodecsPlanes(elementsize=4), NumcodecsBitReorder(dtype="float32")]


def fixture_arrays() -> list[np.ndarray]:
    """Little-endian, C-ordered float32 arrays (what every release wrote the same)."""
    rng = np.random.default_rng(36)
    return [
        (rng.standard_normal(3000) * 0.02).astype("<f4"),
        np.linspace(-100, 100, 1000, dtype="<f4").reshape(10, 100),
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38], dtype="<f4"),
    ]


FIXTURE_SETS = {"bytes": byte_codecs, "weights": weights_codecs, "transforms": transform_codecs}


def missing_fixtures(codec_id: str, prefix: str, n_arrays: int, n_codecs: int) -> list[str]:
    """The fixture files ``check_backwards_compatibility`` would read for these."""
    base = FIXTURES / "fixture" / codec_id / prefix
    want = [base / f"array.{i:02d}.npy" for i in range(n_arrays)]
    for j in range(n_codecs):
        want.append(base / f"codec.{j:02d}" / "config.json")
        want += [base / f"codec.{j:02d}" / f"encoded.{i:02d}.dat" for i in range(n_arrays)]
    return [str(p.relative_to(FIXTURES)) for p in want if not p.exists()]


def main() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from numcodecs_helpers import load_common

    common = load_common()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    os.chdir(FIXTURES)
    for prefix, make in FIXTURE_SETS.items():
        for codec in make():
            common.check_backwards_compatibility(
                codec.codec_id, fixture_arrays(), [codec], prefix=f"{prefix}-{_slug(codec)}"
            )


def _slug(codec: Any) -> str:
    """A fixture folder's name for one codec configuration."""
    config = {k: v for k, v in codec.get_config().items() if k != "id"}
    return "-".join(f"{k}={v}" for k, v in sorted(config.items()) if v is not None) or "default"


if __name__ == "__main__":
    main()
