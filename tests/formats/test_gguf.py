"""GGUF quantized tensors stored field by field (the ``records`` layout) and restored byte
for byte through the CLI; the GGML block layouts checked against the ``gguf`` package's
sizes and its dequantizer; the records layout's own checks."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import optional_import

from nncodecs import CorruptDataError, Reader, Writer
from nncodecs.container.composite import assemble, records_parts
from nncodecs.formats import compress, decompress
from nncodecs.formats.ggml import BLOCK_FIELDS
from nncodecs.formats.spliced import GAPS_FILE

# What gguf.quants can write; the K-quants and IQ types it only reads.
WRITABLE = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "TQ1_0", "TQ2_0", "MXFP4"]
READ_ONLY = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ2_XXS", "IQ2_XS",
             "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"]  # fmt: skip
# Fields a block's value is linear in: doubling this one doubles the block's values once
# the offsets (``m``, ``dmin``) are zero.
SCALE = {"MXFP4": "e"}
OFFSETS = ("m", "dmin")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nncodecs", *args], cwd=cwd, capture_output=True, text=True
    )


def write_gguf(path: Path, tensors: dict[str, tuple[np.ndarray, str]]) -> Path:
    """A GGUF file of ``{name: (array or blocks, GGML type name)}`` with a vocabulary."""
    gguf = optional_import("gguf")
    writer = gguf.GGUFWriter(path, "bert")
    writer.add_string("general.name", "planes")
    writer.add_token_list([f"tok{i}" for i in range(500)])
    for name, (arr, kind) in tensors.items():
        qtype = gguf.GGMLQuantizationType[kind]
        if kind in ("F32", "F16"):
            writer.add_tensor(name, arr)
        else:
            writer.add_tensor(name, arr, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_every_block_layout_has_ggml_s_size() -> None:
    gguf = optional_import("gguf")
    from gguf.constants import GGML_QUANT_SIZES

    for kind, fields in BLOCK_FIELDS.items():
        size = sum(np.dtype(dtype).itemsize * count for _, dtype, count in fields)
        assert size == GGML_QUANT_SIZES[gguf.GGMLQuantizationType[kind]][1], kind
    assert set(WRITABLE + READ_ONLY) <= set(BLOCK_FIELDS)


def interleave(parts: dict[str, np.ndarray], kind: str) -> np.ndarray:
    """Bytes of blocks from their fields' arrays, put together here (not by nncodecs)."""
    columns = [np.ascontiguousarray(parts[f]).view(np.uint8).reshape(len(parts[f]), -1)
               for f, _, _ in BLOCK_FIELDS[kind]]  # fmt: skip
    return np.concatenate(columns, axis=1).reshape(-1)


def _blocks(kind: str, rows: int, cols: int, seed: int) -> np.ndarray:
    """Blocks of ``kind`` built to its layout: random quants, float16 scales of a real
    model's size (never inf or NaN), offsets zero."""
    gguf = optional_import("gguf")
    from gguf.constants import GGML_QUANT_SIZES

    block, size = GGML_QUANT_SIZES[gguf.GGMLQuantizationType[kind]]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (rows * cols // block) * size, dtype=np.uint8)
    _, parts, _ = records_parts("x", raw, BLOCK_FIELDS[kind])
    for field, part in parts.items():
        if part.dtype == np.float16:
            scales = rng.uniform(0.001, 0.05, part.shape).astype(np.float16)
            part[...] = 0 if field in OFFSETS else scales
    return interleave(parts, kind).reshape(rows, -1)


# (IQ1_M has no block scale of its own: its scale's bits are spread over ``scales``)
@pytest.mark.parametrize("kind", [k for k in WRITABLE + READ_ONLY if k != "IQ1_M"])
def test_the_scale_field_is_the_block_s_scale(kind: str) -> None:
    """The split is GGML's: doubling what the layout calls the scale (``d``; MXFP4's
    exponent ``e`` plus one), offsets zero, doubles every value the gguf package's
    dequantizer reads from the bytes put back together."""
    gguf = optional_import("gguf")
    if kind in WRITABLE:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((4, 512)).astype(np.float32)
        blocks = gguf.quants.quantize(x, gguf.GGMLQuantizationType[kind])
    else:
        blocks = _blocks(kind, 4, 512, 1)
    _, parts, extra = records_parts("w", blocks.reshape(-1), BLOCK_FIELDS[kind])
    assert np.array_equal(assemble("w", "records", parts, extra, "numpy"), blocks.reshape(-1))
    for field in OFFSETS:
        if field in parts:
            parts[field][...] = 0
    field = SCALE.get(kind, "d")
    base = interleave(parts, kind)
    if kind == "MXFP4":
        parts["e"][...] = np.minimum(parts["e"], 200)
        base = interleave(parts, kind)
        parts["e"] += 1
    else:
        parts[field][...] = parts[field] * 2
    doubled = interleave(parts, kind)
    qtype = gguf.GGMLQuantizationType[kind]
    before = gguf.quants.dequantize(base.reshape(4, -1), qtype)
    after = gguf.quants.dequantize(doubled.reshape(4, -1), qtype)
    assert np.abs(before).max() > 0
    np.testing.assert_array_equal(after, before * 2)


def test_every_type_comes_back_byte_identical_through_the_cli(
    real_weights: dict, tmp_path: Path
) -> None:
    """Real MiniLM matrices in every type gguf.quants writes, blocks of every read-only
    type on rows of 256-multiples, F32 / F16 / BF16 beside them: sha256-identical, each
    quantized tensor stored as its block's fields (scales typed float16)."""
    gguf = optional_import("gguf")
    names = [n for n, a in real_weights.items() if a.ndim == 2 and a.shape[0] <= 1536][:2]
    tensors: dict[str, tuple[np.ndarray, str]] = {}
    for i, kind in enumerate([*WRITABLE, "BF16"]):
        arr = real_weights[names[i % 2]]
        if arr.shape[1] % 256:
            arr = arr.T.copy()  # (rows of 1536 for the 256-value types)
        qtype = gguf.GGMLQuantizationType[kind]
        tensors[f"{kind}.weight"] = (gguf.quants.quantize(arr, qtype), kind)
    for i, kind in enumerate(READ_ONLY):
        tensors[f"{kind}.weight"] = (_blocks(kind, 8, 512, i), kind)
    tensors["norm.weight"] = (real_weights[names[0]][0].copy(), "F32")
    tensors["half.weight"] = (real_weights[names[0]][:8].astype(np.float16), "F16")
    path = write_gguf(tmp_path / "m.gguf", tensors)
    r = cli("compress", "m.gguf", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = cli("decompress", "m.gguf.zarr.zip", "-o", "back.gguf", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sha(tmp_path / "back.gguf") == sha(path)
    r = cli("verify", "m.gguf.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0 and "gguf source comes back byte for byte" in r.stdout, r.stdout
    with Reader(tmp_path / "m.gguf.zarr.zip") as c:
        for kind in WRITABLE + READ_ONLY:
            name = f"{kind}.weight"
            assert c.layout(name) == "records", name
            assert c.info(name).nbytes == tensors[name][0].nbytes
            assert np.array_equal(c.read_tensor(name), tensors[name][0].reshape(-1))
            fields = c._entries[name].attrs["fields"]
            assert [f[0] for f in fields] == [f for f, _, _ in BLOCK_FIELDS[kind]]
        assert c.layout("BF16.weight") == "dense" and c.info("BF16.weight").dtype == "bfloat16"
        assert not c.files() and c.files(hidden=True) == [GAPS_FILE]  # (an array, hidden)
        assert "source.gguf.gaps" not in c.metadata
        sizes = json.loads(c.metadata["source.gguf.gap_sizes"])
        assert sum(sizes) == len(c.read_file(GAPS_FILE)) > 500 * 4
        c.verify()


def test_quantized_blocks_compress_below_their_raw_bytes(
    real_weights: dict, tmp_path: Path
) -> None:
    """Scales apart from quants pay: a real Q8_0 matrix stores smaller than its bytes
    coded whole (what the container did before) and than zstd -19 of them."""
    gguf = optional_import("gguf")
    zstandard = optional_import("zstandard")
    arr = next(a for a in real_weights.values() if a.ndim == 2 and a.shape[0] == 1536)
    blocks = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0).reshape(-1)
    with Writer(tmp_path / "split.zarr") as w:
        w.add_records("q", blocks, BLOCK_FIELDS["Q8_0"])
    with Writer(tmp_path / "whole.zarr") as w:
        w.add_tensor("q", blocks)
    with Reader(tmp_path / "split.zarr") as r, Reader(tmp_path / "whole.zarr") as whole:
        split, raw = r.info("q").stored_bytes, whole.info("q").stored_bytes
        assert np.array_equal(r.read_tensor("q"), blocks)
    zstd = len(zstandard.ZstdCompressor(level=19).compress(blocks.tobytes()))
    assert split < 0.97 * raw and split < zstd


def test_records_layout_checks_what_it_is_given_and_what_it_reads(tmp_path: Path) -> None:
    fields = [("d", "float16", 1), ("qs", "uint8", 4)]
    data = np.arange(60, dtype=np.uint8)
    with Writer(tmp_path / "m.zarr") as w:
        with pytest.raises(ValueError, match="whole number of 6-byte records"):
            w.add_records("a", data[:59], fields)
        with pytest.raises(TypeError, match="records are bytes"):
            w.add_records("a", data.astype(np.int16), fields)
        for bad in ([("d", "float16", 0)], [("d", "float16", 1), ("d", "uint8", 1)],
                    [("a b", "uint8", 1)], [("d", "complex64", 1)], [], "nonsense"):  # fmt: skip
            with pytest.raises(ValueError, match="fields must"):
                w.add_records("a", data, bad)
        w.add_records("a", data, fields)
        w.add_records("b", data.tobytes(), fields)  # (bytes-like too)
    with Reader(tmp_path / "m.zarr") as r:
        assert np.array_equal(r.read_tensor("a"), data) and r.layout("b") == "records"
        assert r.info("a").dtype == "uint8" and r.info("a").shape == (60,)
    # merge keeps the layout; a conversion to safetensors writes the bytes
    from nncodecs import merge

    merge([tmp_path / "m.zarr"], tmp_path / "merged.zarr")
    with Reader(tmp_path / "merged.zarr") as r:
        assert r.layout("a") == "records" and np.array_equal(r.read_tensor("b"), data)
    decompress(tmp_path / "m.zarr", tmp_path / "m.safetensors")
    from safetensors.numpy import load_file

    assert np.array_equal(load_file(str(tmp_path / "m.safetensors"))["a"], data)
    with Writer(tmp_path / "x.zarr") as w, pytest.raises(ValueError, match="big-endian"):
        w.add_records("a", data, [("d", ">f2", 1), ("qs", "uint8", 4)])
    # forged records are refused by name, never a wrong byte (fields in another order,
    # parts swapped: the CRC32C of the bytes put back; a huge or odd shape: before memory)
    root = tmp_path / "m.zarr" / "zarr.json"
    good = root.read_text()

    def forged(change: Any, match: str, call: str = "read_tensor") -> None:
        doc = json.loads(good)
        change(doc["consolidated_metadata"]["metadata"]["a"]["attributes"]["nncodecs"])
        root.write_text(json.dumps(doc))
        with Reader(tmp_path / "m.zarr") as r, pytest.raises(CorruptDataError, match=match):
            getattr(r, call)("a")

    forged(lambda a: a["fields"][1].__setitem__(2, 5), "'a'")
    forged(lambda a: a["fields"].reverse(), "'a'")
    forged(lambda a: a["fields"].__setitem__(0, ["qs", "uint8", 2]), "'a'")
    forged(lambda a: a.__setitem__("shape", [18 << 40]), "field 'd' should be")
    forged(lambda a: a.__setitem__("shape", 60), "shape 60 is damaged", "info")
    forged(lambda a: a.__setitem__("shape", "60"), "shape '60' is damaged", "info")
    forged(lambda a: a.pop("crc32c"), "differ from those written")


def test_a_gguf_with_its_gaps_inline_still_restores(real_weights: dict, tmp_path: Path) -> None:
    """``archive`` keeps the gaps hidden as compress does; containers written before the
    gaps moved keep them in the attributes (base64) and restore as before; a forged gap
    size is refused."""
    import base64

    gguf = optional_import("gguf")
    arr = next(a for a in real_weights.values() if a.ndim == 2)
    blocks = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q4_0)
    path = write_gguf(tmp_path / "m.gguf", {"w": (blocks, "Q4_0")})
    from nncodecs import archive

    archive(str(path), str(tmp_path / "a.zarr"), scheduler="sync", progress=False)
    with Reader(tmp_path / "a.zarr") as r, Writer(tmp_path / "old.zarr") as old:
        assert "source.gguf.gap_sizes" in r.metadata and r.files(hidden=True) == [GAPS_FILE]
        kept, at, gaps = r.read_file(GAPS_FILE), 0, []
        for n in json.loads(r.metadata["source.gguf.gap_sizes"]):
            gaps.append(base64.b64encode(kept[at : at + n]).decode())
            at += n
        old.metadata.update({k: v for k, v in r.metadata.items() if "gap_sizes" not in k})
        old.metadata["source.gguf.gaps"] = json.dumps(gaps)
        old.add_tensor("w", r.read_tensor("w"))  # (as raw bytes, as before the split)
    for container in ("a.zarr", "old.zarr"):
        decompress(tmp_path / container, tmp_path / f"{container}.gguf")
        assert sha(tmp_path / f"{container}.gguf") == sha(path)
    compress(path, tmp_path / "c.zarr")
    root = tmp_path / "c.zarr" / "zarr.json"
    doc = json.loads(root.read_text())
    sizes = doc["attributes"]["nncodecs"]["metadata"]["source.gguf.gap_sizes"]
    doc["attributes"]["nncodecs"]["metadata"]["source.gguf.gap_sizes"] = "[1, 2]"
    root.write_text(json.dumps(doc))
    with pytest.raises(CorruptDataError, match="GGUF records are damaged"):
        decompress(tmp_path / "c.zarr", tmp_path / "c.gguf")
    assert not (tmp_path / "c.gguf").exists()
    r = cli("verify", "c.zarr", cwd=tmp_path)  # (verify restores it into a digest: refused)
    assert r.returncode != 0 and "GGUF records are damaged" in r.stderr, r.stderr
    doc["attributes"]["nncodecs"]["metadata"]["source.gguf.gap_sizes"] = sizes
    doc["attributes"]["nncodecs"]["metadata"]["source.crc32c"] = "0badc0de"
    root.write_text(json.dumps(doc))
    r = cli("verify", "c.zarr", cwd=tmp_path)
    assert r.returncode != 0 and "would not come back byte for byte" in r.stderr, r.stderr


def test_hidden_files_are_nncodecs_own_and_merge_keeps_them_with_their_records(
    tmp_path: Path,
) -> None:
    """A user cannot add a file under .nncodecs/; merging one spliced container keeps its
    bytes (it still restores), two of them drop both (their records differ), even where
    their gap sizes agree."""
    gguf = optional_import("gguf")
    rng = np.random.default_rng(5)
    with Writer(tmp_path / "u.zarr") as w, pytest.raises(ValueError, match="nncodecs' own"):
        w.add_file(".nncodecs/source-gaps", b"x")
    paths = []
    for name in ("wa", "wb"):  # (same layout: the same gap sizes, other bytes)
        q = gguf.quants.quantize(rng.standard_normal((2, 64)).astype(np.float32),
                                 gguf.GGMLQuantizationType.Q8_0)  # fmt: skip
        paths.append(write_gguf(tmp_path / f"{name}.gguf", {name: (q, "Q8_0")}))
        assert cli("compress", f"{name}.gguf", "-q", cwd=tmp_path).returncode == 0
    r = cli("merge", "wa.gguf.zarr.zip", "-o", "one.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = cli("decompress", "one.zarr.zip", "-o", "one.gguf", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sha(tmp_path / "one.gguf") == sha(paths[0])
    r = cli("merge", "wa.gguf.zarr.zip", "wb.gguf.zarr.zip", "-o", "ab.zarr.zip", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with Reader(tmp_path / "ab.zarr.zip") as ab:
        assert sorted(ab.keys()) == ["wa", "wb"] and not ab.files(hidden=True)
        ab.verify()
