"""``nncodecs.weights``: the fused serializer for weights. Reach for this one first.

Bit reorder, byte-plane split and entropy coding in one call, chunk by
chunk; decoding runs the plane merge and inverse reorder fused into the
decoder, so full-size planes never exist. Its bytes equal those of the
chain ``bitreorder -> planes -> rans | huffman | auto`` (with ``planes`` set
to the element size): a test checks this for every dtype. The exception is
the row shift: for arrays of two or more axes, where rows (every axis but
the first) have exponents centred differently, it stores each row's
exponents less the row's mean, one byte a row, in a version 2 frame
(docs/format.md), which every decoder of the chain reads.

Classes: :class:`Weights` (Zarr v3, array -> bytes) and
:class:`NumcodecsWeights`, configuration ``{"coder", "dtype", "precision",
"subblock_log2", "checksum", "zstd_level", "min_gain"}``; ``coder`` is
``"auto"`` (default), ``"rans"`` or ``"huffman"``.

Examples
--------
>>> import ml_dtypes, numpy as np, zarr
>>> from nncodecs import Weights
>>> w = (np.random.default_rng(0).standard_normal((512, 256)) * 0.02).astype(ml_dtypes.bfloat16)
>>> z = zarr.create_array({}, shape=w.shape, chunks=(256, 256), dtype=w.dtype,
...                       serializer=Weights(), compressors=None)
>>> z[:] = w
>>> bool((z[:].view(np.uint16) == w.view(np.uint16)).all()), z.nbytes_stored() < 0.7 * w.nbytes
(True, True)
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np
from numcodecs.abc import Codec
from zarr.abc.codec import ArrayBytesCodec
from zarr.core.array_spec import ArraySpec

from nncodecs.codecs._direct import DirectChunks
from nncodecs.codecs._shell import DtypeFromArray, NumcodecsShell, ZarrShell
from nncodecs.dtypes import as_numpy, dtype_name, normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.frame.buffers import (
    host_bytes,
    in_memory_order,
    kind_is_bytes,
    typed_input,
)
from nncodecs.frame.params import WEIGHTS
from nncodecs.frame.weights import (
    _NO_DTYPE,
    CODEC_ID,
    decode_weights,
    encode_weights,
    stated_dtype,
)
from nncodecs.gpu.backend import backend_for
from nncodecs.gpu.device import (
    decode_weights_on_device,
    device_dtype,
    encode_weights_on_device,
    stated_dtype_on,
)

__all__ = ["NumcodecsWeights", "Weights", "decode_weights", "encode_weights"]


def as_numpy_out(out: Any) -> Any:
    """``out`` as a NumPy array of any dtype (strings, void: numcodecs' ``out`` takes the
    bytes whatever it holds); object arrays are refused when written to."""
    return host_bytes(out) if kind_is_bytes(out) else as_numpy(out)


def _check_out_type(stated: Any, out_dtype: np.dtype, configured: Any) -> None:
    """A typed ``out`` is an expectation, like the codec's ``dtype``: a frame of another
    element type is corrupt for it. A byte buffer (uint8, int8, raw void) takes any frame,
    and a frame of bytes (raw bytes encoded: uint8 or int8 elements) fills any ``out``
    (numcodecs' rule: raw bytes in, those bytes into an array of any type out)."""
    if configured is not None or dtype_name(normalize_dtype(stated)) in ("uint8", "int8"):
        return
    try:
        wanted = dtype_name(out_dtype)  # (bfloat16 and float8 are typed, though kind "V")
    except TypeError:
        return  # a raw buffer
    if wanted in ("uint8", "int8"):
        return
    if wanted != dtype_name(normalize_dtype(stated)):
        raise CorruptDataError(
            f"{CODEC_ID}: the frame holds {dtype_name(normalize_dtype(stated))} elements, "
            f"out is {wanted}"
        )


class NumcodecsWeights(NumcodecsShell, Codec):
    """numcodecs codec ``nncodecs.weights``.

    Parameters
    ----------
    coder : {"auto", "rans", "huffman"}
        The entropy coder of the planes.
    dtype : str or dtype, optional
        Element type; taken from the array when encoding. Frames record it,
        so decoding needs none; when set, decoding a frame of another raises
        :class:`nncodecs.CorruptDataError`.
    precision, subblock_log2, checksum, zstd_level, min_gain
        As for :class:`nncodecs.codecs.auto.NumcodecsAuto`.
    threads : int, optional
        Threads for chunks (default: every core). Not part of the configuration.
    """

    codec_id = CODEC_ID
    schema = WEIGHTS

    def encode(self, buf: Any) -> Any:
        backend = backend_for(buf)
        if backend is not None:  # CuPy / torch CUDA: the frame stays on the device
            return encode_weights_on_device(backend, buf, self._settings(), self.dtype)
        try:
            arr = typed_input(buf, self.dtype, CODEC_ID)
        except TypeError:
            if self.dtype is not None:
                raise
            # (a dtype the float layouts do not know, complex or strings: its bytes, as the
            # byte coders code them; decoding gives them back, which Zarr views as its dtype)
            arr = host_bytes(buf)
        # numcodecs' rule: the elements as they lie in memory (an F-ordered array's
        # transpose, so that its rows are rows of memory for the row shift)
        return encode_weights(in_memory_order(arr), self._settings(), self.threads)

    def decode(self, buf: Any, out: Any = None) -> Any:
        """Elements of the frame's own element type (a flat array, numcodecs'
        way; Zarr reshapes it), or ``out`` filled with their bytes in its memory
        order; big-endian elements come back big-endian (numcodecs' rule: the
        bytes as they came in). With the codec's ``dtype`` set, a frame of
        another raises :class:`nncodecs.CorruptDataError`. Frames that state no
        type (versions 1 and 2) take ``dtype``, else ``out``'s."""
        backend = backend_for(buf) or (backend_for(out) if out is not None else None)
        if backend is not None:
            return self._decode_on_device(backend, buf, out)
        dtype = self.dtype or stated_dtype(buf)
        if dtype is None:
            if out is None:
                raise ValueError(
                    f"{CODEC_ID}: {_NO_DTYPE}; decoding needs dtype= in the codec or an out= array"
                )
            dtype = dtype_name(as_numpy_out(out).dtype)
        if out is not None:
            _check_out_type(dtype, as_numpy_out(out).dtype, self.dtype)
            itemsize = normalize_dtype(dtype).itemsize
            count, rem = divmod(as_numpy_out(out).nbytes, itemsize)
            if rem:
                raise ValueError(
                    f"{CODEC_ID}: out holds {as_numpy_out(out).nbytes} bytes, not whole {dtype}"
                )
            decode_weights(buf, dtype, count, out=out, threads=self.threads, as_stored=True)
            return out
        return decode_weights(buf, dtype, None, threads=self.threads, as_stored=True)

    def _decode_on_device(self, backend: Any, buf: Any, out: Any) -> Any:
        """A frame (on the device or the host) decoded on the device: into
        ``out`` (on the device) or a new array like the input (CuPy for host
        frames)."""
        dtype = self.dtype or stated_dtype_on(backend, buf)
        if dtype is None:
            if out is None:
                raise ValueError(
                    f"{CODEC_ID}: {_NO_DTYPE}; decoding needs dtype= in the codec or an out= array"
                )
            dtype = device_dtype(out, None)
        if out is None:
            return decode_weights_on_device(backend, [buf], dtype, [None], like=buf)[0]
        if not backend.owns(out):
            raise ValueError(f"{CODEC_ID}: a frame decoded on the device needs out= there too")
        target = normalize_dtype(dtype)
        count, rem = divmod(int(backend.flat_bytes(out).size), target.itemsize)
        if rem:
            raise ValueError(f"{CODEC_ID}: out does not hold whole {dtype} elements")
        arr = decode_weights_on_device(backend, [buf], dtype, [(count,)], like=out)[0]
        backend.flat_bytes(out)[...] = backend.flat_bytes(arr)
        return out


class Weights(ZarrShell, DtypeFromArray, DirectChunks, ArrayBytesCodec):  # type: ignore[misc]
    """Zarr v3 codec ``nncodecs.weights`` (array -> bytes serializer).

    Use it in place of ``bytes`` (and of any compressor): ``serializer=Weights()``.
    As an array's only codec it takes Zarr's partial-encode hook: each chunk is
    encoded from the values written, without Zarr's merge (:mod:`nncodecs.codecs._direct`).
    """

    codec_id = CODEC_ID
    is_fixed_size = False
    schema = WEIGHTS

    def _encode_sync(self, chunk_array: Any, chunk_spec: ArraySpec) -> Any:
        data = chunk_array.as_ndarray_like()
        backend = backend_for(data)
        if backend is not None:  # a GPU buffer (zarr.config.enable_gpu()): encoded there
            dtype = dtype_name(chunk_spec.dtype.to_native_dtype())
            frame = encode_weights_on_device(backend, data, self._settings(), dtype)
            return chunk_spec.prototype.buffer.from_array_like(frame)
        frame = encode_weights(data, self._settings())
        return chunk_spec.prototype.buffer.from_bytes(frame)

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: ArraySpec) -> Any:
        native = chunk_spec.dtype.to_native_dtype()
        raw = chunk_bytes.as_array_like()
        backend = backend_for(raw)
        if backend is not None:  # a GPU buffer: decoded there, into the prototype's arrays
            arr = decode_weights_on_device(
                backend, [raw], native, [tuple(chunk_spec.shape)], like=raw
            )[0]
            return chunk_spec.prototype.nd_buffer.from_ndarray_like(arr)
        count = math.prod(chunk_spec.shape)
        arr = decode_weights(chunk_bytes.as_numpy_array(), native, count)
        return chunk_spec.prototype.nd_buffer.from_ndarray_like(arr.reshape(chunk_spec.shape))

    async def decode(self, chunks_and_specs: Any) -> Any:
        """Zarr's batch of chunks: on the device (GPU buffers) in one batch of
        kernel launches; on the host chunk by chunk, as every codec."""
        items = list(chunks_and_specs)
        raws = [None if c is None else c.as_array_like() for c, _ in items]
        present = [r for r in raws if r is not None]
        backends = {id(b): b for b in map(backend_for, present)}
        backend = next(iter(backends.values())) if len(backends) == 1 else None
        if backend is None or len(present) < 2:
            return await super().decode(items)
        return await asyncio.to_thread(self._decode_batch, backend, items, raws)

    def _decode_batch(self, backend: Any, items: list[Any], raws: list[Any]) -> list[Any]:
        at = [i for i, r in enumerate(raws) if r is not None]
        spec = items[at[0]][1]
        native = spec.dtype.to_native_dtype()
        arrays = decode_weights_on_device(
            backend,
            [raws[i] for i in at],
            native,
            [tuple(items[i][1].shape) for i in at],
            like=raws[at[0]],
        )
        out: list[Any] = [None] * len(items)
        for i, arr in zip(at, arrays, strict=True):
            out[i] = items[i][1].prototype.nd_buffer.from_ndarray_like(arr)
        return out

    def compute_encoded_size(self, input_byte_length: int, _chunk_spec: ArraySpec) -> int:
        raise NotImplementedError  # variable size
