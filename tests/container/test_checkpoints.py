"""Checkpoint series (issue 19): tensors stored against a reference container, as
differences or duplicates; read back exactly, sliced, verified; references that are
missing, replaced or outside the store refused by name; the CLI, merge and archive."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from conftest import optional_import
from harness import same_bits

import nncodecs
from nncodecs import Reader, ReferenceNeededError, ReferenceProblemError, Writer
from nncodecs.container import merge
from nncodecs.container.delta import forward, inverse
from nncodecs.container.references import resolve_reference
from nncodecs.formats.safetensors import write_safetensors


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nncodecs", *args], cwd=cwd, capture_output=True, text=True
    )


def series(steps: int, seed: int = 0, dtype: object = np.float32) -> list[dict[str, np.ndarray]]:
    """A small training-run-like series: weights that move by a few ulps a step, a frozen
    embedding, an int counter, a scalar."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((300, 64)) * 0.05).astype(np.float32)
    b = (rng.standard_normal(64) * 0.01).astype(np.float32)
    emb = (rng.standard_normal((50, 32)) * 0.1).astype(np.float32)
    out = []
    for step in range(steps):
        if step:
            w = w - 2e-5 * np.sign(rng.standard_normal(w.shape)).astype(np.float32)
            b = b - 2e-5 * np.sign(rng.standard_normal(b.shape)).astype(np.float32)
        out.append({
            "layer.weight": w.astype(dtype), "layer.bias": b.astype(dtype),
            "embed.weight": emb.astype(dtype), "steps": np.array([step] * 8, np.int64),
            "scale": np.array(0.5 + step, np.float32),
        })  # fmt: skip
    return out


def write(path: Path, tensors: dict[str, np.ndarray], **kw: object) -> Path:
    with Writer(path, **kw) as w:
        for name, arr in tensors.items():
            w.add_tensor(name, arr)
    return path


def stored(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(
        f.stat().st_size for f in path.rglob("*") if f.is_file()
    )  # fmt: skip


@pytest.mark.parametrize("transform", ["xor", "sub"])
@pytest.mark.parametrize(
    "dtype", ["float32", "bfloat16", "float16", "float8_e4m3fn", "int8", "uint64", "float64"]
)
def test_transforms_invert_on_every_bit_pattern_width(transform: str, dtype: str) -> None:
    rng = np.random.default_rng(1)
    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    n = 150_001  # (over two of inverse's blocks, and a part)
    a = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt)
    b = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt)
    coded = forward(transform, a, b)
    assert same_bits(inverse(transform, coded.copy(), b).view(dt), a)


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_delta_round_trip_info_and_size(tmp_path: Path, suffix: str, dtype: object) -> None:
    s = series(3, dtype=dtype)
    paths = [write(tmp_path / f"s0{suffix}", s[0])]
    for k in (1, 2):
        paths.append(write(tmp_path / f"s{k}{suffix}", s[k], reference=paths[-1]))
    whole = write(tmp_path / f"whole{suffix}", s[2])
    assert stored(paths[2]) < 0.6 * stored(whole)
    with Reader(paths[2]) as r:
        for name, arr in s[2].items():
            assert same_bits(r.read_tensor(name), arr), name
        info = r.info("layer.weight")
        assert info.reference == {"container": f"s1{suffix}", "tensor": "layer.weight",
                                  "transform": info.reference["transform"],
                                  "duplicate": False}  # fmt: skip
        assert info.depth == 2 and info.dtype == np.dtype(dtype).name
        emb = r.info("embed.weight")
        assert emb.reference["duplicate"] and emb.reference["container"] == f"s0{suffix}"
        assert emb.depth == 1  # (the shallowest of equal tensors: s0's, not s1's copy)
        assert emb.stored_bytes < 1200  # (its zarr.json, and a constant chunk of 22 bytes)
        assert r.info("scale").reference is None  # (a scalar that moved: no difference pays)
        r.verify()
        assert same_bits(r["layer.weight"][10:20, 3:9], s[2]["layer.weight"][10:20, 3:9])
        assert same_bits(np.asarray(r["layer.weight"]), s[2]["layer.weight"])
        assert same_bits(r.to_dask("layer.weight").compute(), s[2]["layer.weight"])


def test_duplicates_found_under_another_name_and_off_without_dedup(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((200, 50)).astype(np.float32)
    # (found by the hashes a container records: with hashes=True, or written against one)
    unhashed = write(tmp_path / "unhashed.zarr", {"encoder.weight": a})
    other = write(tmp_path / "other.zarr", {"decoder.weight": a.copy()}, reference=unhashed)
    with Reader(other) as r:
        assert r.info("decoder.weight").reference is None
    base = write(tmp_path / "base.zarr", {"encoder.weight": a}, hashes=True)
    tied = write(tmp_path / "tied.zarr", {"decoder.weight": a.copy()}, reference=base)
    with Reader(tied) as r:
        ref = r.info("decoder.weight").reference
        assert ref["duplicate"] and ref["tensor"] == "encoder.weight"
        assert same_bits(r.read_tensor("decoder.weight"), a)
    off = write(tmp_path / "off.zarr", {"decoder.weight": a.copy()}, reference=base, dedup=False)
    with Reader(off) as r:
        assert r.info("decoder.weight").reference is None  # (no tensor of that name there)


def test_chains_are_bounded_by_keyframes(tmp_path: Path) -> None:
    s = series(6)
    prev = write(tmp_path / "c0.zarr", s[0])
    depths = [0]
    for k in range(1, 6):
        prev = write(tmp_path / f"c{k}.zarr", s[k], reference=prev, max_chain=2)
        with Reader(prev) as r:
            depths.append(r.info("layer.weight").depth)
    assert depths == [0, 1, 2, 0, 1, 2]
    with pytest.raises(ValueError, match="max_chain"):
        Writer(tmp_path / "bad.zarr", reference=prev, max_chain=0)


def test_a_plain_zarr_reader_is_refused_never_given_wrong_numbers(tmp_path: Path) -> None:
    import zarr

    s = series(2)
    base = write(tmp_path / "a.zarr", s[0])
    step = write(tmp_path / "b.zarr", s[1], reference=base)
    z = zarr.open_group(str(step), mode="r")["layer.weight"]
    assert z.shape == (300, 64) and z.dtype == np.float32
    with pytest.raises(ReferenceNeededError, match=r"read it with nncodecs\.Reader"):
        z[:]


def test_missing_replaced_and_corrupt_references_are_named(tmp_path: Path) -> None:
    s = series(2)
    base = write(tmp_path / "a.zarr", s[0])
    step = write(tmp_path / "b.zarr", s[1], reference=base)
    shutil.move(base, tmp_path / "moved.zarr")
    with Reader(step) as r:
        assert same_bits(r.read_tensor("steps"), s[1]["steps"])  # (ints: stored whole? any)
        with pytest.raises(
            ReferenceProblemError, match=r"'layer\.weight'.*'a\.zarr'.*cannot be opened"
        ):
            r.read_tensor("layer.weight")
        with pytest.raises(ReferenceProblemError, match="layer"):
            r.verify()
    out = run("verify", str(step), cwd=tmp_path)
    assert out.returncode != 0 and "a.zarr" in out.stderr and "layer." in out.stderr
    # Moved: named on the command line, as the recorded place's new home.
    with Reader(step, references={"a.zarr": str(tmp_path / "moved.zarr")}) as r:
        r.verify()
    # Another container under the reference's name: not the tensors it was written against.
    write(tmp_path / "a.zarr", series(2, seed=9)[0])
    with Reader(step) as r, pytest.raises(ReferenceProblemError, match="not the tensor"):
        r.read_tensor("layer.weight")
    # A damaged chunk of the reference: its frame's CRC names it.
    shutil.rmtree(tmp_path / "a.zarr")
    shutil.copytree(tmp_path / "moved.zarr", tmp_path / "a.zarr")
    chunk = next((tmp_path / "a.zarr" / "layer.weight" / "c").rglob("*"))
    while chunk.is_dir():
        chunk = next(chunk.iterdir())
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x40
    chunk.write_bytes(bytes(data))
    with Reader(step) as r, pytest.raises(ReferenceProblemError, match=r"layer\.weight"):
        r.read_tensor("layer.weight", check=True)


def test_a_slice_decodes_only_the_reference_chunks_it_needs(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((512, 256)).astype(np.float32)
    b = a + np.float32(1e-6) * rng.standard_normal(a.shape).astype(np.float32)
    # (its hash recorded: it stands for its bits, so a slice need not check them whole)
    base = write(tmp_path / "a.zarr", {"w": a}, chunk_bytes=64 << 10, hashes=True)  # 64 rows
    step = write(tmp_path / "b.zarr", {"w": b}, reference=base, chunk_bytes=64 << 10)
    (tmp_path / "a.zarr" / "w" / "c" / "7" / "0").unlink()  # the last chunk: rows 448..511
    with Reader(step) as r:
        assert same_bits(r["w"][:400], b[:400])
        with pytest.raises(nncodecs.CorruptDataError):
            r.read_tensor("w")


@pytest.mark.parametrize(
    "recorded",
    ["../x.zarr", "/etc/passwd", "a/../../b.zarr", "C:\\x.zarr", "s3://bucket/x.zarr", "", ".."],
)
def test_references_never_lead_outside_the_store(tmp_path: Path, recorded: str) -> None:
    with pytest.raises(ReferenceProblemError):
        resolve_reference(str(tmp_path / "c.zarr"), recorded, {})


def test_a_reference_elsewhere_is_followed_only_where_named(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "store").mkdir()
    s = series(2)
    base = write(tmp_path / "other" / "a.zarr.zip", s[0])
    step = write(tmp_path / "store" / "b.zarr.zip", s[1], reference=base)
    with Reader(step) as r, pytest.raises(ReferenceProblemError, match="outside"):
        r.read_tensor("layer.weight")
    with Reader(step, references=[base]) as r:
        r.verify()
    out = run("verify", str(step), "--reference", str(base), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "stored against references" in out.stdout


def test_cli_compress_against_a_reference_restores_byte_identical(tmp_path: Path) -> None:
    s = series(3)
    files = []
    for k, tensors in enumerate(s):
        files.append(tmp_path / f"ckpt-{k}.safetensors")
        write_safetensors(files[-1], tensors.items())
    assert run("compress", str(files[0]), "-o", "ckpt-0.zarr.zip", cwd=tmp_path).returncode == 0
    for k in (1, 2):
        out = run("compress", str(files[k]), "-o", f"ckpt-{k}.zarr.zip", "--reference",
                  f"ckpt-{k - 1}.zarr.zip", cwd=tmp_path)  # fmt: skip
        assert out.returncode == 0, out.stderr
    info = run("info", "ckpt-2.zarr.zip", cwd=tmp_path)
    assert (
        "= ckpt-1.zarr.zip (2)" in info.stdout
        and "same bits as = ckpt-0.zarr.zip (1)" in info.stdout
    )
    js = json.loads(run("info", "ckpt-2.zarr.zip", "--json", cwd=tmp_path).stdout)
    assert {t["name"]: t["depth"] for t in js["tensors"]}["layer.weight"] == 2
    out = run("decompress", "ckpt-2.zarr.zip", "-o", "back.safetensors", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    digest = [
        hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (files[2], tmp_path / "back.safetensors")
    ]
    assert digest[0] == digest[1]
    assert run("verify", "ckpt-2.zarr.zip", cwd=tmp_path).returncode == 0
    assert run("merge", "ckpt-2.zarr.zip", "-o", "whole.zarr.zip", cwd=tmp_path).returncode == 0
    with Reader(tmp_path / "whole.zarr.zip") as r:
        assert all(r.info(n).reference is None for n in r)
        assert all(same_bits(r.read_tensor(n), a) for n, a in s[2].items())


def test_merge_writes_followed_tensors_whole(tmp_path: Path) -> None:
    s = series(2)
    base = write(tmp_path / "a.zarr", s[0])
    step = write(tmp_path / "b.zarr", s[1], reference=base)
    merge([step], tmp_path / "m.zarr")
    shutil.rmtree(base)
    with Reader(tmp_path / "m.zarr") as r:
        assert all(same_bits(r.read_tensor(n), a) for n, a in s[1].items())


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_archive_a_series_against_the_previous(tmp_path: Path, scheduler: str) -> None:
    optional_import("dask")
    s = series(5)
    result = nncodecs.archive({f"step-{k}": t for k, t in enumerate(s)}, tmp_path / "store",
                              scheduler=scheduler, delta="previous", max_chain=2,
                              progress=False)  # fmt: skip
    assert result.tensors == 25
    depths = []
    for k, tensors in enumerate(s):
        with Reader(tmp_path / "store" / f"step-{k}") as r:
            assert all(same_bits(r.read_tensor(n), a) for n, a in tensors.items())
            depths.append(r.info("layer.weight").depth)
            if k:
                assert r.info("embed.weight").reference["duplicate"]
            r.verify()
    assert depths == [0, 1, 2, 0, 1]
    with pytest.raises(ValueError, match="series"):
        nncodecs.archive(s[0], tmp_path / "one", delta="previous")
    with pytest.raises(ValueError, match="weights codec"):
        nncodecs.archive({"a": s[0], "b": s[1]}, tmp_path / "z", delta="previous", codec="zstd")


def test_a_real_fine_tune_series_stores_small_and_frozen_layers_as_references(
    tmp_path: Path,
) -> None:
    optional_import("torch")
    optional_import("transformers")
    from nncodecs.datasets import minilm_checkpoints

    for frozen in (False, True):
        run_dir = tmp_path / f"frozen-{frozen}"
        steps = minilm_checkpoints(run_dir, steps=2, frozen=frozen)
        prev = None
        for k, paths in enumerate(steps):
            out = run_dir / f"step-{k}.zarr.zip"
            nncodecs.formats.compress(paths["float32"], out, reference=prev)
            prev = out
        with Reader(prev) as r:
            refs = r.references()
            if frozen:  # embeddings and layers 0-1: the same bits as step 0's
                frozen_names = [n for n in r if n.startswith(("embeddings.", "encoder.layer.0."))]
                assert frozen_names and all(r.info(n).reference["duplicate"] for n in frozen_names)
                # (each: its zarr.json and a constant frame of ~22 bytes a chunk)
                assert all(r.info(n).stored_bytes < 4096 for n in frozen_names)
            assert len(refs) >= 100
        whole = stored(run_dir / "step-0.zarr.zip")
        assert stored(prev) < 0.4 * whole
        back = run_dir / "back.safetensors"
        nncodecs.formats.decompress(prev, back)
        assert back.read_bytes() == steps[-1]["float32"].read_bytes()


def forge(container: Path, node: str, change: object) -> None:
    """Edit a node's document in a directory container: its own zarr.json and the root's
    consolidated copy (which a Reader reads)."""
    root = json.loads((container / "zarr.json").read_text())
    doc = root["consolidated_metadata"]["metadata"][node]
    change(doc)  # type: ignore[operator]
    (container / "zarr.json").write_text(json.dumps(root))
    (container / node / "zarr.json").write_text(json.dumps(doc))


def test_slices_check_a_reference_that_records_no_hash(tmp_path: Path) -> None:
    s = series(2)
    base = write(tmp_path / "a.zarr", s[0])  # (no hashes: a plain first checkpoint)
    step = write(tmp_path / "b.zarr", s[1], reference=base)
    with Reader(step) as r:  # intact: sliced, single elements too (0-d results)
        w = s[1]["layer.weight"]
        assert same_bits(r["layer.weight"][5], w[5]) and same_bits(r["layer.weight"][3, 7], w[3, 7])
        assert same_bits(r.to_dask("layer.bias")[5].compute(), s[1]["layer.bias"][5])
    shutil.rmtree(base)
    other = series(2, seed=5)[0]
    write(tmp_path / "a.zarr", other)  # same names and shapes, other bits, no hashes
    with Reader(step) as r:
        for read in (lambda: r["layer.weight"][:5], lambda: r.to_dask("layer.weight")[:5].compute(),
                     lambda: r.read_tensor("layer.weight")):  # fmt: skip
            with pytest.raises(ReferenceProblemError, match="not the tensor"):
                read()


def test_a_container_is_never_its_own_reference_and_chains_stay_readable(tmp_path: Path) -> None:
    s = series(2)
    base = write(tmp_path / "a.zarr", s[0])
    with pytest.raises(ValueError, match="its own reference"):
        Writer(tmp_path / "a.zarr", overwrite=True, reference=tmp_path / "./a.zarr")
    with Reader(base) as r:  # untouched
        assert same_bits(r.read_tensor("layer.weight"), s[0]["layer.weight"])
    for bad in (0, 65, 1.5, True):
        with pytest.raises((ValueError, TypeError), match="max_chain"):
            Writer(tmp_path / "c.zarr", reference=base, max_chain=bad)


def test_a_moved_container_finds_its_references_by_name(tmp_path: Path) -> None:
    s = series(3)
    files = []
    for k, tensors in enumerate(s):
        files.append(tmp_path / f"ckpt-{k}.safetensors")
        write_safetensors(files[-1], tensors.items())
        ref = ["--reference", f"ckpt-{k - 1}.zarr.zip"] if k else []
        out = run("compress", files[-1].name, "-o", f"ckpt-{k}.zarr.zip", *ref, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
    (tmp_path / "moved").mkdir()
    shutil.move(tmp_path / "ckpt-2.zarr.zip", tmp_path / "moved" / "ckpt-2.zarr.zip")
    out = run("decompress", "moved/ckpt-2.zarr.zip", "-o", "back.safetensors", cwd=tmp_path)
    assert out.returncode != 0 and "nncodecs: reference:" in out.stderr
    out = run("decompress", "moved/ckpt-2.zarr.zip", "-o", "back.safetensors", "--reference",
              "ckpt-1.zarr.zip", "--reference", "ckpt-0.zarr.zip", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "back.safetensors").read_bytes() == files[2].read_bytes()


def test_forged_records_and_references_of_another_shape_are_refused(tmp_path: Path) -> None:
    s = series(2)
    base = write(tmp_path / "a.zarr", s[0], hashes=True)
    step = write(tmp_path / "b.zarr", s[1], reference=base)
    for depth in ("x", [1], -100, 0, 65):
        forge(step, "layer.weight", lambda d, v=depth: d["attributes"]["nncodecs"].update(depth=v))
        with Reader(step) as r, pytest.raises(nncodecs.CorruptDataError, match="depth"):
            r.read_tensor("layer.weight")
        with pytest.raises(ReferenceProblemError, match="depth"):
            write(tmp_path / "c.zarr", s[1], reference=step, overwrite=True)
    forge(step, "layer.weight", lambda d: d["attributes"]["nncodecs"].update(depth=1))

    def other_tensor(d: dict) -> None:
        d["codecs"][0]["configuration"]["reference"]["tensor"] = "embed.weight"
        d["codecs"][0]["configuration"]["reference"]["sha256"] = "0" * 64

    forge(step, "layer.weight", other_tensor)
    with Reader(step) as r:
        with pytest.raises(ReferenceProblemError):
            r["layer.weight"][:3]
        with pytest.raises(ReferenceProblemError):
            r.read_tensor("layer.weight")


def test_a_damaged_reference_chunk_is_named_in_a_slice(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((512, 64)).astype(np.float32)
    base = write(tmp_path / "a.zarr", {"w": a}, chunk_bytes=16 << 10, hashes=True)
    step = write(tmp_path / "b.zarr", {"w": a + np.float32(1e-6)}, reference=base,
                 chunk_bytes=16 << 10)  # fmt: skip
    (tmp_path / "a.zarr" / "w" / "c" / "0" / "0").unlink()
    with Reader(step) as r, pytest.raises(ReferenceProblemError, match=r"reference.*'w'"):
        r["w"][:10]


def test_archive_finds_duplicates_across_names_and_checkpoints(tmp_path: Path) -> None:
    optional_import("dask")
    rng = np.random.default_rng(6)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    models = {
        "m0": {"a": a, "b": b},
        "m1": {"a2": a.copy(), "b": b + np.float32(1e-6)},  # a renamed; b moved
        "m2": {"a3": a.copy(), "b": b.copy()},  # b back to m0's bits
    }
    nncodecs.archive(models, tmp_path / "s", delta="previous", progress=False,
                     scheduler="sync")  # fmt: skip
    with Reader(tmp_path / "s" / "m1") as r:
        ref = r.info("a2").reference
        assert ref["duplicate"] and ref["tensor"] == "a" and ref["container"] == "m0"
        assert not r.info("b").reference["duplicate"]
    with Reader(tmp_path / "s" / "m2") as r:
        assert r.info("a3").reference["tensor"] == "a" and r.info("a3").depth == 1
        assert r.info("b").reference == {"container": "m0", "tensor": "b", "transform": "xor",
                                         "duplicate": True}  # fmt: skip
        for name, arr in models["m2"].items():
            assert same_bits(r.read_tensor(name), arr)
        r.verify()


def test_a_duplicate_reads_as_its_checked_reference_and_verify_decodes_it(
    tmp_path: Path,
) -> None:
    s = series(3)
    first = write(tmp_path / "a.zarr", s[0])  # (no hashes: a plain first checkpoint)
    second = write(tmp_path / "b.zarr", s[1], reference=first)
    third = write(tmp_path / "c.zarr", s[2], reference=second)
    with Reader(third) as r:  # followed to its origin, whose bits a CRC32C recorded checks
        ref = r.info("embed.weight").reference
        assert ref["duplicate"] and ref["container"] == "a.zarr"
    doc = json.loads((third / "embed.weight" / "zarr.json").read_text())
    assert '"crc32c"' in json.dumps(doc)
    # A damaged frame of the duplicate's zeros: a read gives the reference's (checked)
    # bits, exact; verify decodes every frame and names it.
    chunk = next(p for p in (third / "embed.weight" / "c").rglob("*") if p.is_file())
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0x40
    chunk.write_bytes(bytes(data))
    with Reader(third) as r:
        assert same_bits(r.read_tensor("embed.weight"), s[2]["embed.weight"])
        with pytest.raises(nncodecs.CorruptDataError, match=r"embed\.weight"):
            r.read_tensor("embed.weight", check=True)
        with pytest.raises(nncodecs.CorruptDataError, match=r"embed\.weight"):
            r.verify()
    # Its origin replaced by other bits of the same shape (no hash recorded there): the
    # recorded CRC32C refuses it, check or not.
    shutil.rmtree(first)
    write(tmp_path / "a.zarr", series(3, seed=7)[0])
    with Reader(third) as r:
        for check in (False, True):
            with pytest.raises(ReferenceProblemError, match="not the tensor"):
                r.read_tensor("embed.weight", check=check)


def test_writing_over_a_container_on_a_references_chain_is_refused(tmp_path: Path) -> None:
    s = series(3)
    first = write(tmp_path / "a.zarr.zip", s[0])
    second = write(tmp_path / "b.zarr.zip", s[1], reference=first)
    third = write(tmp_path / "c.zarr.zip", s[2], reference=second)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (first, second, third)}
    for target, ref in ((first, second), (first, third), (second, third)):
        with pytest.raises(ValueError, match="chain of references"):
            Writer(target, reference=ref, overwrite=True)
        src = tmp_path / "s.safetensors"
        write_safetensors(src, s[0].items())
        out = run("compress", str(src), "-o", str(target), "-f", "--reference", str(ref),
                  cwd=tmp_path)  # fmt: skip
        assert out.returncode == 1 and "chain of references" in out.stderr, out.stderr
    assert before == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in before}
    with Reader(third) as r:
        r.verify()
    out = run("compress", str(tmp_path / "s.safetensors"), "-o", str(tmp_path / "d.zarr.zip"),
              "--max-chain", "3", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 1 and "--reference" in out.stderr


def test_a_reference_whose_own_references_moved_is_written_against(tmp_path: Path) -> None:
    s = series(3)
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    write(tmp_path / "x" / "a.zarr.zip", s[0])
    write(tmp_path / "x" / "b.zarr.zip", s[1], reference=tmp_path / "x" / "a.zarr.zip")
    shutil.move(tmp_path / "x" / "a.zarr.zip", tmp_path / "y" / "a.zarr.zip")
    src = tmp_path / "c.safetensors"
    write_safetensors(src, s[2].items())
    out = run("compress", str(src), "-o", "c.zarr.zip", "--reference", "x/b.zarr.zip",
              "--reference", "y/a.zarr.zip", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    with Reader(tmp_path / "c.zarr.zip", references=[tmp_path / "y" / "a.zarr.zip"]) as r:
        for name, arr in s[2].items():
            assert same_bits(r.read_tensor(name, check=True), arr)


def test_linked_containers_and_linked_directories(tmp_path: Path) -> None:
    s = series(3)
    blobs, snap = tmp_path / "blobs", tmp_path / "snap"
    blobs.mkdir()
    snap.mkdir()
    paths = []
    for k in range(3):  # written beside each other, then kept as blobs behind links
        paths.append(write(tmp_path / f"c{k}.zarr.zip", s[k],
                           **({"reference": paths[-1]} if paths else {})))  # fmt: skip
    for k, p in enumerate(paths):
        shutil.move(p, blobs / f"{k:040x}")
        (snap / p.name).symlink_to(Path("..") / "blobs" / f"{k:040x}")
    with Reader(snap / "c2.zarr.zip") as r:  # (references beside the link, as named)
        r.verify()
    # Written through a link: recorded by the link's name, beside the output.
    step = write(snap / "c3.zarr.zip", s[2], reference=snap / "c2.zarr.zip")
    with Reader(step) as r:
        assert {v["container"] for v in r.references().values()} <= {"c2.zarr.zip",
                                                                      "c0.zarr.zip"}  # fmt: skip
        r.verify()
    # A recorded place through a linked directory is not followed.
    (tmp_path / "other").mkdir()
    shutil.copy(blobs / f"{0:040x}", tmp_path / "other" / "c0.zarr.zip")
    (snap / "lnk").symlink_to(Path("..") / "other")
    with pytest.raises(ReferenceProblemError, match="linked directory"):
        resolve_reference(snap / "c1.zarr.zip", "lnk/c0.zarr.zip", {})
    with pytest.raises(ReferenceProblemError, match="not a path"):
        resolve_reference(snap / "c1.zarr.zip", "c0.zarr.zip\x00x", {})
    os.mkfifo(snap / "fifo.zarr.zip")
    with pytest.raises(ReferenceProblemError, match="not a file or directory"):
        resolve_reference(snap / "c1.zarr.zip", "fifo.zarr.zip", {})


def test_an_output_elsewhere_needs_only_the_references_named(tmp_path: Path) -> None:
    s = series(4)
    (tmp_path / "s").mkdir()
    (tmp_path / "o").mkdir()
    prev = None
    for k in range(3):
        prev = write(tmp_path / "s" / f"c{k}.zarr.zip", s[k],
                     **({"reference": prev} if prev else {}))  # fmt: skip
    out = write(tmp_path / "o" / "c3.zarr.zip", s[3], reference=prev)
    with Reader(out, references=[prev]) as r:  # (its duplicates not followed to s/c0)
        r.verify()
        assert {v["container"] for v in r.references().values()} == {str(prev.resolve())}


def other_transform(step: Path, name: str = "layer.weight") -> Any:
    """A document edit that swaps a delta tensor's transform wherever its document says
    it (its codec's configuration, not its records)."""
    with Reader(step) as r:
        transform = r.references()[name]["transform"]
    other = "xor" if transform == "sub" else "sub"

    def edit(doc: dict) -> None:
        text = json.dumps(doc).replace(f'"transform": "{transform}"', f'"transform": "{other}"')
        doc.clear()
        doc.update(json.loads(text))

    edit.other = other  # type: ignore[attr-defined]
    return edit


def _records_say(doc: dict, transform: str) -> None:
    doc["attributes"][next(iter(doc["attributes"]))]["transform"] = transform


def test_forged_transform_dtype_and_flags_never_give_wrong_numbers(tmp_path: Path) -> None:
    s = series(2)
    base = write(tmp_path / "a.zarr", {**s[0], "ints": np.arange(64 * 300, dtype=np.int32)})
    step = write(tmp_path / "b.zarr", s[1], reference=base)
    doc_edit = other_transform(step)
    other = doc_edit.other

    forged = tmp_path / "forged.zarr"
    shutil.copytree(step, forged)
    forge(forged, "layer.weight", doc_edit)  # (the document's and the records' both)
    with Reader(forged) as r:
        for read in (lambda: r.read_tensor("layer.weight"), lambda: r["layer.weight"][2:5]):
            with pytest.raises(ReferenceProblemError, match=r"transform|CRC32C"):
                read()

    def records_too(doc: dict) -> None:
        doc_edit(doc)
        _records_say(doc, other)

    shutil.rmtree(forged)
    shutil.copytree(step, forged)
    forge(forged, "layer.weight", records_too)
    with Reader(forged) as r, pytest.raises(ReferenceProblemError, match="CRC32C"):
        r.read_tensor("layer.weight")

    def to_ints(doc: dict) -> None:  # the reference: another tensor of the same shape
        text = json.dumps(doc).replace('"tensor": "layer.weight"', '"tensor": "ints"')
        doc.clear()
        doc.update(json.loads(text))

    shutil.rmtree(forged)
    shutil.copytree(step, forged)
    forge(forged, "layer.weight", to_ints)
    with Reader(forged) as r:
        for read in (lambda: r.read_tensor("layer.weight"), lambda: r["layer.weight"][2:5]):
            with pytest.raises(ReferenceProblemError, match="int32"):
                read()


def test_fifos_link_chains_and_loops_are_clear_errors_and_whole_slices_are_checked(
    tmp_path: Path,
) -> None:
    s = series(3)
    os.mkfifo(tmp_path / "fifo.zarr.zip")
    with pytest.raises(nncodecs.NotAContainerError, match="not a file or directory"):
        Reader(tmp_path / "fifo.zarr.zip")
    with pytest.raises(ReferenceProblemError):
        write(tmp_path / "x.zarr.zip", s[1], reference=tmp_path / "fifo.zarr.zip")
    # A link to a link: the references beside either target are found.
    (tmp_path / "snap").mkdir()
    first = write(tmp_path / "snap" / "a.zarr.zip", s[0])
    second = write(tmp_path / "snap" / "b.zarr.zip", s[1], reference=first)
    (tmp_path / "L").mkdir()
    (tmp_path / "M").mkdir()
    (tmp_path / "M" / "b.zarr.zip").symlink_to(second)
    (tmp_path / "L" / "c.zarr.zip").symlink_to(tmp_path / "M" / "b.zarr.zip")
    with Reader(tmp_path / "L" / "c.zarr.zip") as r:
        r.verify()
    # A loop of links as a reference's place: a ReferenceProblemError.
    (tmp_path / "snap" / "a.zarr.zip").rename(tmp_path / "a0.zarr.zip")
    (tmp_path / "snap" / "a.zarr.zip").symlink_to(tmp_path / "snap" / "loop.zarr.zip")
    (tmp_path / "snap" / "loop.zarr.zip").symlink_to(tmp_path / "snap" / "a.zarr.zip")
    with Reader(second) as r, pytest.raises(ReferenceProblemError):
        r.read_tensor("layer.weight")
    # A forged transform (document and records both): a slice of the whole is checked.
    base = write(tmp_path / "h.zarr", s[0], hashes=True)
    step = write(tmp_path / "i.zarr", s[1], reference=base)
    both = other_transform(step)
    forge(step, "layer.weight", lambda doc: (both(doc), _records_say(doc, both.other)))
    with Reader(step) as r:
        for whole in (lambda: r["layer.weight"][:], lambda: r["layer.weight"][...],
                      lambda: r["layer.weight"][0:300, :]):  # fmt: skip
            with pytest.raises(ReferenceProblemError, match="CRC32C"):
                whole()
