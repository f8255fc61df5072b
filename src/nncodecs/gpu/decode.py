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

The frame's CRC32C is checked too: a CRC per (plane, chunk) computed on
the device from the decoded bytes, joined on the host. Not yet: the merge
fused into the rANS kernel, encoding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from nncodecs import _core
from nncodecs.errors import CorruptDataError

__all__ = ["Backend", "DecodePlan", "decode_on", "plan_decode"]

CHUNK_LOG2 = 18
#: Threads of a rANS block: 4 warps, one sub-block each (2^18 / 2^16).
RANS_BLOCK = 128
MERGE_BLOCK = 256
MERGE_GRID_MAX = 65535

LAYOUT_CODES = {
    "none": 0,
    "float64": 1,
    "float32": 2,
    "float16": 3,
    "bfloat16": 4,
    "float8_e4m3fn": 5,
    "float8_e5m2": 6,
}

FROM_FRAME, CONSTANT, FROM_PLANES, FROM_EXTERNAL = 0, 1, 2, 3

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
    planes one after another.
    """
    plan = plan_decode(frame, max_decoded)
    k, n = plan.planes, plan.symbols
    if layout not in LAYOUT_CODES:
        raise ValueError(f"unknown layout {layout!r}")
    out = backend.empty(k * n)
    if k * n == 0:
        return out
    dev_frame = backend.to_device(frame) if device_frame is None else device_frame
    dev_rows = backend.to_device(plan.row_offsets)
    dev_planes = backend.empty(k * n if len(plan.rans) else 1)
    if len(plan.rans):
        status = backend.zeros_int32(len(plan.rans))
        backend.launch(
            "rans_decode_chunks",
            len(plan.rans),
            RANS_BLOCK,
            (
                dev_frame,
                backend.to_device(plan.rans.view(np.uint8)),
                np.uint32(plan.precision),
                np.uint32(plan.subblock_log2),
                dev_planes,
                dev_rows,
                np.uint64(plan.row_length),
                status,
            ),
        )
        codes = backend.to_host(status)
        bad = np.flatnonzero(codes)
        if bad.size:
            plane, index = plan.rans_where[bad[0]]
            why = STATUS_MESSAGES.get(int(codes[bad[0]]), f"status {int(codes[bad[0]])}")
            raise CorruptDataError(f"plane {plane} chunk {index}: {why}")
    if plan.external:
        from nncodecs.codecs._frame import decode_frame

        # Row offsets come undone already (the merge adds them to raw and
        # constant chunks only).
        cpu = decode_frame(frame, max_decoded=max_decoded)
        dev_external = backend.to_device(np.asarray(cpu).view(np.uint8))
    else:
        dev_external = backend.empty(1)
    limit = getattr(backend, "max_grid", MERGE_GRID_MAX)  # the merge strides over the rest
    grid = max(1, min(limit, -(-n // MERGE_BLOCK)))
    backend.launch(
        "merge_elements",
        grid,
        MERGE_BLOCK,
        (
            dev_frame,
            dev_planes,
            dev_external,
            backend.to_device(plan.sources.view(np.uint8)),
            np.uint32(k),
            np.uint64(n),
            np.uint32(plan.chunks),
            np.uint32(LAYOUT_CODES[layout] if elements else 0),
            dev_rows,
            np.uint64(plan.row_length),
            np.uint32(0 if elements else 1),
            out,
        ),
    )
    if plan.checksum is not None:
        _check_crc(backend, plan, (dev_frame, dev_planes, dev_external), dev_rows)
    return out


CRC_BLOCK = 256


def _check_crc(backend: Backend, plan: DecodePlan, buffers: tuple, dev_rows: Any) -> None:
    """The frame's CRC32C over the decoded planes: a CRC per (plane, chunk) on the
    device, joined here in index order, as the CPU decoder does."""
    crcs = backend.empty(4 * len(plan.lengths))
    backend.launch(
        "crc_chunks",
        len(plan.lengths),
        getattr(backend, "crc_block", CRC_BLOCK),
        (
            *buffers,
            backend.to_device(plan.sources.view(np.uint8)),
            np.uint32(plan.planes),
            np.uint64(plan.symbols),
            np.uint32(plan.chunks),
            dev_rows,
            np.uint64(plan.row_length),
            crcs,
        ),
    )
    crc = 0
    for part, length in zip(backend.to_host(crcs).view("<u4").tolist(), plan.lengths, strict=True):
        crc = _core.crc32c_combine(crc, part, length)
    if crc != plan.checksum:
        raise CorruptDataError(
            f"CRC32C mismatch: frame says {plan.checksum:08x}, decoded data gives {crc:08x}"
        )
