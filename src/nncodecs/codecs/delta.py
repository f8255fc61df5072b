"""``nncodecs.delta``: the codec of a delta array, which only nncodecs' Reader decodes.

A container written against a reference (``Writer(..., reference=...)``,
docs/container.md, "Checkpoint series") stores a tensor close to a tensor of another
container as its difference from it: the bits of the two, XORed or subtracted, coded by
the weights codec. A chunk's bytes are then no value of the tensor, and a Zarr codec
sees no chunk coordinates and no store, so it cannot fetch the reference to add back.
This codec declares the reference in the array's metadata and refuses to decode: a plain
Zarr reader gets :class:`nncodecs.ReferenceNeededError` naming the reference, never
fill values or wrong numbers. :class:`nncodecs.Reader` reads such arrays itself.

Configuration: ``{"transform": "xor" | "sub", "reference": {"container", "tensor",
"sha256"}, "codec": <the weights codec's JSON for the coded bits>}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Self

from zarr.abc.codec import ArrayBytesCodec
from zarr.core.array_spec import ArraySpec

from nncodecs.errors import ReferenceNeededError
from nncodecs.frame.delta import CODEC_ID, TRANSFORMS, check_config

__all__ = ["CODEC_ID", "TRANSFORMS", "Delta"]


@dataclass(frozen=True)
class Delta(ArrayBytesCodec):
    """A delta array's codec (see the module's docstring): metadata only."""

    transform: str
    reference: dict[str, Any]
    codec: dict[str, Any]
    is_fixed_size = False

    def __post_init__(self) -> None:
        check_config(self.to_dict())

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        config = check_config(data)
        return cls(config["transform"], config["reference"], config["codec"])

    def to_dict(self) -> dict[str, Any]:
        config = {"transform": self.transform, "reference": self.reference, "codec": self.codec}
        return {"name": CODEC_ID, "configuration": config}

    def _refuse(self) -> ReferenceNeededError:
        ref = self.reference
        return ReferenceNeededError(
            f"{CODEC_ID}: this chunk holds a difference ({self.transform}) against tensor "
            f"{ref['tensor']!r} of container {ref['container']!r}; read it with "
            "nncodecs.Reader, which fetches that reference"
        )

    async def _decode_single(self, chunk_bytes: Any, chunk_spec: ArraySpec) -> Any:
        raise self._refuse()

    async def _encode_single(self, chunk_array: Any, chunk_spec: ArraySpec) -> Any:
        raise ValueError(f"{CODEC_ID}: delta arrays are written by nncodecs.Writer only")

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        raise NotImplementedError
