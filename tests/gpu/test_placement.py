"""The codecs, Zarr and the Reader on device arrays: output stays where input is.

The device is the SIMT emulator everywhere (its arrays are ``DeviceArray``,
served by the registered emulator backend through the same dispatch CuPy
arrays and torch CUDA tensors take) and CuPy where a GPU is present. Every
result is compared with the CPU's: frames byte for byte, tensors bit for bit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from harness import np_dtype, row_scaled, same_bits, to_old_version, weights_like

from nncodecs import CorruptDataError, NumcodecsWeights, Reader, Writer
from nncodecs.codecs.weights import Weights
from nncodecs.gpu.backend import backend_for, register_backend, unregister_backend


@pytest.fixture
def device(backend: Any) -> Any:
    """The backend, registered for the codecs' dispatch while a test runs."""
    registered = getattr(backend, "name", "") == "emulator"
    if registered:
        register_backend(backend)
    yield backend
    if registered:
        unregister_backend(backend)


def _device_name(backend: Any) -> str:
    return "emulator" if getattr(backend, "name", "") == "emulator" else "cuda"


def _to_host(backend: Any, arr: Any) -> np.ndarray:
    return np.asarray(backend.to_host(backend.flat_bytes(arr)))


def _launched(backend: Any) -> set[str]:
    return {name for name, _, _ in getattr(backend, "launches", [])}


def _bits(dtype: str) -> np.dtype:
    """How a device array holds a dtype (CuPy has no bfloat16 or float8)."""
    itemsize = np_dtype(dtype).itemsize
    return np.dtype(f"uint{8 * itemsize}") if dtype.startswith(("bfloat", "float8")) else (
        np_dtype(dtype))  # fmt: skip


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float8_e4m3fn"])
def test_numcodecs_weights_encode_and_decode_on_the_device(device: Any, dtype: str) -> None:
    arr = row_scaled(dtype, 600, 512, seed=3)
    codec = NumcodecsWeights(dtype=dtype)
    cpu = codec.encode(arr)
    dev = device.device_array(arr.view(_bits(dtype)))
    assert backend_for(dev) is device
    frame = codec.encode(dev)
    assert backend_for(frame) is device  # the frame stays on the device
    assert _to_host(device, frame).tobytes() == cpu
    back = codec.decode(frame)
    assert backend_for(back) is device
    assert same_bits(_to_host(device, back).view(arr.dtype).reshape(arr.shape), arr)
    # a host frame into a device array
    out = device.device_array(np.zeros(arr.shape, _bits(dtype)))
    assert codec.decode(cpu, out=out) is out
    assert same_bits(_to_host(device, out).view(arr.dtype).reshape(arr.shape), arr)


def test_device_input_errors(device: Any) -> None:
    codec = NumcodecsWeights(dtype="bfloat16")
    with pytest.raises(ValueError, match="configured for bfloat16"):
        codec.encode(device.device_array(np.zeros(300_000, np.float32)))
    arr = weights_like("bfloat16", 300_000, seed=1)
    frame = codec.encode(arr)
    # The frame records its dtype: a codec without one decodes it on the device ...
    back = NumcodecsWeights().decode(device.device_array(np.frombuffer(frame, np.uint8)))
    assert _to_host(device, back).tobytes() == arr.tobytes()
    # ... as one of another dtype refuses it, and a version 1 frame needs one.
    on_device = device.device_array(np.frombuffer(frame, np.uint8))
    with pytest.raises(CorruptDataError, match="holds bfloat16 elements, expected float16"):
        NumcodecsWeights(dtype="float16").decode(on_device)
    old = to_old_version(frame)
    with pytest.raises(ValueError, match="dtype="):
        NumcodecsWeights().decode(device.device_array(np.frombuffer(old, np.uint8)))
    bad = bytearray(frame)
    bad[len(bad) // 2] ^= 0x40
    with pytest.raises(CorruptDataError):
        codec.decode(device.device_array(np.frombuffer(bytes(bad), np.uint8)))


def test_zarr_reads_and_writes_through_device_buffers(device: Any, tmp_path: Path) -> None:
    # Zarr hands the codec buffers of the prototype it is given: here ones
    # whose arrays live on the device, as zarr.config.enable_gpu() does
    # with CuPy. The codec decodes (and encodes) them there.
    if _device_name(device) != "emulator":
        pytest.skip("the CuPy variant is zarr.config.enable_gpu(), in test_enable_gpu")
    from gpu_emulator import DeviceArray
    from zarr.core.buffer import BufferPrototype, cpu

    class DeviceBuffer(cpu.Buffer):
        def as_array_like(self) -> Any:
            return np.asarray(self._data).view(DeviceArray)

    class DeviceNDBuffer(cpu.NDBuffer):
        def as_ndarray_like(self) -> Any:
            return np.asarray(self._data).view(DeviceArray)

    proto = BufferPrototype(buffer=DeviceBuffer, nd_buffer=DeviceNDBuffer)
    arr = row_scaled("bfloat16", 1200, 256, seed=5)
    z = zarr.create_array(
        str(tmp_path / "a.zarr"), shape=arr.shape, chunks=(600, 256), dtype=arr.dtype,
        serializer=Weights(coder="rans"), compressors=None,
    )  # fmt: skip
    device.launches.clear()
    z.set_basic_selection(Ellipsis, arr, prototype=proto)
    assert "rans_encode_chunks" in _launched(device)
    plain = zarr.open_array(str(tmp_path / "a.zarr"))
    assert same_bits(plain[...], arr)  # GPU frames read on the CPU
    device.launches.clear()
    back = z.get_basic_selection(Ellipsis, prototype=proto)
    assert same_bits(np.asarray(back), arr)
    # Zarr hands the codec batches of chunks (codec_pipeline.batch_size,
    # 1 by default, read when an array is opened): a batch decodes in one
    # launch of each kernel.
    with zarr.config.set({"codec_pipeline.batch_size": 8}):
        batched = zarr.open_array(str(tmp_path / "a.zarr"))
    device.launches.clear()
    back = batched.get_basic_selection(Ellipsis, prototype=proto)
    ran = [name for name, _, _ in device.launches]
    assert ran.count("rans_decode_merge") == 1, ran
    assert same_bits(np.asarray(back), arr)


def _model(tmp_path: Path, **writer: Any) -> tuple[Path, dict[str, np.ndarray]]:
    tensors = {
        "bf16": row_scaled("bfloat16", 700, 384, seed=1),
        "f32": weights_like("float32", 5_000, seed=2).reshape(50, 100),
        "f8": weights_like("float8_e4m3fn", 70_000, seed=3).reshape(700, 100),
        "zeros": np.zeros((400, 384), np_dtype("bfloat16")),  # chunks never written
        "scalar": np.array(3.5, np.float32),
        "raw": weights_like("float16", 1000, seed=4),
    }
    path = tmp_path / "m.zarr"
    with Writer(path, mode="w", **writer) as w:
        for name, t in tensors.items():
            w.add_tensor(name, t, codec="raw" if name == "raw" else None)
    return path, tensors


@pytest.mark.parametrize("chunk_bytes", [2 << 20, 16 << 10], ids=["chunks", "shards"])
def test_reader_decodes_tensors_on_the_device(
    device: Any, tmp_path: Path, chunk_bytes: int
) -> None:
    path, tensors = _model(tmp_path, chunk_bytes=chunk_bytes)
    with Reader(path) as r:
        if chunk_bytes < 1 << 20:
            assert r["bf16"].shards is not None
        for name, t in tensors.items():
            if hasattr(device, "launches"):
                device.launches.clear()
            got = r.read_tensor(name, to="cupy", device=_device_name(device))
            assert backend_for(got) is device
            host = _to_host(device, got).view(t.dtype).reshape(t.shape)
            assert same_bits(host, t), name
            if hasattr(device, "launches"):
                ran = [n for n, _, _ in device.launches]
                assert len(ran) == len(set(ran)), ran  # every chunk in one batch
                if name == "bf16" and chunk_bytes > 1 << 20:
                    assert "rans_decode_merge" in ran


def test_reader_device_read_of_a_corrupt_tensor(device: Any, tmp_path: Path) -> None:
    path, _ = _model(tmp_path)
    chunk = path / "bf16" / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x08
    chunk.write_bytes(bytes(data))
    with Reader(path) as r, pytest.raises(CorruptDataError, match="tensor 'bf16'"):
        r.read_tensor("bf16", to="cupy", device=_device_name(device))
    with Reader(path) as r, pytest.raises(ValueError, match="device must be"):
        r.read_tensor("f32", device="tpu")


def test_reader_device_read_checks_the_shard_index(device: Any, tmp_path: Path) -> None:
    path, _ = _model(tmp_path, chunk_bytes=16 << 10)
    shard = path / "bf16" / "c" / "0" / "0"
    data = bytearray(shard.read_bytes())
    data[-10] ^= 0x01  # an offset in the index
    shard.write_bytes(bytes(data))
    with Reader(path) as r, pytest.raises(CorruptDataError, match="fails its CRC32C"):
        r.read_tensor("bf16", to="cupy", device=_device_name(device))


def test_enable_gpu(device: Any, tmp_path: Path) -> None:
    # zarr.config.enable_gpu(): Zarr reads into CuPy buffers, the codec
    # decodes (and encodes) on the GPU, the result is a CuPy array.
    if _device_name(device) != "cuda":
        pytest.skip("needs CuPy and a GPU (the emulator variant is the prototype test)")
    import cupy as cp

    arr = row_scaled("float16", 1200, 256, seed=6)
    with zarr.config.enable_gpu():
        z = zarr.create_array(
            str(tmp_path / "g.zarr"), shape=arr.shape, chunks=(600, 256), dtype=arr.dtype,
            serializer=Weights(coder="rans"), compressors=None,
        )  # fmt: skip
        z[...] = cp.asarray(arr)
        back = z[...]
    assert isinstance(back, cp.ndarray)
    assert same_bits(cp.asnumpy(back), arr)
    assert same_bits(zarr.open_array(str(tmp_path / "g.zarr"))[...], arr)  # and on the CPU


def test_torch_cuda_tensors(device: Any, tmp_path: Path) -> None:
    # torch CUDA tensors in and out without host copies (DLPack), bfloat16 kept.
    if _device_name(device) != "cuda":
        pytest.skip("needs CuPy, torch and a GPU")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    arr = row_scaled("bfloat16", 600, 512, seed=7)
    t = torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16).cuda()
    codec = NumcodecsWeights(dtype="bfloat16")
    frame = codec.encode(t)
    assert isinstance(frame, torch.Tensor) and frame.is_cuda
    assert frame.cpu().numpy().tobytes() == codec.encode(arr)
    back = codec.decode(frame)
    assert isinstance(back, torch.Tensor) and back.dtype == torch.bfloat16 and back.is_cuda
    assert torch.equal(back.view(torch.int16).reshape(arr.shape).cpu(), t.view(torch.int16).cpu())
    path, tensors = _model(tmp_path)
    with Reader(path) as r:
        got = r.read_tensor("bf16", to="torch", device="cuda")
    assert got.is_cuda and got.dtype == torch.bfloat16
    assert got.cpu().view(torch.int16).numpy().tobytes() == tensors["bf16"].tobytes()
