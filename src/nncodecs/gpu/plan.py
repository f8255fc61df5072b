"""The host's plan of a frame the GPU decodes: its header and index parsed, the kernels' tables.

The same C++ parser as the CPU decoder reads and checks each frame's header
and chunk index (for a frame already on the device, from a copy of its
first bytes); the plan lays out, for every (plane, chunk), where its bytes
come from for the merge (the frame for raw chunks, a value for constant
ones, the planes buffer, or the CPU's planes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.errors import CorruptDataError
from nncodecs.frame.constants import CHUNK_LOG2, FRAME_MAGIC, MODE_CONSTANT, MODE_RANS, MODE_RAW
from nncodecs.gpu.backend import Backend
from nncodecs.gpu.structs import (
    CONSTANT,
    FROM_EXTERNAL,
    FROM_FRAME,
    FROM_PLANES,
    PLANE_SOURCE,
    RANS_CHUNK,
)

__all__ = ["PREFIX_BYTES", "DecodePlan", "device_plan", "fused_chunks", "join_crcs", "plan_decode"]

#: The first bytes of a device frame copied to the host to parse it (more
#: when its header and index do not fit).
PREFIX_BYTES = 1 << 16


@dataclass
class DecodePlan:
    """What the kernels need for one frame, on the host (arrays, not a
    Python object a chunk: a 2 GiB tensor has thousands of chunks)."""

    planes: int
    symbols: int  # per plane
    chunks: int  # per plane
    element: str  # the element type the frame records ("bytes": none)
    big_endian: bool  # a version 4 frame of big-endian elements (swapped back when decoded)
    precision: int
    subblock_log2: int
    row_length: int
    row_offsets: np.ndarray  # the frame's row offsets (a single zero byte when none)
    rans: np.ndarray  # RANS_CHUNK records, the order of their thread blocks
    rans_plane: np.ndarray  # the plane of each record
    rans_chunk: np.ndarray  # its chunk within the plane
    sources: np.ndarray  # PLANE_SOURCE, plane-major
    external: bool  # whether Huffman or zstd chunks need the CPU's planes
    checksum: int | None  # the frame's CRC32C of the decoded planes
    lengths: np.ndarray  # symbols of each (plane, chunk), index order (uint64)


def plan_decode(frame: np.ndarray, max_decoded: int, total_len: int = 0) -> DecodePlan | None:
    """Parse and check a frame (uint8, on the host) and lay out the kernels' tables.

    With ``total_len``, ``frame`` is the first bytes of a frame that long:
    ``None`` when its header and index do not lie in them."""
    if frame[:4].tobytes() != FRAME_MAGIC:
        raise CorruptDataError("the GPU decoder reads chunked frames ('NNCF') only")
    info = _core.frame_index(frame, max_decoded, total_len)
    if info is None:
        return None
    k = int(info["planes"])
    n = int(info["decoded_len"]) // k
    chunks = (n + (1 << CHUNK_LOG2) - 1) >> CHUNK_LOG2
    row_length = int(info["row_length"])
    if row_length:
        at = int(info["row_offsets_at"])
        row_offsets = frame[at : at + (n + row_length - 1) // row_length].copy()
    else:
        row_offsets = np.zeros(1, np.uint8)
    modes, offsets = info["modes"], info["offsets"]
    index = np.arange(k * chunks, dtype=np.uint64)
    plane, chunk = index // np.uint64(max(chunks, 1)), index % np.uint64(max(chunks, 1))
    first = chunk << np.uint64(CHUNK_LOG2)
    at_planes = plane * np.uint64(n) + first
    sources = np.zeros(k * chunks, PLANE_SOURCE)
    raw, const, coded = modes == MODE_RAW, modes == MODE_CONSTANT, modes == MODE_RANS
    sources["kind"] = np.select(
        [raw, const, coded], [FROM_FRAME, CONSTANT, FROM_PLANES], FROM_EXTERNAL
    )
    sources["offset"] = np.where(raw, offsets, np.where(const, 0, at_planes))
    sources["value"] = np.where(const, info["values"], 0)
    r = np.flatnonzero(coded)
    rans = np.zeros(r.size, RANS_CHUNK)
    rans["payload"], rans["out"], rans["first"] = offsets[r], at_planes[r], first[r]
    rans["length"] = info["lengths"][r]
    rans["symbols"] = np.minimum(np.uint64(1 << CHUNK_LOG2), np.uint64(n) - first[r])
    rans["shifted"] = (plane[r] == k - 1) & (row_length > 0)
    return DecodePlan(
        element=str(info["element"]),
        big_endian=bool(info["big_endian"]),
        planes=k,
        symbols=n,
        chunks=chunks,
        precision=int(info["precision"]),
        subblock_log2=int(info["subblock_log2"]),
        row_length=row_length,
        row_offsets=row_offsets,
        rans=rans,
        rans_plane=plane[r],
        rans_chunk=chunk[r],
        sources=sources,
        external=bool((modes > MODE_RANS).any()),
        checksum=info["checksum"],
        lengths=np.minimum(np.uint64(1 << CHUNK_LOG2), np.uint64(n) - first),
    )


def fused_chunks(plan: DecodePlan) -> np.ndarray:
    """Per chunk, whether its only rANS plane is the last one (the exponent
    plane): such chunks decode straight into elements (rans_decode_merge)."""
    kinds = plan.sources["kind"].reshape(plan.planes, plan.chunks)
    last_coded = kinds[-1] == FROM_PLANES
    others_coded = (kinds[:-1] == FROM_PLANES).any(axis=0)
    return (last_coded & ~others_coded).astype(np.uint8)


def device_plan(
    backend: Backend, device_frame: Any, max_decoded: int, prefix: np.ndarray | None = None
) -> DecodePlan:
    """The plan of a frame on the device, from a copy of its first bytes
    (``prefix`` when the caller has it; grown until the header and index are
    in; the whole frame at worst)."""
    total = int(device_frame.size)
    if prefix is None:
        prefix = backend.to_host(device_frame[: min(total, PREFIX_BYTES)])
    while True:
        plan = plan_decode(prefix, max_decoded, 0 if prefix.size == total else total)
        if plan is not None:
            return plan
        prefix = backend.to_host(device_frame[: min(total, prefix.size * 8)])


def join_crcs(crcs: np.ndarray, lengths: Any) -> int:
    """The CRC32C of a frame's planes from the CRC of every (plane, chunk),
    joined in index order as the CPU does."""
    return _core.crc32c_join(np.asarray(crcs, np.uint32), np.asarray(lengths, np.uint64))
