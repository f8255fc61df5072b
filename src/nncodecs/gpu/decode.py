"""Frames decoded by the GPU kernels (``kernels/decode.cu``), through a backend.

The host plans each frame (:mod:`nncodecs.gpu.plan`), then hands the
kernels tables: a descriptor per frame (``FRAME_DESC``), the rANS chunks
(one thread block each), and the plan's sources of every (plane, chunk).
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

from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.errors import CorruptDataError
from nncodecs.frame import check_frame_element, decode_frame, frame_element
from nncodecs.frame.constants import WHOLE_MAGICS
from nncodecs.frame.info import big_endian_frame
from nncodecs.gpu import plan as planning
from nncodecs.gpu.backend import Backend
from nncodecs.gpu.plan import DecodePlan, device_plan, fused_chunks, join_crcs, plan_decode
from nncodecs.gpu.structs import (
    CRC_BLOCK,
    CRC_TASK,
    FRAME_DESC,
    MERGE_BLOCK,
    MERGE_TASK,
    RANS_BLOCK,
    STATUS_MESSAGES,
)

__all__ = ["decode_frames", "decode_on"]


def _decode_whole(
    backend: Backend,
    frame: np.ndarray | None,
    device_frame: Any,
    max_decoded: int,
    layout: str,
    elements: bool,
    planes: int | None,
) -> np.ndarray:
    """A whole-input zstd frame decoded on the CPU (no GPU kernel for zstd)."""
    if elements and planes is None:
        raise ValueError("decode_frames: a whole-input zstd frame of elements needs planes=")
    host = frame if frame is not None else backend.to_host(device_frame)
    out = decode_frame(
        host, max_decoded=max_decoded, elements=elements, layout=layout, planes=planes
    )
    return np.asarray(out).reshape(-1).view(np.uint8)


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
        backend,
        [frame],
        max_decoded=[max_decoded],
        layouts=[layout],
        elements=elements,
        device_frames=[device_frame],
    )[0]


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
    as_stored: bool = True,
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
    ``as_stored``: elements of a big-endian frame (version 4) come back big-endian,
    as the CPU decoder gives them; ``False`` keeps them little-endian (native), for
    typed device arrays, which have no big-endian types.
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
        dev = device_frames[i]
        prefix = (
            backend.to_host(dev[: min(int(dev.size), planning.PREFIX_BYTES)])
            if on_device
            else frames[i]
        )
        if prefix[:4].tobytes() in WHOLE_MAGICS:
            if dtypes:
                host = frames[i] if frames[i] is not None else backend.to_host(device_frames[i])
                check_frame_element(frame_element(host), dtypes[i])
            k = planes[i] if planes else None
            hosted[i] = _decode_whole(
                backend, frames[i], device_frames[i], max_decoded[i], layouts[i], elements, k
            )
            if elements and not as_stored and k and k > 1:
                host = frames[i] if frames[i] is not None else backend.to_host(device_frames[i])
                if big_endian_frame(host):  # (the CPU gave them back big-endian)
                    hosted[i] = hosted[i].reshape(-1, k)[:, ::-1].copy().reshape(-1)
            plans.append(None)
            continue
        plan = (
            device_plan(backend, device_frames[i], max_decoded[i], prefix)
            if on_device
            else plan_decode(frames[i], max_decoded[i])
        )
        assert plan is not None
        if plan.big_endian and not elements:
            raise ValueError(
                f"decode_frames: frame {i} holds big-endian {plan.element} elements: it decodes "
                "to elements only (the weights codec), not to planes"
            )
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
            cpu = np.asarray(decode_frame(host, max_decoded=max_decoded[i], any_order=True))
            cpu = cpu.view(np.uint8)
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
        descs[d] = (
            frame_at[d],
            out_at[i],
            planes_at,
            external_at.get(i, 0),
            rows_at,
            plan.row_length,
            plan.symbols,
            k,
            chunks,
            codes[i],
            sources_at,
            plan.precision,
            plan.subblock_log2,
            0 if elements else 1,
            0,
        )
        recs = plan.rans.copy()
        recs["desc"] = d
        records.append((recs, in_fused, i, plan))
        tasks = np.zeros(chunks - int(fused.sum()), MERGE_TASK)
        tasks["desc"], tasks["chunk"] = d, np.flatnonzero(~fused.astype(bool))
        merge.append(tasks)
        if plan.checksum is not None:
            t = np.zeros(k * chunks, CRC_TASK)
            t["desc"], t["plane"], t["chunk"] = (
                d,
                np.repeat(np.arange(k), chunks),
                np.tile(np.arange(chunks), k),
            )
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
    dev_external = (
        backend.to_device(np.concatenate(external_parts)) if external_parts else (backend.empty(1))
    )

    # Every launch first; the statuses are read once (one wait for the device).
    checks = []
    for fused_kind, kernel in ((False, "rans_decode_chunks"), (True, "rans_decode_merge")):
        picked = [
            (recs[f == fused_kind], i, plan, np.flatnonzero(f == fused_kind))
            for recs, f, i, plan in records
        ]
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
            "merge_chunks",
            merge_table.size,
            MERGE_BLOCK,
            (
                dev_descs,
                backend.to_device(merge_table.view(np.uint8)),
                dev_frames,
                dev_planes,
                dev_external,
                dev_sources,
                dev_rows,
                out,
            ),
        )
    if crc:
        crc_table = np.concatenate(crc)
        crcs = backend.empty(4 * crc_table.size)
        backend.launch(
            "crc_chunks",
            crc_table.size,
            getattr(backend, "crc_block", CRC_BLOCK),
            (
                dev_descs,
                backend.to_device(crc_table.view(np.uint8)),
                dev_frames,
                dev_planes,
                dev_external,
                dev_sources,
                dev_rows,
                out,
                crcs,
            ),
        )
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
    for i in live:  # (version 4: elements given back as they came in, big-endian)
        if plans[i].big_endian and as_stored:
            rows = outputs[i].reshape(-1, plans[i].planes)
            rows[...] = rows[:, ::-1].copy()
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
