"""``nncodecs info``: a container's or a model file's tensors, from headers only."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from nncodecs.cli.report import JSON_VERSION
from nncodecs.sizes import count as counted
from nncodecs.sizes import human, path_bytes, ratio_text, times_smaller

__all__ = ["cmd_info", "of_source", "shown", "source_count"]


def cmd_info(args: argparse.Namespace) -> int:
    from nncodecs.formats import detect_format

    src = Path(args.input)
    fmt = detect_format(src)
    count, files, said, by_fqn = None, [], None, None
    if fmt == "container":
        rows, count, files, said, by_fqn = _container_rows(src)
    else:
        rows, by_fqn = _file_rows(src, fmt)
    checkpoint = dcp_rows(by_fqn, {r["name"]: r["stored_bytes"] for r in rows})
    total_n = sum(r["nbytes"] for r in rows)
    original, stored, recorded = _sizes(src, fmt, total_n, said)
    if args.json:
        doc = {
            "version": JSON_VERSION,
            "command": "info",
            "format": fmt,
            "tensors": rows,
            "nbytes": total_n,
            "original_bytes": original,
            "stored_bytes": stored,
        }
        if fmt == "container":
            doc["source_tensors"], doc["files"] = count, files
        if checkpoint:
            doc["dcp_tensors"] = checkpoint
        print(json.dumps(doc))
        return 0
    table = [
        (
            shown(r["name"]),
            r["dtype"],
            "x".join(map(str, r["shape"])) or "()",
            human(r["stored_bytes"]),
            times_smaller(r["nbytes"], r["stored_bytes"]),
            r["codec"],
            _reference(r),
        )
        for r in rows
    ]
    head = ("tensor", "dtype", "shape", "stored", "ratio", "codec", "reference (chain depth)")
    _print_table(head, table, (False, False, False, True, True, False, False))
    if fmt != "container":  # (a model file: its tensors, nothing compressed)
        print(f"{counted(len(rows), 'tensor')} ({fmt}): {human(total_n)} in {human(stored)}")
    else:  # (the ratio compress printed: the source's files against the container's)
        held = "" if recorded else " of tensors (no source size recorded)"
        print(
            f"{counted(len(rows), 'tensor')} (container): {human(stored)}, "
            f"{ratio_text(original, stored)}"
            f"{held}{of_source(count)}"
        )
    if files:  # (a snapshot directory's config, tokenizer ...: Reader.read_file)
        more = f" and {len(files) - 8} more" if len(files) > 8 else ""
        print(f"{counted(len(files), 'kept file')}: {', '.join(shown(f) for f in files[:8])}{more}")
    if checkpoint:  # (a DCP checkpoint: its tensors as DCP names them, whole)
        print("\nby fully qualified name (torch.distributed.checkpoint):")
        _print_table(
            ("tensor", "dtype", "global shape", "shards", "stored"),
            [
                (
                    shown(c["name"]),
                    shown(c["dtype"]),
                    "-" if c["dtype"] == "bytes" else "x".join(map(str, c["shape"])) or "()",
                    str(c["shards"]),
                    human(c["stored_bytes"]) if c["stored_bytes"] else "-",
                )
                for c in checkpoint
            ],
            (False, False, False, True, True),
        )
    return 0


def _print_table(head: tuple[str, ...], table: list[tuple[str, ...]], right: tuple) -> None:
    widths = [max([len(head[i])] + [len(t[i]) for t in table]) for i in range(len(head))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ).rstrip()

    print(line(head))
    for t in table:
        print(line(t))


def dcp_rows(by_fqn: Any, stored: dict[str, int]) -> list[dict[str, Any]]:
    """A DCP checkpoint's tensors by fully qualified name (``by_fqn``: the JSON the
    container or the directory's source gives; an entry not of its form is left out):
    dtype, global shape, the number of shards, the stored bytes of those stored."""
    out: list[dict[str, Any]] = []
    for fqn, item in (by_fqn if isinstance(by_fqn, dict) else {}).items():
        if not isinstance(item, dict):
            continue
        if "bytes" in item:
            if isinstance(item["bytes"], str):
                out.append({"name": fqn, "dtype": "bytes", "shape": [], "shards": 1,
                            "stored_bytes": stored.get(item["bytes"], 0)})  # fmt: skip # (one row)
            continue
        chunks, size, dtype = item.get("chunks"), item.get("size"), item.get("dtype")
        if not (isinstance(chunks, list) and isinstance(size, list) and isinstance(dtype, str)):
            continue
        names = [c.get("name") if isinstance(c, dict) else None for c in chunks]
        dims = all(type(d) is int and d >= 0 for d in size)
        if not dims or not all(isinstance(n, str) for n in names):
            continue
        out.append({
            "name": fqn,
            "dtype": dtype,
            "shape": size,
            "shards": len(chunks),
            "stored_bytes": sum(stored.get(n, 0) for n in names),
        })  # fmt: skip # (one row a tensor)
    return out


def _reference(row: dict[str, Any]) -> str:
    """A tensor stored against another container's: ``sub tensor @ container (depth)``
    (``= container`` where the reference has the same name; ``same bits as`` for a
    duplicate)."""
    ref = row.get("reference")
    if not ref:
        return ""
    what = "=" if ref["tensor"] == row["name"] else f"{ref['tensor']} @"
    how = "same bits as" if ref.get("duplicate") else ref["transform"]
    return f"{how} {what} {ref['container']} ({row['depth']})"


def shown(name: str) -> str:
    """A name as the terminal shows it: escapes and line breaks written out (``\\x1b``,
    ``\\n``), so a hostile name can neither colour the screen nor break the table."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def of_source(count: int | None) -> str:
    return "" if count is None else f"; the source had {counted(count, 'tensor')}"


def source_count(metadata: dict[str, str]) -> int | None:
    """The number of tensors the container's source had, where it recorded it."""
    text = metadata.get("source.tensors")
    if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) < 19:
        return int(text)
    return None


def _sizes(src: Path, fmt: str, tensor_bytes: int, said: int | None) -> tuple[int, int, bool]:
    """``(original, stored, recorded)``: for a container the source's bytes it recorded
    (``said``; where it recorded none, as a container written through the API, its
    tensors' bytes) and its own bytes on disk; for a model file, its files' bytes both."""
    from nncodecs.formats.file_modes import source_bytes

    if fmt != "container":
        size = source_bytes(src, fmt)
        return size, size, True
    if said is None or (said == 0 and tensor_bytes):  # (none, or a forged one)
        return tensor_bytes, path_bytes(src), False
    return said, path_bytes(src), True


def _container_rows(
    src: Path,
) -> tuple[list[dict[str, Any]], int | None, list[str], int | None, Any]:
    """Its tensors' rows, the source's tensor count, its kept files, the source's bytes,
    as the container recorded them (one Reader), and a DCP checkpoint's tensors by
    fully qualified name (:func:`dcp_rows`; ``None`` for any other container)."""
    from nncodecs import Reader
    from nncodecs.formats.file_modes import recorded_bytes
    from nncodecs.formats.ggml_convert import quantized_in_container, quantized_shapes

    with Reader(src) as r:
        ggml = dict(quantized_in_container(r.metadata))  # (a GGUF's blocks: their type)
        logical = quantized_shapes(r.metadata)  # (and their shape in values)
        rows = [
            {
                "name": i.name,
                "dtype": ggml.get(i.name, i.dtype),
                "shape": logical.get(i.name, list(i.shape)) if i.name in ggml else list(i.shape),
                "layout": "ggml" if i.name in ggml else i.layout,
                "nbytes": i.nbytes,
                "stored_bytes": i.stored_bytes,
                "codec": i.codec,
                "reference": i.reference,
                "depth": i.depth,
            }
            for i in (r.info(n) for n in r)
        ]
        by_fqn = None
        for key, part in (("dcp.metadata", "tensors"), ("source.dcp.tensors", None)):
            if key in r.metadata:  # (ContainerWriter's; a compressed DCP directory's)
                try:
                    by_fqn = json.loads(r.metadata[key])
                except (ValueError, RecursionError):  # (not JSON; nested past any table)
                    break
                by_fqn = by_fqn.get(part) if part and isinstance(by_fqn, dict) else by_fqn
                break
        said = recorded_bytes(r.metadata)
        return rows, source_count(r.metadata), r.files(), said, by_fqn


def _file_rows(src: Path, fmt: str) -> tuple[list[dict[str, Any]], Any]:
    """Every tensor's dtype and shape from the file's header: no tensor is read; and a
    DCP directory's tensors by fully qualified name (:func:`dcp_rows`)."""
    from nncodecs.dtypes import dtype_name
    from nncodecs.formats import open_source

    with open_source(src, fmt) as source:  # (a GGML type and its logical shape as such)
        rows = [
            {
                "name": t.name,
                "dtype": t.quantized[0] if t.quantized else dtype_name(t.dtype),
                "shape": list(t.quantized[1] if t.quantized else t.shape),
                "layout": "ggml" if t.quantized else "dense",
                "nbytes": t.nbytes,
                "stored_bytes": t.nbytes,
                "codec": "none",
            }
            for t in source.tensors()
        ]
        return rows, getattr(source, "by_fqn", None)
