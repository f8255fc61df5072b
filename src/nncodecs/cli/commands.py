"""The commands but ``info``: each parses nothing, calls the formats API, prints a line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from nncodecs.cli.habits import check_cli_output
from nncodecs.cli.info import of_source, source_count
from nncodecs.cli.many import run_each
from nncodecs.cli.progress import ProgressBar
from nncodecs.cli.report import emit
from nncodecs.sizes import count as counted
from nncodecs.sizes import human, path_bytes, ratio_text

__all__ = ["cmd_compress", "cmd_convert", "cmd_decompress", "cmd_merge", "cmd_verify"]


def cmd_compress(args: argparse.Namespace) -> int:
    from nncodecs.formats.paths import default_container

    if args.max_chain is not None and not args.reference:
        raise ValueError("--max-chain bounds chains of references: give --reference too")
    return run_each(args, _compress_one, default_container)


def _compress_one(args: argparse.Namespace) -> dict[str, Any]:
    from nncodecs.formats import compress
    from nncodecs.formats.file_modes import recorded_bytes
    from nncodecs.formats.paths import default_container

    src = Path(args.input)
    if args.dask is not None:
        return _compress_dask(args, src)
    # (beside the input, and beside the folder an index file stands for: never inside it)
    out = args.output or str(default_container(src))
    check_cli_output(out, args.force)
    bar = ProgressBar("compress", args.quiet)
    recorded: dict[str, str] = {}  # (what the container records of the source)
    fmt = compress(
        src,
        out,
        codec=args.codec,
        threads=args.threads,
        chunk_bytes=args.chunk_bytes,
        progress=bar,
        force=args.force,
        reference=args.reference,
        max_chain=args.max_chain,
        recorded=recorded,
    )
    bar.finish()
    original = recorded_bytes(recorded) or 0  # (the size info will print as the original)
    stored = None if "://" in out else path_bytes(Path(out.removeprefix("file://")))
    if not (args.quiet or args.json):
        if stored is None:  # (a URL: its size is the store's to tell)
            print(f"{src} ({fmt}, {human(original)}) -> {out}")
        else:
            print(f"{src} ({fmt}) -> {out}: {human(stored)}, {ratio_text(original, stored)}")
    return {
        "input": str(src),
        "output": out,
        "format": fmt,
        "original_bytes": original,
        "stored_bytes": stored,
    }


def _compress_dask(args: argparse.Namespace, src: Path) -> dict[str, Any]:
    """``compress --dask [ADDRESS]``: slabs of shards as dask tasks (nncodecs.archive)."""
    from nncodecs.formats import archive, check_container_name
    from nncodecs.outputs import check_output

    if not args.output or args.output.endswith(".zip"):
        raise ValueError("--dask writes a directory or URL container: give -o NAME.zarr")
    check_cli_output(args.output, args.force)
    kwargs: dict[str, Any] = {"codec": args.codec, "progress": not (args.quiet or args.json)}
    if args.chunk_bytes:
        kwargs["chunk_bytes"] = args.chunk_bytes
    scheduler = None if args.dask == "threads" else args.dask
    if "://" not in args.output:
        check_container_name(Path(args.output))
        check_output(Path(args.output), args.force, inputs=(src,))
    result = archive(src, args.output, scheduler=scheduler, overwrite=args.force, **kwargs)
    original, stored = _recorded_sizes(args.output)  # (as info will print them)
    if original is None:  # (a URL's container: the source counted here)
        from nncodecs.formats.file_modes import source_bytes

        original = source_bytes(src, "safetensors")
    if not (args.quiet or args.json):
        sizes = f"; {human(stored)}, {ratio_text(original, stored)}" if stored else ""
        tasks = f"{counted(result.tensors, 'tensor')} in {counted(result.tasks, 'task')}"
        print(f"{src} -> {args.output}: {tasks}{sizes}")
    return {
        "input": str(src),
        "output": args.output,
        "format": "safetensors",
        "tensors": result.tensors,
        "original_bytes": original,
        "stored_bytes": stored,
        "tasks": result.tasks,
    }


def cmd_decompress(args: argparse.Namespace) -> int:
    from nncodecs.formats import default_output

    return run_each(args, _decompress_one, default_output)


def _decompress_one(args: argparse.Namespace) -> dict[str, Any]:
    from nncodecs.formats import decompress, default_output

    src = Path(args.input)
    if args.output == "-":  # (as zstd -dc: the file on standard output)
        return _decompress_to_stdout(args, src)
    out = args.output or str(default_output(src))  # a str: Path would turn s3:// into s3:/
    check_cli_output(out, args.force)
    bar = ProgressBar("decompress", args.quiet)
    beside: list[Path] = []
    fmt = decompress(
        src,
        out,
        fmt=args.format,
        progress=bar,
        force=args.force,
        references=args.reference,
        beside=beside,
    )
    bar.finish()
    for path in beside:  # (files the container named: always told, even with -q)
        print(f"nncodecs: also wrote {path} (external data the model names)", file=sys.stderr)
    size = path_bytes(Path(out.removeprefix("file://")))
    if not (args.quiet or args.json):
        print(f"{src} -> {out} ({fmt}, {human(size)})")
    # (what was written, every file of it, for a script; the files beside count)
    also = [str(p) for p in beside]
    restored = size + sum(p.stat().st_size for p in beside if p.is_file())
    stored = None if "://" in str(args.input) else path_bytes(src)
    return {
        "input": str(src),
        "output": out,
        "format": fmt,
        "original_bytes": restored,
        "stored_bytes": stored,
        "beside": also,
    }


def _decompress_to_stdout(args: argparse.Namespace, src: Path) -> dict[str, Any]:
    from nncodecs.formats.streaming import stream_safetensors

    if args.json:
        raise ValueError("-o -: standard output carries the file, so --json cannot go there")
    if sys.stdout.isatty():
        raise ValueError("-o -: standard output is a terminal; redirect it to a file or a pipe")
    bar = ProgressBar("decompress", args.quiet)
    sys.stdout.flush()
    stream_safetensors(src, sys.stdout.buffer, args.format, bar, args.reference)
    sys.stdout.buffer.flush()
    bar.finish()
    return {"input": str(src), "output": "-", "format": "safetensors"}


def cmd_verify(args: argparse.Namespace) -> int:
    from nncodecs import Reader
    from nncodecs.errors import CorruptDataError
    from nncodecs.formats.source import KEPT, named_order
    from nncodecs.formats.spliced import check_spliced, has_places

    with Reader(args.input, references=args.reference) as r:
        r.verify()
        fmt = r.metadata.get("source.format", "")
        # (a GGUF, ONNX or torch source: restored into its digests, nothing written)
        exact = check_spliced(r, fmt) if has_places(r.metadata, fmt) else 0
        if fmt == "safetensors" and "source.files" in r.metadata:  # (its files' records)
            from nncodecs.formats.streaming import check_safetensors_files
            from nncodecs.formats.torch_members import check_members

            exact = check_safetensors_files(r, str(args.input)) + check_members(r)
        if fmt == "dcp":  # (a torch.distributed.checkpoint directory: its .distcp files)
            from nncodecs.formats.dcp import check_dcp

            exact = check_dcp(r)
        kept = r.metadata.get(KEPT)  # (the kept files the source had: all must be there)
        if kept is not None and kept != str(len(r.files())):
            raise CorruptDataError(
                f"{args.input}: {len(r.files())} kept files, but the source had {kept}"
            )
        count = source_count(r.metadata)
        order, tied = named_order(r)  # (a tied tensor is stored once, under its first name)
        if count is not None and count != len(order):
            raise CorruptDataError(
                f"{args.input}: {len(order)} tensors, but the source had {count}: "
                f"{'some are missing' if count > len(order) else 'more than it had'}"
            )
        if args.json:
            emit(
                args,
                input=str(args.input),
                ok=True,
                tensors=len(order),
                tied=len(tied),
                kept_files=len(r.files()),
                source_tensors=count,
                source_format=fmt or None,
                source_exact=bool(exact),
                references=len(r.references()),
            )
        elif not args.quiet:
            more = f" ({len(tied)} of them tied: stored once)" if tied else ""
            files = f", {counted(len(r.files()), 'kept file')}" if r.files() else ""
            back = f"; its {fmt} source comes back byte for byte" if exact else ""
            deltas = r.references()
            if deltas:
                back += (
                    f"; {len(deltas)} stored against references, each found and the one "
                    "written against"
                )
            print(
                f"{args.input}: {counted(len(order), 'tensor')}{more}{files}, every checksum holds"
                f"{of_source(count)}{back}"
            )
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from nncodecs.formats import merge_containers

    check_cli_output(args.output, args.force)
    merge_containers(
        args.inputs, args.output, codec=args.codec, force=args.force, references=args.reference
    )
    if args.json:
        emit(args, inputs=[str(i) for i in args.inputs], output=args.output)
    elif not args.quiet:
        print(f"{len(args.inputs)} containers -> {args.output}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    """By what the input is and what -o's suffix names (:func:`nncodecs.formats.convert`)."""
    from nncodecs.formats import convert

    check_cli_output(args.output, args.force)
    fmt = convert(
        args.input,
        args.output,
        fmt=args.format,
        codec=args.codec,
        force=args.force,
        dequantize=args.dequantize,
    )
    if args.json:
        emit(args, input=str(args.input), output=args.output, format=fmt)
    elif not args.quiet:
        print(f"{Path(args.input)} -> {args.output} ({fmt})")
    return 0


def _recorded_sizes(container: str) -> tuple[int | None, int | None]:
    """A local container's recorded source size and its own files' size (``None``, for
    a URL: the store's to tell)."""
    if "://" in container:
        return None, None
    from nncodecs import Reader
    from nncodecs.formats.file_modes import recorded_bytes

    with Reader(container) as r:
        return recorded_bytes(r.metadata), path_bytes(Path(container))
