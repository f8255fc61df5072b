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
from nncodecs.gpu.encode_batch import Batch

__all__ = ["encode_frames", "encode_on"]


def encode_on(backend: Backend, data: Any, *, planes: int, coder: str, **settings: Any) -> Any:
    """Encode a flat uint8 device array into a frame on the device (a uint8
    device array), byte for byte what :func:`nncodecs.frame.encode_frame`
    writes for the same bytes and settings. See :func:`encode_frames`."""
    layout = settings.pop("layout", "none")
    row_length = settings.pop("row_length", 0)
    dtype = settings.pop("dtype", "bytes")
    return encode_frames(
        backend,
        [data],
        planes=[planes],
        layouts=[layout],
        row_lengths=[row_length],
        dtypes=[dtype],
        coder=coder,
        **settings,
    )[0]


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
    checked = check_settings(
        precision=precision, subblock_log2=subblock_log2, zstd_level=zstd_level, min_gain=min_gain
    )
    permille = round(checked["min_gain"] * 1000)
    threads = threads or get_threads()
    common = {
        "coder": coder,
        "precision": precision,
        "subblock_log2": subblock_log2,
        "checksum": checksum,
        "elements": elements,
    }
    sizes = [int(d.size) for d in datas]
    for i in range(count):
        check_settings(planes=planes[i])
        if sizes[i] % planes[i]:
            raise ValueError(f"{sizes[i]} bytes is not {planes[i]} equal planes")
        # The CPU encoder checks the settings it shares (layout against planes).
        _core.frame_encode(
            np.zeros(0, np.uint8), planes=planes[i], layout=layouts[i], element=dtypes[i], **common
        )
    limit = max(host_below, WHOLE_ZSTD_LIMIT if coder == "auto" else 0)
    frames: list[Any] = [None] * count
    for i in range(count):
        if sizes[i] <= limit or sizes[i] == 0:
            frame = encode_frame(
                backend.to_host(datas[i]),
                planes=planes[i],
                layout=layouts[i],
                zstd_level=zstd_level,
                min_gain=min_gain,
                threads=threads,
                row_length=row_lengths[i] if elements else 0,
                dtype=dtypes[i],
                **common,
            )
            frames[i] = backend.to_device(np.frombuffer(frame, np.uint8))
    live = [i for i in range(count) if frames[i] is None]
    if live:
        batch = Batch(
            backend,
            [datas[i] for i in live],
            [planes[i] for i in live],
            [layouts[i] for i in live],
            [row_lengths[i] if elements else 0 for i in live],
            elements,
            [dtypes[i] for i in live],
        )
        made = batch.encode(
            coder, precision, subblock_log2, checksum, zstd_level, permille, threads
        )
        for i, frame in zip(live, made, strict=True):
            frames[i] = frame
    return frames
