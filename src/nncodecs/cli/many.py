"""Several inputs in one call (``nncodecs compress a.safetensors b.gguf``), as zstd and
gzip take them: each to its default output, beside it or in ``--output-dir``; one that
fails is named on stderr and the others go on; the exit status is 1 when any failed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nncodecs.cli.errors import error_line
from nncodecs.cli.report import emit

__all__ = ["run_each"]


def run_each(
    args: argparse.Namespace,
    one: Callable[[argparse.Namespace], dict[str, Any]],
    default_output: Callable[[Path], Path],
) -> int:
    """Run ``one`` (a command for ``args.input`` and ``args.output``, returning its
    ``--json`` fields) on each of ``args.inputs``."""
    inputs = args.inputs
    if args.output and (len(inputs) > 1 or args.output_dir is not None):
        raise ValueError(
            "-o names one output: for several inputs give --output-dir DIR, or neither "
            "(each output beside its input)"
        )
    if args.output_dir is not None and not Path(args.output_dir).is_dir():
        raise FileNotFoundError(f"{args.output_dir}: no such directory; create it first")
    if len(inputs) == 1 and args.output_dir is None:
        args.input = inputs[0]
        record = one(args)
        if args.json:
            emit(args, **record)
        return 0
    results, failed = [], 0
    for src in inputs:
        each = argparse.Namespace(**vars(args))
        each.input, each.inputs = src, [src]
        if args.output_dir is not None:
            each.output = str(Path(args.output_dir) / default_output(Path(src)).name)
        try:
            results.append({"ok": True, **one(each)})
        except Exception as exc:  # (this input's: named, and the next one goes on)
            line = error_line(exc, each)
            print(line, file=sys.stderr)
            results.append({"input": str(src), "ok": False, "error": line})
            failed += 1
    if args.json:
        emit(args, results=results)
    elif not args.quiet and len(inputs) > 1:
        more = f"; {failed} failed (named above)" if failed else ""
        print(f"{len(inputs) - failed} of {len(inputs)} inputs done{more}")
    return 1 if failed else 0
