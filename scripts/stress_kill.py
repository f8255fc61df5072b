"""Kill container writers at random moments and check what survives.

For each mode (directory / zip container x write / append) and trial, a
writer forked from this process (which has nncodecs imported already, so a
trial costs milliseconds, not an interpreter start) adds tensors, small ones
in batches and large ones written through at once, calling ``flush()`` now
and then, and reports each tensor's name on a pipe once it is committed
(``flush`` / ``close`` returned; ``add_tensor`` returned, for a large tensor
in a directory container already at its path). The parent SIGKILLs it after
a random delay, then checks:

- write mode with no commit begun: nothing at the named path;
- otherwise a container that lists every reported tensor, every tensor it
  lists bit-exact, ``verify()`` passing;
- beside the target only the documented temporaries of the dead writer
  (``.NAME.nncodecs-PID.tmp``, ``.NAME.nncodecs.lock``), and a new writer
  takes the container over (lock and temporaries of the dead one) and leaves
  nothing but the target behind.

``python scripts/stress_kill.py --trials 60`` (``make stress``); exits 1 on any
failure, printing each.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from nncodecs import Reader, Writer

MODES = ("dir-w", "dir-a", "zip-w", "zip-a")
BASE = ("base0", "base1")
ALLOWED = re.compile(r"^\.(?P<name>.+)\.nncodecs(-\d+\.tmp|\.lock)$")


def tensor(name: str) -> np.ndarray:
    """The tensor a name stands for (deterministic: the parent checks bits)."""
    seed = sum(map(ord, name)) * 7919 + len(name)
    rng = np.random.default_rng(seed)
    rows = 300 if name.startswith("big") else 8  # big: 300 x 1024 float32 = 1.2 MiB
    return (rng.standard_normal((rows, 1024 if rows == 300 else 64)) * 0.02).astype(np.float32)


def victim(target: Path, mode: str, report: int, seed: int) -> None:
    """The writer (in the forked child): never returns."""
    rng = random.Random(seed)
    try:
        w = Writer(target, mode="a" if mode.endswith("-a") else "w")
        pending: list[str] = []
        in_place = mode == "dir-a"

        def committed(names: list[str]) -> None:
            if names:
                os.write(report, ("".join(f"{n}\n" for n in names)).encode())

        for i in range(24):
            name = f"big{i}" if rng.random() < 0.2 else f"t{i}"
            w.add_tensor(name, tensor(name))
            if name.startswith("big") and in_place:
                committed([name])
            else:
                pending.append(name)
            if rng.random() < 0.15:
                os.write(report, b"#committing\n")  # (a kill from here on may find it done)
                w.flush()
                committed(pending)
                pending = []
                in_place = in_place or mode == "dir-w"
        os.write(report, b"#committing\n")
        w.close()
        committed(pending)
        os.write(report, b"#closed\n")
    finally:
        os._exit(0)


def make_base(target: Path) -> None:
    with Writer(target) as w:
        for name in BASE:
            w.add_tensor(name, tensor(name))


def read_reports(fd: int) -> list[str]:
    chunks = []
    while True:
        data = os.read(fd, 1 << 16)
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode().split()


def check(target: Path, mode: str, committed: list[str], pid: int) -> list[str]:
    """The problems found after a kill (empty: all is well)."""
    problems = []
    for entry in target.parent.iterdir():
        if entry == target:
            continue
        m = ALLOWED.match(entry.name)
        if not m or m["name"] != target.name:
            problems.append(f"unexpected file beside the target: {entry.name}")
        elif "-" in entry.name and f"-{pid}." not in entry.name:
            problems.append(f"a temporary of another pid: {entry.name}")
    expected = [n for n in committed if not n.startswith("#")]
    if mode.endswith("-a"):
        expected = [*BASE, *expected]
    if not expected and not (target.exists() and "#committing" in committed):
        if target.exists():
            problems.append("nothing was committed, yet the target exists")
        return problems
    try:
        with Reader(target) as r:
            missing = [n for n in expected if n not in r]
            if missing:
                problems.append(f"committed but not listed: {missing}")
            for name in r:
                if not np.array_equal(r.read_tensor(name), tensor(name)):
                    problems.append(f"{name}: not bit-exact")
            r.verify()
    except Exception as exc:
        problems.append(f"reading: {type(exc).__name__}: {exc}")
        return problems
    # A new writer takes over the dead one's lock and temporaries.
    try:
        with Writer(target, mode="a") as w:
            w.add_tensor("after", tensor("after"))
        with Reader(target) as r:
            if "after" not in r or any(n not in r for n in expected):
                problems.append("an append after the kill lost tensors")
        left = sorted(p.name for p in target.parent.iterdir() if p != target)
        if left:
            problems.append(f"left beside the target after a clean append: {left}")
    except Exception as exc:
        problems.append(f"appending after the kill: {type(exc).__name__}: {exc}")
    return problems


def trial(mode: str, delay: float, seed: int) -> tuple[list[str], float, bool]:
    root = Path(tempfile.mkdtemp(prefix="nncodecs-stress-"))
    try:
        target = root / "out" / ("m.zarr" if mode.startswith("dir") else "m.zarr.zip")
        target.parent.mkdir()
        if mode.endswith("-a"):
            make_base(target)
        read_fd, write_fd = os.pipe()
        start = time.perf_counter()
        sys.stdout.flush()  # (the child must not print the parent's buffer again)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            victim(target, mode, write_fd, seed)
        os.close(write_fd)
        deadline = start + delay
        done = 0
        while not done and time.perf_counter() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            time.sleep(0.001)
        if not done:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        elapsed = time.perf_counter() - start
        reports = read_reports(read_fd)
        os.close(read_fd)
        closed = "#closed" in reports
        return check(target, mode, reports, pid), elapsed, closed
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=60, help="per mode")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    failures = 0
    print(f"{'mode':6} {'trials':>6} {'killed':>6} {'closed':>6} {'failed':>6} {'s':>6}")
    for mode in args.modes.split(","):
        began = time.perf_counter()
        _, full, _ = trial(mode, 1e9, rng.randrange(1 << 30))  # an unkilled run: its length
        killed = closed = failed = 0
        for _ in range(args.trials):
            problems, _, was_closed = trial(
                mode, rng.uniform(0, full * 1.1), rng.randrange(1 << 30)
            )
            closed += was_closed
            killed += not was_closed
            if problems:
                failed += 1
                print(f"  {mode}: " + "; ".join(problems), file=sys.stderr)
        failures += failed
        print(
            f"{mode:6} {args.trials:6} {killed:6} {closed:6} {failed:6} "
            f"{time.perf_counter() - began:6.1f}"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
