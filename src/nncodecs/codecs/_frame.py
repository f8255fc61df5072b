"""Frames of entropy-coded planes: the part every coder codec shares.

The C++ core writes and reads the frames (``docs/format.md``); this module
adds what lives in Python: zstd candidates for ``auto`` (through the
``zstandard`` package) and their decoding, and the bounds a decoder checks
before it allocates anything.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, ClassVar, Self

import numpy as np
import zstandard
from numcodecs.abc import Codec
from numcodecs.compat import ndarray_copy
from zarr.abc.codec import BytesBytesCodec
from zarr.core.array_spec import ArraySpec

from nncodecs import _core
from nncodecs.codecs._shell import NumcodecsParams, ZarrShell, as_array, get_threads
from nncodecs.errors import CorruptDataError

__all__ = [
    "CHUNK_SYMBOLS",
    "CODERS",
    "DEFAULT_MIN_GAIN",
    "FrameBytesCodec",
    "NumcodecsFrameCodec",
    "check_frame_params",
    "decode_frame",
    "element_types",
    "encode_frame",
    "frame_decoded_len",
    "frame_element",
    "frame_info",
    "max_ratio_bound",
]

CHUNK_SYMBOLS = 1 << 18
#: Magic of the second frame kind: a zstd frame of the whole input, its own
#: magic replaced by this one (auto writes it for small inputs when smaller).
#: Read, no longer written: WHOLE_TYPED_MAGIC says the element type too.
WHOLE_MAGIC = b"NNCZ"
#: The whole-input kind that records its element type: this magic, the
#: element code (one byte, the table of ``_core.element_types()``), then the
#: zstd frame. What auto writes now.
WHOLE_TYPED_MAGIC = b"NNCW"
WHOLE_MAGICS = (WHOLE_MAGIC, WHOLE_TYPED_MAGIC)
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: auto tries the whole-input zstd frame on inputs up to this many bytes
#: (always up to TINY_BYTES: biases, norms; above, when zstd chunks could
#: win), and no per-chunk zstd trials up to TINY_BYTES.
WHOLE_ZSTD_LIMIT = CHUNK_SYMBOLS
TINY_BYTES = 1 << 14
TINY_LEVEL = 12
TINY_LEVEL_BYTES = 1 << 11
CODERS = ("rans", "huffman", "auto")
# The most one frame byte can expand to: a constant chunk (2 index bytes)
# stands for 2^18 bytes. Bounds the allocation of a decoder told no size.
_MAX_EXPANSION = CHUNK_SYMBOLS // 2
#: auto keeps a chunk raw unless coding saves at least this fraction of it,
#: FORMAT's 5% rule: a raw chunk decodes at memcpy speed, and on
#: all-MiniLM-L6-v2 the chunks that save 0-5% are worth 0.01% of the model.
DEFAULT_MIN_GAIN = 0.05


#: The element types frames record, by code: (name, width in bytes; 0 any).
#: From the C++ table (nnc::kElements): the one place the codes live.
ELEMENT_TYPES: tuple[tuple[str, int], ...] = tuple(_core.element_types())
_ELEMENT_CODES = {name: code for code, (name, _) in enumerate(ELEMENT_TYPES)}


def element_types() -> tuple[str, ...]:
    """Names of the element types a frame can record, by code ("bytes": none)."""
    return tuple(name for name, _ in ELEMENT_TYPES)


def max_ratio_bound(frame_len: int) -> int:
    """The largest decoded size a frame of ``frame_len`` bytes can honestly declare."""
    return frame_len * _MAX_EXPANSION + CHUNK_SYMBOLS


def check_min_gain(value: Any) -> float:
    """``min_gain`` as a float in [0, 1] with at most three decimals (stored in permille)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise TypeError(f"min_gain must be a number, got {value!r}")
    if not 0 <= value <= 1:
        raise ValueError(f"min_gain must be between 0 and 1, got {value}")
    return float(value)


def check_frame_params(
    planes: Any, precision: Any, subblock_log2: Any, zstd_level: Any = 3
) -> tuple[int | None, int, int, int]:
    """Validate the shared coder settings; ``ValueError`` / ``TypeError`` naming the bad one."""

    def integer(name: str, value: Any, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if not low <= value <= high:
            raise ValueError(f"{name} must be between {low} and {high}, got {value}")
        return int(value)

    return (
        None if planes is None else integer("planes", planes, 1, 255),
        integer("precision", precision, 10, 12),
        integer("subblock_log2", subblock_log2, 12, 16),
        integer("zstd_level", zstd_level, 1, 22),
    )


_local = threading.local()


def _compressor(level: int, size: int, whole: bool = False, checksum: bool = False) -> Any:
    """A zstd compressor for these settings, kept per thread: making one
    allocates zstd's context (hundreds of KiB at high levels), which cost
    more than compressing a bias. Small tensors repeat a few sizes."""
    cache = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    key = (level, size, whole, checksum)
    c = cache.get(key)
    if c is None:
        if len(cache) >= 64:
            cache.clear()
        params = _zstd_params(level, size, whole, checksum)
        c = cache[key] = zstandard.ZstdCompressor(compression_params=params)
    return c


def _decompressor() -> Any:
    """This thread's magicless zstd decompressor (its context is reused)."""
    d = getattr(_local, "decompressor", None)
    if d is None:
        d = _local.decompressor = zstandard.ZstdDecompressor(
            format=zstandard.FORMAT_ZSTD1_MAGICLESS
        )
    return d


def _zstd_params(level: int, size: int, whole: bool = False, checksum: bool = False) -> Any:
    """zstd frames as nncodecs stores them: magicless, no dictionary id. A chunk's
    frame has no size or checksum either (the chunk index and CRC32C say that);
    the whole-input kind has its content size, and zstd's checksum if asked."""
    return zstandard.ZstdCompressionParameters.from_level(
        level,
        source_size=size,
        format=zstandard.FORMAT_ZSTD1_MAGICLESS,
        write_content_size=whole,
        write_checksum=whole and checksum,
        write_dict_id=False,
    )


def _compress_pieces(pieces: list[bytes | None], level: int, threads: int) -> list[bytes | None]:
    """zstd of the (plane, chunk) pieces of a plan, in index order (None elsewhere).

    The C++ probe picks them: every small chunk, and larger ones in which a
    quick search finds long repeats (docs/format.md); on other chunks an
    order-0 coder beats zstd and the trial would be wasted work.
    """
    work = [i for i, piece in enumerate(pieces) if piece is not None]

    def compress(i: int) -> bytes:
        piece = pieces[i]
        return _compressor(level, len(piece)).compress(piece)

    out: list[bytes | None] = [None] * len(pieces)
    if len(work) > 1 and threads > 1 and sum(len(pieces[i]) for i in work) >= 1 << 20:
        # zstd releases the GIL; each worker thread keeps its own compressors.
        with ThreadPoolExecutor(min(threads, len(work))) as pool:
            for i, z in zip(work, pool.map(compress, work), strict=True):
                out[i] = z
    else:
        for i in work:
            out[i] = compress(i)
    return out


def encode_frame(
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
    threads: int | None = None,
    row_length: int = 0,
    dtype: str = "bytes",
) -> bytes:
    """Encode a flat uint8 array of ``planes`` planes as a frame.

    With ``elements=True`` the input holds ``planes``-byte elements and the
    split (and the reorder of a float ``layout``) runs fused, chunk by chunk
    (``auto`` copies out only the chunks it tries zstd on). The bytes equal
    those of encoding the planes. ``min_gain`` (auto only): a chunk is
    stored raw unless its best coder saves at least this fraction of it.
    ``row_length`` (elements of a float layout only): elements per row; the
    encoder then shifts each row's exponents by the row's median where that
    pays, and writes the row section (docs/format.md, "Row shift").
    ``dtype`` is the element type the frame records (a name of
    :func:`element_types`; ``"bytes"``: none), whose width must be ``planes``.
    """
    threads = threads or get_threads()
    settings = {
        "planes": planes,
        "coder": coder,
        "precision": precision,
        "subblock_log2": subblock_log2,
        "checksum": checksum,
        "layout": layout,
        "elements": elements,
        "threads": threads,
        "min_gain_permille": round(min_gain * 1000),
        "row_length": row_length if elements else 0,
        "element": dtype,
    }
    # auto probes for zstd while it encodes (tiny inputs get the whole-input
    # trial below instead: trials per chunk cost more there than they save).
    # When a chunk is worth a trial, the probe returns the plan instead of a
    # frame: zstd runs on those chunks and the frame is made again with them.
    probe = coder == "auto" and data.nbytes > TINY_BYTES
    frame = _core.frame_encode(data, probe_zstd=probe, **settings)
    planned = isinstance(frame, list)
    if planned:
        zstd = _compress_pieces(frame, zstd_level, threads)
        frame = _core.frame_encode(data, zstd=zstd, **settings)
    if (
        coder == "auto"
        and data.nbytes <= WHOLE_ZSTD_LIMIT
        and (data.nbytes <= TINY_BYTES or planned)
    ):
        # A small input may do better as one zstd frame, which costs no
        # header, index or chunk lengths of ours (see docs/format.md); worth
        # a trial when tiny, or when the plan saw chunks zstd could win.
        # Inputs of at most 2 KiB get level 12: the lowest at which none of
        # all-MiniLM-L6-v2's tiny tensors ends larger than zstd-3 of its raw
        # bytes (below it, float8 biases of 384 bytes end 2-5 bytes over);
        # a few microseconds there, hundreds on 12 KiB.
        level = max(zstd_level, TINY_LEVEL) if data.nbytes <= TINY_LEVEL_BYTES else zstd_level
        if elements:  # the whole-input kind holds the planes
            split = np.empty(data.nbytes, dtype=np.uint8)
            _core.planes_split(split, data, planes, layout, threads=threads)
            data = split
        whole = _whole_zstd(data, level, checksum, dtype)
        if len(whole) < len(frame):
            return whole
    return frame


def _whole_zstd(data: np.ndarray, level: int, checksum: bool, dtype: str) -> bytes:
    head = WHOLE_TYPED_MAGIC + bytes([_ELEMENT_CODES[dtype]])
    return head + _compressor(level, data.nbytes, True, checksum).compress(data)


def _whole_element(src: np.ndarray) -> str:
    """The element type a whole-input zstd frame records ("bytes" for the first kind)."""
    if src[:4].tobytes() == WHOLE_MAGIC:
        return "bytes"
    if src.nbytes < 5 or src[4] >= len(ELEMENT_TYPES):
        code = "missing" if src.nbytes < 5 else int(src[4])
        raise CorruptDataError(
            f"whole-input zstd frame: element type code {code}, this build knows "
            f"0..{len(ELEMENT_TYPES) - 1}"
        )
    return ELEMENT_TYPES[int(src[4])][0]


def _whole_payload(src: np.ndarray) -> np.ndarray:
    """The zstd frame (magicless) of a whole-input frame of either kind."""
    return src[4:] if src[:4].tobytes() == WHOLE_MAGIC else src[5:]


def check_frame_element(found: str, expected: str) -> None:
    """CorruptDataError when a frame states an element type other than the
    caller's ("bytes" on either side: nothing to check), as the C++ decoder."""
    if "bytes" not in (found, expected) and found != expected:
        raise CorruptDataError(f"the frame holds {found} elements, expected {expected}")


def _whole_zstd_size(src: np.ndarray, limit: int) -> int:
    """The decoded size a whole-input zstd frame declares, checked against ``limit``."""
    _whole_element(src)  # a bad element code first: nothing else is read then
    try:
        declared = zstandard.frame_content_size(ZSTD_MAGIC + _whole_payload(src)[:18].tobytes())
    except zstandard.ZstdError as exc:
        raise CorruptDataError(f"whole-input zstd frame: bad zstd header ({exc})") from exc
    if declared < 0:
        raise CorruptDataError("whole-input zstd frame: no decoded size in its zstd header")
    if declared > limit:
        raise CorruptDataError(
            f"whole-input zstd frame declares {declared} decoded bytes, expected at most {limit}"
        )
    return int(declared)


def _decode_whole_zstd(src: np.ndarray, limit: int) -> np.ndarray:
    size = _whole_zstd_size(src, limit)
    # libzstd stops a frame whose output passes its declared size (checked
    # against `limit` above), so this allocates at most one block more; the
    # stream object also tells truncation and trailing bytes apart.
    stream = _decompressor().decompressobj()
    try:
        raw = stream.decompress(_whole_payload(src).tobytes())
    except zstandard.ZstdError as exc:
        raise CorruptDataError(f"whole-input zstd frame: corrupt zstd data ({exc})") from exc
    if not stream.eof:
        raise CorruptDataError("whole-input zstd frame: truncated zstd data")
    if stream.unused_data:
        raise CorruptDataError(
            f"whole-input zstd frame: {len(stream.unused_data)} bytes after its zstd frame"
        )
    if len(raw) != size:
        raise CorruptDataError(f"whole-input zstd frame: {len(raw)} bytes, declared {size}")
    return np.frombuffer(raw, dtype=np.uint8)


def frame_info(buf: Any, max_decoded: int | None = None) -> dict[str, Any]:
    """Header and chunk index of a frame, checked against its length.

    ``chunks`` lists ``(plane, index, mode, offset, length, symbols)``.
    Raises :class:`nncodecs.CorruptDataError` for anything malformed.
    """
    src = _source(buf)
    bound = max_ratio_bound(src.nbytes) if max_decoded is None else max_decoded
    if src[:4].tobytes() in WHOLE_MAGICS:
        size = _whole_zstd_size(src, bound)
        return {"kind": "zstd", "decoded_len": size, "element": _whole_element(src), "chunks": []}
    return {"kind": "chunked", **_core.frame_info(src, bound)}


def frame_decoded_len(buf: Any) -> int:
    """The decoded length a (checked) frame declares."""
    src = _source(buf)
    if src[:4].tobytes() in WHOLE_MAGICS:
        return _whole_zstd_size(src, max_ratio_bound(src.nbytes))
    return int(_core.frame_summary(src, max_ratio_bound(src.nbytes))[0])


def frame_element(buf: Any) -> str:
    """The element type a (checked) frame records: a name of :func:`element_types`;
    ``"bytes"`` when it states none (byte coders given no dtype, and every
    frame of the versions before it, 1 and 2, and of the first zstd kind)."""
    src = _source(buf)
    if src[:4].tobytes() in WHOLE_MAGICS:
        _whole_zstd_size(src, max_ratio_bound(src.nbytes))
        return _whole_element(src)
    return str(_core.frame_summary(src, max_ratio_bound(src.nbytes))[3])


def _source(buf: Any) -> np.ndarray:
    if type(buf) is bytes:  # the common case, without as_array's checks
        return np.frombuffer(buf, dtype=np.uint8)
    arr = as_array(buf)
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def decode_frame(
    buf: Any,
    *,
    out: Any = None,
    max_decoded: int | None = None,
    elements: bool = False,
    layout: str = "none",
    planes: int | None = None,
    threads: int | None = None,
    dtype: str = "bytes",
) -> np.ndarray:
    """Decode a frame into a new uint8 array, or into ``out`` (without a copy when contiguous).

    ``max_decoded`` bounds the size the frame may declare (default: the size
    of ``out``, or the most its length can honestly stand for). With
    ``elements=True`` the output holds elements of ``planes`` bytes: the
    merge (and the inverse reorder of a float ``layout``) runs fused.
    ``dtype``: the element type the caller decodes to; a frame that records
    another raises :class:`nncodecs.CorruptDataError` (``"bytes"``: any).
    """
    src = _source(buf)
    target = None
    limit = max_ratio_bound(src.nbytes) if max_decoded is None else max_decoded
    if out is not None:
        arr = as_array(out)
        if arr.flags.c_contiguous and arr.flags.writeable:
            target = arr.reshape(-1).view(np.uint8)
        limit = min(limit, arr.nbytes)
    if src[:4].tobytes() in WHOLE_MAGICS:
        check_frame_element(_whole_element(src), dtype)
        return _decode_whole(src, limit, target, out, elements, layout, planes)
    threads = threads or get_threads()
    if out is None:
        # One call sizes, allocates and decodes (None: zstd chunks to decode first).
        new = _core.frame_decode_new(src, limit, layout, elements, threads, dtype)
        if new is not None:
            return new
    decoded_len, _, zstd_chunks, _ = _core.frame_summary(src, limit, dtype)
    zstd_decoded = _decode_zstd_chunks(src, _core.frame_info(src, limit)) if zstd_chunks else None
    direct = target is not None
    if target is None:
        target = np.empty(decoded_len, dtype=np.uint8)
    elif target.nbytes != decoded_len:
        raise CorruptDataError(
            f"frame decodes to {decoded_len} bytes, the output holds {target.nbytes}"
        )
    _core.frame_decode(
        target,
        src,
        limit,
        layout=layout,
        elements=elements,
        zstd_decoded=zstd_decoded,
        threads=threads,
    )
    if out is not None and not direct:
        _copy_out(target, as_array(out))
    return target


def _decode_whole(
    src: np.ndarray,
    limit: int,
    target: np.ndarray | None,
    out: Any,
    elements: bool,
    layout: str,
    planes: int | None,
) -> np.ndarray:
    """Decode the whole-input zstd kind: zstd gives the planes, then the merge if asked."""
    decoded = _decode_whole_zstd(src, limit)
    if target is not None and target.nbytes != decoded.nbytes:
        raise CorruptDataError(
            f"frame decodes to {decoded.nbytes} bytes, the output holds {target.nbytes}"
        )
    if elements:
        if planes is None:
            raise ValueError("decoding elements needs the element size (planes=)")
        if decoded.nbytes % planes:
            raise CorruptDataError(f"{decoded.nbytes} decoded bytes are not {planes} planes")
        merged = target if target is not None else np.empty(decoded.nbytes, dtype=np.uint8)
        _core.planes_merge(merged, decoded, planes, layout)
        decoded = merged
    elif target is not None:
        np.copyto(target, decoded)
        decoded = target
    if out is not None and target is None:
        _copy_out(decoded, as_array(out))
    return decoded


def _copy_out(decoded: np.ndarray, out: np.ndarray) -> None:
    """Copy decoded bytes (C order) into an ``out`` that could not be decoded into directly."""
    if out.ndim > 1 and out.dtype.itemsize and decoded.nbytes == out.nbytes:
        # An F-ordered or strided array: element by element, in logical order.
        np.copyto(out, decoded.view(out.dtype).reshape(out.shape))
    else:
        ndarray_copy(decoded, out)


def _decode_zstd_chunks(src: np.ndarray, info: dict[str, Any]) -> np.ndarray | None:
    chunks = [c for c in info["chunks"] if c[2] == "zstd"]
    if not chunks:
        return None
    out = np.empty(sum(c[5] for c in chunks), dtype=np.uint8)
    at = 0
    decompressor = _decompressor()
    for plane, index, _, offset, length, symbols in chunks:
        piece = src[offset : offset + length]
        where = f"plane {plane} chunk {index}"
        try:
            raw = decompressor.decompress(piece, max_output_size=symbols)
        except zstandard.ZstdError as exc:
            raise CorruptDataError(f"{where}: corrupt zstd data ({exc})") from exc
        if len(raw) != symbols:
            raise CorruptDataError(f"{where}: zstd gave {len(raw)} bytes, not {symbols}")
        out[at : at + symbols] = np.frombuffer(raw, dtype=np.uint8)
        at += symbols
    return out


# -- the shells every frame codec shares -------------------------------------------------


def check_element_dtype(dtype: Any, planes: int | None) -> str | None:
    """A coder's ``dtype`` setting: the canonical name (``None`` stays), whose
    width must equal ``planes`` where that is known (``ValueError`` otherwise)."""
    if dtype is None:
        return None
    from nncodecs.dtypes import dtype_name, normalize_dtype

    name = dtype_name(dtype)
    width = normalize_dtype(name).itemsize
    if planes is not None and width != planes:
        raise ValueError(f"dtype {name} has {width}-byte elements, planes is {planes}")
    return name


class NumcodecsFrameCodec(NumcodecsParams, Codec):
    """numcodecs shell of a frame coder; a subclass sets ``codec_id``, ``coder``, ``_params``.

    Bytes in (any buffer; its bytes are ``planes`` equal planes), a frame out.
    ``dtype`` (optional): the element type of the array whose planes these
    are, recorded in the frame (the chain ``bitreorder -> planes -> coder``
    then writes the bytes of the fused ``weights`` codec); ``planes``
    defaults to its width, else 1. Decoding returns the planes (uint8) and
    refuses a frame that records another element type.
    ``threads`` is a run-time setting, not part of the configuration.
    """

    coder: ClassVar[str]
    _params: ClassVar[tuple[str, ...]]

    def __init__(
        self,
        planes: int | None = None,
        precision: int = 11,
        subblock_log2: int = 16,
        checksum: bool = True,
        zstd_level: int = 3,
        min_gain: float = DEFAULT_MIN_GAIN,
        *,
        dtype: Any = None,
        threads: int | None = None,
    ) -> None:
        if planes is None:
            named = check_element_dtype(dtype, None)
            planes = 1 if named is None else _element_width(named)
        planes_, self.precision, self.subblock_log2, self.zstd_level = check_frame_params(
            planes, precision, subblock_log2, zstd_level
        )
        self.min_gain = check_min_gain(min_gain)
        if planes_ is None:
            raise TypeError("planes must be an int")
        self.planes = planes_
        self.checksum = _check_bool("checksum", checksum)
        self.dtype = check_element_dtype(dtype, self.planes)
        self.threads = threads

    def encode(self, buf: Any) -> bytes:
        data = _source(buf)
        if data.nbytes % self.planes:
            raise ValueError(
                f"{self.codec_id}: {data.nbytes} bytes is not {self.planes} equal planes"
            )
        return encode_frame(
            data,
            planes=self.planes,
            coder=self.coder,
            precision=self.precision,
            subblock_log2=self.subblock_log2,
            checksum=self.checksum,
            zstd_level=self.zstd_level,
            min_gain=self.min_gain,
            threads=self.threads,
            dtype=self.dtype or "bytes",
        )

    def decode(self, buf: Any, out: Any = None) -> Any:
        dec = decode_frame(buf, out=out, threads=self.threads, dtype=self.dtype or "bytes")
        return dec if out is None else out


def _element_width(name: str) -> int:
    return ELEMENT_TYPES[_ELEMENT_CODES[name]][1]


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


class FrameBytesCodec(ZarrShell, BytesBytesCodec):  # type: ignore[misc]
    """Zarr v3 shell of a frame coder (bytes -> bytes); subclasses are frozen dataclasses
    with fields ``planes``, ``precision``, ``subblock_log2``, ``checksum``, ``dtype``
    (and ``zstd_level``).

    ``planes`` and ``dtype`` default to the array's: Zarr evolves every codec
    from the array's own data type, before any filter (so after a bit
    reorder that made floats unsigned, the frame still records the float
    type, as the fused ``weights`` codec's frame does).
    """

    coder: ClassVar[str]
    is_fixed_size = False

    def _init(self, **config: Any) -> None:
        """Validate and set the fields a subclass has (a subset of the frame settings)."""
        planes, precision, subblock, level = check_frame_params(
            config.get("planes"),
            config.get("precision", 11),
            config.get("subblock_log2", 16),
            config.get("zstd_level", 3),
        )
        values = {
            "dtype": check_element_dtype(config.get("dtype"), planes),
            "planes": planes,
            "precision": precision,
            "subblock_log2": subblock,
            "checksum": _check_bool("checksum", config.get("checksum", True)),
            "zstd_level": level,
            "min_gain": check_min_gain(config.get("min_gain", DEFAULT_MIN_GAIN)),
        }
        for name in config:
            object.__setattr__(self, name, values[name])

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        from nncodecs.dtypes import dtype_name

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
        if dtype is None and name is not None and _element_width(name) == planes:
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
        frame = encode_frame(
            data,
            planes=planes,
            coder=self.coder,
            precision=getattr(self, "precision", 11),
            subblock_log2=self.subblock_log2,  # type: ignore[attr-defined]
            checksum=self.checksum,  # type: ignore[attr-defined]
            zstd_level=getattr(self, "zstd_level", 3),
            min_gain=getattr(self, "min_gain", DEFAULT_MIN_GAIN),
            dtype=dtype,
        )
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
