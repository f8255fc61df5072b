"""The command line: every command, its arguments, their help and an example each."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from nncodecs.cli.commands import (
    cmd_compress,
    cmd_convert,
    cmd_decompress,
    cmd_merge,
    cmd_verify,
)
from nncodecs.cli.info import cmd_info

__all__ = ["build_parser", "dask_without_address"]

EXAMPLES = {
    "compress": "nncodecs compress model.safetensors            # -> model.safetensors.zarr.zip",
    "decompress": "nncodecs decompress model.safetensors.zarr.zip  # -> model.safetensors",
    "info": "nncodecs info model.safetensors.zarr.zip --json",
    "verify": "nncodecs verify model.safetensors.zarr.zip       # exit 0 when every checksum holds",
    "merge": "nncodecs merge a.zarr.zip b.zarr.zip -o ab.zarr.zip",
    "convert": "nncodecs convert model.npz -o model.zarr.zip    # or a container -o model.npz",
}


def container_input(arg: str) -> str:
    """An input as given; ``zip::PATH`` (fsspec's chained spelling of a local zip
    container) and ``file://PATH`` as ``PATH``: they open as the file they name, never
    as a file of that literal name."""
    if arg.startswith("zip::") and "://" not in arg[5:].removeprefix("file://"):
        return arg[5:].removeprefix("file://")
    return arg.removeprefix("file://")  # (a local path: as Path would not take it)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nncodecs")
    except PackageNotFoundError:
        return "unknown"


class _Version(argparse.Action):
    """``--version``: the package's version and the SIMD level its kernels run at (the
    only option that loads the kernels, and only when given)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: Any):
        kw.setdefault("help", "print the version and the kernels' SIMD level, and exit")
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(f"nncodecs {_version()}\n{kernels_line()}")  # on stdout, as argparse's own
        parser.exit()


def kernels_line() -> str:
    """Which SIMD kernels run here: the level (scalar, avx2, avx512), the CPU's own,
    and the NNCODECS_DISPATCH cap; or why the kernels do not load."""
    import os

    cap = os.environ.get("NNCODECS_DISPATCH") or "unset"
    try:
        from nncodecs import _core
    except ImportError as exc:
        return f"kernels: not loaded ({exc})"
    return (
        f"kernels: {_core.dispatch_level()} (this CPU: {_core.cpu_dispatch_level()}; "
        f"NNCODECS_DISPATCH={cap})"
    )


CODECS = ["auto", "rans", "huffman", "zstd", "raw"]
CODEC_HELP = (
    "codec of every tensor: auto (the fused weights codec, default), rans, huffman, zstd or raw"
)
FORCE_HELP = "replace an existing output (a directory only if it is an nncodecs container)"
OUTPUT_DIR_HELP = (
    "write each output into DIR (an existing folder) under its default name; with several "
    "inputs, one failing does not stop the others"
)
JSON_HELP = (
    "print one JSON object on stdout (its fields: docs/cli.md), messages and progress on "
    "stderr only"
)


READ_REFERENCE_HELP = (
    "a container the input's tensors are stored against, where it is not where the "
    "input records it (outside the input's directory, or moved): it stands for the "
    "recorded reference of the same file name (repeatable; those found beside the "
    "input need no option)"
)


def build_parser() -> argparse.ArgumentParser:
    from nncodecs.formats import READ_FORMATS, WRITE_FORMATS

    reads = ", ".join(READ_FORMATS)
    writes = ", ".join(dict.fromkeys(WRITE_FORMATS.values()))
    parser = argparse.ArgumentParser(
        prog="nncodecs",
        description="Lossless compression of neural-network weights into Zarr containers. "
        f"Reads {reads}; restores {writes}.",
        epilog="examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_: str, fn: Callable[[argparse.Namespace], int]) -> Any:
        p = sub.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=f"example:\n  {EXAMPLES[name]}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(fn=fn)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary")
        if name != "info":  # (info's --json lists the tensors: its own help)
            p.add_argument("--json", action="store_true", help=JSON_HELP)
        return p

    p = command(
        "compress",
        f"compress a model file ({reads}) or a directory of safetensors shards",
        cmd_compress,
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="input",
        help="the model file, or a directory of shards (several: each to its own container)",
    )
    p.add_argument(
        "-o",
        "--output",
        help="the container: NAME.zarr.zip (one file), NAME.zarr "
        "(a directory) or a URL (default: INPUT.zarr.zip)",
    )
    p.add_argument("--output-dir", metavar="DIR", help=OUTPUT_DIR_HELP)
    p.add_argument("--codec", default="auto", choices=CODECS, help=CODEC_HELP)
    p.add_argument("--threads", type=_positive, default=None, help="threads (default: every core)")
    p.add_argument(
        "--chunk-bytes",
        type=_positive,
        default=None,
        help="chunk size in bytes along a tensor's first axis (the random-access unit)",
    )
    p.add_argument("-f", "--force", action="store_true", help=FORCE_HELP)
    p.add_argument(
        "--reference",
        action="append",
        default=None,
        metavar="CONTAINER",
        help="store tensors against this container's (a checkpoint's previous one): "
        "duplicates as references, close ones as differences (repeatable; the first is "
        "the one differenced against; the others also stand for its own references of "
        "the same file name, moved)",
    )
    p.add_argument(
        "--max-chain",
        type=_positive,
        default=None,
        metavar="N",
        help="store whole a tensor whose reference is N differences deep (default 8)",
    )
    p.add_argument(
        "--dask",
        nargs="?",
        const="threads",
        default=None,
        metavar="ADDRESS",
        help="encode and write slabs of shards as dask tasks: on threads, or on the "
        "dask.distributed scheduler at ADDRESS (or 'processes'); -o NAME.zarr or a URL",
    )

    p = command(
        "decompress",
        f"restore the original file ({writes}; safetensors, GGUF, ONNX with its data "
        "files and torch zip checkpoints byte-identical)",
        cmd_decompress,
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="input",
        type=container_input,
        help="the container (several: each restored to its own default name)",
    )
    p.add_argument(
        "-o",
        "--output",
        help="where to (default: INPUT without .zarr.zip, with the "
        "suffix of the format it is restored to)",
    )
    p.add_argument("--output-dir", metavar="DIR", help=OUTPUT_DIR_HELP)
    p.add_argument(
        "--format",
        choices=list(dict.fromkeys(WRITE_FORMATS.values())),
        default=None,
        help="the format to write (default: -o's suffix, else the source's)",
    )
    p.add_argument("-f", "--force", action="store_true", help=FORCE_HELP)
    p.add_argument(
        "--reference", action="append", default=None, metavar="CONTAINER", help=READ_REFERENCE_HELP
    )

    p = command("info", "list the tensors of a container or a model file", cmd_info)
    p.add_argument("input", type=container_input, help="a container or a model file")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = command("verify", "decode everything and check every checksum", cmd_verify)
    p.add_argument("input", type=container_input, help="the container")
    p.add_argument(
        "--reference", action="append", default=None, metavar="CONTAINER", help=READ_REFERENCE_HELP
    )

    p = command("merge", "merge containers into one", cmd_merge)
    p.add_argument(
        "inputs",
        nargs="+",
        type=container_input,
        help="the containers (tensor names must not repeat)",
    )
    p.add_argument("-o", "--output", required=True, help="the new container")
    p.add_argument(
        "--reference", action="append", default=None, metavar="CONTAINER", help=READ_REFERENCE_HELP
    )
    p.add_argument("--codec", default="auto", choices=CODECS, help=CODEC_HELP)
    p.add_argument("-f", "--force", action="store_true", help=FORCE_HELP)

    p = command(
        "convert",
        "a model file to a container or another model file, a container to a model file "
        "(-o's suffix decides: .safetensors, .npz, .gguf, .onnx, .pt / .pth / .bin, else a "
        "container)",
        cmd_convert,
    )
    p.add_argument("input", type=container_input, help="a model file or a container")
    p.add_argument("-o", "--output", required=True, help="the output; its suffix picks the format")
    p.add_argument("--codec", default="auto", choices=CODECS, help=CODEC_HELP + " (containers)")
    p.add_argument(
        "--format",
        choices=list(dict.fromkeys(WRITE_FORMATS.values())),
        default=None,
        help="the model format to write, whatever -o's suffix",
    )
    p.add_argument(
        "--dequantize",
        action="store_true",
        help="a quantized GGUF file's tensors written as float32 values to .safetensors or "
        ".npz (which cannot hold GGML types; without it, refused)",
    )
    p.add_argument("-f", "--force", action="store_true", help=FORCE_HELP)
    return parser


def dask_without_address(argv: list[str]) -> list[str]:
    """``compress --dask model.safetensors -o m.zarr``: ``--dask`` takes an optional
    ADDRESS, which would swallow the input. A word after it that is a local path and no
    scheduler (``threads``, ``processes``, ``sync``, ``host:port``, a URL) is the
    input, and ``--dask`` runs on threads, as given alone."""
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        nxt = out[i + 1]
        local = "://" not in nxt and nxt not in ("threads", "processes", "sync", "synchronous")
        if word == "--dask" and local and os.path.exists(nxt):
            out[i] = "--dask=threads"
    return out
