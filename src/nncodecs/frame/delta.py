"""The ``nncodecs.delta`` codec's id and configuration, checked without Zarr (a Reader
of local files reads delta arrays without importing it; :mod:`nncodecs.codecs.delta`
is the Zarr codec that declares them)."""

from __future__ import annotations

from typing import Any

__all__ = ["CODEC_ID", "TRANSFORMS", "check_config"]

CODEC_ID = "nncodecs.delta"
#: ``xor``: the bits XORed; ``sub``: the bits' difference (modulo 2^width), zigzag-coded.
TRANSFORMS = ("xor", "sub")
_REF_KEYS = ("container", "tensor", "sha256")


def check_config(data: Any) -> dict[str, Any]:
    """The configuration of a delta codec's JSON (``{"name", "configuration"}``), checked
    (``ValueError`` saying what is wrong): ``transform`` one of TRANSFORMS;
    ``reference`` with ``container``, ``tensor`` and ``sha256`` strings (and an optional
    integer ``crc32c``); ``codec`` a codec's JSON."""
    config = data.get("configuration") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("name") != CODEC_ID or not isinstance(config, dict):
        raise ValueError(f"not a {CODEC_ID} codec: {data!r}")
    if config.keys() != {"transform", "reference", "codec"}:
        raise ValueError(f"{CODEC_ID}: configuration keys must be transform, reference, codec")
    if config["transform"] not in TRANSFORMS:
        raise ValueError(f"{CODEC_ID}: transform must be one of {TRANSFORMS}")
    ref = config["reference"]
    if not (isinstance(ref, dict) and all(isinstance(ref.get(k), str) for k in _REF_KEYS)):
        raise ValueError(f"{CODEC_ID}: reference must hold {', '.join(_REF_KEYS)} strings")
    crc = ref.get("crc32c")
    if ref.keys() - {*_REF_KEYS, "crc32c"} or not (crc is None or type(crc) is int):
        raise ValueError(f"{CODEC_ID}: reference holds {sorted(ref)}")
    codec = config["codec"]
    if not (isinstance(codec, dict) and isinstance(codec.get("name"), str)):
        raise ValueError(f"{CODEC_ID}: codec must be a codec's JSON")
    return {"transform": config["transform"], "reference": dict(ref), "codec": dict(codec)}
