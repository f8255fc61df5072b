"""Frames decoded by the GPU kernels (``kernels/decode.cu``), through a backend.

The host parses and checks each frame's header and chunk index (the same C++
parser as the CPU decoder; for a frame already on the device, from a copy
of its first bytes), then hands the kernels tables: a descriptor per frame
(``FRAME_DESC``), the rANS chunks (one thread block each), and, for every
(plane, chunk), where its bytes come from for the merge (the frame for raw
chunks, a value for constant ones, the planes buffer, or the CPU's planes).
Many frames go through one launch of each kernel (:func:`decode_frames`):
small tensors, or the chunks of one Zarr array, do not pay launches each.

Chunks whose only rANS plane is the last (the exponent plane, the usual
case) decode fused, straight into elements, so that plane never goes to
memory; the others through a planes buffer and the merge kernel. Huffman
and zstd chunks have no GPU kernel yet: a frame holding any is decoded to
planes on the CPU first and those chunks are taken from there. Each frame's
CRC32C is checked: a CRC per (plane, chunk) computed on the device (for
fused chunks, from the elements written), joined on the host. The kernels
report a status per rANS chunk, turned here into
:class:`nncodecs.CorruptDataError`.

A backend (``CupyBackend`` in ``nncodecs.gpu``; the tests' SIMT emulator)
supplies device arrays and launches. Nothing here imports CuPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from nncodecs import _core
from nncodecs.codecs._frame import WHOLE_MAGICS, check_frame_element, decode_frame, frame_element
from nncodecs.errors import CorruptDataError

__all__ = [
    "Backend",
    "DecodePlan",
    "decode_frames",
    "decode_on",
    "fused_chunks",
    "join_crcs",
    "plan_decode",
]

CHUNK_LOG2 = 18
#: Threads of a rANS block: 4 warps, one sub-block each (2^18 / 2^16).
RANS_BLOCK = 128
MERGE_BLOCK = 256
CRC_BLOCK = 256
#: The first bytes of a device frame copied to the host to parse it (more
#: when its header and index do not fit).
PREFIX_BYTES = 1 << 16

FROM_FRAME, CONSTANT, FROM_PLANES, FROM_EXTERNAL = 0, 1, 2, 3

#: nnc::gpu::RansChunk, PlaneSource, FrameDesc, MergeTask and CrcTask, byte for byte.
RANS_CHUNK = np.dtype(
    [
        ("payload", "<u8"),
        ("out", "<u8"),
        ("first", "<u8"),
        ("length", "<u4"),
        ("symbols", "<u4"),
        ("shifted", "<u4"),
        ("desc", "<u4"),
    ]
)
PLANE_SOURCE = np.dtype([("offset", "<u8"), ("kind", "<u4"), ("value", "<u4")])
FRAME_DESC = np.dtype(
    [
        ("frame", "<u8"),
        ("out", "<u8"),
        ("planes", "<u8"),
        ("external", "<u8"),
        ("rows", "<u8"),
        ("row_length", "<u8"),
        ("n", "<u8"),
        ("k", "<u4"),
        ("chunks", "<u4"),
        ("layout", "<u4"),
        ("sources", "<u4"),
        ("precision", "<u4"),
        ("subblock_log2", "<u4"),
        ("to_planes", "<u4"),
        ("pad", "<u4"),
    ]
)
MERGE_TASK = np.dtype([("desc", "<u4"), ("chunk", "<u4")])
CRC_TASK = np.dtype([("desc", "<u4"), ("plane", "<u4"), ("chunk", "<u4"), ("from_elements", "<u4")])

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
    def concat(self, arrays: list[Any]) -> Any: ...


@dataclass
class DecodePlan:
    """What the kernels need for one frame, on the host (arrays, not a
    Python object a chunk: a 2 GiB tensor has thousands of chunks)."""

    planes: int
    symbols: int  # per plane
    chunks: int  # per plane
    element: str  # the element type the frame records ("bytes": none)
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


#: nnc::ChunkMode, the modes of a frame's chunk index.
MODE_RAW, MODE_CONSTANT, MODE_RANS, MODE_HUFFMAN, MODE_ZSTD = 0, 1, 2, 3, 4
MODES = {"raw": MODE_RAW, "constant": MODE_CONSTANT, "rans": MODE_RANS,
         "huffman": MODE_HUFFMAN, "zstd": MODE_ZSTD}  # fmt: skip


def plan_decode(frame: np.ndarray, max_decoded: int, total_len: int = 0) -> DecodePlan | None:
    """Parse and check a frame (uint8, on the host) and lay out the kernels' tables.

    With ``total_len``, ``frame`` is the first bytes of a frame that long:
    ``None`` when its header and index do not lie in them."""
    if frame[:4].tobytes() != b"NNCF":
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
    sources["kind"] = np.select([raw, const, coded], [FROM_FRAME, CONSTANT, FROM_PLANES],
                                FROM_EXTERNAL)  # fmt: skip
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


def _decode_whole(
    backend: Backend, frame: np.ndarray | None, device_frame: Any, max_decoded: int,
    layout: str, elements: bool, planes: int | None,
) -> np.ndarray:  # fmt: skip
    """A whole-input zstd frame decoded on the CPU (no GPU kernel for zstd)."""
    if elements and planes is None:
        raise ValueError("decode_frames: a whole-input zstd frame of elements needs planes=")
    host = frame if frame is not None else backend.to_host(device_frame)
    out = decode_frame(host, max_decoded=max_decoded, elements=elements, layout=layout,
                       planes=planes)  # fmt: skip
    return np.asarray(out).reshape(-1).view(np.uint8)


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


def decode_on(
    backend: Backend,
    frame: np.ndarray | None,
    *,
    max_decoded: int,
    layout: str = "none",
    elements: bool = False,
    device_frame: Any = None,
) -> Any:
    """Decode one frame on a backend: a device array of the decoded bytes.

    ``frame`` is the frame on the host, or ``None`` with ``device_frame``
    (the frame on the device; then its header and index are copied to the
    host to be parsed). With ``elements`` the output holds elements (of the
    frame's plane count in bytes, inverse reorder of ``layout``), else the
    planes one after another. See :func:`decode_frames`.
    """
    return decode_frames(
        backend, [frame], max_decoded=[max_decoded], layouts=[layout], elements=elements,
        device_frames=[device_frame],
    )[0]  # fmt: skip


def decode_frames(
    backend: Backend,
    frames: list[np.ndarray | None],
    *,
    max_decoded: list[int],
    layouts: list[str] | None = None,
    elements: bool = False,
    device_frames: list[Any] | None = None,
    planes: list[int] | None = None,
    out: Any = None,
    dtypes: list[str] | None = None,
) -> list[Any]:
    """Decode many frames in one launch of each kernel: a device array each.

    ``frames[i]`` is frame ``i`` on the host, or ``None`` where
    ``device_frames[i]`` holds it on the device. Outputs are slices of one
    device buffer. Chunks whose only rANS plane is the last decode fused,
    straight into elements; the others go through the planes buffer and
    the merge. Then every frame's CRC32C is checked; a corrupt frame raises
    :class:`nncodecs.CorruptDataError` naming it (``frame i:`` when there are
    several). Whole-input zstd frames (``auto`` writes them for small inputs)
    decode on the CPU and are copied to the device; with ``elements`` they
    need ``planes`` (bytes an element, a frame). ``out``: a device buffer of
    at least the outputs' total bytes to decode into (frame after frame).
    ``dtypes``: the element type each frame decodes to; a frame that records
    another raises :class:`nncodecs.CorruptDataError` (``"bytes"``: any).
    """
    count = len(frames)
    layouts = layouts or ["none"] * count
    device_frames = device_frames or [None] * count
    if not (len(max_decoded) == len(layouts) == len(device_frames) == count):
        raise ValueError("decode_frames: one max_decoded, layout and device frame a frame")
    codes = [np.uint32(_core.layout_code(x) if elements else 0) for x in layouts]  # ValueError
    plans: list[DecodePlan | None] = []
    hosted: dict[int, np.ndarray] = {}  # whole-input zstd frames, decoded on the CPU
    for i in range(count):
        if frames[i] is None and device_frames[i] is None:
            raise ValueError(f"decode_frames: frame {i} is neither on the host nor on the device")
        on_device = frames[i] is None
        prefix = (backend.to_host(device_frames[i][: min(int(device_frames[i].size), PREFIX_BYTES)])
                  if on_device else frames[i])  # fmt: skip
        if prefix[:4].tobytes() in WHOLE_MAGICS:
            if dtypes:
                host = frames[i] if frames[i] is not None else backend.to_host(device_frames[i])
                check_frame_element(frame_element(host), dtypes[i])
            k = planes[i] if planes else None
            hosted[i] = _decode_whole(backend, frames[i], device_frames[i], max_decoded[i],
                                      layouts[i], elements, k)  # fmt: skip
            plans.append(None)
            continue
        plan = (device_plan(backend, device_frames[i], max_decoded[i], prefix) if on_device
                else plan_decode(frames[i], max_decoded[i]))  # fmt: skip
        assert plan is not None
        plans.append(plan)
    name = (lambda i: f"frame {i}: ") if count > 1 else (lambda i: "")
    for i, plan in enumerate(plans):
        if plan is not None and dtypes:
            try:
                check_frame_element(plan.element, dtypes[i])
            except CorruptDataError as exc:
                raise CorruptDataError(f"{name(i)}{exc}") from None
    sizes = [hosted[i].size if p is None else p.planes * p.symbols for i, p in enumerate(plans)]
    out_at = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    if out is None:
        out = backend.empty(int(out_at[-1]))
    elif int(out.size) < int(out_at[-1]):
        raise ValueError(f"decode_frames: out has {int(out.size)} bytes, {int(out_at[-1])} needed")
    outputs = [out[int(out_at[i]) : int(out_at[i + 1])] for i in range(count)]
    for i, cpu in hosted.items():
        if cpu.size:
            outputs[i][...] = backend.to_device(cpu)
    live = [i for i in range(count) if sizes[i] and i not in hosted]
    if not live:
        return outputs

    # The frames, the CPU's planes (Huffman, zstd chunks) and the tables.
    frame_parts, frame_at, at = [], [], 0
    for i in live:
        dev = device_frames[i]
        frame_parts.append(dev if dev is not None else backend.to_device(frames[i]))
        frame_at.append(at)
        at += int(frame_parts[-1].size)
    dev_frames = frame_parts[0] if len(frame_parts) == 1 else backend.concat(frame_parts)
    external_parts, external_at, ext = [], {}, 0
    for i in live:
        if plans[i].external:
            host = frames[i] if frames[i] is not None else backend.to_host(device_frames[i])
            # Row offsets come undone already (the merge adds them to raw and
            # constant chunks only).
            cpu = np.asarray(decode_frame(host, max_decoded=max_decoded[i])).view(np.uint8)
            external_parts.append(cpu)
            external_at[i] = ext
            ext += cpu.size
    descs = np.zeros(len(live), FRAME_DESC)
    sources, rows, records, merge, crc = [], [], [], [], []
    planes_at = rows_at = sources_at = 0
    for d, i in enumerate(live):
        plan = plans[i]
        k, chunks = plan.planes, plan.chunks
        fused = fused_chunks(plan) if elements else np.zeros(chunks, np.uint8)
        in_fused = fused[plan.rans_chunk].astype(bool)
        descs[d] = (frame_at[d], out_at[i], planes_at, external_at.get(i, 0), rows_at,
                    plan.row_length, plan.symbols, k, chunks, codes[i], sources_at,
                    plan.precision, plan.subblock_log2, 0 if elements else 1, 0)  # fmt: skip
        recs = plan.rans.copy()
        recs["desc"] = d
        records.append((recs, in_fused, i, plan))
        tasks = np.zeros(chunks - int(fused.sum()), MERGE_TASK)
        tasks["desc"], tasks["chunk"] = d, np.flatnonzero(~fused.astype(bool))
        merge.append(tasks)
        if plan.checksum is not None:
            t = np.zeros(k * chunks, CRC_TASK)
            t["desc"], t["plane"], t["chunk"] = d, np.repeat(np.arange(k), chunks), np.tile(
                np.arange(chunks), k)  # fmt: skip
            t["from_elements"][(k - 1) * chunks :] = fused
            crc.append(t)
        sources.append(plan.sources)
        rows.append(plan.row_offsets)
        planes_at += k * plan.symbols if (~in_fused).any() else 0
        rows_at += plan.row_offsets.size
        sources_at += plan.sources.size
    dev_descs = backend.to_device(descs.view(np.uint8))
    dev_sources = backend.to_device(np.concatenate(sources).view(np.uint8))
    dev_rows = backend.to_device(np.concatenate(rows))
    dev_planes = backend.empty(max(planes_at, 1))
    dev_external = backend.to_device(np.concatenate(external_parts)) if external_parts else (
        backend.empty(1))  # fmt: skip

    # Every launch first; the statuses are read once (one wait for the device).
    checks = []
    for fused_kind, kernel in ((False, "rans_decode_chunks"), (True, "rans_decode_merge")):
        picked = [(recs[f == fused_kind], i, plan, np.flatnonzero(f == fused_kind))
                  for recs, f, i, plan in records]  # fmt: skip
        table = np.concatenate([p[0] for p in picked])
        if not table.size:
            continue
        status = backend.zeros_int32(table.size)
        args = (dev_descs, backend.to_device(table.view(np.uint8)), dev_frames, dev_rows, status)
        args += (dev_planes,) if not fused_kind else (dev_external, dev_sources, out)
        backend.launch(kernel, table.size, RANS_BLOCK, args)
        checks.append((status, picked))
    merge_table = np.concatenate(merge)
    if merge_table.size:
        backend.launch(
            "merge_chunks", merge_table.size, MERGE_BLOCK,
            (dev_descs, backend.to_device(merge_table.view(np.uint8)), dev_frames, dev_planes,
             dev_external, dev_sources, dev_rows, out),
        )  # fmt: skip
    if crc:
        crc_table = np.concatenate(crc)
        crcs = backend.empty(4 * crc_table.size)
        backend.launch(
            "crc_chunks", crc_table.size, getattr(backend, "crc_block", CRC_BLOCK),
            (dev_descs, backend.to_device(crc_table.view(np.uint8)), dev_frames, dev_planes,
             dev_external, dev_sources, dev_rows, out, crcs),
        )  # fmt: skip
    _raise_for_status(backend, checks, name)
    if crc:
        values = backend.to_host(crcs).view("<u4")
        at = 0
        for i in live:
            plan = plans[i]
            if plan.checksum is None:
                continue
            got = join_crcs(values[at : at + plan.lengths.size], plan.lengths)
            at += plan.lengths.size
            if got != plan.checksum:
                raise CorruptDataError(
                    f"{name(i)}CRC32C mismatch: frame says {plan.checksum:08x}, decoded data "
                    f"gives {got:08x}"
                )
    return outputs


def _raise_for_status(backend: Backend, checks: list[Any], name: Any) -> None:
    """CorruptDataError for the first rANS chunk a kernel reported, naming its
    frame (when several), plane and chunk."""
    for status, picked in checks:
        codes = backend.to_host(status)
        bad = np.flatnonzero(codes)
        if not bad.size:
            continue
        why = STATUS_MESSAGES.get(int(codes[bad[0]]), f"status {int(codes[bad[0]])}")
        at = int(bad[0])
        for _, frame, plan, where in picked:  # the frame and chunk of record `at`
            if at < where.size:
                plane, index = int(plan.rans_plane[where[at]]), int(plan.rans_chunk[where[at]])
                raise CorruptDataError(f"{name(frame)}plane {plane} chunk {index}: {why}")
            at -= where.size


def join_crcs(crcs: np.ndarray, lengths: Any) -> int:
    """The CRC32C of a frame's planes from the CRC of every (plane, chunk),
    joined in index order as the CPU does."""
    return _core.crc32c_join(np.asarray(crcs, np.uint32), np.asarray(lengths, np.uint64))
