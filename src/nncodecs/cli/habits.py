"""What the command line checks of an output before any work, as zstd and tar users
expect: the folder it goes into exists (the Python API creates missing parents; the
command does not, as zstd does not), an existing empty folder is an existing output
(``--force`` to write into it), and ``-o -`` is refused by name but where decompress
streams a safetensors file (:mod:`nncodecs.formats.streaming`)."""

from __future__ import annotations

from pathlib import Path

from nncodecs.outputs import is_chained, is_url

__all__ = ["check_cli_output"]


def check_cli_output(out: str | None, force: bool) -> None:
    """Refuse ``out`` (an ``-o`` or default output) before anything is read or written."""
    if out is None or is_url(out) or is_chained(out):
        return
    if out == "-":  # (decompress streams a safetensors file there itself)
        raise ValueError(
            "-o -: only decompress writes to standard output (a safetensors file); this "
            "output is a file or folder: give a name"
        )
    path = Path(out.removeprefix("file://"))
    parent = path.parent
    if not parent.is_dir():
        raise FileNotFoundError(
            f"{parent}: no such directory; create it first (the command creates no folder "
            "for its output)"
        )
    if path.is_dir() and not path.is_symlink() and not force and not any(path.iterdir()):
        raise FileExistsError(f"{path}: exists (an empty folder); --force to write into it")
