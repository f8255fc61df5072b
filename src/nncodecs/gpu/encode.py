"""Frames encoded by the GPU kernels (``kernels/encode.cu``), through a backend.

The bytes equal the CPU encoder's for the same input and settings. The
kernels do the data-parallel work: the row plan's statistics, the bit
reorder and plane split, each chunk's histogram and sample (and auto's zstd
probe), rANS coding, the CRC and the frame's assembly. Every decision is
taken on the host by the CPU encoder's own functions (``_core.plan_chunks``,
``_core.settle_rans``, ``_core.row_shift_pays``, ``_core.frame_head``), from
statistics of a few KiB a chunk. What has no kernel runs on the CPU with the
CPU's code and joins the frame as bytes: chunks that try Huffman (coder
``huffman``, or ``auto`` where Huffman is estimated smaller, and chunks under
2^15 symbols, which try every coder), and zstd candidates (``auto``).

Inputs of at most ``host_below`` bytes (default: ``WHOLE_ZSTD_LIMIT``,
256 KiB, the size up to which ``auto`` may write a whole-input zstd frame)
are encoded on the CPU: copies to and from the device cost less there than
the launches.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.codecs._frame import (
    CODERS,
    DEFAULT_MIN_GAIN,
    WHOLE_ZSTD_LIMIT,
    _compress_pieces,
    check_frame_params,
    check_min_gain,
    encode_frame,
)
from nncodecs.codecs._shell import get_threads
from nncodecs.gpu.decode import (
    CHUNK_LOG2,
    CRC_BLOCK,
    CRC_TASK,
    FRAME_DESC,
    FROM_PLANES,
    MODES,
    PLANE_SOURCE,
    RANS_BLOCK,
    Backend,
    join_crcs,
)
from nncodecs.gpu.decode import MODE_CONSTANT as CONSTANT
from nncodecs.gpu.decode import MODE_RANS as RANS
from nncodecs.gpu.decode import MODE_RAW as RAW
from nncodecs.gpu.decode import MODE_ZSTD as ZSTD

__all__ = ["encode_frames", "encode_on"]

#: nnc::gpu::EncodeChunk and FramePiece, byte for byte.
ENCODE_CHUNK = np.dtype(
    [
        ("input", "<u8"),
        ("words", "<u8"),
        ("symbols", "<u4"),
        ("first_sub", "<u4"),
        ("freqs", "<u4"),
        ("pad", "<u4"),
    ]
)
FRAME_PIECE = np.dtype(
    [
        ("dst", "<u8"),
        ("src", "<u8"),
        ("words", "<u8"),
        ("length", "<u4"),
        ("kind", "<u4"),
        ("first_sub", "<u4"),
        ("subblocks", "<u4"),
    ]
)
PIECE_FROM_PLANES, PIECE_FROM_HOST, PIECE_RANS = 0, 1, 2
#: plan_chunks' kinds: final below 16; 16 + 1 (try rANS) + 2 (try Huffman).
CODE_RANS_ONLY = 17
STATS_BLOCK = 256
ROWS_BLOCK = 256
#: nnc::gpu::EncodeDesc and EncodeTask, byte for byte.
ENCODE_DESC = np.dtype(
    [
        ("input", "<u8"),
        ("planes", "<u8"),
        ("rows", "<u8"),
        ("row_length", "<u8"),
        ("n", "<u8"),
        ("k", "<u4"),
        ("layout", "<u4"),
        ("elements", "<u4"),
        ("shift", "<u4"),
        ("bits", "<u4"),
        ("pad", "<u4"),
    ]
)
ENCODE_TASK = np.dtype([("desc", "<u4"), ("plane", "<u4"), ("index", "<u4"), ("pad", "<u4")])


def _u32(backend: Backend, arr: Any) -> np.ndarray:
    return backend.to_host(arr).view("<u4")


def _tasks(rows: list[tuple[int, int, int]]) -> np.ndarray:
    out = np.zeros(len(rows), ENCODE_TASK)
    if rows:
        out["desc"], out["plane"], out["index"] = np.array(rows, np.int64).T
    return out


def encode_on(backend: Backend, data: Any, *, planes: int, coder: str, **settings: Any) -> Any:
    """Encode a flat uint8 device array into a frame on the device (a uint8
    device array), byte for byte what :func:`nncodecs.codecs._frame.encode_frame`
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
    precision: int = 11,
    subblock_log2: int = 16,
    checksum: bool = True,
    zstd_level: int = 3,
    min_gain: float = DEFAULT_MIN_GAIN,
    elements: bool = False,
    threads: int | None = None,
    host_below: int = WHOLE_ZSTD_LIMIT,
) -> list[Any]:
    """Encode flat uint8 device arrays (tensors) into frames on the device,
    many through one launch of each kernel: a frame each, byte for byte what
    :func:`nncodecs.codecs._frame.encode_frame` writes for the same bytes and
    settings. ``planes``, ``layouts``, ``row_lengths`` and ``dtypes`` (the
    element type each frame records; default ``"bytes"``) are per tensor. The
    tensors are copied into one buffer first when there are several (small
    ones: a copy costs less than launches); frames are slices of one buffer.
    """
    if coder not in CODERS:
        raise ValueError(f"coder must be one of {', '.join(CODERS)}, got {coder!r}")
    count = len(datas)
    layouts = layouts or ["none"] * count
    row_lengths = row_lengths or [0] * count
    dtypes = dtypes or ["bytes"] * count
    if not (len(planes) == len(layouts) == len(row_lengths) == len(dtypes) == count):
        raise ValueError("encode_frames: one planes, layout, row length and dtype a tensor")
    check_frame_params(1, precision, subblock_log2, zstd_level)
    permille = round(check_min_gain(min_gain) * 1000)
    threads = threads or get_threads()
    common = {"coder": coder, "precision": precision, "subblock_log2": subblock_log2,
              "checksum": checksum, "elements": elements}  # fmt: skip
    sizes = [int(d.size) for d in datas]
    for i in range(count):
        check_frame_params(planes[i], precision, subblock_log2, zstd_level)
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
        counts_h = _u32(backend, counts).reshape(entries, 256)

        def piece(e: int) -> Any:
            return planes_dev[int(self.offset[e]) : int(self.offset[e] + self.lengths[e])]

        zstd: list[bytes | None] = [None] * entries
        if probe:
            wanted = _u32(backend, wants)
            if wanted.any():
                pieces = [backend.to_host(piece(e)).tobytes() if w else None
                          for e, w in enumerate(wanted.tolist())]  # fmt: skip
                zstd = _compress_pieces(pieces, zstd_level, threads)
        zlens = np.array([-1 if z is None else len(z) for z in zstd], np.int64)
        lens = self.lengths
        kinds, values = _core.plan_chunks(
            counts_h, _u32(backend, samples), lens.tolist(), zlens.tolist(), coder, precision,
            subblock_log2, permille,
        )  # fmt: skip
        kind = np.frombuffer(kinds, np.uint8)
        modes = np.where(kind < 16, kind, RAW).astype(np.uint8)  # final below 16
        sizes = np.where(modes == RAW, lens, np.where(modes == ZSTD, zlens, 0))
        host_parts: dict[int, bytes] = {int(e): zstd[e] for e in np.flatnonzero(modes == ZSTD)}
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
        rans = _encode_rans(backend, planes_dev, counts_h, on_device, self.offset, lens,
                            precision, subblock_log2)  # fmt: skip
        if on_device.size:
            settled = np.frombuffer(
                _core.settle_rans(lens[on_device].tolist(), rans["sizes"].tolist(),
                                  zlens[on_device].tolist(), coder, permille),
                np.uint8,
            )  # fmt: skip
            modes[on_device] = settled
            kept_sizes = [rans["sizes"], lens[on_device]]
            sizes[on_device] = np.select([settled == RANS, settled == RAW], kept_sizes,
                                         zlens[on_device])  # fmt: skip
            for e in on_device[settled == ZSTD].tolist():
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
        return _assemble(backend, heads, self.base, modes, sizes, self.offset, host_parts,
                         on_device, rans, planes_dev, subblock_log2)  # fmt: skip

    def _row_plan(self) -> tuple[list[bytes], Any, np.ndarray]:
        """The version 2 row plan (frame.cpp's plan_row_shift) of every tensor
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
        plain_h = _u32(backend, plain).reshape(-1, 256)
        shifted_h = _u32(backend, shifted).reshape(-1, 256)
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
        return _u32(backend, crcs)


def _encode_rans(
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
        "rans_encode_chunks", chosen.size, RANS_BLOCK,
        (planes_dev, backend.to_device(records.view(np.uint8)), backend.to_device(freqs),
         np.uint32(precision), np.uint32(subblock_log2), words, states, nwords),
    )  # fmt: skip
    per_chunk = np.add.reduceat(_u32(backend, nwords).astype(np.int64), first_sub[:-1])
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


def _assemble(
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
    stored = np.flatnonzero(modes != CONSTANT)
    payload = np.where(modes != CONSTANT, sizes, 0)
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
    coded = modes[on_device] == RANS
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
            np.frombuffer(h, np.uint8))  # fmt: skip
    if pieces.size:
        dummy = backend.empty(1)
        backend.launch(
            "assemble_frame", pieces.size, STATS_BLOCK,
            (backend.to_device(pieces.view(np.uint8)), planes_dev,
             backend.to_device(np.frombuffer(bytes(host) or b"\0", np.uint8)),
             rans.get("tables", dummy), rans.get("words", dummy), rans.get("states", dummy),
             rans.get("nwords", dummy), np.uint32(subblock_log2), out),
        )  # fmt: skip
    return [out[int(frame_at[t]) : int(frame_at[t + 1])] for t in range(len(heads))]
