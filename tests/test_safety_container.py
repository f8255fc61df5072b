import hashlib, json
from pathlib import Path
import numpy as np
import pytest
from nncodecs import Reader

FIXTURES = Path(__file__).parent / "fixtures" / "containers"

def _sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).tobytes()).hexdigest()

@pytest.mark.parametrize("name", ["v1.zarr", "v1.zarr.zip"])
def test_containers_of_version_1_read_bit_exact(name: str) -> None:
    expected = json.loads((FIXTURES / "expected.json").read_text())
    with Reader(FIXTURES / name) as r:
        assert sorted(r.keys()) == sorted(expected)
        for tname, want in expected.items():
            assert r.layout(tname) == want["layout"]
            got = r.read_tensor(tname)
            if want["layout"] == "dense":
                assert str(got.dtype) == want["dtype"] and list(got.shape) == want["shape"]
                assert _sha(got) == want["sha256"], tname
            else:
                assert list(got["shape"]) == want["shape"]
                assert {p: _sha(got[p]) for p in want["sha256"]} == want["sha256"]
        r.verify()
