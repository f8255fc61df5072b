"""Type stub of the compiled kernels module (cpp/bindings/core.cpp)."""

from collections.abc import Buffer
from typing import Literal

Layout = Literal[
    "none", "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"
]
Variant = Literal["auto", "scalar", "avx2"]

def reorder_encode(
    dst: Buffer, src: Buffer, layout: Layout, variant: Variant = "auto", threads: int = 0
) -> None: ...
def reorder_decode(
    dst: Buffer, src: Buffer, layout: Layout, variant: Variant = "auto", threads: int = 0
) -> None: ...
def planes_split(
    dst: Buffer,
    src: Buffer,
    elemsize: int,
    layout: Layout = "none",
    variant: Variant = "auto",
    threads: int = 0,
) -> None: ...
def planes_merge(
    dst: Buffer,
    src: Buffer,
    elemsize: int,
    layout: Layout = "none",
    variant: Variant = "auto",
    threads: int = 0,
) -> None: ...
def variants() -> list[str]: ...
def best_variant() -> str: ...
def hardware_threads() -> int: ...
