"""The ``nncodecs`` command: compress, decompress, info, verify, merge, convert."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["main"]

EXAMPLES = {
    "compress": "nncodecs compress model.safetensors            # -> model.safetensors.zarr.zip",
    "decompress": "nncodecs decompress model.safetensors.zarr.zip  # -> model.safetensors",
    "info": "nncodecs info model.safetensors.zarr.zip --json",
    "verify": "nncodecs verify model.safetensors.zarr.zip       # exit 0 when every checksum holds",
    "merge": "nncodecs merge a.zarr.zip b.zarr.zip -o ab.zarr.zip",
    "convert": "nncodecs convert model.npz -o model.zarr.zip    # or a container -o model.npz",
}


def human(n: float) -> str:
    """Bytes for people: 1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


class ProgressBar:
    """A progress bar (tqdm) on stderr, only when stderr is a terminal; ends at 100%."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label = label
        self.on = not quiet and sys.stderr.isatty()
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self.on:
            return
        if self.bar is None:
            import shutil

            from tqdm import tqdm

            # a terminal that reports no size (a bare pty) gets 80 x 24: tqdm would print
            # nothing on a terminal of 0 rows
            size = shutil.get_terminal_size((80, 24))
            self.bar = tqdm(total=total, desc=self.label, unit="B", unit_scale=True,
                            unit_divisor=1024, file=sys.stderr, ncols=size.columns,
                            nrows=max(size.lines, 2))  # fmt: skip
        # (done, total) may be a final (1, 1): the bar shows the same fraction
        done = done * self.bar.total // total if total and total != self.bar.total else done
        self.bar.update(max(0, min(done, self.bar.total) - self.bar.n))

    def finish(self) -> None:
        """Fill the bar (the last update may fall short of the total) and end its line."""
        if self.bar is not None:
            self.bar.update(self.bar.total - self.bar.n)
            self.bar.close()
            self.bar = None


def _default_output(path: Path) -> Path:
    return path.with_name(path.name + ".zarr.zip")


def cmd_compress(args: argparse.Namespace) -> int:
    from nncodecs.formats import compress

    src = Path(args.input)
    if args.dask is not None:
        return _compress_dask(args, src)
    out = args.output or str(_default_output(src))
    bar = ProgressBar("compress", args.quiet)
    fmt = compress(
        src,
        out,
        codec=args.codec,
        threads=args.threads,
        chunk_bytes=args.chunk_bytes,
        progress=bar,
        force=args.force,
    )
    bar.finish()
    if not args.quiet:
        _report(src, fmt, out)
    return 0


def _report(src: Path, fmt: str, out: str) -> None:
    original = _size(src)
    if "://" in out:
        print(f"{src} ({fmt}, {human(original)}) -> {out}")
        return
    stored = _size(Path(out))
    print(
        f"{src} ({fmt}, {human(original)}) -> {out} ({human(stored)}, "
        f"ratio {stored / max(original, 1):.4f})"
    )


def _compress_dask(args: argparse.Namespace, src: Path) -> int:
    """``compress --dask [ADDRESS]``: slabs of shards as dask tasks (nncodecs.archive)."""
    from nncodecs import archive

    if not args.output or args.output.endswith(".zip"):
        raise ValueError("--dask writes a directory or URL container: give -o NAME.zarr")
    kwargs: dict[str, Any] = {"codec": args.codec, "progress": not args.quiet}
    if args.chunk_bytes:
        kwargs["chunk_bytes"] = args.chunk_bytes
    scheduler = None if args.dask == "threads" else args.dask
    if "://" not in args.output:
        from nncodecs.formats.convert import _container_name
        from nncodecs.outputs import check_output

        _container_name(Path(args.output))
        check_output(Path(args.output), args.force, inputs=(src,))
    result = archive(src, args.output, scheduler=scheduler, overwrite=args.force, **kwargs)
    if not args.quiet:
        print(f"{src} -> {args.output}: {result.tensors} tensors, {human(result.nbytes)} in "
              f"{result.tasks} tasks")  # fmt: skip
    return 0


def cmd_decompress(args: argparse.Namespace) -> int:
    from nncodecs.formats import decompress

    src = Path(args.input)
    out = args.output or str(_restored_name(src))  # a str: Path would turn s3:// into s3:/
    bar = ProgressBar("decompress", args.quiet)
    fmt = decompress(src, out, fmt=args.format, progress=bar, force=args.force)
    bar.finish()
    if not args.quiet:
        print(f"{src} -> {out} ({fmt}, {human(_size(Path(out)))})")
    return 0


def _restored_name(src: Path) -> Path:
    from nncodecs import Reader
    from nncodecs.formats.convert import restored_name

    with Reader(src) as r:
        return restored_name(src, r.metadata)


def cmd_info(args: argparse.Namespace) -> int:
    from nncodecs.formats import detect_format

    src = Path(args.input)
    fmt = detect_format(src)
    source_count = None
    if fmt == "container":
        rows, source_count = _container_rows(src)
    else:
        rows = _file_rows(src, fmt)
    total_n = sum(r["nbytes"] for r in rows)
    total_s = sum(r["stored_bytes"] for r in rows)
    if args.json:
        doc = {"format": fmt, "tensors": rows, "nbytes": total_n, "stored_bytes": total_s}
        if fmt == "container":
            doc["source_tensors"] = source_count
        print(json.dumps(doc))
        return 0
    table = [
        (
            r["name"],
            r["dtype"],
            "x".join(map(str, r["shape"])) or "()",
            human(r["stored_bytes"]),
            f"{r['stored_bytes'] / r['nbytes'] if r['nbytes'] else 1.0:.4f}",
            r["codec"],
        )
        for r in rows
    ]
    head = ("tensor", "dtype", "shape", "stored", "ratio", "codec")
    widths = [max([len(head[i])] + [len(t[i]) for t in table]) for i in range(len(head))]
    right = (False, False, False, True, True, False)

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ).rstrip()

    print(line(head))
    for t in table:
        print(line(t))
    ratio = total_s / total_n if total_n else 1.0
    print(
        f"{len(rows)} tensors ({fmt}): {human(total_n)} -> {human(total_s)} stored, "
        f"ratio {ratio:.4f}{_of_source(source_count)}"
    )
    return 0


def _of_source(count: int | None) -> str:
    return "" if count is None else f"; the source had {count} tensors"


def _source_count(metadata: dict[str, str]) -> int | None:
    try:
        return int(metadata["source.tensors"])
    except (KeyError, ValueError):
        return None


def _container_rows(src: Path) -> tuple[list[dict[str, Any]], int | None]:
    from nncodecs import Reader

    with Reader(src) as r:
        rows = [
            {
                "name": i.name,
                "dtype": i.dtype,
                "shape": list(i.shape),
                "layout": i.layout,
                "nbytes": i.nbytes,
                "stored_bytes": i.stored_bytes,
                "codec": i.codec,
            }
            for i in (r.info(n) for n in r)
        ]
        return rows, _source_count(r.metadata)


def _file_rows(src: Path, fmt: str) -> list[dict[str, Any]]:
    from nncodecs.dtypes import dtype_name
    from nncodecs.formats import iter_source

    rows = []
    for name, arr in iter_source(src, fmt):
        rows.append(
            {
                "name": name,
                "dtype": dtype_name(arr.dtype),
                "shape": list(arr.shape),
                "layout": "dense",
                "nbytes": int(arr.nbytes),
                "stored_bytes": int(arr.nbytes),
                "codec": "none",
            }
        )
    return rows


def cmd_verify(args: argparse.Namespace) -> int:
    from nncodecs import Reader
    from nncodecs.errors import CorruptDataError

    with Reader(args.input) as r:
        r.verify()
        count = _source_count(r.metadata)
        if count is not None and count != len(r):
            raise CorruptDataError(
                f"{args.input}: {len(r)} tensors, but the source had {count}: some are missing"
            )
        if not args.quiet:
            print(f"{args.input}: {len(r)} tensors, every checksum holds{_of_source(count)}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from nncodecs.formats.convert import merge_containers

    merge_containers(args.inputs, args.output, codec=args.codec, force=args.force)
    if not args.quiet:
        print(f"{len(args.inputs)} containers -> {args.output}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    """By what the input is and what -o's suffix names: a container is restored to a model
    file, a model file becomes a container or another model file."""
    from nncodecs.formats import WRITE_FORMATS, compress, convert_file, decompress, detect_format
    from nncodecs.formats.convert import merge_containers

    src, out = Path(args.input), args.output
    to_file = args.format is not None or Path(out).suffix.lower() in WRITE_FORMATS
    if detect_format(src) == "container":
        if not to_file:
            merge_containers([src], out, codec=args.codec, force=args.force)
            fmt = "container"
        else:
            fmt = decompress(src, out, fmt=args.format, force=args.force)
    elif to_file:
        fmt = convert_file(src, out, fmt=args.format, force=args.force)
    else:
        fmt = compress(src, out, codec=args.codec, force=args.force)
    if not args.quiet:
        print(f"{src} -> {out} ({fmt})")
    return 0


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


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


CODECS = ["auto", "rans", "huffman", "zstd", "raw"]
CODEC_HELP = "codec of every tensor: auto (the fused weights codec, default), rans, huffman, " \
    "zstd or raw"  # fmt: skip
FORCE_HELP = "replace an existing output (a directory only if it is an nncodecs container)"


def build_parser() -> argparse.ArgumentParser:
    from nncodecs.formats.convert import READ_FORMATS, WRITE_FORMATS

    reads = ", ".join(READ_FORMATS)
    writes = ", ".join(WRITE_FORMATS.values())
    parser = argparse.ArgumentParser(
        prog="nncodecs",
        description="Lossless compression of neural-network weights into Zarr containers. "
        f"Reads {reads}; restores {writes}.",
        epilog="examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"nncodecs {_version()}")
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
        return p

    p = command(
        "compress",
        f"compress a model file ({reads}) or a directory of safetensors shards",
        cmd_compress,
    )
    p.add_argument("input", help="the model file, or a directory of shards")
    p.add_argument("-o", "--output", help="the container: NAME.zarr.zip (one file), NAME.zarr "
                   "(a directory) or a URL (default: INPUT.zarr.zip)")  # fmt: skip
    p.add_argument("--codec", default="auto", choices=CODECS, help=CODEC_HELP)
    p.add_argument("--threads", type=_positive, default=None, help="threads (default: every core)")
    p.add_argument(
        "--chunk-bytes", type=_positive, default=None,
        help="chunk size in bytes along a tensor's first axis (the random-access unit)",
    )  # fmt: skip
    p.add_argument("-f", "--force", action="store_true", help=FORCE_HELP)
    p.add_argument(
        "--dask", nargs="?", const="threads", default=None, metavar="ADDRESS",
        help="encode and write slabs of shards as dask tasks: on threads, or on the "
        "dask.distributed scheduler at ADDRESS (or 'processes'); -o NAME.zarr or a URL",
    )  # fmt: skip

    p = command(
        "decompress",
        f"restore the original file ({writes}; safetensors and GGUF byte-identical)",
        cmd_decompress,
    )
    p.add_argument("input", help="the container")
    p.add_argument("-o", "--output", help="where to (default: INPUT without .zarr.zip, with the "
                   "suffix of the format it is restored to)")  # fmt: skip
    p.add_argument(
        "--format", choices=list(WRITE_FORMATS.values()), default=None,
        help="the format to write (default: -o's suffix, else the source's)",
    )  # fmt: skip
    p.add_argument("-f", "--force", action="store_true", help=FORCE_HELP)

    p = command("info", "list the tensors of a container or a model file", cmd_info)
    p.add_argument("input", help="a container or a model file")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = command("verify", "decode everything and check every checksum", cmd_verify)
    p.add_argument("input", help="the container")

    p = command("merge", "merge containers into one", cmd_merge)
    p.add_argument("inputs", nargs="+", help="the containers (tensor names must not repeat)")
    p.add_argument("-o", "--output", required=True, help="the new container")
    p.add_argument("--codec", default="auto", choices=CODECS, help=CODEC_HELP)
    p.add_argument("-f", "--force", action="store_true", help=FORCE_HELP)

    p = command(
        "convert",
        "a model file to a container or another model file, a container to a model file "
        "(-o's suffix decides: .safetensors, .npz, .gguf, else a container)",
        cmd_convert,
    )
    p.add_argument("input", help="a model file or a container")
    p.add_argument("-o", "--output", required=True, help="the output; its suffix picks the format")
    p.add_argument("--codec", default="auto", choices=CODECS, help=CODEC_HELP + " (containers)")
    p.add_argument("--format", choices=list(WRITE_FORMATS.values()), default=None,
                   help="the model format to write, whatever -o's suffix")  # fmt: skip
    p.add_argument("-f", "--force", action="store_true", help=FORCE_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; errors are one line on stderr: exit 1, or 2 for a usage error."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _terminate_as_interrupt()
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print("nncodecs: interrupted", file=sys.stderr)
        _quiet_exit()
        return 130
    except Exception as exc:  # one line for people, not a traceback
        from nncodecs.errors import CorruptDataError

        kind = "corrupt data" if isinstance(exc, CorruptDataError) else "error"
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"nncodecs: {kind}: {_with_path(text, exc, args)}", file=sys.stderr)
        _quiet_exit()
        return 1


def _terminate_as_interrupt() -> None:
    """SIGTERM (a kill, a scheduler's stop) ends the run as Ctrl-C does: the output is
    not published, its temporary and lock are removed, one line is printed."""
    import signal
    import threading

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


def _with_path(text: str, exc: Exception, args: argparse.Namespace) -> str:
    """The message names a path the user gave: an error from deep down (a full disk, a
    tensor's dtype) gets the output's (for errors of the file system) or the input's."""
    inputs = [getattr(args, "input", None), *(getattr(args, "inputs", None) or [])]
    named = [str(p) for p in (*inputs, getattr(args, "output", None)) if p]
    if any(p in text for p in named):
        return text
    output = getattr(args, "output", None)
    if isinstance(exc, OSError) and output and not getattr(exc, "filename", None):
        return f"{output}: {text}"
    return f"{named[0]}: {text}" if named else text


def _quiet_exit() -> None:
    """After an error, Zarr's event loop may still hold tasks of the failed call; at exit
    asyncio would print "Task was destroyed but it is pending!" for each. The error line
    is what the user needs: silence asyncio's logger for the rest of the process."""
    import logging

    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
