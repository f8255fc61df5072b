"""The ``nncodecs`` command: compress, decompress, info, verify, merge, convert.

``main`` runs one; the parser is in ``parser``, the commands in ``commands`` and ``info``.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import os
import sys
from typing import Any

from nncodecs.cli.errors import error_line
from nncodecs.cli.parser import build_parser, dask_without_address

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command; errors are one line on stderr: exit 1, or 2 for a usage error."""
    parser = build_parser()
    try:
        args = parser.parse_args(dask_without_address(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # (``nncodecs --help | head -1``)
        return _closed_pipe()
    previous = _terminate_as_interrupt()
    try:
        return _run(args)
    finally:  # (an in-process caller gets its own SIGTERM handling back)
        if previous is not None:
            import contextlib
            import signal

            with contextlib.suppress(KeyboardInterrupt):  # (a second Ctrl-C: ending anyway)
                signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    """The command of ``args``; errors as :func:`main` says."""
    # A model's thousands of tensors allocate many small objects (Zarr's metadata of
    # each): collecting after every 700 took a tenth of a decompress. A command holds
    # no cycles worth collecting that often.
    gc.set_threshold(100_000, 50, 50)
    # NumPy's OpenBLAS starts a thread per core that spins after start-up: 0.1-0.17 s of
    # CPU taken from the codec's threads on two cores. No command does linear algebra.
    # (Before NumPy's first import, which no command has done yet; a user's setting stays.)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print("nncodecs: interrupted", file=sys.stderr)
        _quiet_exit()
        return 130
    except BrokenPipeError:  # (``nncodecs info ... | head``: the reader has all it wanted)
        return _closed_pipe()
    except Exception as exc:  # one line for people, not a traceback
        print(error_line(exc, args), file=sys.stderr)
        _quiet_exit()
        return 1


def _closed_pipe() -> int:
    """Quiet, as ``ls | head`` is, when stdout's reader went away: stdout goes nowhere
    from here, so that Python's own flush at exit does not fail again (its buffer is
    lost with the pipe anyway); 141 = 128 + SIGPIPE, as a shell reports such a command."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141


def _terminate_as_interrupt() -> Any:
    """SIGTERM (a kill, a scheduler's stop) ends the run as Ctrl-C does: the output is
    not published, its temporary and lock are removed, one line is printed. Returns the
    handler it replaced (``None`` off the main thread, where none is set)."""
    import signal
    import threading

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, stop)


def _quiet_exit() -> None:
    """After an error, Zarr's event loop may still hold tasks of the failed call; at exit
    asyncio would print "Task was destroyed but it is pending!" for each, and each
    coroutine finalised after the loop closed a traceback ("Event loop is closed") or a
    warning (never awaited). The error line is what the user needs: silence those for
    the rest of the process."""
    import logging
    import warnings

    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
    warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
    default = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        closing = isinstance(unraisable.exc_value, RuntimeError) and inspect.iscoroutine(
            unraisable.object
        )
        if not closing:
            default(unraisable)

    sys.unraisablehook = hook
