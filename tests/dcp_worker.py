"""One rank of a torch.distributed.checkpoint run for tests/integrations/test_dcp.py: run
as ``python dcp_worker.py JOB`` (a JSON object) with RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT set, gloo on the CPU, DTensors sharded on a CPU device mesh. Prints one JSON
line: what it saw."""

from __future__ import annotations

import datetime
import json
import os
import sys
from typing import Any

from nncodecs.integrations.dcp import ContainerReader, ContainerWriter

try:  # (pytest --doctest-modules imports every module of tests/, where torch may be absent)
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh
except ModuleNotFoundError:
    pass


def full_tensors(seed: int, nudged: bool = False) -> dict[str, torch.Tensor]:
    """The global tensors of step ``seed``; ``nudged``: step ``seed`` with ``w`` moved a
    little (the next step of a run: every other tensor the same)."""
    g = torch.Generator().manual_seed(seed)
    out = {
        "w": torch.randn(96, 40, generator=g),
        "b": torch.randn(30, generator=g),  # (30 rows over 4 ranks: 8, 8, 8, 6)
        "e": torch.randn(24, 16, generator=g).to(torch.bfloat16),
        "r": torch.randn(5, 7, generator=g),  # (replicated: one rank writes it)
    }
    if nudged:
        out["w"] = out["w"] + 1e-3 * torch.randn(96, 40, generator=torch.Generator().manual_seed(9))
    return out


def state(
    world: int, seed: int, empty: bool, nudged: bool = False
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    full = full_tensors(seed, nudged)
    mesh = init_device_mesh("cpu", (world,))
    model = {}
    for k, v in full.items():
        value = torch.zeros_like(v) if empty else v
        placement = Replicate() if k == "r" else Shard(0)
        model[k] = distribute_tensor(value, mesh, [placement])
    exp_avg = {"w": distribute_tensor(torch.zeros_like(full["w"]) if empty else full["w"] * 0.1,
                                      mesh, [Shard(0)])}  # fmt: skip
    step = 0.0 if empty else 7.0
    sd = {
        "model": model,
        "optimizer": {"state": {0: {"exp_avg": exp_avg["w"], "step": torch.tensor(step)}}},
        "step": 0 if empty else seed,
        "extra": {"lr": 0.0 if empty else 0.5, "name": "" if empty else "run"},
    }
    return sd, full


def main() -> None:
    job = json.loads(sys.argv[1])
    timeout = datetime.timedelta(seconds=job.get("timeout", 60))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    opts = job.get("storage_options")
    out: dict[str, Any] = {"rank": rank}
    if job["mode"] in ("save", "async", "kill"):
        sd, _ = state(world, job.get("seed", 1), empty=False, nudged=job.get("nudged", False))
        writer = ContainerWriter(job["path"], overwrite=job.get("overwrite", False),
                                 reference=job.get("reference"), storage_options=opts)  # fmt: skip
        if job["mode"] == "kill" and rank == job["victim"]:
            real = writer.write_data

            def dying(plan: Any, planner: Any) -> Any:
                real(dataclasses_first(plan), planner)
                os._exit(9)

            writer.write_data = dying  # type: ignore[method-assign]
        if job.get("plain"):  # (DCP's own FileSystemWriter: a directory of .distcp files)
            writer = dcp.FileSystemWriter(job["path"])
        if job["mode"] == "async":
            dcp.async_save(sd, storage_writer=writer).result()
            writer.reset(job["path2"])  # (the same writer, the next step)
            sd2, _ = state(world, job.get("seed", 1) + 1, empty=False)
            dcp.async_save(sd2, storage_writer=writer).result()
        else:
            dcp.save(sd, storage_writer=writer)
    else:
        sd, full = state(world, job.get("seed", 1), empty=True, nudged=job.get("nudged", False))
        reader = ContainerReader(job["path"], storage_options=opts)
        dcp.load(sd, storage_reader=reader)
        out["bytes_read"] = reader.bytes_read
        out["ok"] = all(
            torch.equal(sd["model"][k].full_tensor(), full[k]) for k in full
        ) and torch.equal(sd["optimizer"]["state"][0]["exp_avg"].full_tensor(), full["w"] * 0.1)
        out["step"] = sd["step"]
        out["extra"] = sd["extra"]
        out["opt_step"] = float(sd["optimizer"]["state"][0]["step"])
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(out), flush=True)
    # (torch's gloo aborted at interpreter exit in about 1 of 12 loading ranks here:
    # "terminate called without an active exception", after all its work was done and
    # printed. The rank's work is what is tested, so it leaves without the teardown.)
    sys.stderr.flush()
    os._exit(0)


def dataclasses_first(plan: Any) -> Any:
    """The plan with its first item only: the rank dies having written part of its share."""
    import dataclasses

    return dataclasses.replace(plan, items=plan.items[:1])


if __name__ == "__main__":
    main()
