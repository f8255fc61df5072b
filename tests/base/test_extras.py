"""A missing optional package is one line naming the extra that brings it.

Each case runs the ``nncodecs`` command (or the API) in a process where the package
cannot be imported (``sys.modules[name] = None``, as Python's import system reads it),
so the message is the one a user without it sees. On Python 3.12 the test venv has no
torch at all: the torch case is the real thing there.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from harness import varint

from nncodecs import Writer
from nncodecs.extras import EXTRAS, MissingExtraError, need

_RUN = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # (not importable)
from nncodecs.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run_without(packages: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", _RUN, packages, *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def one_line_naming(r: subprocess.CompletedProcess, package: str, extra: str) -> None:
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert f"the optional package {package!r}: pip install 'nncodecs[{extra}]'" in lines[0]


def _typed_onnx() -> bytes:
    """A model whose one initializer keeps its values in float_data (typed fields)."""

    def field(n: int, payload: bytes) -> bytes:
        return varint(n << 3 | 2) + varint(len(payload)) + payload

    values = np.arange(4, dtype="<f4").tobytes()
    tensor = varint(1 << 3) + varint(4) + varint(2 << 3) + varint(1) + field(8, b"w")
    graph = field(5, tensor + field(4, values))  # (float_data, packed)
    return field(7, graph)


@pytest.mark.parametrize(
    ("package", "extra", "name", "content", "args"),
    [
        ("torch", "torch", "m.pt", None, ()),
        ("gguf", "gguf", "m.gguf", b"GGUF" + bytes(60), ()),
        ("onnx", "onnx", "m.onnx", _typed_onnx(), ()),
        ("ztensor", "ztensor", "m.zt", b"\x89ZT" + bytes(60), ()),
        ("s3fs", "s3", "m.safetensors", None, ("-o", "s3://bucket/m.zarr")),
        ("dask", "dask", "m.safetensors", None, ("-o", "m.zarr", "--dask")),
    ],
)
def test_compress_names_the_extra(
    tmp_path: Path, package: str, extra: str, name: str, content: bytes | None, args: tuple
) -> None:
    path = tmp_path / name
    if name.endswith(".pt"):  # (a zip with a pickle: what torch.save writes)
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("m/data.pkl", b"\x80\x02}q\x00.")
    elif name.endswith(".safetensors"):
        header = b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'
        path.write_bytes(len(header).to_bytes(8, "little") + header + bytes(16))
    else:
        path.write_bytes(content or b"")
    r = run_without(package, "compress", name, *args, cwd=tmp_path)
    one_line_naming(r, package, extra)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing written


def test_the_api_names_the_extra(tmp_path: Path) -> None:
    with Writer(tmp_path / "m.zarr") as w:
        w.add_tensor("w", np.ones(4, np.float32))
    code = (
        "import sys; sys.modules['transformers'] = None; sys.modules['dask'] = None\n"
        "from nncodecs import Reader\n"
        "from nncodecs.integrations.transformers import load_model\n"
        "for call in (lambda: load_model(sys.argv[1], sys.argv[1]),\n"
        "             lambda: Reader(sys.argv[1]).to_dask('w')):\n"
        "    try:\n"
        "        call()\n"
        "    except ModuleNotFoundError as exc:\n"
        "        print(type(exc).__name__, exc)\n"
    )
    cmd = [sys.executable, "-c", code, str(tmp_path / "m.zarr")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2, r.stdout
    assert lines[0].startswith("MissingExtraError") and "'nncodecs[transformers]'" in lines[0]
    assert lines[1].startswith("MissingExtraError") and "'nncodecs[dask]'" in lines[1]


def test_a_package_missing_its_own_dependency_says_so(tmp_path: Path, monkeypatch) -> None:
    """A package that is there but lacks one of its own dependencies is not a missing
    extra: its own error comes through."""
    (tmp_path / "halfthere.py").write_text("import no_such_dependency_of_halfthere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:
        need("halfthere", "a test")
    assert not isinstance(info.value, MissingExtraError)
    assert info.value.name == "no_such_dependency_of_halfthere"
    with pytest.raises(MissingExtraError, match="a test needs the optional package"):
        need("no_such_package_at_all", "a test")


def test_every_extra_is_in_pyproject() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(EXTRAS.values()) <= set(extras)
    everything = extras["all"][0]
    assert all(e in everything for e in set(EXTRAS.values()))
