"""One ratio convention (nncodecs.sizes): original over stored, and the sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from nncodecs.sizes import human, path_bytes, ratio_text, times_smaller


@pytest.mark.parametrize(
    ("original", "stored", "text"),
    [
        (90_868_376, 74_410_036, "1.22x smaller, 81.9% of 86.7 MiB"),
        (1000, 1000, "1.00x smaller, 100.0% of 1000 B"),
        (100, 250, "2.50x larger, 250.0% of 100 B"),
        (0, 12, "12 B stored for an empty input"),
        (5 * 2**30, 1, "5368709120.00x smaller, 0.0% of 5.0 GiB"),
    ],
)
def test_the_sentence(original: int, stored: int, text: str) -> None:
    assert ratio_text(original, stored) == text


def test_the_factor_agrees_with_the_sentence() -> None:
    for original, stored in [(90_868_376, 74_410_036), (45_434_000, 30_200_000), (7, 3)]:
        assert ratio_text(original, stored).startswith(times_smaller(original, stored) + " ")
    assert times_smaller(0, 10) == times_smaller(10, 0) == "-"
    assert times_smaller(3, 2, 3) == "1.500x"


def test_human_and_path_bytes(tmp_path: Path) -> None:
    assert [human(n) for n in (0, 1023, 1024, 1536, 2**40 * 3000)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "3000.0 TiB"
    ]  # fmt: skip
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "a").write_bytes(b"x" * 10)
    (tmp_path / "d" / "e" / "b").write_bytes(b"y" * 5)
    assert path_bytes(tmp_path / "d") == 15 and path_bytes(tmp_path / "d" / "a") == 10
