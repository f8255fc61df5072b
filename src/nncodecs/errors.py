"""Exceptions raised by nncodecs."""

from __future__ import annotations

import re

__all__ = [
    "CorruptDataError",
    "NNCodecsError",
    "NotAContainerError",
    "ReferenceNeededError",
    "ReferenceProblemError",
    "plain_message",
    "raised_by_nncodecs",
]


class NNCodecsError(Exception):
    """Base class of the errors nncodecs raises itself."""


class CorruptDataError(NNCodecsError, ValueError):
    """Encoded bytes that do not describe what the decoder expects.

    A subclass of ``ValueError``, so code that catches ``ValueError`` around
    a decode keeps working.
    """


class NotAContainerError(NNCodecsError, ValueError):
    """A store or group that holds no nncodecs container."""


class ReferenceNeededError(NNCodecsError, ValueError):
    """A chunk of a delta array (a difference against a tensor of another container)
    decoded by a plain Zarr reader: only :class:`nncodecs.Reader`, which fetches the
    reference, reads it. Never fill values or wrong numbers instead."""


class ReferenceProblemError(CorruptDataError):
    """A tensor's reference (another container's tensor it is stored against) is
    missing, unreadable, outside the places it may be read from, or not the tensor it
    was written against."""


def raised_by_nncodecs(exc: BaseException) -> bool:
    """Whether the innermost Python frame of an exception's traceback is nncodecs' own:
    a KeyError or RuntimeError raised there is a gap of nncodecs, not damage that another
    package's parser or codec found (those are made CorruptDataError)."""
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return False
    return str(last.tb_frame.f_globals.get("__name__")).startswith("nncodecs.")


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_ERRNO = re.compile(r"^\[Errno -?\d+\]\s*")


def plain_message(text: str) -> str:
    """Another package's message as one plain line: terminal escapes (bold, colours)
    removed, ``[Errno N]`` prefixes dropped, whitespace runs made one space.

    >>> plain_message("\\x1b[1mbold\\x1b[0m  text\\n\\tmore")
    'bold text more'
    >>> plain_message("[Errno 11] out.zarr: another writer holds it")
    'out.zarr: another writer holds it'
    """
    return _ERRNO.sub("", " ".join(_ANSI.sub("", text).split()))
