"""An ONNX model of 2^20 ``Constant`` nodes, read by the wire walk alone (issue 36, N5).

Parsed by the onnx package, such a model (about 170 MB) needed 4.4 GB to list, and
``compress`` died of SIGSEGV inside protobuf under a 4 GiB limit. Here ``compress``,
``info``, ``verify`` and ``decompress`` each run under a 1 GiB address-space limit with
the onnx package made unimportable: the model comes back byte for byte, its small
Constants kept in the graph's bytes, its large tensors as tensors.
"""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nncodecs import Reader
from nncodecs.formats.onnx_graph import SMALL_CONSTANT

NODES = 1 << 20
LIMIT = 1 << 30  # the address-space limit each command runs under

_RUN = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
sys.modules["onnx"] = None  # (the wire walk alone: importing onnx fails)
from nncodecs.cli import main
sys.exit(main(sys.argv[1:]))
"""


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def number(n: int, value: int) -> bytes:
    return varint(n << 3) + varint(value)


def tensor(values: np.ndarray, name: bytes = b"") -> bytes:
    """A float32 TensorProto: dims, data_type, (name), raw_data."""
    dims = b"".join(number(1, d) for d in values.shape)
    return dims + number(2, 1) + (field(8, name) if name else b"") + field(9, values.tobytes())


def constant(output: bytes, values: np.ndarray) -> bytes:
    attribute = field(1, b"value") + field(5, tensor(values)) + number(20, 4)
    return field(1, field(2, output) + field(4, b"Constant") + field(5, attribute))


def many_constants(path: Path, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """A model of ``nodes`` small Constants (32 floats each, as a shape or scale
    constant might be), one large Constant and one large initializer; written as
    protobuf's wire format directly (building it with onnx would take minutes)."""
    rng = np.random.default_rng(5)
    small = [(rng.integers(-64, 64, 32) / 4).astype(np.float32) for _ in range(256)]
    big_constant = rng.standard_normal(600).astype(np.float32)
    weight = rng.standard_normal((256, 64)).astype(np.float32)
    parts = [constant(b"big_constant", big_constant)]
    parts += [constant(b"c%d" % i, small[i % 256]) for i in range(nodes)]
    parts += [field(2, b"g"), field(5, tensor(weight, b"weight"))]
    graph = b"".join(parts)
    opset = field(8, field(1, b"") + number(2, 17))
    path.write_bytes(number(1, 8) + opset + varint(7 << 3 | 2) + varint(len(graph)) + graph)
    return big_constant, weight


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    code = _RUN.format(limit=LIMIT)
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    path = tmp_path_factory.mktemp("many") / "many.onnx"
    big_constant, weight = many_constants(path, NODES)
    return path, big_constant, weight


def test_a_million_constants_compress_and_restore_in_1_gib(
    model: tuple[Path, np.ndarray, np.ndarray],
) -> None:
    path, big_constant, weight = model
    assert path.stat().st_size > 150 << 20
    folder = path.parent
    r = run(["compress", path.name, "-q"], folder)
    assert r.returncode == 0, r.stderr
    container = folder / "many.onnx.zarr.zip"
    with Reader(container) as c:  # the large ones are tensors; the small, the graph's bytes
        assert sorted(c.keys()) == ["big_constant", "weight"]
        assert np.array_equal(c.read_tensor("weight"), weight)
        assert np.array_equal(c.read_tensor("big_constant"), big_constant)
    assert container.stat().st_size < path.stat().st_size / 4
    r = run(["verify", container.name], folder)
    assert r.returncode == 0 and "comes back byte for byte" in r.stdout, r.stdout + r.stderr
    r = run(["decompress", container.name, "-o", "back.onnx"], folder)
    assert r.returncode == 0, r.stderr
    assert filecmp.cmp(folder / "back.onnx", path, shallow=False)


def test_info_lists_a_million_constants_in_1_gib(
    model: tuple[Path, np.ndarray, np.ndarray],
) -> None:
    path = model[0]
    r = run(["info", path.name], path.parent)
    assert r.returncode == 0, r.stderr
    assert "weight" in r.stdout and "big_constant" in r.stdout
    assert "c1048575" not in r.stdout  # (under 1 KiB: the graph's own)


def test_a_constant_is_a_tensor_from_1_kib_on() -> None:
    """The rule at its edge: a Constant's value attribute under 1 KiB as written stays in
    the graph, one of 1 KiB is listed; an initializer is listed at any size."""
    from nncodecs.formats.onnx_graph import graph_tensors

    def attribute_size(n: int) -> int:
        values = np.zeros(n, np.float32)
        return len(field(1, b"value") + field(5, tensor(values)) + number(20, 4))

    n = next(n for n in range(200, 300) if attribute_size(n + 1) >= SMALL_CONSTANT)
    assert attribute_size(n) < SMALL_CONSTANT == 1024 <= attribute_size(n + 1)
    nodes = constant(b"under", np.zeros(n, np.float32))
    nodes += constant(b"at", np.zeros(n + 1, np.float32))
    graph = nodes + field(5, tensor(np.zeros(1, np.float32), b"tiny_init"))
    listed = graph_tensors(varint(7 << 3 | 2) + varint(len(graph)) + graph)
    assert [t.name for t in listed] == ["tiny_init", "at"]
