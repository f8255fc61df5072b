"""Write the analysis notebooks of notebooks/ from the cells below, and run them.

``python scripts/make_notebooks.py`` writes them; ``--execute`` then runs every notebook
of notebooks/ (quickstart.ipynb too) in a Jupyter kernel and saves its outputs, plots
included, so that they show where the repository is browsed. Commit what it writes.
The test suite reruns them with nbval (tests/docs/test_notebooks.py): every text output must
come out the same, except in cells tagged ``nbval-ignore-output`` (``"code-varies"``
below: timings, the peers installed). Edit the cells here, not the .ipynb files.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parent.parent / "notebooks"

INSPECT = [
    (
        "md",
        """# Inside a container: exponents, planes, and what each codec achieves

This notebook opens an nncodecs container of a real model (all-MiniLM-L6-v2,
bundled offline, in bfloat16) and looks at why its weights compress: how their
exponents are distributed, how much entropy each byte plane carries once the
exponent bits are moved into their own plane, and what each codec stores per
tensor.""",
    ),
    ("md", "First a container to open: the model's weights written with the default codec."),
    (
        "code",
        """import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import nncodecs
from nncodecs.codecs.planes import split_array
from nncodecs.datasets import minilm_weights

weights = minilm_weights("bfloat16")
work = tempfile.TemporaryDirectory()  # removed when the kernel stops
path = Path(work.name) / "minilm.zarr"
with nncodecs.Writer(path) as w:
    for name, tensor in weights.items():
        w.add_tensor(name, tensor)
reader = nncodecs.Reader(path)
print(len(reader), "tensors;", sum(reader.info(n).nbytes for n in reader) >> 20, "MiB")""",
    ),
    (
        "md",
        """The layers worth looking at are the large weight matrices (biases and
norms are a few hundred values each).""",
    ),
    (
        "code",
        """layers = [n for n in reader if reader.info(n).nbytes >= 256 << 10]
print(len(layers), "layers of 256 KiB or more, e.g.", layers[:3])""",
    ),
    (
        "md",
        """## The exponent distribution

A bfloat16 value has 8 exponent bits. In trained weights only a few exponents
occur, and most values share a handful of them: that is what an entropy
coder exploits. One histogram per layer (a few layers, overlaid).""",
    ),
    (
        "code",
        """def exponents(tensor):
    bits = np.asarray(tensor).view(np.uint16)
    return (bits >> 7) & 0xFF

fig, ax = plt.subplots(figsize=(8, 3.5))
for name in layers[:6]:
    e = exponents(reader.read_tensor(name))
    counts = np.bincount(e.ravel(), minlength=256)
    label = ".".join(name.split(".")[-3:-1])
    ax.plot(np.arange(256), counts / counts.sum(), label=label)
ax.set_xlim(100, 130)
ax.set_xlabel("exponent byte")
ax.set_ylabel("share of values")
ax.legend(fontsize=7)
plt.show()""",
    ),
    (
        "md",
        """## Entropy of each byte plane, per layer

After the bit reorder (sign moved below the exponent) and the split into byte
planes, the exponent plane carries about 2.6 bits of entropy a byte; the
mantissa plane is near random (8 bits). This is the per-plane order-0
entropy of every large layer.""",
    ),
    (
        "code",
        """def entropy(plane):
    p = np.bincount(plane, minlength=256) / plane.size
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())

rows = []
for name in layers:
    planes = split_array(reader.read_tensor(name), reorder=True).reshape(2, -1)
    rows.append([entropy(planes[0]), entropy(planes[1])])
rows = np.array(rows)
fig, ax = plt.subplots(figsize=(9, 3.5))
x = np.arange(len(layers))
ax.bar(x - 0.2, rows[:, 0], 0.4, label="plane 0 (mantissa)")
ax.bar(x + 0.2, rows[:, 1], 0.4, label="plane 1 (exponent)")
ax.set_ylabel("bits / byte")
ax.set_xlabel("layer")
ax.legend()
plt.show()
print("mean exponent-plane entropy:", round(float(rows[:, 1].mean()), 2), "bits a byte")""",
    ),
    (
        "md",
        """## What each codec achieves per tensor

The same tensors through each of nncodecs' codecs and zstd, as the ratio
nncodecs states everywhere: original bytes over stored bytes, times smaller
(higher is better). The `weights` codec is what the
container uses by default.""",
    ),
    (
        "code",
        """from numcodecs import Zstd

codecs = {
    "weights (auto)": nncodecs.NumcodecsWeights(dtype="bfloat16"),
    "weights (rans)": nncodecs.NumcodecsWeights(coder="rans", dtype="bfloat16"),
    "weights (huffman)": nncodecs.NumcodecsWeights(coder="huffman", dtype="bfloat16"),
    "zstd -3": Zstd(level=3),
}
ratios = {label: [] for label in codecs}
for name in layers:
    t = reader.read_tensor(name)
    for label, codec in codecs.items():
        data = t if label.startswith("weights") else t.view(np.uint16)
        ratios[label].append(t.nbytes / len(codec.encode(data)))
fig, ax = plt.subplots(figsize=(9, 3.5))
for label, r in ratios.items():
    ax.plot(r, marker="o", ms=3, label=label)
ax.set_ylabel("original / stored (x smaller)")
ax.set_xlabel("layer")
ax.legend(fontsize=8)
plt.show()
for label, r in ratios.items():
    print(f"{label:18s} mean {np.mean(r):.3f}x")""",
    ),
    ("md", "The container's own account of each tensor (stored bytes and codec chain):"),
    (
        "code",
        """from nncodecs.sizes import ratio_text

for name in layers[:4]:
    info = reader.info(name)
    print(f"{name:45s} {ratio_text(info.nbytes, info.stored_bytes)}  {info.codec}")
reader.close()
work.cleanup()  # the temporary container goes""",
    ),
]

COMPARE = [
    (
        "md",
        """# Codecs and peers: ratio and speed

The same real model (all-MiniLM-L6-v2, offline) in float32, bfloat16 and
float16, through nncodecs' `weights` codec and through the peers installed
here: zstd, ztensor (its seekable zstd encoding) and ZipNN, each when
importable. A
plot shows ratio against decode speed: up and right is better. One run on
this machine; `make compare` is the full benchmark.""",
    ),
    ("md", "The models, and a timing helper (best of three, one thread for everyone)."),
    (
        "code",
        """import time

import matplotlib.pyplot as plt
import numpy as np
from numcodecs import Zstd

import nncodecs
from nncodecs.datasets import minilm_weights

nncodecs.set_threads(1)
models = {dt: minilm_weights(dt) for dt in ("float32", "bfloat16", "float16")}

def best(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)""",
    ),
    (
        "md",
        """Each system is a pair of functions on a whole model (a dict of tensors):
encode to a list of buffers, decode them back. Every result is checked
bit for bit.""",
    ),
    (
        "code-varies",
        """def nncodecs_system(dtype):
    # each tensor's own dtype (the model holds an int64 one too)
    def encode(model):
        return [nncodecs.NumcodecsWeights(dtype=t.dtype).encode(t) for t in model.values()]
    def decode(frames, model):
        return [nncodecs.NumcodecsWeights(dtype=t.dtype).decode(f)
                for f, t in zip(frames, model.values())]
    return encode, decode

def zstd_system(dtype):
    z = Zstd(level=3)
    def encode(model):
        return [z.encode(np.ascontiguousarray(t).view(np.uint8)) for t in model.values()]
    def decode(frames, model):
        return [np.frombuffer(z.decode(f), t.dtype) for f, t in zip(frames, model.values())]
    return encode, decode

systems = {"nncodecs weights": nncodecs_system, "zstd -3": zstd_system}
try:
    from zipnn import ZipNN

    def zipnn_system(dtype):
        zn = ZipNN(bytearray_dtype={"float32": "float32", "bfloat16": "bfloat16",
                                     "float16": "float16"}[dtype], threads=1)
        def encode(model):
            return [zn.compress(np.ascontiguousarray(t).tobytes()) for t in model.values()]
        def decode(frames, model):
            return [np.frombuffer(zn.decompress(f), t.dtype)
                    for f, t in zip(frames, model.values())]
        return encode, decode

    systems["ZipNN"] = zipnn_system
except ImportError:
    print("ZipNN is not installed here: left out")
import os
import tempfile

scratch = tempfile.TemporaryDirectory()  # for the systems that write files
try:
    import ztensor

    def ztensor_system(dtype):
        # ztensor's own file, its seekable zstd encoding over each tensor's bytes
        path = os.path.join(scratch.name, f"{dtype}.zt")
        def encode(model):
            w = ztensor.Writer(path, canonical=False)
            for name, t in model.items():
                raw = np.ascontiguousarray(t).reshape(-1).view(np.uint8)
                w.add(name, raw, [raw.size], "u8", encoding="zt.zstd-seekable/1")
            w.finish()
            with open(path, "rb") as f:
                return [f.read()]
        def decode(frames, model):
            src = ztensor.open(path)
            out = [np.frombuffer(src[name].tobytes(), t.dtype) for name, t in model.items()]
            src.close()
            return out
        return encode, decode

    systems["ztensor"] = ztensor_system
except ImportError:
    print("ztensor is not installed here: left out")
print("systems:", ", ".join(systems))""",
    ),
    ("md", "Measure: ratio (original over stored, x smaller), encode and decode speed in MB/s."),
    (
        "code-varies",
        """rows = []
for dtype, model in models.items():
    nbytes = sum(t.nbytes for t in model.values())
    for label, make in systems.items():
        encode, decode = make(dtype)
        frames = encode(model)
        back = decode(frames, model)
        assert all(np.asarray(b).tobytes() == t.tobytes() for b, t in zip(back, model.values()))
        stored = sum(len(f) for f in frames)
        rows.append({
            "dtype": dtype, "system": label, "ratio": nbytes / stored,
            "encode MB/s": nbytes / best(lambda: encode(model)) / 1e6,
            "decode MB/s": nbytes / best(lambda: decode(frames, model)) / 1e6,
        })
for r in rows:
    print(f"{r['dtype']:9s} {r['system']:17s} ratio {r['ratio']:.3f}x  "
          f"encode {r['encode MB/s']:7.0f} MB/s  decode {r['decode MB/s']:7.0f} MB/s")""",
    ),
    ("md", "The plot: each point one system on one dtype."),
    (
        "code",
        """fig, ax = plt.subplots(figsize=(7, 4))
markers = {"float32": "o", "bfloat16": "s", "float16": "^"}
colors = {label: f"C{i}" for i, label in enumerate(systems)}
for r in rows:
    ax.scatter(r["decode MB/s"], r["ratio"], marker=markers[r["dtype"]], color=colors[r["system"]],
               label=f"{r['system']} {r['dtype']}")
ax.set_xlabel("decode MB/s (one thread)")
ax.set_ylabel("original / stored (x smaller)")
ax.legend(fontsize=7, ncol=2)
plt.show()
nncodecs.set_threads(None)
scratch.cleanup()  # ztensor's files go""",
    ),
]

XARRAY = [
    (
        "md",
        """# A container with xarray and dask: lazy slices, statistics in parallel

A container is a Zarr group, one array per tensor: xarray opens it lazily,
and dask turns every chunk into a task. Nothing is read until a value is
needed; per-layer statistics are computed in parallel over the chunks.""",
    ),
    (
        "md",
        "A container of the real model (float32, offline), written by `nncodecs.archive` "
        "with small chunks, so that the big tensors have many.",
    ),
    (
        "code",
        """import tempfile
from pathlib import Path

import dask
import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

import nncodecs
from nncodecs.datasets import minilm_weights

weights = minilm_weights("float32")
work = tempfile.TemporaryDirectory()  # removed when the kernel stops
path = Path(work.name) / "minilm.zarr"
result = nncodecs.archive(weights, path, chunk_bytes=256 << 10, progress=False)
print(result.tensors, "tensors in", result.tasks, "dask tasks")""",
    ),
    (
        "md",
        """xarray opens the group as a Dataset of lazy (dask-backed) variables: one
per tensor, named by its escaped tensor name. Opening reads metadata only.""",
    ),
    (
        "code",
        """ds = xr.open_zarr(path, consolidated=True, zarr_format=3)
big = max(ds.data_vars, key=lambda v: ds[v].size)
print(len(ds.data_vars), "variables; the largest:", big, ds[big].shape, ds[big].dtype)
print("backed by", type(ds[big].data).__name__, "with", ds[big].data.npartitions, "chunks")""",
    ),
    ("md", "A slice reads and decodes only the chunks it touches."),
    (
        "code",
        """rows = ds[big][1000:1004].values
reader = nncodecs.Reader(path)
name = next(n for n in reader if reader.info(n).shape == ds[big].shape)
assert np.array_equal(rows, weights[name][1000:1004])
print(rows.shape, "rows read lazily, equal to the original")""",
    ),
    (
        "md",
        """Per-layer statistics, all computed in one dask graph (every chunk of every
layer a task, run in parallel): mean absolute value and standard deviation
of each weight matrix.""",
    ),
    (
        "code",
        """matrices = {n: reader.to_dask(n) for n in reader if len(reader.info(n).shape) == 2}
stats = dask.compute({n: (abs(a).mean(), a.std()) for n, a in matrices.items()})[0]
names = list(stats)
fig, ax = plt.subplots(figsize=(9, 3.5))
ax.plot([stats[n][0] for n in names], marker="o", ms=3, label="mean |w|")
ax.plot([stats[n][1] for n in names], marker="s", ms=3, label="std")
ax.set_xlabel("weight matrix (in model order)")
ax.legend()
plt.show()
check = names[0]
assert np.isclose(stats[check][1], weights[check].std(), rtol=1e-5)
print(len(names), "matrices; statistics match NumPy's on the original")""",
    ),
    (
        "md",
        "The same reader gives a dict of dask arrays for the whole model, for any other analysis.",
    ),
    (
        "code",
        """lazy = reader.to_dask()
total = sum(a.nbytes for a in lazy.values())
print(len(lazy), "dask arrays;", total >> 20, "MiB in all, none read yet")
reader.close()
work.cleanup()  # the temporary container goes""",
    ),
]


IGNORE = "nbval-ignore-output"


def notebook(cells: list[tuple[str, str]]) -> dict:
    """The notebook of ``cells``, outputs empty."""
    out = []
    for i, (kind, text) in enumerate(cells):
        lines = text.splitlines(keepends=True)
        if kind == "md":
            out.append({"cell_type": "markdown", "id": f"cell-{i}", "metadata": {},
                        "source": lines})  # fmt: skip
        else:
            meta = {"tags": [IGNORE]} if kind == "code-varies" else {}
            out.append({"cell_type": "code", "execution_count": None, "id": f"cell-{i}",
                        "metadata": meta, "outputs": [], "source": lines})  # fmt: skip
    return {
        "cells": out,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def without_outputs(nb: dict[str, Any]) -> dict[str, Any]:
    """A notebook (parsed JSON) as written before it ran: what the generator compares."""
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["metadata"] = {k: nb["metadata"][k] for k in ("kernelspec", "language_info")}
    nb["metadata"]["language_info"] = {"name": "python"}
    return nb


def execute(path: Path) -> None:
    """Run a notebook top to bottom in a fresh kernel, in a scratch directory, and save it
    with its outputs (no timestamps: a rerun changes only what the code prints)."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as work:
        nbclient.NotebookClient(
            nb, timeout=300, kernel_name="python3", record_timing=False,
            resources={"metadata": {"path": work}},
        ).execute()  # fmt: skip
    nb.metadata = {"kernelspec": nb.metadata["kernelspec"], "language_info": {"name": "python"}}
    nbformat.write(nb, path)


GENERATED = (("inspect_weights", "INSPECT"), ("compare_codecs", "COMPARE"),
             ("xarray_dask", "XARRAY"))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execute", action="store_true", help="run them and save outputs")
    args = parser.parse_args()
    for name, cells in GENERATED:
        path = ROOT / f"{name}.ipynb"
        path.write_text(json.dumps(notebook(globals()[cells]), indent=1) + "\n")
        print("wrote", path)
    if args.execute:
        for path in sorted(ROOT.glob("*.ipynb")):
            execute(path)
            print("ran", path)


if __name__ == "__main__":
    main()
