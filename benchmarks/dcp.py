"""torch.distributed.checkpoint storage: nncodecs' ContainerWriter / ContainerReader, into
a directory and into a zip, beside DCP's own FileSystemWriter / FileSystemReader, plain
and with DCP's zstd extension (``_extensions=[ZStandard()]``).

The state dict is a real training checkpoint: all-MiniLM-L6-v2 after 10 AdamW steps
(``nncodecs.datasets.minilm_training_checkpoints``): model (float32, or its weights
rounded to bfloat16) and optimizer state (float32 moments). Saved and loaded in one
process (DCP without a process group): a round saves and loads with each system in
turn; the first round warms up and is not counted. Printed: bytes stored, save and
load seconds (medians of the rounds, and each against the plain writer's; dirty pages
written out before each), every load
checked bit for bit against what was saved; then the files and folders each save
makes and what creating one costs where they are written (a directory container makes
one a stored object and a few a tensor, DCP's writer one a rank).

Usage: ``python benchmarks/dcp.py [--work DIR] [--repeat 5] [--pause SECONDS]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

from nncodecs.integrations.dcp import ContainerReader, ContainerWriter

warnings.filterwarnings("ignore", message="torch.distributed is disabled")


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def remove(path: Path) -> None:
    if path.is_file():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def zeroed(state: Any) -> Any:
    if isinstance(state, torch.Tensor):
        return torch.zeros_like(state)
    if isinstance(state, dict):
        return {k: zeroed(v) for k, v in state.items()}
    if isinstance(state, list):
        return [zeroed(v) for v in state]
    return state


def same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(
            a.view(-1).view(torch.uint8), b.view(-1).view(torch.uint8)
        )
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def systems() -> dict[str, tuple[Any, Any, str]]:
    from torch.distributed.checkpoint._extension import ZStandard

    return {
        "DCP FileSystemWriter": (FileSystemWriter, FileSystemReader, ""),
        "DCP + ZStandard": (
            lambda p: FileSystemWriter(p, _extensions=[ZStandard()]),
            FileSystemReader,
            "",
        ),
        "nncodecs, a directory": (ContainerWriter, ContainerReader, ""),
        "nncodecs, a zip": (ContainerWriter, ContainerReader, ".zip"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "nncodecs-dcp"))
    parser.add_argument("--repeat", type=int, default=5)
    idle = "seconds idle before each timed save and load (saves spaced out, as in training)"
    parser.add_argument("--pause", type=float, default=0.0, help=idle)
    args = parser.parse_args()
    work = Path(args.work)
    from nncodecs.datasets import minilm_training_checkpoints

    made = work / "training"
    if not (made / "done").exists():
        shutil.rmtree(made, ignore_errors=True)
        minilm_training_checkpoints(made, windows=((10, 10),))
        (made / "done").write_text("ok")
    head = (f"{'weights':9s} {'system':26s} {'stored MB':>10s} {'ratio':>8s} {'save s':>8s} "
            f"{'vs plain':>9s} {'load s':>8s} {'vs plain':>9s} {'exact':>6s}")  # fmt: skip
    print(head + "\n" + "-" * len(head))
    from nncodecs.sizes import times_smaller

    for dtype in ("float32", "bfloat16"):
        state = torch.load(made / f"step-010.{dtype}.pt", weights_only=True)
        raw = sum(t.numel() * t.element_size() for t in _tensors(state))
        runs = {
            name: {"save": [], "load": [], "exact": True, "stored": 0, "files": 0}
            for name in systems()
        }
        for i in range(args.repeat + 1):  # (round 0 warms up, uncounted; then round-robin)
            for name, (writer, reader, suffix) in systems().items():
                run = runs[name]
                path = work / "out" / f"{i}{suffix}"
                remove(path)
                os.sync()  # (no save pays for writing out another's dirty pages)
                time.sleep(args.pause)
                t0 = time.perf_counter()
                dcp.save(state, storage_writer=writer(path))
                save = time.perf_counter() - t0
                run["stored"] = size(path)
                run["files"] = sum(1 for _ in path.rglob("*")) + 1 if path.is_dir() else 1
                target = zeroed(state)
                os.sync()
                time.sleep(args.pause)
                t0 = time.perf_counter()
                dcp.load(target, storage_reader=reader(path))
                load = time.perf_counter() - t0
                run["exact"] &= same(state, target)
                remove(path)
                if i:
                    run["save"].append(save)
                    run["load"].append(load)
        plain = {k: statistics.median(runs["DCP FileSystemWriter"][k]) for k in ("save", "load")}
        files = ", ".join(f"{name} {run['files']}" for name, run in runs.items())
        for name, run in runs.items():
            save, load = statistics.median(run["save"]), statistics.median(run["load"])
            stored, exact = run["stored"], "yes" if run["exact"] else "NO"
            print(f"{dtype:9s} {name:26s} {stored / 1e6:10.2f} {times_smaller(raw, stored, 3):>8s} "
                  f"{save:8.2f} {save / plain['save']:8.2f}x {load:8.2f} "
                  f"{load / plain['load']:8.2f}x {exact:>6s}")  # fmt: skip
    made_at = creation_cost(work / "out")
    print(f"\nfiles and folders each save makes: {files}; creating one in {work / 'out'} "
          f"takes {made_at * 1e6:.0f} us (a file and a folder, 500 of each)")  # fmt: skip
    print(f"ratio = tensor bytes ({raw / 1e6:.1f} MB of float32) / stored bytes (x smaller); "
          f"seconds: medians of {args.repeat} rounds (one save and load of each system a "
          f"round, in turn), after a round that warms up; {args.pause:g} s idle before "
          "each")  # fmt: skip


def creation_cost(folder: Path, n: int = 500) -> float:
    """Seconds to create one empty file or one folder in ``folder`` (the mean of both)."""
    scratch = folder / "creation-cost"
    remove(scratch)
    scratch.mkdir(parents=True)
    t0 = time.perf_counter()
    for i in range(n):
        (scratch / f"f{i}").touch()
        (scratch / f"d{i}").mkdir()
    spent = time.perf_counter() - t0
    remove(scratch)
    return spent / (2 * n)


def _tensors(state: Any) -> list[torch.Tensor]:
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        return [t for v in state.values() for t in _tensors(v)]
    if isinstance(state, list):
        return [t for v in state for t in _tensors(v)]
    return []


if __name__ == "__main__":
    main()
