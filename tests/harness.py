"""Shared checks for every nncodecs codec, in the manner of numcodecs' own.

One list of arrays (:data:`ARRAYS`) serves every codec test module: every
supported dtype; 0-d, empty, lengths 1, 31, 32, 33 and large (past the
multi-threading threshold); C and F order; special values. The check
functions take a numcodecs codec and assert the round trip, the config,
the repr and the committed fixtures.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import ml_dtypes
import numcodecs
import numpy as np

FIXTURES = Path(__file__).parent / "fixtures"
#: Fixtures of the current frame version (3: frames record their element
#: type), beside the earlier ones under FIXTURES/<codec>, which are decode-only.
FIXTURES_V3 = FIXTURES / "v3"

FLOATS = ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
ML_FLOAT4 = ["float4_e2m1fn"]
INTEGERS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]
ALL_DTYPES = FLOATS + ML_FLOAT4 + INTEGERS

# Large: past the 1 MiB threshold where the kernels split work across threads.
LARGE_BYTES = (1 << 20) + 4096 + 7


def np_dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def bits_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(f"uint{dt.itemsize * 8}")


def random_array(name: str, count: int, seed: int = 0) -> np.ndarray:
    """Random bit patterns of a dtype (so every exponent, NaN payloads included)."""
    dt = np_dtype(name)
    rng = np.random.default_rng(seed)
    if name == "bool":
        return rng.integers(0, 2, count).astype(bool)
    if name == "float4_e2m1fn":  # 4 bits used per byte; others must stay zero
        return rng.integers(0, 16, count, dtype=np.uint8).view(dt)
    raw = rng.integers(0, 256, count * dt.itemsize, dtype=np.uint8)
    return raw.view(dt)


def weights_like(name: str, count: int, seed: int = 0) -> np.ndarray:
    """Values shaped like trained weights (for ratios, not bit coverage)."""
    dt = np_dtype(name)
    if dt.kind in "biu" or name == "bool":
        return random_array(name, count, seed)
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(count) * 0.05).astype(np.float32).astype(dt)


def row_scaled(name: str, rows: int, cols: int, seed: int = 0, spread: float = 1.0) -> np.ndarray:
    """Weights whose rows (output channels) have scales of their own, lognormal
    with ``spread``: the data the row shift of a version 2 frame is for.
    1-byte floats are scaled to their range first (about 1), as fp8 weights are."""
    rng = np.random.default_rng(seed)
    dt = np_dtype(name)
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    base = 1.0 if dt.itemsize == 1 else 0.02
    w *= (rng.lognormal(0.0, spread, rows) * base).astype(np.float32)[:, None]
    return w.astype(dt)


def special_values(name: str) -> np.ndarray:
    """+-0, +-inf, NaN with payloads, subnormals, max and min, as bit patterns where needed."""
    dt = np_dtype(name)
    if name not in FLOATS:
        if name == "bool":
            return np.array([False, True, True, False])
        if name == "float4_e2m1fn":
            return np.arange(16, dtype=np.uint8).view(dt)
        info = np.iinfo(dt)
        return np.array([0, 1, info.min, info.max, info.min + 1, info.max - 1], dtype=dt)
    finfo = ml_dtypes.finfo(dt) if hasattr(ml_dtypes, name) else np.finfo(dt)
    values = [0.0, -0.0, float(finfo.max), float(finfo.min), float(finfo.tiny), 1.0, -1.0]
    values.append(float(finfo.smallest_subnormal))
    values.append(-float(finfo.smallest_subnormal))
    arr = np.array(values, dtype=np.float64).astype(dt)
    extra = [np.array([math.nan, math.inf, -math.inf]).astype(dt)]
    bits = bits_dtype(dt)
    width = dt.itemsize * 8
    # NaNs with payloads: exponent all ones (or the fn NaN pattern) with other mantissas.
    top = (1 << (width - 1)) - 1
    extra.append(np.array([top, top - 1, (1 << width) - 1, top ^ 1], dtype=np.uint64)
                 .astype(bits).view(dt))  # fmt: skip
    return np.concatenate([arr, *extra])


def _cases() -> list[tuple[str, np.ndarray]]:
    cases: list[tuple[str, np.ndarray]] = []
    for name in ALL_DTYPES:
        dt = np_dtype(name)
        cases.append((f"{name}-0d", random_array(name, 1, seed=1).reshape(())))
        cases.append((f"{name}-empty", random_array(name, 0)))
        for n in (1, 31, 32, 33):
            cases.append((f"{name}-{n}", random_array(name, n, seed=n)))
        large = LARGE_BYTES // dt.itemsize
        cases.append((f"{name}-large", random_array(name, large, seed=7)))
        c2 = random_array(name, 33 * 17, seed=3).reshape(33, 17)
        cases.append((f"{name}-2d-C", c2))
        cases.append((f"{name}-2d-F", np.asfortranarray(c2)))
        cases.append((f"{name}-strided", random_array(name, 200, seed=4)[::3]))
        cases.append((f"{name}-special", special_values(name)))
    return cases


#: (id, array) pairs every codec test runs over.
ARRAYS = _cases()
ARRAY_IDS = [case[0] for case in ARRAYS]


def varint(v: int) -> bytes:
    """Unsigned LEB128, as frames store lengths (docs/format.md)."""
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def same_bits(a: Any, b: Any) -> bool:
    """Bit-exact equality, whatever the dtype (NaN payloads and -0.0 included)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype.itemsize != b.dtype.itemsize:
        return False
    bits = bits_dtype(a.dtype) if a.dtype.itemsize in (1, 2, 4, 8) else np.uint8
    return bool(
        np.array_equal(np.ascontiguousarray(a).view(bits), np.ascontiguousarray(b).view(bits))
    )


def as_bytes(buf: Any) -> bytes:
    """The bytes of any array or buffer as they lie in memory (F order for an
    F-ordered array; C order for any other): numcodecs' contract."""
    return np.asarray(buf).tobytes(order="A")


def check_encode_decode(codec: Any, arr: np.ndarray) -> None:
    """Encode from every buffer type, decode plain and into ``out=`` buffers: the
    bytes come back as they lie in ``arr``'s memory (numcodecs' contract)."""
    c_bytes = as_bytes(arr)
    enc = codec.encode(arr)
    enc_bytes = as_bytes(enc)
    assert as_bytes(codec.decode(enc)) == c_bytes

    # The same bytes from bytes-like input (the codec knows the dtype from its config).
    for buf in (c_bytes, bytearray(c_bytes), memoryview(c_bytes)):
        assert as_bytes(codec.encode(buf)) == enc_bytes

    # Decode from bytes-like encoded data, into out= of several kinds.
    for src in (enc_bytes, bytearray(enc_bytes), memoryview(enc_bytes)):
        assert as_bytes(codec.decode(src)) == c_bytes
    out = np.empty_like(arr)  # (F-ordered for an F-ordered arr: filled in its memory order)
    res = codec.decode(enc_bytes, out=out)
    assert same_bits(out, arr)
    assert as_bytes(res) == c_bytes
    out_raw = bytearray(len(c_bytes))
    codec.decode(enc_bytes, out=out_raw)
    assert bytes(out_raw) == c_bytes


def check_config(codec: Any) -> None:
    """The config survives JSON and rebuilds an equal codec through the registry."""
    config = codec.get_config()
    assert config["id"] == codec.codec_id
    config2 = json.loads(json.dumps(config))
    codec2 = numcodecs.get_codec(dict(config2))
    assert type(codec2) is type(codec)
    assert codec2.get_config() == config


def check_repr(codec: Any, namespace: dict[str, Any]) -> None:
    """``repr`` is the constructor call: evaluating it gives the same config."""
    rebuilt = eval(repr(codec), namespace)
    assert rebuilt.get_config() == codec.get_config()
    assert repr(rebuilt) == repr(codec)


def check_zarr_config(codec: Any) -> None:
    """A Zarr v3 codec survives to_dict -> JSON -> from_dict unchanged."""
    d = codec.to_dict()
    rebuilt = type(codec).from_dict(json.loads(json.dumps(d)))
    assert rebuilt == codec
    assert rebuilt.to_dict() == d


# -- committed fixtures -------------------------------------------------------


def fixture_cases() -> list[tuple[str, np.ndarray]]:
    """The arrays frozen as fixtures: one small and one special per dtype."""
    out = []
    for name in ALL_DTYPES:
        out.append((f"{name}-33", random_array(name, 33, seed=33)))
        out.append((f"{name}-special", special_values(name)))
        out.append((f"{name}-weights", weights_like(name, 257, seed=5).reshape(257)))
    return out


def row_shift_fixture_cases() -> list[tuple[str, np.ndarray]]:
    """Arrays frozen as version 2 (row shift) weights fixtures: 2-byte and 1-byte elements."""
    return [
        ("bfloat16-rows", row_scaled("bfloat16", 256, 384, seed=21)),
        ("float8_e4m3fn-rows", row_scaled("float8_e4m3fn", 256, 384, seed=22)),
    ]


def save_fixtures(codec: Any, directory: Path, arrays: list[tuple[str, np.ndarray]]) -> int:
    """Write fixtures that do not exist yet; never overwrite one. Returns how many."""
    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    for name, arr in arrays:
        stem = directory / name
        if stem.with_suffix(".json").exists():
            continue
        enc = np.ascontiguousarray(codec.encode(arr)).view(np.uint8).reshape(-1)
        dtype = arr.dtype.name if arr.dtype.kind != "V" else str(arr.dtype)
        meta = {"config": codec.get_config(), "dtype": dtype, "shape": list(arr.shape)}
        stem.with_suffix(".raw").write_bytes(np.ascontiguousarray(arr).tobytes())
        stem.with_suffix(".enc").write_bytes(enc.tobytes())
        stem.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
        written += 1
    return written


def frame_version(enc: bytes) -> int:
    """A frame's version: the byte after 'NNCF'; the whole-input zstd kinds
    count as 1 ('NNCZ', no element type) and 3 ('NNCW'); 0 for other bytes."""
    if enc.startswith(b"NNCF") and len(enc) > 4:
        return enc[4]
    return {b"NNCZ": 1, b"NNCW": 3}.get(enc[:4], 0)


def has_rows(enc: bytes) -> bool:
    """Whether a chunked frame has the row section (version 2; version 3's flag)."""
    return frame_version(enc) == 2 or (frame_version(enc) == 3 and bool(enc[7] & 0x80))


def to_old_version(enc: bytes) -> bytes:
    """The version 1 (or, with a row section, 2) frame of a version 3 frame,
    as earlier releases wrote it: the element byte dropped, and its code
    taken out of the checksum field again (docs/format.md)."""
    assert enc[:5] == b"NNCF\x03", enc[:5]
    out = bytearray(enc[:4] + bytes([2 if enc[7] & 0x80 else 1]) + enc[5:7] + enc[8:])
    if enc[5] & 0x04:  # the checksum follows the decoded length (a varint)
        at = 7
        while out[at] & 0x80:
            at += 1
        at += 1
        crc = int.from_bytes(out[at : at + 4], "little") ^ (enc[7] & 0x3F)
        out[at : at + 4] = crc.to_bytes(4, "little")
    return bytes(out)


def _holds_zstd(enc: bytes) -> bool:
    if enc[:4] in (b"NNCZ", b"NNCW"):  # a whole-input zstd frame
        return True
    if not enc.startswith(b"NNCF"):
        return False
    from nncodecs.frame import frame_info

    return any(chunk[2] == "zstd" for chunk in frame_info(enc)["chunks"])


def check_backwards_compatibility(directory: Path, version: int | None = None) -> int:
    """Every committed fixture decodes to its array; one of the version the
    encoders write (3) also encodes to the same bytes (earlier versions are
    decode-only: nothing writes them any more). ``version``: the frame version
    every fixture there must have (None: not checked)."""
    count = 0
    for meta_path in sorted(directory.glob("*.json")):
        meta = json.loads(meta_path.read_text())
        codec = numcodecs.get_codec(dict(meta["config"]))
        dt = np_dtype(meta["dtype"])
        arr = np.frombuffer(meta_path.with_suffix(".raw").read_bytes(), dtype=dt)
        arr = arr.reshape(meta["shape"])
        enc = meta_path.with_suffix(".enc").read_bytes()
        if version is not None:
            assert frame_version(enc) == version, meta_path.name
        dec = codec.decode(enc)
        assert same_bits(np.asarray(dec).view(dt).reshape(arr.shape), arr), meta_path.name
        # Versions 1 and 2 are decode-only; zstd's own output may differ between releases.
        if frame_version(enc) not in (1, 2) and not _holds_zstd(enc):
            again = np.ascontiguousarray(codec.encode(arr)).view(np.uint8).tobytes()
            assert again == enc, f"{meta_path.name}: encoding changed: the format must not change"
        count += 1
    return count


def run_cli(*args: str, cwd: Any) -> Any:
    """``python -m nncodecs ARGS`` in ``cwd``, as a user runs it: its completed process."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "nncodecs", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
