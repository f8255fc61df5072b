"""One batch of tensors encoded on the device (see :mod:`nncodecs.gpu.encode`): their
descriptors and buffers, the kernels' launches in order, and the frames assembled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.frame.constants import (
    CHUNK_LOG2,
    MODE_RANS,
    MODE_RAW,
    MODE_ZSTD,
    MODES,
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

__all__ = ["Batch"]

#: plan_chunks' kinds: final below 16; 16 + 1 (try rANS) + 2 (try Huffman).
CODE_RANS_ONLY = 17


def _tasks(rows: list[tuple[int, int, int]]) -> np.ndarray:
    out = np.zeros(len(rows), ENCODE_TASK)
    if rows:
        out["desc"], out["plane"], out["index"] = np.array(rows, np.int64).T
    return out


class Batch:
    """Tensors encoded together: their layout in the batch's buffers, and the
    (tensor, plane, chunk) entries in one index space (tensor after tensor,
    plane-major within each, as each frame's index)."""

    def __init__(
        self,
        backend: Backend,
        datas: list[Any],
        planes: list[int],
        layouts: list[str],
        row_lengths: list[int],
        elements: bool,
        dtypes: list[str],
    ) -> None:
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

    def encode(
        self,
        coder: str,
        precision: int,
        subblock_log2: int,
        checksum: bool,
        zstd_level: int,
        permille: int,
        threads: int,
    ) -> list[Any]:
        backend = self.backend
        offsets, rows_dev, kept = self._row_plan()
        descs = self.descs.copy()
        descs["row_length"] = kept
        dev_descs = backend.to_device(descs.view(np.uint8))
        planes_dev = backend.empty(int(self.at[-1]))
        split = _tasks([(t, 0, c) for t in range(self.count) for c in range(self.chunks[t])])
        backend.launch(
            "split_planes",
            split.size,
            STATS_BLOCK,
            (dev_descs, backend.to_device(split.view(np.uint8)), self.input, rows_dev, planes_dev),
        )
        entries = int(self.base[-1])
        probe = coder == "auto"  # as encode_frame: auto probes inputs over TINY_BYTES
        counts, samples, wants = (
            backend.empty(entries * 1024),
            backend.empty(entries * 1024),
            backend.empty(entries * 4),
        )
        stats = _tasks(
            list(zip(self.owner.tolist(), self.plane.tolist(), self.chunk.tolist(), strict=True))
        )
        backend.launch(
            "chunk_stats",
            entries,
            STATS_BLOCK,
            (
                dev_descs,
                backend.to_device(stats.view(np.uint8)),
                planes_dev,
                np.uint32(probe),
                counts,
                samples,
                wants,
            ),
        )
        counts_h = u32(backend, counts).reshape(entries, 256)

        def piece(e: int) -> Any:
            return planes_dev[int(self.offset[e]) : int(self.offset[e] + self.lengths[e])]

        zstd: list[bytes | None] = [None] * entries
        if probe:
            wanted = u32(backend, wants)
            if wanted.any():
                pieces = [
                    backend.to_host(piece(e)).tobytes() if w else None
                    for e, w in enumerate(wanted.tolist())
                ]
                zstd = _core.zstd_chunks(pieces, zstd_level, threads)
        zlens = np.array([-1 if z is None else len(z) for z in zstd], np.int64)
        lens = self.lengths
        kinds, values = _core.plan_chunks(
            counts_h,
            u32(backend, samples),
            lens.tolist(),
            zlens.tolist(),
            coder,
            precision,
            subblock_log2,
            permille,
        )
        kind = np.frombuffer(kinds, np.uint8)
        modes = np.where(kind < 16, kind, MODE_RAW).astype(np.uint8)  # final below 16
        sizes = np.where(modes == MODE_RAW, lens, np.where(modes == MODE_ZSTD, zlens, 0))
        host_parts: dict[int, bytes] = {int(e): zstd[e] for e in np.flatnonzero(modes == MODE_ZSTD)}
        for e in np.flatnonzero((kind >= 16) & (kind != CODE_RANS_ONLY)).tolist():
            # Huffman to try: the CPU's choice on the chunk's bytes.
            one = _core.frame_encode(
                backend.to_host(piece(e)),
                planes=1,
                coder=coder,
                precision=precision,
                subblock_log2=subblock_log2,
                checksum=False,
                zstd=[zstd[e]],
                min_gain_permille=permille,
                threads=threads,
            )
            _, _, mode, at, length, _ = _core.frame_info(one, int(lens[e]))["chunks"][0]
            modes[e], sizes[e] = MODES[mode], length
            if mode != "raw":
                host_parts[e] = one[at : at + length]
        on_device = np.flatnonzero(kind == CODE_RANS_ONLY)
        rans = encode_rans(
            backend, planes_dev, counts_h, on_device, self.offset, lens, precision, subblock_log2
        )
        if on_device.size:
            settled = np.frombuffer(
                _core.settle_rans(
                    lens[on_device].tolist(),
                    rans["sizes"].tolist(),
                    zlens[on_device].tolist(),
                    coder,
                    permille,
                ),
                np.uint8,
            )
            modes[on_device] = settled
            kept_sizes = [rans["sizes"], lens[on_device]]
            sizes[on_device] = np.select(
                [settled == MODE_RANS, settled == MODE_RAW], kept_sizes, zlens[on_device]
            )
            for e in on_device[settled == MODE_ZSTD].tolist():
                host_parts[e] = zstd[e]
        crcs = self._crcs() if checksum else None
        heads = []
        for t in range(self.count):
            span = slice(int(self.base[t]), int(self.base[t + 1]))
            crc = join_crcs(crcs[span], lens[span]) if crcs is not None else 0
            heads.append(
                _core.frame_head(
                    int(self.at[t + 1] - self.at[t]),
                    self.k[t],
                    coder,
                    precision,
                    subblock_log2,
                    checksum,
                    crc,
                    int(kept[t]),
                    offsets[t],
                    modes[span].tobytes(),
                    values[span.start : span.stop],
                    sizes[span].tolist(),
                    self.dtypes[t],
                )
            )
        return assemble(
            backend,
            heads,
            self.base,
            modes,
            sizes,
            self.offset,
            host_parts,
            on_device,
            rans,
            planes_dev,
            subblock_log2,
        )

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
        backend.launch(
            "row_stats",
            len(tasks),
            ROWS_BLOCK,
            (
                backend.to_device(descs.view(np.uint8)),
                backend.to_device(table.view(np.uint8)),
                self.input,
                rows_dev,
                plain,
                shifted,
            ),
        )
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
            "crc_chunks",
            tasks.size,
            getattr(backend, "crc_block", CRC_BLOCK),
            (
                backend.to_device(desc.view(np.uint8)),
                backend.to_device(tasks.view(np.uint8)),
                dummy,
                self.input,
                dummy,
                backend.to_device(sources.view(np.uint8)),
                dummy,
                self.input,
                crcs,
            ),
        )
        return u32(backend, crcs)
