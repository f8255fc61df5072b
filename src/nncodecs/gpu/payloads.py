"""The frames' payloads on the device: rANS coding of the chosen chunks, and the assembly.

The host gives the pieces of each frame (where its raw, rANS and host-coded
payloads come from); the kernels copy or write them after each header.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.frame.constants import MODE_CONSTANT, MODE_RANS
from nncodecs.gpu.backend import Backend
from nncodecs.gpu.structs import (
    ENCODE_CHUNK,
    FRAME_PIECE,
    PIECE_FROM_HOST,
    PIECE_FROM_PLANES,
    PIECE_RANS,
    RANS_BLOCK,
    STATS_BLOCK,
)

__all__ = ["assemble", "encode_rans", "u32"]


def u32(backend: Backend, arr: Any) -> np.ndarray:
    """A device array's bytes on the host, as little-endian uint32."""
    return backend.to_host(arr).view("<u4")


def encode_rans(
    backend: Backend,
    planes_dev: Any,
    counts: np.ndarray,
    chosen: np.ndarray,
    offset: np.ndarray,
    lengths: np.ndarray,
    precision: int,
    subblock_log2: int,
) -> dict[str, Any]:
    """rANS-code the chosen entries on the device: their tables (on the host,
    from the counts), the kernel's states and words, and each payload's size."""
    if not chosen.size:
        return {"sizes": np.zeros(0, np.int64)}
    freqs, tables, table_at = _core.rans_tables(counts[chosen], chosen.size, precision)
    table_at = np.asarray(table_at, np.int64)
    block = 1 << subblock_log2
    m = lengths[chosen]
    subs = -(-m // block)
    first_sub = np.concatenate([[0], np.cumsum(subs)]).astype(np.int64)
    region = 2 * block  # the words of a sub-block: at most one per symbol
    records = np.zeros(chosen.size, ENCODE_CHUNK)
    records["input"] = offset[chosen]
    records["words"] = first_sub[:-1] * region
    records["symbols"], records["first_sub"] = m, first_sub[:-1]
    records["freqs"] = np.arange(chosen.size)
    total_subs = int(first_sub[-1])
    words = backend.empty(total_subs * region)
    states = backend.empty(total_subs * 128)
    nwords = backend.empty(total_subs * 4)
    backend.launch(
        "rans_encode_chunks",
        chosen.size,
        RANS_BLOCK,
        (
            planes_dev,
            backend.to_device(records.view(np.uint8)),
            backend.to_device(freqs),
            np.uint32(precision),
            np.uint32(subblock_log2),
            words,
            states,
            nwords,
        ),
    )
    per_chunk = np.add.reduceat(u32(backend, nwords).astype(np.int64), first_sub[:-1])
    sizes = np.diff(table_at) + (4 + 128) * subs + 2 * per_chunk
    return {
        "sizes": sizes,
        "tables": backend.to_device(np.frombuffer(tables, np.uint8)),
        "table_at": table_at,
        "first_sub": first_sub,
        "subs": subs,
        "region": region,
        "words": words,
        "states": states,
        "nwords": nwords,
    }


def assemble(
    backend: Backend,
    heads: list[bytes],
    base: np.ndarray,
    modes: np.ndarray,
    sizes: np.ndarray,
    offset: np.ndarray,
    host_parts: dict[int, bytes],
    on_device: np.ndarray,
    rans: dict[str, Any],
    planes_dev: Any,
    subblock_log2: int,
) -> list[Any]:
    """The frames on the device, one after another in one buffer: each
    header (from the host), then its payloads."""
    stored = np.flatnonzero(modes != MODE_CONSTANT)
    payload = np.where(modes != MODE_CONSTANT, sizes, 0)
    owner = np.searchsorted(base, np.arange(modes.size), side="right") - 1
    head_len = np.array([len(h) for h in heads], np.int64)
    frame_len = head_len + np.add.reduceat(payload, base[:-1]) if modes.size else head_len
    frame_len = np.where(np.diff(base) > 0, frame_len, head_len)
    frame_at = np.concatenate([[0], np.cumsum(frame_len)]).astype(np.int64)
    # each payload after its frame's header and the payloads before it
    within = np.cumsum(payload) - payload - np.concatenate([[0], np.cumsum(payload)])[base[owner]]
    dst = frame_at[owner] + head_len[owner] + within
    pieces = np.zeros(stored.size, FRAME_PIECE)
    pieces["dst"], pieces["length"] = dst[stored], sizes[stored]
    pieces["src"], pieces["kind"] = offset[stored], PIECE_FROM_PLANES  # raw: the planes
    host = bytearray()
    row = {int(e): p for p, e in enumerate(stored.tolist())}
    for e, part in sorted(host_parts.items()):
        pieces["kind"][row[e]], pieces["src"][row[e]] = PIECE_FROM_HOST, len(host)
        host += part
    coded = modes[on_device] == MODE_RANS
    if coded.any():
        r = np.flatnonzero(coded)
        at = np.searchsorted(stored, on_device[r])
        pieces["kind"][at] = PIECE_RANS
        pieces["src"][at] = rans["table_at"][r]
        pieces["length"][at] = np.diff(rans["table_at"])[r]
        pieces["words"][at] = rans["first_sub"][r] * rans["region"]
        pieces["first_sub"][at] = rans["first_sub"][r]
        pieces["subblocks"][at] = rans["subs"][r]
    out = backend.empty(int(frame_at[-1]))
    for t, h in enumerate(heads):
        out[int(frame_at[t]) : int(frame_at[t]) + len(h)] = backend.to_device(
            np.frombuffer(h, np.uint8)
        )
    if pieces.size:
        dummy = backend.empty(1)
        backend.launch(
            "assemble_frame",
            pieces.size,
            STATS_BLOCK,
            (
                backend.to_device(pieces.view(np.uint8)),
                planes_dev,
                backend.to_device(np.frombuffer(bytes(host) or b"\0", np.uint8)),
                rans.get("tables", dummy),
                rans.get("words", dummy),
                rans.get("states", dummy),
                rans.get("nwords", dummy),
                np.uint32(subblock_log2),
                out,
            ),
        )
    return [out[int(frame_at[t]) : int(frame_at[t + 1])] for t in range(len(heads))]
