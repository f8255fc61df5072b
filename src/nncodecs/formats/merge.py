"""Containers merged into one, with their sources' records, so the result restores as
the files it holds."""

from __future__ import annotations

import json
import os
from typing import Any

from nncodecs.container import Reader, merge
from nncodecs.formats.file_modes import MODE, common_mode, recorded, strictest
from nncodecs.formats.paths import check_container_name, local_output
from nncodecs.formats.source import ORDER, TIED
from nncodecs.formats.spliced import has_places
from nncodecs.outputs import check_output, created_mode, made_parents

__all__ = ["merge_containers", "merged_metadata"]


def merged_metadata(metadatas: list[dict[str, str]]) -> dict[str, str]:
    """The metadata of containers merged into one: keys they agree on kept; the file records
    of safetensors sources joined (restored as a directory of those files; a name that two
    sources share gets the source's number, ``2-model.safetensors``); the tensor counts
    added; any other key that differs dropped."""
    if len(metadatas) == 1:
        return dict(metadatas[0])
    out = {k: v for k, v in metadatas[0].items() if all(m.get(k) == v for m in metadatas)}
    ties = [json.loads(m.get(TIED, "{}")) for m in metadatas]
    if any(ties):  # each container's tied tensors, named in the merged one alike
        out[TIED] = json.dumps({k: v for t in ties for k, v in t.items()})
        orders = [m.get(ORDER) for m in metadatas]
        out.pop(ORDER, None)
        if all(orders):
            out[ORDER] = json.dumps([n for o in orders for n in json.loads(str(o))])
    modes = [recorded(m)[0] for m in metadatas]  # (the strictest: a private one stays so)
    out.pop(MODE, None)
    if all(x is not None for x in modes):
        out[MODE] = f"{common_mode([x for x in modes if x is not None]):o}"
    for key in ("source.tensors", "source.bytes"):  # (summed; unknown if one lacks it)
        counts = [_int(m.get(key)) for m in metadatas]
        out.pop(key, None)
        if all(c is not None for c in counts):
            out[key] = str(sum(c for c in counts if c is not None))
    if all(m.get("source.format") == "safetensors" and "source.files" in m for m in metadatas):
        per_source = [json.loads(m["source.files"]) for m in metadatas]
        names = [rec.get("file") for recs in per_source for rec in recs]
        records = []
        for i, recs in enumerate(per_source, 1):
            for rec in recs:  # (every model is model.safetensors: a shared name gets "N-")
                if names.count(rec.get("file")) > 1:
                    rec = {**rec, "file": f"{i}-{rec['file']}"}
                records.append(rec)
        if len({rec["file"] for rec in records}) != len(records):
            raise ValueError("the containers' files cannot be given distinct names")
        out.update(
            {
                "source.format": "safetensors",
                "source.files": json.dumps(records),
                "source.layout": "directory",
            }
        )
        out.pop("source.index", None)  # each index described one model's shards
    return out


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def merge_containers(
    sources: list[Any],
    target: Any,
    codec: str = "auto",
    force: bool = False,
    references: Any = None,
) -> None:
    """Merge containers into one (tensor names must not repeat); their source records are
    merged too (:func:`merged_metadata`), so the result restores as the files it holds."""
    local = local_output(target)
    inputs = tuple(p for p in (local_output(s) for s in sources) if p is not None)
    if local is not None:
        check_container_name(local)
        check_output(local, force, inputs=inputs)
    metas = []
    for source in sources:
        with Reader(source) as r:
            metas.append(dict(r.metadata))
    meta = merged_metadata(metas)
    # (a spliced source's kept bytes go only where its records stay: one source, or the same)
    kept = has_places(meta, meta.get("source.format", ""))
    mode = strictest(list(inputs))  # (the merged container: as private as its inputs)
    with made_parents(local), created_mode(mode):
        merge(
            sources,
            target,
            codec=codec,
            metadata=meta,
            overwrite=force,
            keep_hidden=kept,
            references=references,
        )
    if mode is not None and local is not None and local.is_file() and not local.is_symlink():
        os.chmod(local, mode)
