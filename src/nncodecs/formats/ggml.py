"""GGML's quantized block layouts: the fields of each block type, in block order.

A quantized GGUF tensor is a run of fixed-size blocks, each a few float16 scales (and
mins, sub-scales) beside packed small-integer quants; their statistics differ, so the
container stores each field as its own array (:meth:`nncodecs.Writer.add_records`):
scales through the float path, quants as bytes. Layouts as in GGML's ``ggml-common.h``
(``QK_K`` = 256); each block's size is checked against the ``gguf`` package's table in
the tests. A type not listed here (``Q8_1``, whose size the ``gguf`` package and GGML
disagree on, and any new one) is stored as its raw bytes.
"""

from __future__ import annotations

__all__ = ["BLOCK_FIELDS"]

_H, _U8, _I8, _U16 = "float16", "uint8", "int8", "uint16"

#: {GGML type name: [(field, dtype, count), ...]} in block order.
# (not formatted: a table, one GGML block type a line, its fields in block order)
# fmt: off
BLOCK_FIELDS: dict[str, list[tuple[str, str, int]]] = {
    "Q4_0": [("d", _H, 1), ("qs", _U8, 16)],
    "Q4_1": [("d", _H, 1), ("m", _H, 1), ("qs", _U8, 16)],
    "Q5_0": [("d", _H, 1), ("qh", _U8, 4), ("qs", _U8, 16)],
    "Q5_1": [("d", _H, 1), ("m", _H, 1), ("qh", _U8, 4), ("qs", _U8, 16)],
    "Q8_0": [("d", _H, 1), ("qs", _I8, 32)],
    "Q2_K": [("scales", _U8, 16), ("qs", _U8, 64), ("d", _H, 1), ("dmin", _H, 1)],
    "Q3_K": [("hmask", _U8, 32), ("qs", _U8, 64), ("scales", _U8, 12), ("d", _H, 1)],
    "Q4_K": [("d", _H, 1), ("dmin", _H, 1), ("scales", _U8, 12), ("qs", _U8, 128)],
    "Q5_K": [("d", _H, 1), ("dmin", _H, 1), ("scales", _U8, 12), ("qh", _U8, 32), ("qs", _U8, 128)],
    "Q6_K": [("ql", _U8, 128), ("qh", _U8, 64), ("scales", _I8, 16), ("d", _H, 1)],
    "Q8_K": [("d", "float32", 1), ("qs", _I8, 256), ("bsums", "int16", 16)],
    "TQ1_0": [("qs", _U8, 48), ("qh", _U8, 4), ("d", _H, 1)],
    "TQ2_0": [("qs", _U8, 64), ("d", _H, 1)],
    "MXFP4": [("e", _U8, 1), ("qs", _U8, 16)],  # (e: an E8M0 exponent)
    "NVFP4": [("d", _U8, 4), ("qs", _U8, 32)],  # (d: four unsigned E4M3 scales)
    "IQ4_NL": [("d", _H, 1), ("qs", _U8, 16)],
    "IQ4_XS": [("d", _H, 1), ("scales_h", _U16, 1), ("scales_l", _U8, 4), ("qs", _U8, 128)],
    "IQ2_XXS": [("d", _H, 1), ("qs", _U16, 32)],
    "IQ2_XS": [("d", _H, 1), ("qs", _U16, 32), ("scales", _U8, 8)],
    "IQ2_S": [("d", _H, 1), ("qs", _U8, 64), ("qh", _U8, 8), ("scales", _U8, 8)],
    "IQ3_XXS": [("d", _H, 1), ("qs", _U8, 96)],
    "IQ3_S": [("d", _H, 1), ("qs", _U8, 64), ("qh", _U8, 8), ("signs", _U8, 32),
              ("scales", _U8, 4)],
    "IQ1_S": [("d", _H, 1), ("qs", _U8, 32), ("qh", _U16, 8)],
    "IQ1_M": [("qs", _U8, 32), ("qh", _U8, 16), ("scales", _U8, 8)],
}
# fmt: on
