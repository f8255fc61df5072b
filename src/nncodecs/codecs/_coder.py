"""The shells every coder codec (rans, huffman, auto) shares.

A coder's schema (``nncodecs.frame.params``) holds its settings; a subclass
sets ``codec_id``, ``coder`` and ``schema``. Bytes in, a frame out
(:func:`nncodecs.frame.encode_frame`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar, Self

from numcodecs.abc import Codec
from zarr.abc.codec import BytesBytesCodec
from zarr.core.array_spec import ArraySpec

from nncodecs.codecs._shell import NumcodecsShell, ZarrShell
from nncodecs.dtypes import dtype_name
from nncodecs.frame import decode_frame, encode_frame
from nncodecs.frame.buffers import host_bytes
from nncodecs.frame.params import element_width, encoder_settings

__all__ = ["FrameBytesCodec", "NumcodecsFrameCodec"]


class NumcodecsFrameCodec(NumcodecsShell, Codec):
    """numcodecs shell of a frame coder.

    Bytes in (any buffer; its bytes are ``planes`` equal planes), a frame out.
    ``dtype`` (optional): the element type of the array whose planes these
    are, recorded in the frame (the chain ``bitreorder -> planes -> coder``
    then writes the bytes of the fused ``weights`` codec); ``planes``
    defaults to its width, else 1. Decoding returns the planes (uint8) and
    refuses a frame that records another element type.
    ``threads`` is a run-time setting, not part of the configuration.
    """

    coder: ClassVar[str]
    planes: int
    dtype: str | None

    @classmethod
    def _settle(cls, settings: dict[str, Any]) -> dict[str, Any]:
        if settings["planes"] is None:
            dtype = settings["dtype"]
            settings["planes"] = 1 if dtype is None else element_width(dtype)
        return settings

    def encode(self, buf: Any) -> bytes:
        data = host_bytes(buf)
        if data.nbytes % self.planes:
            raise ValueError(
                f"{self.codec_id}: {data.nbytes} bytes is not {self.planes} equal planes"
            )
        return encode_frame(
            data,
            planes=self.planes,
            coder=self.coder,
            threads=self.threads,
            dtype=self.dtype or "bytes",
            **encoder_settings(self._settings()),
        )

    def decode(self, buf: Any, out: Any = None) -> Any:
        dec = decode_frame(buf, out=out, threads=self.threads, dtype=self.dtype or "bytes")
        return dec if out is None else out


class FrameBytesCodec(ZarrShell, BytesBytesCodec):  # type: ignore[misc]
    """Zarr v3 shell of a frame coder (bytes -> bytes).

    ``planes`` and ``dtype`` default to the array's: Zarr evolves every codec
    from the array's own data type, before any filter (so after a bit
    reorder that made floats unsigned, the frame still records the float
    type, as the fused ``weights`` codec's frame does).
    """

    coder: ClassVar[str]
    is_fixed_size = False

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        native = array_spec.dtype.to_native_dtype()
        planes = self.planes if self.planes is not None else native.itemsize  # type: ignore[attr-defined]
        # After a bit reorder (zarr >= 3.2 evolves codecs from the spec the
        # filters resolve): the array's own dtype, which the spec remembers.
        name: str | None = getattr(array_spec, "reordered_from", None)
        try:
            name = name or dtype_name(native)
        except TypeError:  # a type no frame records (complex, strings): bytes
            name = None
        dtype = self.dtype  # type: ignore[attr-defined]
        if dtype is not None and dtype != name:
            raise ValueError(f"{self.codec_id}: configured for {dtype}, the array holds {name}")
        if dtype is None and name is not None and element_width(name) == planes:
            dtype = name
        if (planes, dtype) == (self.planes, self.dtype):  # type: ignore[attr-defined]
            return self
        return replace(self, planes=planes, dtype=dtype)  # type: ignore[type-var]

    def _encode_sync(self, chunk_bytes: Any, chunk_spec: ArraySpec) -> Any:
        data = chunk_bytes.as_numpy_array()
        planes = self.planes or 1  # type: ignore[attr-defined]
        dtype = self.dtype or "bytes"  # type: ignore[attr-defined]
        if data.nbytes % planes:
            # bytes that another codec reshaped: one plane, still correct, of no element type
            planes, dtype = 1, "bytes"
        settings = encoder_settings(self._settings())
        frame = encode_frame(data, planes=planes, coder=self.coder, dtype=dtype, **settings)
        return chunk_spec.prototype.buffer.from_bytes(frame)

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: ArraySpec) -> Any:
        native = chunk_spec.dtype.to_native_dtype()
        # The chunk's own bytes plus room for a small header of an inner codec.
        expected = math.prod(chunk_spec.shape) * native.itemsize + 4096
        dtype = self.dtype or "bytes"  # type: ignore[attr-defined]
        out = decode_frame(chunk_bytes.as_numpy_array(), max_decoded=expected, dtype=dtype)
        return chunk_spec.prototype.buffer.from_array_like(out)

    def compute_encoded_size(self, input_byte_length: int, _chunk_spec: ArraySpec) -> int:
        raise NotImplementedError  # variable size, like any compressor
