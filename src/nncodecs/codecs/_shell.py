"""The two shells of every nncodecs codec, built from the codec's schema.

A codec module holds the transform itself once (functions on arrays) and two
thin shells around it: a numcodecs ``Codec`` (:class:`NumcodecsShell`) and a
Zarr v3 codec (:class:`ZarrShell`) with the same id and configuration. Both
take their constructor, checks, configuration and repr from one
:class:`nncodecs.frame.params.Schema`, as numcodecs.zarr3 builds its Zarr
codecs from the numcodecs ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from typing import Any, ClassVar

from zarr.core.common import parse_named_configuration

from nncodecs.dtypes import dtype_name
from nncodecs.frame.params import Schema

__all__ = ["DtypeFromArray", "NumcodecsShell", "ZarrShell"]


class _FromSchema:
    """What both shells take from ``schema``: the constructor's signature and checks."""

    schema: ClassVar[Schema]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "schema" in cls.__dict__:
            cls.__signature__ = cls._signature()  # type: ignore[attr-defined]

    @classmethod
    def _signature(cls) -> inspect.Signature:
        raise NotImplementedError

    @classmethod
    def _checked(cls, args: tuple, kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """The settings of a constructor call, checked, and its ``threads``."""
        try:
            given = cls.__signature__.bind(*args, **kwargs).arguments  # type: ignore[attr-defined]
        except TypeError as exc:  # Python's message, with the codec's name in it
            raise TypeError(f"{cls.__name__}(): {exc}") from None
        return cls._settle(cls.schema.check(given)), given.get("threads")

    @classmethod
    def _settle(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """Settings after the schema's checks (a subclass fills in derived defaults)."""
        return settings

    def _settings(self) -> dict[str, Any]:
        """The settings, in schema order: the configuration."""
        return {name: getattr(self, name) for name in self.schema.names}


class NumcodecsShell(_FromSchema):
    """Base of the numcodecs codecs: constructor, config and repr from ``schema``.

    A subclass sets ``codec_id`` and ``schema``; its settings are positional
    or keyword arguments in schema order. ``threads`` (where the schema takes
    it) is a run-time setting: shown by repr when set, never in the config.
    """

    codec_id: ClassVar[str]
    threads: int | None = None

    @classmethod
    def _signature(cls) -> inspect.Signature:
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return cls.schema.signature(kind, threads=cls.schema.threads)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        settings, self.threads = self._checked(args, kwargs)
        for name, value in settings.items():
            setattr(self, name, value)

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, **self._settings()}

    def __repr__(self) -> str:
        args = [f"{name}={value!r}" for name, value in self._settings().items()]
        if self.threads is not None:
            args.append(f"threads={self.threads!r}")
        return f"{type(self).__name__}({', '.join(args)})"


class ZarrShell(_FromSchema):
    """Base of the Zarr v3 codecs: a frozen dataclass of the ``schema``'s settings.

    A subclass sets ``codec_id`` and ``schema`` and implements
    ``_encode_sync`` / ``_decode_sync``; it becomes a frozen dataclass whose
    fields are the settings (keyword-only, checked by the schema), and those
    fields are its JSON configuration.
    """

    codec_id: ClassVar[str]

    @classmethod
    def _signature(cls) -> inspect.Signature:
        return cls.schema.signature(inspect.Parameter.KEYWORD_ONLY)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "schema" in cls.__dict__:
            cls.__annotations__ = dict.fromkeys(cls.schema.names, Any)
            dataclasses.dataclass(frozen=True, init=False)(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        settings, _ = self._checked(args, kwargs)
        for name, value in settings.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        _, config = parse_named_configuration(data, cls.codec_id, require_configuration=False)
        return cls(**(config or {}))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.codec_id, "configuration": self._settings()}

    async def _encode_single(self, chunk: Any, chunk_spec: Any) -> Any:
        return await asyncio.to_thread(self._encode_sync, chunk, chunk_spec)  # type: ignore[attr-defined]

    async def _decode_single(self, chunk: Any, chunk_spec: Any) -> Any:
        return await asyncio.to_thread(self._decode_sync, chunk, chunk_spec)  # type: ignore[attr-defined]

    def compute_encoded_size(self, input_byte_length: int, _chunk_spec: Any) -> int:
        return input_byte_length


class DtypeFromArray:
    """Mixin of Zarr codecs whose ``dtype`` setting the array fills in (and must match)."""

    codec_id: ClassVar[str]
    dtype: str | None

    def _array_dtype(self, zdtype: Any) -> str:
        name = dtype_name(zdtype.to_native_dtype())
        if self.dtype is not None and self.dtype != name:
            raise ValueError(
                f"{self.codec_id}: configured for {self.dtype}, the array holds {name}"
            )
        return name

    def evolve_from_array_spec(self, array_spec: Any) -> Any:
        name = self._array_dtype(array_spec.dtype)
        return self if self.dtype == name else dataclasses.replace(self, dtype=name)  # type: ignore[type-var]

    def validate(self, *, shape: Any, dtype: Any, chunk_grid: Any) -> None:
        self._array_dtype(dtype)
