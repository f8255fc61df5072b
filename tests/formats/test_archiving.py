"""Beyond one machine: archiving with dask, containers in S3-compatible storage.

The S3 server is real (moto's server mode on the loopback address, in a
process of its own, tests/s3_server.py); the cluster is a
``dask.distributed.LocalCluster`` of worker processes. Both are started and
stopped here.
"""

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
from harness import np_dtype, row_scaled, weights_like
from s3_server import S3Server

import nncodecs
from nncodecs import Reader, Writer, archive

DTYPES = ("float32", "bfloat16", "float16", "float8_e4m3fn")


@pytest.fixture(scope="module")
def s3() -> Any:
    optional_import("s3fs")
    optional_import("moto.server")
    with S3Server() as server:
        yield server


def _digests(tensors: dict[str, np.ndarray]) -> dict[str, str]:
    return {
        k: f"{np.dtype(v.dtype).name}{list(v.shape)}:{hashlib.sha256(v.tobytes()).hexdigest()}"
        for k, v in tensors.items()
    }


# A fresh process reads containers back: prints {container: {tensor: digest}}.
READ_BACK = """
import hashlib, json, sys
import numpy as np
from nncodecs import Reader
targets, options = json.loads(sys.argv[1]), json.loads(sys.argv[2]) or None
out = {}
for name, target in targets.items():
    with Reader(target, storage_options=options) as r:
        out[name] = {k: f"{np.dtype(v.dtype).name}{list(v.shape)}:"
                        f"{hashlib.sha256(v.tobytes()).hexdigest()}"
                     for k, v in ((k, r.read_tensor(k)) for k in r)}
print(json.dumps(out))
"""


def _read_back_elsewhere(targets: dict[str, str], options: dict | None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", READ_BACK, json.dumps(targets), json.dumps(options or {})],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _models(real_weights: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    from nncodecs.datasets import minilm_weights

    return {dt: minilm_weights(dt) for dt in DTYPES}


def test_a_container_on_s3_reads_only_the_ranges_it_needs(s3: S3Server) -> None:
    import s3fs

    bucket = s3.bucket("ranges")
    arr = row_scaled("bfloat16", 20_000, 64, seed=1)
    with Writer(f"{bucket}/m.zarr", storage_options=s3.storage_options, chunk_bytes=64 << 10) as w:
        w.add_tensor("w", arr)
        w.add_tensor("b", weights_like("float32", 64, seed=2))
    calls: list[tuple[str, Any, Any]] = []
    original = s3fs.S3FileSystem._cat_file

    async def spy(self: Any, path: str, version_id: Any = None, start: Any = None,
                  end: Any = None, **kw: Any) -> Any:  # fmt: skip
        calls.append((path, start, end))
        return await original(self, path, version_id=version_id, start=start, end=end, **kw)

    with Reader(f"{bucket}/m.zarr", storage_options=s3.storage_options) as r:
        assert r["w"].shards is not None
        s3fs.S3FileSystem._cat_file = spy
        try:
            rows = r["w"][5_000:5_010]
        finally:
            s3fs.S3FileSystem._cat_file = original
        assert rows.tobytes() == arr[5_000:5_010].tobytes()
        shard_bytes = r["w"].shards[0] * 64 * 2
        fetched = [(p, s, e) for p, s, e in calls if "/w/c/" in p]
        assert fetched and all(s is not None for _, s, _ in fetched), calls  # ranges only
        got = sum((e if e is not None else 0) - s for _, s, e in fetched if s >= 0)
        assert got < shard_bytes // 4, (got, shard_bytes)
        assert r.read_tensor("w").tobytes() == arr.tobytes()


def test_archive_on_local_schedulers(tmp_path: Path, real_weights: dict[str, Any]) -> None:
    models = _models(real_weights)
    for scheduler in ("threads", "processes"):
        result = archive(models, tmp_path / scheduler, scheduler=scheduler, progress=False)
        assert result.tensors == sum(len(m) for m in models.values())
        assert result.nbytes == sum(v.nbytes for m in models.values() for v in m.values())
        for dt, weights in models.items():
            with Reader(result.targets[dt]) as r:
                assert r.keys() == list(weights)
                assert _digests({k: r.read_tensor(k) for k in r}) == _digests(weights)


def test_model_names_are_never_paths(tmp_path: Path) -> None:
    """A model's name names its container inside the target: never a path out of it."""
    w = {"w": np.ones(4, np.float32)}
    for bad in ("../escape", "..", ".", "", "a/b", "a\\b", "/abs"):
        with pytest.raises(ValueError, match="one plain name"):
            archive({bad: w, "ok": w}, tmp_path / "out", scheduler="sync", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # (nothing written, anywhere)


def test_archive_tasks_align_with_shards(tmp_path: Path) -> None:
    # A sharded tensor: a task a shard (no two tasks write one object); the
    # small ones whole, together in one task; an empty one needs none.
    tensors = {
        "big": row_scaled("bfloat16", 5_000, 64, seed=3),
        "mid": weights_like("float32", 4_000, seed=4).reshape(1000, 4),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 8), np_dtype("float16")),
    }
    result = archive(tensors, tmp_path / "m.zarr", chunk_bytes=8 << 10, progress=False)
    with Reader(tmp_path / "m.zarr") as r:
        z = r["big"]
        assert z.shards is not None
        assert result.tasks == -(-5_000 // z.shards[0]) + 1  # big's shards; mid and scalar
        for k, v in tensors.items():
            assert r.read_tensor(k).tobytes() == v.tobytes()
        dask_big = r.to_dask("big")
        assert dask_big.chunks[0][0] == z.chunks[0]
        assert dask_big[100:200].compute().tobytes() == tensors["big"][100:200].tobytes()


def test_archive_shows_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive({"a": weights_like("float32", 1000, seed=5)}, tmp_path / "m.zarr")
    shown = capsys.readouterr()  # (on stderr, as every progress bar of nncodecs)
    assert "100%" in shown.err and "100%" not in shown.out


def test_archive_refuses_what_it_cannot_write(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="zip"):
        archive({"a": np.ones(3, np.float32)}, tmp_path / "m.zip", progress=False)
    with pytest.raises(ValueError, match="codec"):
        archive({"a": np.ones(3, np.float32)}, tmp_path / "x", codec="lz4", progress=False)
    with pytest.raises(TypeError):
        archive({"a": np.ones(3, np.complex64)}, tmp_path / "y", progress=False)
    with pytest.raises(ValueError, match="share a container name"):
        archive([tmp_path / "m.safetensors", tmp_path / "m.npz"], tmp_path / "z", progress=False)


def test_archive_reads_model_files_in_the_tasks(
    tmp_path: Path, real_weights: dict[str, Any]
) -> None:
    # A safetensors file: each task reads its rows' byte range from the file.
    from nncodecs.datasets import minilm_path

    result = archive([minilm_path()], tmp_path / "out", scheduler="processes", progress=False)
    (target,) = result.targets.values()
    with Reader(target) as r:
        assert _digests({k: r.read_tensor(k) for k in r}) == _digests(real_weights)
        assert r.metadata["source.format"] == "safetensors"


def test_cli_compress_with_dask(tmp_path: Path, real_weights: dict[str, Any]) -> None:
    from nncodecs.cli import main
    from nncodecs.datasets import minilm_path

    out = tmp_path / "cli.zarr"
    assert main(["compress", str(minilm_path()), "-o", str(out), "--dask", "--quiet"]) == 0
    with Reader(out) as r:
        assert _digests({k: r.read_tensor(k) for k in r}) == _digests(real_weights)


def test_local_cluster_archives_minilm_into_s3(s3: S3Server, real_weights: dict[str, Any]) -> None:
    # Worker processes encode and write every slab straight into the S3
    # server; a fresh process reads every container back, bit for bit.
    distributed = optional_import("distributed")
    models = _models(real_weights)
    bucket = s3.bucket("cluster")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        result = archive(models, f"{bucket}/minilm", scheduler=client,
                         storage_options=s3.storage_options, progress=False)  # fmt: skip
        workers = {w for w in client.run(lambda: __import__("os").getpid()).values()}
        assert len(workers) == 2
    read = _read_back_elsewhere(result.targets, s3.storage_options)
    for dt, weights in models.items():
        assert read[dt] == _digests(weights), dt
    # and through the scheduler's address, as `nncodecs compress --dask ADDRESS` does
    with distributed.LocalCluster(n_workers=1, processes=True, dashboard_address=None) as c2:
        address = c2.scheduler_address
        again = archive({"one": models["float16"]}, f"{bucket}/again", scheduler=address,
                        storage_options=s3.storage_options, progress=False)  # fmt: skip
    assert _read_back_elsewhere(again.targets, s3.storage_options)["one"] == _digests(
        models["float16"]
    )
    assert nncodecs.Reader(again.targets["one"], storage_options=s3.storage_options).keys()
