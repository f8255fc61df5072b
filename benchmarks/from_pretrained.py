"""A transformers model loaded from a container against transformers' own load of the
snapshot directory (issue 18): whole processes, best of ``--repeat``, and the call alone.

    python benchmarks/from_pretrained.py [--repeat 3]

The snapshot is all-MiniLM-L6-v2 as its package ships it (config, tokenizer, weights);
the container is ``nncodecs compress`` of that directory. Each process imports torch and
transformers, loads the model and runs one forward pass; both outputs must be equal.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOAD = {
    "transformers.AutoModel.from_pretrained(snapshot dir)": (
        "import transformers; load = lambda p: transformers.AutoModel.from_pretrained("
        "p, local_files_only=True)"
    ),
    "nncodecs from_pretrained(container)": (
        "from nncodecs.integrations.transformers import from_pretrained as load"
    ),
}
RUN = """
import sys, time, torch
{load}
t = time.perf_counter()
model = load(sys.argv[1]).eval()
took = time.perf_counter() - t
with torch.no_grad():
    out = model(input_ids=torch.tensor([[101, 7570, 2003, 1037, 6251, 102]])).last_hidden_state
torch.save(out, sys.argv[2])
print(took)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import torch

    from nncodecs.datasets import minilm_path
    from nncodecs.formats import compress

    with tempfile.TemporaryDirectory() as tmp:
        snap = Path(tmp) / "snapshot"
        shutil.copytree(minilm_path().parent, snap, ignore=shutil.ignore_patterns("__pycache__"))
        container = Path(tmp) / "model.zarr.zip"
        compress(snap, container)
        inputs = [str(snap), str(container)]
        print(f"| load (best of {args.repeat}) | process s | the call s |\n|---|---|---|")
        outs = []
        for (label, load), where in zip(LOAD.items(), inputs, strict=True):
            best_p = best_c = float("inf")
            out = Path(tmp) / f"out{len(outs)}.pt"
            for _ in range(args.repeat):
                t = time.perf_counter()
                r = subprocess.run([sys.executable, "-c", RUN.format(load=load), where, out],
                                   capture_output=True, text=True, check=True)  # fmt: skip
                best_p = min(best_p, time.perf_counter() - t)
                best_c = min(best_c, float(r.stdout.split()[-1]))
            outs.append(torch.load(out))
            print(f"| {label} | {best_p:.2f} | {best_c:.3f} |")
        print(f"\noutputs equal: {torch.equal(outs[0], outs[1])}")


if __name__ == "__main__":
    main()
