"""Frames encoded by the GPU kernels (``kernels/encode.cu``), through a backend.

The bytes equal the CPU encoder's for the same input and settings. The
kernels do the data-parallel work: the row plan's statistics, the bit
reorder and plane split, each chunk's histogram and sample (and auto's zstd
probe), rANS coding, the CRC and the frame's assembly
(:mod:`nncodecs.gpu.payloads`). Every decision is taken on the host by the
CPU encoder's own functions (``_core.plan_chunks``, ``_core.settle_rans``,
``_core.row_shift_pays``, ``_core.frame_head``), from statistics of a few
KiB a chunk. What has no kernel runs on the CPU with the CPU's code and
joins the frame as bytes: chunks that try Huffman (coder ``huffman``, or
``auto`` where Huffman is estimated smaller, and chunks under 2^15 symbols,
which try every coder), and zstd candidates (``auto``).

Inputs of at most ``host_below`` bytes (default: ``WHOLE_ZSTD_LIMIT``, the
size up to which ``auto`` may write a whole-input zstd frame) are encoded
on the CPU: copies to and from the device cost less there than the launches.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.frame import encode_frame, get_threads
from nncodecs.frame.constants import (
    CHUNK_LOG2,
    MODE_RANS,
    MODE_RAW,
    MODE_ZSTD,
    MODES,
    WHOLE_ZSTD_LIMIT,
)
from nncodecs.frame.params import (
    CHECKSUM,
    MIN_GAIN,
    PRECISION,
    SUBBLOCK_LOG2,
    ZSTD_LEVEL,
    check_settings,
)
from nncodecs.gpu.backend import Backend
from nncodecs.gpu.payloads import assemble, encode_rans, u32
from nncodecs.gpu.plan import join_crcs
from nncodecs.gpu.structs import (
    CRC_BLOCK,
    CRC_TASK,
    ENCODE_DESC,
    ENCODE_TASK,
    FRAME_DESC,
    FROM_PLANES,
    PLANE_SOURCE,
    ROWS_BLOCK,
    STATS_BLOCK,
)

__all__ = ["encode_frames", "encode_on"]

#: plan_chunks' kinds: final below 16; 16 + 1 (try rANS) + 2 (try Huffman).
CODE_RANS_ONLY = 17


def _tasks(rows: list[tuple[int, int, int]]) -> np.ndarray:
    out = np.zeros(len(rows), ENCODE_TASK)
    if rows:
        out["desc"], out["plane"], out["index"] = np.array(rows, np.int64).T
    return out


def encode_on(backend: Backend, data: Any, *, planes: int, coder: str, **settings: Any) -> Any:
    """Encode a flat uint8 device array into a frame on the device (a uint8
    device array), byte for byte what :func:`nncodecs.frame.encode_frame`
    writes for the same bytes and settings. See :func:`encode_frames`."""
    layout = settings.pop("layout", "none")
    row_length = settings.pop("row_length", 0)
    dtype = settings.pop("dtype", "bytes")
    return encode_frames(
        backend, [data], planes=[planes], layouts=[layout], row_lengths=[row_length],
        dtypes=[dtype], coder=coder, **settings,
    )[0]  # fmt: skip


def encode_frames(
    backend: Backend,
    datas: list[Any],
    *,
    planes: list[int],
    coder: str,
    layouts: list[str] | None = None,
    row_lengths: list[int] | None = None,
    dtypes: list[str] | None = None,
    precision: int = PRECISION.default,
    subblock_log2: int = SUBBLOCK_LOG2.default,
    checksum: bool = CHECKSUM.default,
    zstd_level: int = ZSTD_LEVEL.default,
    min_gain: float = MIN_GAIN.default,
    elements: bool = False,
    threads: int | None = None,
    host_below: int = WHOLE_ZSTD_LIMIT,
) -> list[Any]:
    """Encode flat uint8 device arrays (tensors) into frames on the device,
    many through one launch of each kernel: a frame each, byte for byte what
    :func:`nncodecs.frame.encode_frame` writes for the same bytes and
    settings. ``planes``, ``layouts``, ``row_lengths`` and ``dtypes`` (the
    element type each frame records; default ``"bytes"``) are per tensor. The
    tensors are copied into one buffer first when there are several (small
    ones: a copy costs less than launches); frames are slices of one buffer.
    """
    check_settings(coder=coder)
    count = len(datas)
    layouts = layouts or ["none"] * count
    row_lengths = row_lengths or [0] * count
    dtypes = dtypes or ["bytes"] * count
    if not (len(planes) == len(layouts) == len(row_lengths) == len(dtypes) == count):
        raise ValueError("encode_frames: one planes, layout, row length and dtype a tensor")
    checked = check_settings(precision=precision, subblock_log2=subblock_log2,
                             zstd_level=zstd_level, min_gain=min_gain)  # fmt: skip
    permille = round(checked["min_gain"] * 1000)
    threads = threads or get_threads()
    common = {"coder": coder, "precision": precision, "subblock_log2": subblock_log2,
              "checksum": checksum, "elements": elements}  # fmt: skip
    sizes = [int(d.size) for d in datas]
    for i in range(count):
        check_settings(planes=planes[i])
        if sizes[i] % planes[i]:
            raise ValueError(f"{sizes[i]} bytes is not {planes[i]} equal planes")
        # The CPU encoder checks the settings it shares (layout against planes).
        _core.frame_encode(np.zeros(0, np.uint8), planes=planes[i], layout=layouts[i],
                           element=dtypes[i], **common)  # fmt: skip
    limit = max(host_below, WHOLE_ZSTD_LIMIT if coder == "auto" else 0)
    frames: list[Any] = [None] * count
    for i in range(count):
        if sizes[i] <= limit or sizes[i] == 0:
            frame = encode_frame(
                backend.to_host(datas[i]), planes=planes[i], layout=layouts[i],
                zstd_level=zstd_level, min_gain=min_gain, threads=threads,
                row_length=row_lengths[i] if elements else 0, dtype=dtypes[i], **common,
            )  # fmt: skip
            frames[i] = backend.to_device(np.frombuffer(frame, np.uint8))
    live = [i for i in range(count) if frames[i] is None]
    if live:
        batch = _Batch(backend, [datas[i] for i in live], [planes[i] for i in live],
                       [layouts[i] for i in live],
                       [row_lengths[i] if elements else 0 for i in live], elements,
                       [dtypes[i] for i in live])  # fmt: skip
        made = batch.encode(coder, precision, subblock_log2, checksum, zstd_level, permille,
                            threads)  # fmt: skip
        for i, frame in zip(live, made, strict=True):
            frames[i] = frame
    return frames


class _Batch:
    """Tensors encoded together: their layout in the batch's buffers, and the
    (tensor, plane, chunk) entries in one index space (tensor after tensor,
    plane-major within each, as each frame's index)."""

    def __init__(
        self, backend: Backend, datas: list[Any], planes: list[int], layouts: list[str],
        row_lengths: list[int], elements: bool, dtypes: list[str],
    ) -> None:  # fmt: skip
        self.backend = backend
        self.dtypes = dtypes
        self.count = len(datas)
        self.k = planes
        self.layouts = layouts
        self.row_lengths = row_lengths
        self.elements = elements
        self.n = [int(d.size) // k for d, k in zip(datas, planes, strict=True)]
        self.chunks = [(n + (1 << CHUNK_LOG2) - 1) >> CHUNK_LOG2 for n in self.n]
        self.input = datas[0] if len(datas) == 1 else backend.concat(datas)
        self.at = np.concatenate([[0], np.cumsum([int(d.size) for d in datas])]).astype(np.int64)
        # entries: tensor t's (plane j, chunk c) is base[t] + j * chunks[t] + c
        entries = [k * c for k, c in zip(planes, self.chunks, strict=True)]
        self.base = np.concatenate([[0], np.cumsum(entries)]).astype(np.int64)
        self.owner = np.repeat(np.arange(self.count), entries)
        local = np.arange(int(self.base[-1])) - self.base[self.owner]
        chunks = np.asarray(self.chunks, np.int64)[self.owner]
        n = np.asarray(self.n, np.int64)[self.owner]
        self.plane, self.chunk = local // np.maximum(chunks, 1), local % np.maximum(chunks, 1)
        first = self.chunk << CHUNK_LOG2
        self.lengths = np.minimum(1 << CHUNK_LOG2, n - first)
        self.offset = self.at[self.owner] + self.plane * n + first  # in the planes buffer
        self.descs = np.zeros(self.count, ENCODE_DESC)
        self.descs["input"] = self.at[:-1]
        self.descs["planes"] = self.at[:-1]
        self.descs["n"], self.descs["k"] = self.n, planes
        self.descs["layout"] = [_core.layout_code(x) for x in layouts]
        self.descs["elements"] = int(elements)

    def encode(self, coder: str, precision: int, subblock_log2: int, checksum: bool,
               zstd_level: int, permille: int, threads: int) -> list[Any]:  # fmt: skip
        backend = self.backend
        offsets, rows_dev, kept = self._row_plan()
        descs = self.descs.copy()
        descs["row_length"] = kept
        dev_descs = backend.to_device(descs.view(np.uint8))
        planes_dev = backend.empty(int(self.at[-1]))
        split = _tasks([(t, 0, c) for t in range(self.count) for c in range(self.chunks[t])])
        backend.launch("split_planes", split.size, STATS_BLOCK,
                       (dev_descs, backend.to_device(split.view(np.uint8)), self.input, rows_dev,
                        planes_dev))  # fmt: skip
        entries = int(self.base[-1])
        probe = coder == "auto"  # as encode_frame: auto probes inputs over TINY_BYTES
        counts, samples, wants = (backend.empty(entries * 1024), backend.empty(entries * 1024),
                                  backend.empty(entries * 4))  # fmt: skip
        stats = _tasks(list(zip(self.owner.tolist(), self.plane.tolist(), self.chunk.tolist(),
                                strict=True)))  # fmt: skip
        backend.launch("chunk_stats", entries, STATS_BLOCK,
                       (dev_descs, backend.to_device(stats.view(np.uint8)), planes_dev,
                        np.uint32(probe), counts, samples, wants))  # fmt: skip
        counts_h = u32(backend, counts).reshape(entries, 256)

        def piece(e: int) -> Any:
            return planes_dev[int(self.offset[e]) : int(self.offset[e] + self.lengths[e])]

        zstd: list[bytes | None] = [None] * entries
        if probe:
            wanted = u32(backend, wants)
            if wanted.any():
                pieces = [backend.to_host(piece(e)).tobytes() if w else None
                          for e, w in enumerate(wanted.tolist())]  # fmt: skip
                zstd = _core.zstd_chunks(pieces, zstd_level, threads)
        zlens = np.array([-1 if z is None else len(z) for z in zstd], np.int64)
        lens = self.lengths
        kinds, values = _core.plan_chunks(
            counts_h, u32(backend, samples), lens.tolist(), zlens.tolist(), coder, precision,
            subblock_log2, permille,
        )  # fmt: skip
        kind = np.frombuffer(kinds, np.uint8)
        modes = np.where(kind < 16, kind, MODE_RAW).astype(np.uint8)  # final below 16
        sizes = np.where(modes == MODE_RAW, lens, np.where(modes == MODE_ZSTD, zlens, 0))
        host_parts: dict[int, bytes] = {int(e): zstd[e] for e in np.flatnonzero(modes == MODE_ZSTD)}
        for e in np.flatnonzero((kind >= 16) & (kind != CODE_RANS_ONLY)).tolist():
            # Huffman to try: the CPU's choice on the chunk's bytes.
            one = _core.frame_encode(
                backend.to_host(piece(e)), planes=1, coder=coder, precision=precision,
                subblock_log2=subblock_log2, checksum=False, zstd=[zstd[e]],
                min_gain_permille=permille, threads=threads,
            )  # fmt: skip
            _, _, mode, at, length, _ = _core.frame_info(one, int(lens[e]))["chunks"][0]
            modes[e], sizes[e] = MODES[mode], length
            if mode != "raw":
                host_parts[e] = one[at : at + length]
        on_device = np.flatnonzero(kind == CODE_RANS_ONLY)
        rans = encode_rans(backend, planes_dev, counts_h, on_device, self.offset, lens,
                            precision, subblock_log2)  # fmt: skip
        if on_device.size:
            settled = np.frombuffer(
                _core.settle_rans(lens[on_device].tolist(), rans["sizes"].tolist(),
                                  zlens[on_device].tolist(), coder, permille),
                np.uint8,
            )  # fmt: skip
            modes[on_device] = settled
            kept_sizes = [rans["sizes"], lens[on_device]]
            sizes[on_device] = np.select([settled == MODE_RANS, settled == MODE_RAW], kept_sizes,
                                         zlens[on_device])  # fmt: skip
            for e in on_device[settled == MODE_ZSTD].tolist():
                host_parts[e] = zstd[e]
        crcs = self._crcs() if checksum else None
        heads = []
        for t in range(self.count):
            span = slice(int(self.base[t]), int(self.base[t + 1]))
            crc = join_crcs(crcs[span], lens[span]) if crcs is not None else 0
            heads.append(_core.frame_head(
                int(self.at[t + 1] - self.at[t]), self.k[t], coder, precision, subblock_log2,
                checksum, crc, int(kept[t]), offsets[t], modes[span].tobytes(),
                values[span.start : span.stop], sizes[span].tolist(), self.dtypes[t],
            ))  # fmt: skip
        return assemble(backend, heads, self.base, modes, sizes, self.offset, host_parts,
                         on_device, rans, planes_dev, subblock_log2)  # fmt: skip

    def _row_plan(self) -> tuple[list[bytes], Any, np.ndarray]:
        """The version 2 row plan (row_shift.cpp's plan_row_shift) of every tensor
        that may have one: (its offsets, on the host; the rows buffer; the
        row length each tensor keeps, 0 where the shift does not pay)."""
        backend = self.backend
        kept = np.zeros(self.count, np.int64)
        offsets = [b""] * self.count
        tried, tasks, rows_at = [], [], [0]
        descs = self.descs.copy()
        for t in range(self.count):
            length, n = self.row_lengths[t], self.n[t]
            field = _core.row_shift_field(self.layouts[t], self.elements, n, length)
            if field is None:  # the CPU encoder's own rule
                continue
            shift, bits = field
            rows = -(-n // length)
            groups = -(-rows // max(1, (1 << CHUNK_LOG2) // length))
            descs["rows"][t], descs["row_length"][t] = rows_at[-1], length
            descs["shift"][t], descs["bits"][t] = shift, bits
            tried.append((t, len(tasks), groups, rows_at[-1], rows))
            tasks.extend((t, 0, g) for g in range(groups))
            rows_at.append(rows_at[-1] + rows)
        if not tried:
            return offsets, backend.empty(1), kept
        rows_dev = backend.empty(rows_at[-1])
        plain, shifted = backend.empty(len(tasks) * 1024), backend.empty(len(tasks) * 1024)
        table = _tasks(tasks)
        backend.launch("row_stats", len(tasks), ROWS_BLOCK,
                       (backend.to_device(descs.view(np.uint8)),
                        backend.to_device(table.view(np.uint8)), self.input, rows_dev, plain,
                        shifted))  # fmt: skip
        plain_h = u32(backend, plain).reshape(-1, 256)
        shifted_h = u32(backend, shifted).reshape(-1, 256)
        rows_h = backend.to_host(rows_dev)
        for t, first, groups, at, rows in tried:
            part = slice(first, first + groups)
            length = self.row_lengths[t]
            if _core.row_shift_pays(plain_h[part], shifted_h[part], groups, self.n[t], length):
                kept[t] = length
                offsets[t] = rows_h[at : at + rows].tobytes()
        self.descs["rows"] = descs["rows"]
        return offsets, rows_dev, kept

    def _crcs(self) -> np.ndarray:
        """The CRC32C of every entry's plane bytes before any row shift, from
        the input: byte j of each reordered element, or the planes themselves."""
        backend = self.backend
        desc = np.zeros(self.count, FRAME_DESC)
        desc["out"] = desc["planes"] = self.at[:-1]
        desc["n"], desc["k"], desc["chunks"] = self.n, self.k, self.chunks
        desc["layout"] = self.descs["layout"]
        desc["sources"] = self.base[:-1]
        sources = np.zeros(int(self.base[-1]), PLANE_SOURCE)
        sources["kind"] = FROM_PLANES
        sources["offset"] = self.offset - self.at[self.owner]  # from the tensor's own bytes
        tasks = np.zeros(int(self.base[-1]), CRC_TASK)
        tasks["desc"], tasks["plane"], tasks["chunk"] = self.owner, self.plane, self.chunk
        tasks["from_elements"] = int(self.elements)
        crcs = backend.empty(4 * tasks.size)
        dummy = backend.empty(1)
        backend.launch(
            "crc_chunks", tasks.size, getattr(backend, "crc_block", CRC_BLOCK),
            (backend.to_device(desc.view(np.uint8)), backend.to_device(tasks.view(np.uint8)),
             dummy, self.input, dummy, backend.to_device(sources.view(np.uint8)), dummy,
             self.input, crcs),
        )  # fmt: skip
        return u32(backend, crcs)
