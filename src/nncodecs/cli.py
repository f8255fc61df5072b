"""The ``nncodecs`` command: compress, decompress, info, verify, merge, convert."""

from __future__ import annotations

import argparse
import json
import sys
import time
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
    """A one-line bar with rate and ETA on stderr, only when stderr is a terminal."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label = label
        self.on = not quiet and sys.stderr.isatty()
        self.start = time.monotonic()
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.on or (now - self.last < 0.1 and done < total):
            return
        self.last = now
        frac = done / total if total else 1.0
        rate = done / max(now - self.start, 1e-9)
        eta = (total - done) / rate if rate > 0 else 0.0
        bar = "#" * int(frac * 30)
        sys.stderr.write(
            f"\r{self.label} [{bar:<30}] {frac * 100:5.1f}% {human(done)}/{human(total)} "
            f"{human(rate)}/s ETA {eta:4.0f}s"
        )
        if done >= total:
            sys.stderr.write("\n")
            self.last = 0.0  # the line is ended
        sys.stderr.flush()

    def finish(self) -> None:
        """End the bar's line (the last update may fall short of the total)."""
        if self.on and self.last:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.last = 0.0


def _default_output(path: Path) -> Path:
    return path.with_name(path.name + ".zarr.zip")


def cmd_compress(args: argparse.Namespace) -> int:
    from nncodecs.formats import compress

    src = Path(args.input)
    if getattr(args, "dask", None) is not None:  # (convert reaches here without --dask)
        return _compress_dask(args, src)
    out = Path(args.output) if args.output else _default_output(src)
    bar = ProgressBar("compress", args.quiet)
    fmt = compress(
        src,
        out,
        codec=args.codec,
        threads=args.threads,
        chunk_bytes=args.chunk_bytes,
        progress=bar,
    )
    bar.finish()
    if not args.quiet:
        original = _size(src)
        stored = _size(out)
        print(
            f"{src} ({fmt}, {human(original)}) -> {out} ({human(stored)}, "
            f"ratio {stored / original:.4f})"
        )
    return 0


def _compress_dask(args: argparse.Namespace, src: Path) -> int:
    """``compress --dask [ADDRESS]``: slabs of shards as dask tasks (nncodecs.archive)."""
    from nncodecs import archive

    if not args.output or args.output.endswith(".zip"):
        raise ValueError("--dask writes a directory or URL container: give -o NAME.zarr")
    kwargs: dict[str, Any] = {"codec": args.codec, "progress": not args.quiet}
    if args.chunk_bytes:
        kwargs["chunk_bytes"] = args.chunk_bytes
    scheduler = None if args.dask == "threads" else args.dask
    result = archive(src, args.output, scheduler=scheduler, **kwargs)
    if not args.quiet:
        print(f"{src} -> {args.output}: {result.tensors} tensors, {human(result.nbytes)} in "
              f"{result.tasks} tasks")  # fmt: skip
    return 0


def cmd_decompress(args: argparse.Namespace) -> int:
    from nncodecs.formats import decompress

    src = Path(args.input)
    if args.output:
        out = Path(args.output)
    elif src.name.endswith(".zarr.zip"):
        out = src.with_name(src.name[: -len(".zarr.zip")])
    elif src.name.endswith(".zarr"):
        out = src.with_name(src.name[: -len(".zarr")])
    else:
        raise ValueError(f"{src}: name an output with -o")
    bar = ProgressBar("decompress", args.quiet)
    fmt = decompress(src, out, fmt=args.format, progress=bar)
    bar.finish()
    if not args.quiet:
        print(f"{src} -> {out} ({fmt}, {human(_size(out))})")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from nncodecs.formats import detect_format

    src = Path(args.input)
    fmt = detect_format(src)
    rows = _container_rows(src) if fmt == "container" else _file_rows(src, fmt)
    total_n = sum(r["nbytes"] for r in rows)
    total_s = sum(r["stored_bytes"] for r in rows)
    if args.json:
        print(
            json.dumps({"format": fmt, "tensors": rows, "nbytes": total_n, "stored_bytes": total_s})
        )
        return 0
    width = max([len(r["name"]) for r in rows] + [6])
    print(f"{'tensor':<{width}}  {'dtype':<14}{'shape':<20}{'stored':>11}{'ratio':>8}  codec")
    for r in rows:
        ratio = r["stored_bytes"] / r["nbytes"] if r["nbytes"] else 1.0
        shape = "x".join(map(str, r["shape"])) or "()"
        print(
            f"{r['name']:<{width}}  {r['dtype']:<14}{shape:<20}{human(r['stored_bytes']):>11}"
            f"{ratio:>8.4f}  {r['codec']}"
        )
    ratio = total_s / total_n if total_n else 1.0
    print(
        f"{len(rows)} tensors ({fmt}): {human(total_n)} -> {human(total_s)} stored, "
        f"ratio {ratio:.4f}"
    )
    return 0


def _container_rows(src: Path) -> list[dict[str, Any]]:
    from nncodecs import Reader

    with Reader(src) as r:
        return [
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

    with Reader(args.input) as r:
        r.verify()
        if not args.quiet:
            print(f"{args.input}: {len(r)} tensors, every checksum holds")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from nncodecs import merge

    merge([Path(p) for p in args.inputs], Path(args.output), codec=args.codec)
    if not args.quiet:
        print(f"{len(args.inputs)} containers -> {args.output}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from nncodecs.formats import detect_format

    if detect_format(args.input) == "container":
        args.format = args.format or _format_of(args.output)
        return cmd_decompress(args)
    args.chunk_bytes = None
    args.threads = None
    return cmd_compress(args)


def _format_of(path: str | None) -> str | None:
    if path and path.endswith(".npz"):
        return "npz"
    return "safetensors" if path else None


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nncodecs",
        description="Lossless compression of neural-network weights into Zarr containers.",
        epilog="examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
        "compress a model file (safetensors, GGUF, npz, torch) or a directory of shards",
        cmd_compress,
    )
    p.add_argument("input")
    p.add_argument("-o", "--output", help="the container (default: INPUT.zarr.zip)")
    p.add_argument("--codec", default="auto", choices=["auto", "rans", "huffman", "zstd", "raw"])
    p.add_argument("--threads", type=int, default=None, help="threads (default: every core)")
    p.add_argument("--chunk-bytes", type=int, default=None, help="chunk size along the first axis")
    p.add_argument(
        "--dask", nargs="?", const="threads", default=None, metavar="ADDRESS",
        help="encode and write slabs of shards as dask tasks: on threads, or on the "
        "dask.distributed scheduler at ADDRESS (or 'processes'); -o NAME.zarr or a URL",
    )  # fmt: skip

    p = command(
        "decompress", "restore the original file (byte-identical for safetensors)", cmd_decompress
    )
    p.add_argument("input")
    p.add_argument("-o", "--output", help="where to (default: INPUT without .zarr.zip)")
    p.add_argument("--format", choices=["safetensors", "npz", "gguf"], default=None)

    p = command("info", "list the tensors of a container or a model file", cmd_info)
    p.add_argument("input")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = command("verify", "decode everything and check every checksum", cmd_verify)
    p.add_argument("input")

    p = command("merge", "merge containers into one", cmd_merge)
    p.add_argument("inputs", nargs="+")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--codec", default="auto", choices=["auto", "rans", "huffman", "zstd", "raw"])

    p = command(
        "convert", "compress a model file, or restore a container (by -o's suffix)", cmd_convert
    )
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--codec", default="auto", choices=["auto", "rans", "huffman", "zstd", "raw"])
    p.add_argument("--format", choices=["safetensors", "npz"], default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; errors are one line on stderr and a non-zero exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print("nncodecs: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line for people, not a traceback
        from nncodecs.errors import CorruptDataError

        kind = "corrupt data" if isinstance(exc, CorruptDataError) else "error"
        print(f"nncodecs: {kind}: {exc}", file=sys.stderr)
        return 1
