"""Frames decoded by the GPU kernels (``kernels/decode.cu``), through a backend.

The host parses and checks the frame's header and chunk index (the same C++
parser as the CPU decoder), then hands the kernels two tables: the rANS
chunks to decode into a planes buffer (one thread block each), and, for
every (plane, chunk), where its bytes come from for the merge (the frame
for raw chunks, a value for constant ones, the planes buffer, or an
external buffer). Huffman and zstd chunks have no GPU kernel yet: a frame
holding any is decoded to planes on the CPU first and those chunks are
taken from there. The kernels report a status per chunk, turned here into
:class:`nncodecs.CorruptDataError`.

A backend (``CupyBackend`` in ``nncodecs.gpu``; the tests' SIMT emulator)
supplies device arrays and launches. Nothing here imports CuPy.

Chunks whose only rANS plane is the last (the exponent plane, the usual
case) decode fused, straight into elements, so that plane never goes to
memory; the others through a planes buffer and the merge kernel. The
frame's CRC32C is checked too: a CRC per (plane, chunk) computed on the
device (for fused chunks, from the elements written), joined on the host.
Not yet: encoding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from nncodecs import _core
from nncodecs.errors import CorruptDataError

__all__ = ["Backend", "DecodePlan", "decode_on", "fused_chunks", "join_crcs", "plan_decode"]

CHUNK_LOG2 = 18
#: Threads of a rANS block: 4 warps, one sub-block each (2^18 / 2^16).
RANS_BLOCK = 128
MERGE_BLOCK = 256
MERGE_GRID_MAX = 65535

FROM_FRAME, CONSTANT, FROM_PLANES, FROM_EXTERNAL, FROM_ELEMENTS = 0, 1, 2, 3, 4

#: nnc::gpu::RansChunk and PlaneSource, byte for byte.
RANS_CHUNK = np.dtype(
    [
        ("payload", "<u8"),
        ("out", "<u8"),
        ("first", "<u8"),
        ("length", "<u4"),
        ("symbols", "<u4"),
        ("shifted", "<u4"),
        ("pad", "<u4"),
    ]
)
PLANE_SOURCE = np.dtype([("offset", "<u8"), ("kind", "<u4"), ("value", "<u4")])

STATUS_MESSAGES = {
    1: "malformed rANS table",
    2: "rANS sub-block headers do not add up to the payload",
    3: "a rANS lane state outside [2^15, 2^31)",
    4: "corrupt rANS stream (words left over or missing, or a final state not 2^15)",
    5: "a rANS sub-block declares more words than symbols",
    6: "more rANS sub-blocks than a thread block handles",
}


class Backend(Protocol):
    """Device arrays and kernel launches (CuPy, or the tests' emulator)."""

    def to_device(self, host: np.ndarray) -> Any: ...
    def empty(self, nbytes: int) -> Any: ...
    def zeros_int32(self, count: int) -> Any: ...
    def to_host(self, arr: Any) -> np.ndarray: ...
    def launch(self, name: str, grid: int, block: int, args: tuple) -> None: ...


@dataclass
class DecodePlan:
    """What the kernels need for one frame, on the host."""

    planes: int
    symbols: int  # per plane
    chunks: int  # per plane
    precision: int
    subblock_log2: int
    row_length: int
    row_offsets: np.ndarray  # the frame's row offsets (a single zero byte when none)
    rans: np.ndarray  # RANS_CHUNK records, the order of their thread blocks
    rans_where: list[tuple[int, int]]  # (plane, chunk) of each record
    sources: np.ndarray  # PLANE_SOURCE, plane-major
    external: bool  # whether Huffman or zstd chunks need the CPU's planes
    checksum: int | None  # the frame's CRC32C of the decoded planes
    lengths: list[int]  # symbols of each (plane, chunk), index order


def plan_decode(frame: np.ndarray, max_decoded: int) -> DecodePlan:
    """Parse and check a frame (uint8, on the host) and lay out the kernels' tables."""
    if frame[:4].tobytes() != b"NNCF":
        raise CorruptDataError("the GPU decoder reads chunked frames ('NNCF') only")
    info = _core.frame_info(frame, max_decoded)
    k = int(info["planes"])
    n = int(info["decoded_len"]) // k
    chunks = (n + (1 << CHUNK_LOG2) - 1) >> CHUNK_LOG2
    row_length = int(info["row_length"])
    if row_length:
        at = int(info["row_offsets_at"])
        row_offsets = frame[at : at + (n + row_length - 1) // row_length].copy()
    else:
        row_offsets = np.zeros(1, np.uint8)
    sources = np.zeros(k * chunks, PLANE_SOURCE)
    rans = []
    where = []
    external = False
    for i, (plane, index, mode, offset, length, symbols) in enumerate(info["chunks"]):
        first = index << CHUNK_LOG2
        at_planes = plane * n + first
        if mode == "raw":
            sources[i] = (offset, FROM_FRAME, 0)
        elif mode == "constant":
            sources[i] = (0, CONSTANT, info["values"][i])
        elif mode == "rans":
            sources[i] = (at_planes, FROM_PLANES, 0)
            shifted = 1 if row_length and plane == k - 1 else 0
            rans.append((offset, at_planes, first, length, symbols, shifted, 0))
            where.append((plane, index))
        else:  # huffman, zstd: from the CPU's planes
            sources[i] = (at_planes, FROM_EXTERNAL, 0)
            external = True
    return DecodePlan(
        planes=k,
        symbols=n,
        chunks=chunks,
        precision=int(info["precision"]),
        subblock_log2=int(info["subblock_log2"]),
        row_length=row_length,
        row_offsets=row_offsets,
        rans=np.array(rans, RANS_CHUNK),
        rans_where=where,
        sources=sources,
        external=external,
        checksum=info["checksum"],
        lengths=[int(c[5]) for c in info["chunks"]],
    )


def fused_chunks(plan: DecodePlan) -> np.ndarray:
    """Per chunk, whether its only rANS plane is the last one (the exponent
    plane): such chunks decode straight into elements (rans_decode_merge)."""
    kinds = plan.sources["kind"].reshape(plan.planes, plan.chunks)
    last_coded = kinds[-1] == FROM_PLANES
    others_coded = (kinds[:-1] == FROM_PLANES).any(axis=0)
    return (last_coded & ~others_coded).astype(np.uint8)


def _run_rans(backend: Backend, plan: DecodePlan, picked: np.ndarray, name: str, args) -> None:
    """Launch a rANS kernel over the records picked, and raise for any bad chunk."""
    records = plan.rans[picked]
    if not len(records):
        return
    status = backend.zeros_int32(len(records))
    backend.launch(
        name, len(records), RANS_BLOCK, args(backend.to_device(records.view(np.uint8)), status)
    )
    codes = backend.to_host(status)
    bad = np.flatnonzero(codes)
    if bad.size:
        plane, index = [w for w, p in zip(plan.rans_where, picked, strict=True) if p][bad[0]]
        why = STATUS_MESSAGES.get(int(codes[bad[0]]), f"status {int(codes[bad[0]])}")
        raise CorruptDataError(f"plane {plane} chunk {index}: {why}")


def decode_on(
    backend: Backend,
    frame: np.ndarray,
    *,
    max_decoded: int,
    layout: str = "none",
    elements: bool = False,
    device_frame: Any = None,
) -> Any:
    """Decode a frame on a backend: a device array of the decoded bytes.

    ``frame`` is the frame on the host (its header and index are parsed
    there); ``device_frame`` the same bytes on the device when they are
    there already. With ``elements`` the output holds elements (of the
    frame's plane count in bytes, inverse reorder of ``layout``), else the
    planes one after another. Chunks whose only rANS plane is the last
    decode fused, straight into elements; the others go through the planes
    buffer and the merge. Then the frame's CRC32C is checked.
    """
    plan = plan_decode(frame, max_decoded)
    k, n = plan.planes, plan.symbols
    code = np.uint32(_core.layout_code(layout) if elements else 0)  # ValueError if unknown
    out = backend.empty(k * n)
    if k * n == 0:
        return out
    fused = fused_chunks(plan) if elements else np.zeros(plan.chunks, np.uint8)
    in_fused = np.array([bool(fused[c]) for _, c in plan.rans_where], dtype=bool)
    dev_frame = backend.to_device(frame) if device_frame is None else device_frame
    dev_rows = backend.to_device(plan.row_offsets)
    dev_sources = backend.to_device(plan.sources.view(np.uint8))
    dev_planes = backend.empty(k * n if (~in_fused).any() else 1)
    if plan.external:
        from nncodecs.codecs._frame import decode_frame

        # Row offsets come undone already (the merge adds them to raw and
        # constant chunks only).
        cpu = decode_frame(frame, max_decoded=max_decoded)
        dev_external = backend.to_device(np.asarray(cpu).view(np.uint8))
    else:
        dev_external = backend.empty(1)
    precision, sb = np.uint32(plan.precision), np.uint32(plan.subblock_log2)
    rows = np.uint64(plan.row_length)
    _run_rans(backend, plan, ~in_fused, "rans_decode_chunks",
              lambda recs, status: (dev_frame, recs, precision, sb, dev_planes, dev_rows, rows,
                                    status))  # fmt: skip
    _run_rans(backend, plan, in_fused, "rans_decode_merge",
              lambda recs, status: (dev_frame, recs, precision, sb, dev_external, dev_sources,
                                    np.uint32(k), np.uint64(n), np.uint32(plan.chunks), code,
                                    dev_rows, rows, status, out))  # fmt: skip
    if not fused.all():
        limit = getattr(backend, "max_grid", MERGE_GRID_MAX)  # the merge strides over the rest
        grid = max(1, min(limit, -(-n // MERGE_BLOCK)))
        backend.launch(
            "merge_elements",
            grid,
            MERGE_BLOCK,
            (dev_frame, dev_planes, dev_external, dev_sources, np.uint32(k), np.uint64(n),
             np.uint32(plan.chunks), code, dev_rows, rows, np.uint32(0 if elements else 1),
             backend.to_device(fused), out),
        )  # fmt: skip
    if plan.checksum is not None:
        sources = plan.sources.copy()
        kinds = sources["kind"].reshape(k, plan.chunks)
        kinds[-1][fused.astype(bool)] = FROM_ELEMENTS  # that plane is only in the elements
        crcs = backend.empty(4 * len(plan.lengths))
        backend.launch(
            "crc_chunks",
            len(plan.lengths),
            getattr(backend, "crc_block", CRC_BLOCK),
            (dev_frame, dev_planes, dev_external, backend.to_device(sources.view(np.uint8)),
             np.uint32(k), np.uint64(n), np.uint32(plan.chunks), code, dev_rows, rows, out,
             crcs),
        )  # fmt: skip
        _check_crc(plan, backend.to_host(crcs).view("<u4"))
    return out


CRC_BLOCK = 256


def join_crcs(crcs: np.ndarray, lengths: list[int]) -> int:
    """The CRC32C of a frame's planes from the CRC of every (plane, chunk),
    joined in index order as the CPU does."""
    crc = 0
    for part, length in zip(crcs.tolist(), lengths, strict=True):
        crc = _core.crc32c_combine(crc, part, length)
    return crc


def _check_crc(plan: DecodePlan, crcs: np.ndarray) -> None:
    """The frame's CRC32C from the device's CRC of every (plane, chunk)."""
    crc = join_crcs(crcs, plan.lengths)
    if crc != plan.checksum:
        raise CorruptDataError(
            f"CRC32C mismatch: frame says {plan.checksum:08x}, decoded data gives {crc:08x}"
        )
