"""Exceptions raised by nncodecs."""

from __future__ import annotations

__all__ = ["CorruptDataError", "NNCodecsError", "NotAContainerError"]


class NNCodecsError(Exception):
    """Base class of the errors nncodecs raises itself."""


class CorruptDataError(NNCodecsError, ValueError):
    """Encoded bytes that do not describe what the decoder expects.

    A subclass of ``ValueError``, so code that catches ``ValueError`` around
    a decode keeps working.
    """


class NotAContainerError(NNCodecsError, ValueError):
    """A store or group that holds no nncodecs container."""
