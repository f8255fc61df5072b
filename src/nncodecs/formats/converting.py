"""Model file to model file, and the one ``convert`` that picks by input and output."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nncodecs.formats.compressing import compress
from nncodecs.formats.detect import WRITE_FORMATS, detect_format
from nncodecs.formats.file_modes import kept_like
from nncodecs.formats.ggml_convert import check_no_quantized, dequantized
from nncodecs.formats.merge import merge_containers
from nncodecs.formats.npz import write_npz
from nncodecs.formats.opening import iter_source, open_source
from nncodecs.formats.paths import check_model_file_name
from nncodecs.formats.restore import decompress
from nncodecs.formats.safetensors import write_safetensors
from nncodecs.outputs import atomic_output, is_url

__all__ = ["convert", "convert_file"]


def convert_file(
    source: str | Path,
    out: str | Path,
    fmt: str | None = None,
    force: bool = False,
    dequantize: bool = False,
) -> str:
    """A model file to another model file (the suffix of ``out`` picks the format, or
    ``fmt``): tensors stream through, no container. Returns the format written. A
    quantized GGUF tensor is refused by name, or with ``dequantize`` written as its
    float32 values (:mod:`nncodecs.formats.ggml_convert`)."""
    if is_url(str(out)):
        raise ValueError(f"{out}: model files are written to a local path, not a URL")
    source, out = Path(source), Path(str(out).removeprefix("file://"))
    check_model_file_name(out)
    fmt = fmt or WRITE_FORMATS.get(out.suffix.lower())
    if fmt not in ("safetensors", "npz"):
        raise ValueError(f"{out}: a model file is converted to .safetensors or .npz")
    tensors = _tensors(source, fmt, dequantize)
    st = source.stat()  # (its mode and times, kept on the file made from it)
    with (
        kept_like(stat.S_IMODE(st.st_mode), st.st_mtime_ns, out),
        atomic_output(out, force, inputs=(source,)) as tmp,
    ):
        if fmt == "safetensors":
            write_safetensors(tmp, tensors)
        else:
            write_npz(tmp, tensors)
    return fmt


def _tensors(source: Path, fmt: str, dequantize: bool) -> Iterator[tuple[str, Any]]:
    """The tensors to write (checked before the output exists)."""
    if detect_format(source) != "gguf":
        return iter_source(source)
    with open_source(source, "gguf") as src:
        listed = src.tensors()
    quantized = [(t.name, t.quantized[0]) for t in listed if t.quantized is not None]
    if quantized and not dequantize:
        check_no_quantized(quantized, str(source), fmt, file=True)
    return dequantized(listed) if quantized else iter_source(source)


def convert(
    source: str | Path,
    out: str,
    fmt: str | None = None,
    codec: str = "auto",
    force: bool = False,
    dequantize: bool = False,
) -> str:
    """By what ``source`` is and what ``out`` names (``fmt``, or a suffix of a format nncodecs
    writes: a model file; else a container): a container is restored to a model file or
    copied to another container, a model file becomes a container or another model file.
    Returns what was written: a format, or ``"container"`` for a container."""
    source = Path(source)
    to_file = fmt is not None or Path(out).suffix.lower() in WRITE_FORMATS
    if detect_format(source) == "container":
        if not to_file:
            merge_containers([source], out, codec=codec, force=force)
            return "container"
        return decompress(source, out, fmt=fmt, force=force)
    if to_file:
        return convert_file(source, out, fmt=fmt, force=force, dequantize=dequantize)
    compress(source, out, codec=codec, force=force)  # (returns the source's format)
    return "container"
