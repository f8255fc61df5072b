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
    MERGE_BLOCK,
    PLANE_SOURCE,
    RANS_BLOCK,
    Backend,
    join_crcs,
)

__all__ = ["encode_on"]

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
RAW, CONSTANT, RANS, HUFFMAN, ZSTD = 0, 1, 2, 3, 4
MODES = {"raw": RAW, "constant": CONSTANT, "rans": RANS, "huffman": HUFFMAN, "zstd": ZSTD}
#: plan_chunks' kinds: final below 16; 16 + 1 (try rANS) + 2 (try Huffman).
CODE_RANS_ONLY = 17
STATS_BLOCK = 256
#: The split strides over what this many blocks do not cover.
GRID_MAX = 65535
ROWS_BLOCK = 256
MIN_ROW_LENGTH, ROW_SHIFT_FROM = 128, 1 << 16


def _grid(backend: Backend, n: int) -> int:
    return max(1, min(getattr(backend, "max_grid", GRID_MAX), -(-n // MERGE_BLOCK)))


def _u32(backend: Backend, arr: Any) -> np.ndarray:
    return backend.to_host(arr).view("<u4")


def encode_on(
    backend: Backend,
    data: Any,
    *,
    planes: int,
    coder: str,
    precision: int = 11,
    subblock_log2: int = 16,
    checksum: bool = True,
    zstd_level: int = 3,
    min_gain: float = DEFAULT_MIN_GAIN,
    elements: bool = False,
    layout: str = "none",
    row_length: int = 0,
    threads: int | None = None,
    host_below: int = WHOLE_ZSTD_LIMIT,
) -> Any:
    """Encode a flat uint8 device array into a frame on the device (a uint8
    device array), byte for byte what :func:`nncodecs.codecs._frame.encode_frame`
    writes for the same bytes and settings."""
    if coder not in CODERS:
        raise ValueError(f"coder must be one of {', '.join(CODERS)}, got {coder!r}")
    check_frame_params(planes, precision, subblock_log2, zstd_level)
    permille = round(check_min_gain(min_gain) * 1000)
    k = int(planes)
    nbytes = int(data.size)
    if nbytes % k:
        raise ValueError(f"{nbytes} bytes is not {k} equal planes")
    settings = {
        "planes": k,
        "coder": coder,
        "precision": precision,
        "subblock_log2": subblock_log2,
        "checksum": checksum,
        "layout": layout,
        "elements": elements,
    }
    # The CPU encoder checks the settings it shares (layout against planes).
    _core.frame_encode(np.zeros(0, np.uint8), **settings)
    threads = threads or get_threads()
    row_length = row_length if elements else 0
    if nbytes <= max(host_below, WHOLE_ZSTD_LIMIT if coder == "auto" else 0):
        frame = encode_frame(
            backend.to_host(data), zstd_level=zstd_level, min_gain=min_gain, threads=threads,
            row_length=row_length, **settings,
        )  # fmt: skip
        return backend.to_device(np.frombuffer(frame, np.uint8))

    n = nbytes // k
    chunks = (n + (1 << CHUNK_LOG2) - 1) >> CHUNK_LOG2
    count = k * chunks
    lengths = [min(1 << CHUNK_LOG2, n - (c << CHUNK_LOG2)) for c in range(chunks)] * k

    def at(i: int) -> int:  # offset of (plane, chunk) i in the planes buffer
        return (i // chunks) * n + ((i % chunks) << CHUNK_LOG2)

    code = np.uint32(_core.layout_code(layout))
    offsets, offsets_dev, rows_len = b"", backend.empty(1), 0
    if row_length:
        offsets_dev, rows_len = _row_plan(backend, data, n, k, layout, int(row_length))
        if rows_len:
            offsets = backend.to_host(offsets_dev).tobytes()
    if elements and (k > 1 or layout != "none"):
        planes_dev = backend.empty(nbytes)
        backend.launch(
            "split_planes", _grid(backend, n), MERGE_BLOCK,
            (data, np.uint64(n), np.uint32(k), code, offsets_dev, np.uint64(rows_len), planes_dev),
        )  # fmt: skip
    else:
        planes_dev = data

    probe = coder == "auto"  # as encode_frame: auto probes inputs over TINY_BYTES
    counts, samples, wants = (backend.empty(count * 1024), backend.empty(count * 1024),
                              backend.empty(count * 4))  # fmt: skip
    backend.launch(
        "chunk_stats", count, STATS_BLOCK,
        (planes_dev, np.uint64(n), np.uint32(chunks), np.uint32(probe), counts, samples, wants),
    )  # fmt: skip
    counts_h = _u32(backend, counts).reshape(count, 256)
    zstd: list[bytes | None] = [None] * count
    if probe:
        wanted = _u32(backend, wants)
        if wanted.any():
            pieces = [
                backend.to_host(planes_dev[at(i) : at(i) + lengths[i]]).tobytes() if w else None
                for i, w in enumerate(wanted.tolist())
            ]
            zstd = _compress_pieces(pieces, zstd_level, threads)
    zstd_lens = [-1 if z is None else len(z) for z in zstd]
    kinds, values = _core.plan_chunks(
        counts_h, _u32(backend, samples), lengths, zstd_lens, coder, precision, subblock_log2,
        permille,
    )  # fmt: skip

    kind = np.frombuffer(kinds, np.uint8)
    lens = np.asarray(lengths, np.int64)
    zlens = np.asarray(zstd_lens, np.int64)
    modes = np.where(kind < 16, kind, RAW).astype(np.uint8)  # final below 16
    sizes = np.where(modes == RAW, lens, np.where(modes == ZSTD, zlens, 0))
    host_parts: dict[int, bytes] = {int(i): zstd[i] for i in np.flatnonzero(modes == ZSTD)}
    for i in np.flatnonzero((kind >= 16) & (kind != CODE_RANS_ONLY)).tolist():
        # Huffman to try: the CPU's choice on the chunk's bytes.
        piece = backend.to_host(planes_dev[at(i) : at(i) + lengths[i]])
        one = _core.frame_encode(
            piece, planes=1, coder=coder, precision=precision, subblock_log2=subblock_log2,
            checksum=False, zstd=[zstd[i]], min_gain_permille=permille, threads=threads,
        )  # fmt: skip
        _, _, mode, offset, length, _ = _core.frame_info(one, lengths[i])["chunks"][0]
        modes[i], sizes[i] = MODES[mode], length
        if mode != "raw":
            host_parts[i] = one[offset : offset + length]
    on_device = np.flatnonzero(kind == CODE_RANS_ONLY)
    rans = _encode_rans(backend, planes_dev, counts_h, on_device, at, lens, precision,
                        subblock_log2)  # fmt: skip
    if on_device.size:
        settled = np.frombuffer(
            _core.settle_rans(lens[on_device].tolist(), rans["sizes"].tolist(),
                              zlens[on_device].tolist(), coder, permille),
            np.uint8,
        )  # fmt: skip
        modes[on_device] = settled
        kept = [rans["sizes"], lens[on_device]]
        sizes[on_device] = np.select([settled == RANS, settled == RAW], kept, zlens[on_device])
        for i in on_device[settled == ZSTD].tolist():
            host_parts[i] = zstd[i]

    crc = _crc(backend, data, n, k, chunks, code, elements, lengths) if checksum else 0
    head = _core.frame_head(
        nbytes, k, coder, precision, subblock_log2, checksum, crc, rows_len, offsets,
        modes.tobytes(), bytes(values), sizes.tolist(),
    )  # fmt: skip
    return _assemble(backend, head, modes, sizes, n, chunks, host_parts, on_device, rans,
                     planes_dev, subblock_log2)  # fmt: skip


def _row_plan(
    backend: Backend, data: Any, n: int, k: int, layout: str, length: int
) -> tuple[Any, int]:
    """The version 2 row plan (frame.cpp's plan_row_shift): the offsets on the
    device and the row length, or (a dummy, 0) where the shift does not pay."""
    shift, bits = _core.exponent_field(layout)
    if bits == 0 or length < MIN_ROW_LENGTH or n < ROW_SHIFT_FROM:
        return backend.empty(1), 0
    rows = -(-n // length)
    group = max(1, (1 << CHUNK_LOG2) // length)
    groups = -(-rows // group)
    offsets = backend.empty(rows)
    plain, shifted = backend.empty(groups * 1024), backend.empty(groups * 1024)
    backend.launch(
        "row_stats", groups, ROWS_BLOCK,
        (data, np.uint64(n), np.uint32(k), np.uint64(length), np.uint64(group), np.uint32(shift),
         np.uint32(bits), offsets, plain, shifted),
    )  # fmt: skip
    if _core.row_shift_pays(_u32(backend, plain), _u32(backend, shifted), groups, n, length):
        return offsets, length
    return backend.empty(1), 0


def _encode_rans(
    backend: Backend,
    planes_dev: Any,
    counts: np.ndarray,
    chosen: np.ndarray,
    at: Any,
    lengths: np.ndarray,
    precision: int,
    subblock_log2: int,
) -> dict[str, Any]:
    """rANS-code the chosen chunks on the device: their tables (on the host,
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
    records["input"] = [at(i) for i in chosen.tolist()]
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


def _crc(
    backend: Backend, data: Any, n: int, k: int, chunks: int, code: Any, elements: bool,
    lengths: list[int],
) -> int:  # fmt: skip
    """The frame's CRC32C of the planes (before any row shift), from the input:
    byte j of each reordered element, or the planes themselves."""
    desc = np.zeros(1, FRAME_DESC)
    desc["n"], desc["k"], desc["chunks"], desc["layout"] = n, k, chunks, code
    sources = np.zeros(k * chunks, PLANE_SOURCE)
    index = np.arange(k * chunks, dtype=np.uint64)
    sources["kind"] = FROM_PLANES
    sources["offset"] = (index // chunks) * n + ((index % chunks) << CHUNK_LOG2)
    tasks = np.zeros(k * chunks, CRC_TASK)
    tasks["plane"], tasks["chunk"] = index // chunks, index % chunks
    tasks["from_elements"] = int(elements)
    crcs = backend.empty(4 * k * chunks)
    dummy = backend.empty(1)
    backend.launch(
        "crc_chunks", k * chunks, getattr(backend, "crc_block", CRC_BLOCK),
        (backend.to_device(desc.view(np.uint8)), backend.to_device(tasks.view(np.uint8)), dummy,
         dummy if elements else data, dummy, backend.to_device(sources.view(np.uint8)), dummy,
         data if elements else dummy, crcs),
    )  # fmt: skip
    return join_crcs(_u32(backend, crcs), lengths)


def _assemble(
    backend: Backend,
    head: bytes,
    modes: np.ndarray,
    sizes: np.ndarray,
    n: int,
    chunks: int,
    host_parts: dict[int, bytes],
    on_device: np.ndarray,
    rans: dict[str, Any],
    planes_dev: Any,
    subblock_log2: int,
) -> Any:
    """The frame on the device: the host's header, then every payload."""
    stored = np.flatnonzero(modes != CONSTANT)
    dst = len(head) + np.concatenate([[0], np.cumsum(sizes[stored])]).astype(np.int64)
    pieces = np.zeros(stored.size, FRAME_PIECE)
    pieces["dst"], pieces["length"] = dst[:-1], sizes[stored]
    index = stored.astype(np.int64)
    pieces["src"] = (index // chunks) * n + ((index % chunks) << CHUNK_LOG2)  # raw: the planes
    pieces["kind"] = PIECE_FROM_PLANES
    host = bytearray()
    where = {int(i): p for p, i in enumerate(stored.tolist())}
    for i, part in sorted(host_parts.items()):
        pieces["kind"][where[i]], pieces["src"][where[i]] = PIECE_FROM_HOST, len(host)
        host += part
    coded = np.isin(on_device, stored) & (modes[on_device] == RANS)
    if coded.any():
        r = np.flatnonzero(coded)
        rows = np.searchsorted(stored, on_device[r])
        pieces["kind"][rows] = PIECE_RANS
        pieces["src"][rows] = rans["table_at"][r]
        pieces["length"][rows] = np.diff(rans["table_at"])[r]
        pieces["words"][rows] = rans["first_sub"][r] * rans["region"]
        pieces["first_sub"][rows] = rans["first_sub"][r]
        pieces["subblocks"][rows] = rans["subs"][r]
    frame = backend.empty(int(dst[-1]))
    frame[: len(head)] = backend.to_device(np.frombuffer(head, np.uint8))
    if pieces.size:
        dummy = backend.empty(1)
        backend.launch(
            "assemble_frame", pieces.size, STATS_BLOCK,
            (backend.to_device(pieces.view(np.uint8)), planes_dev,
             backend.to_device(np.frombuffer(bytes(host) or b"\0", np.uint8)),
             rans.get("tables", dummy), rans.get("words", dummy), rans.get("states", dummy),
             rans.get("nwords", dummy), np.uint32(subblock_log2), frame),
        )  # fmt: skip
    return frame
