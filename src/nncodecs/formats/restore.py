"""A container back to a model file: its source's format (byte for byte for safetensors
and GGUF) or another one nncodecs writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nncodecs.container import Reader, not_on_a_chain
from nncodecs.errors import CorruptDataError
from nncodecs.formats.dcp import restore_dcp
from nncodecs.formats.detect import EXACT_FORMATS, WRITE_FORMATS
from nncodecs.formats.digests import check_restored
from nncodecs.formats.file_modes import kept_like, recorded
from nncodecs.formats.ggml_convert import check_no_quantized, quantized_in_container
from nncodecs.formats.malloc import use_one_malloc_arena
from nncodecs.formats.npz import write_npz
from nncodecs.formats.onnx_external import owned_external, restore_external
from nncodecs.formats.paths import READ_ONLY_SUFFIXES, check_model_file_name, local_output
from nncodecs.formats.safetensors_restore import file_records, restore_safetensors
from nncodecs.formats.source import Progress, stream_named
from nncodecs.formats.spliced import has_places, restore_spliced
from nncodecs.gcpause import collector_paused
from nncodecs.outputs import atomic_output, is_url

__all__ = ["check_dense", "decompress", "default_format", "default_output", "restored_name"]

#: Suffixes of formats written only from a source of their own: replaced in a default name.
_OWN_ONLY = (".onnx", ".pt", ".pth", ".bin")
#: Formats restored as kept bytes with each tensor at its place (nncodecs.formats.spliced).
SPLICED = ("gguf", "onnx", "torch")


def default_format(metadata: dict[str, str]) -> str:
    """The format a container is restored to when nothing else says: its source's, where it
    has the records for it; else safetensors."""
    source = metadata.get("source.format")
    if source == "dcp":  # (a torch.distributed.checkpoint directory: only as itself)
        return "dcp"
    if source == "safetensors" and "source.files" in metadata:
        return "safetensors"
    if source in SPLICED and has_places(metadata, source):
        return source
    if source == "npz":
        return "npz"
    return "safetensors"


def restored_name(container: Path, metadata: dict[str, str]) -> Path:
    """Where ``decompress`` writes by default: the container's name without ``.zarr.zip``
    / ``.zarr`` when the source comes back in its own format, else with the suffix of the
    format it is restored to (``model.onnx.zarr.zip`` -> ``model.safetensors``): never
    a name that would replace a source of another format."""
    name = container.name
    for suffix in (".zarr.zip", ".zarr", ".zip"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    else:
        raise ValueError(f"{container}: name an output with -o")
    fmt = default_format(metadata)
    if metadata.get("source.layout") == "directory":
        return container.with_name(name)
    stem = Path(name)
    suffixes = [k for k, v in WRITE_FORMATS.items() if v == fmt]  # (torch: .pt, .pth, .bin)
    want = stem.suffix.lower() if stem.suffix.lower() in suffixes else suffixes[0]
    if stem.suffix != want:
        source = metadata.get("source.format")
        # (a suffix of a format restored only from its own source is replaced, as one
        # nncodecs does not write: "m.onnx.zarr.zip" -> "m.safetensors")
        keep = source == fmt or stem.suffix not in (*READ_ONLY_SUFFIXES, *_OWN_ONLY)
        stem = Path(name + want) if keep and stem.suffix != want else stem.with_suffix(want)
    return container.with_name(stem.name)


def default_output(container: str | Path) -> Path:
    """Where :func:`decompress` of a local ``container`` writes when not told:
    :func:`restored_name` of its metadata."""
    container = Path(container)
    with Reader(container) as r:
        return restored_name(container, r.metadata)


def decompress(
    container: Any,
    out: str | Path,
    fmt: str | None = None,
    progress: Progress | None = None,
    force: bool = False,
    references: Any = None,
    beside: list[Path] | None = None,
) -> str:
    """Restore a container as a model file: ``fmt``, else the one ``out``'s suffix names,
    else the source's own format (byte for byte for safetensors and GGUF, checked against
    the source file's CRC32C, or the sha256 older containers recorded). Returns the format.

    The output is written under a temporary name and appears at ``out`` only
    once complete and checked; an existing ``out`` is refused unless
    ``force``. Tensors stream one at a time into the file, those of the weights
    codec into a safetensors file a piece at a time (npz excepted: NumPy writes it
    from a dict of every tensor). ``references``: as :class:`nncodecs.Reader` takes
    them, for tensors stored against containers outside the container's directory.
    ``beside``: a list that receives the files written beside ``out`` (an ONNX
    model's external data), which a front end names to its user.
    """
    use_one_malloc_arena()
    if is_url(str(out)):
        raise ValueError(f"{out}: restored files are written to a local path, not a URL")
    out = Path(str(out).removeprefix("file://"))
    check_model_file_name(out)
    with collector_paused(), Reader(container, references=references) as r:
        source = r.metadata.get("source.format")
        if source == "dcp" and fmt in (None, "dcp"):
            return _restore_dcp(r, container, out, force)
        fmt = fmt or WRITE_FORMATS.get(out.suffix.lower()) or default_format(r.metadata)
        if fmt not in WRITE_FORMATS.values():
            raise ValueError(
                f"cannot write {fmt!r}: choose {', '.join(dict.fromkeys(WRITE_FORMATS.values()))}"
            )
        if fmt in SPLICED and not has_places(r.metadata, fmt):
            kind = {
                "onnx": "an ONNX file",
                "gguf": "a GGUF file",
                "torch": "a zip checkpoint whose tensors are whole storages",
            }[fmt]
            why = r.metadata.get(f"source.{fmt}.inexact")  # (what its own source lacked)
            why = f" (its source {why})" if source == fmt and why else ""
            raise ValueError(
                f"{out}: only a container made from {kind} can be written as {fmt}{why}"
            )
        if fmt not in SPLICED:
            check_dense(r, fmt)
        own = fmt == source and fmt in EXACT_FORMATS and "source.files" in r.metadata
        records = file_records(r, str(container)) if own and fmt == "safetensors" else None
        directory = records is not None and r.metadata.get("source.layout") == "directory"
        if directory and out.suffix.lower() == ".safetensors":  # (a folder under a file's name)
            raise ValueError(
                f"{out}: the container restores to a folder of {len(records or [])} safetensors "
                "files (its source was a folder, or a merge): name a folder, not a file"
            )
        local = local_output(container)
        inputs = (local,) if local is not None else ()
        # (never over a container the input is stored against: both would be lost)
        not_on_a_chain(out, [container])
        # (before the output exists: what was there decides which external files may go;
        # resolved: "-o new/../m.onnx" is not a new directory)
        fresh, owned = False, set()
        if fmt == "onnx":
            parent = out.parent.resolve()
            fresh = not parent.exists() or not any(parent.iterdir())
            owned = owned_external(out) if force else set()
        mode, mtime = recorded(r.metadata)  # (a folder: the mode to its files, no time)
        with (
            kept_like(mode, mtime, out),
            atomic_output(out, force, directory=directory, inputs=inputs) as tmp,
        ):
            if fmt in SPLICED:
                expected = {k: r.metadata.get(f"source.{k}") for k in ("sha256", "crc32c")}
                if not any(expected.values()):  # (recorded with every place: never skipped)
                    raise CorruptDataError(f"{container}: the source's checksum record is missing")
                restore_spliced(r, tmp, fmt)
                check_restored(tmp, expected, out)
                if fmt == "onnx":  # (its data files beside it, as its graph names them)
                    written = restore_external(r, out, tmp, force, inputs, fresh, owned)
                    if beside is not None:
                        beside.extend(written)
            elif fmt == "safetensors":
                restore_safetensors(r, tmp, records, progress)
            else:
                write_npz(tmp, stream_named(r, progress))
    return fmt


def _restore_dcp(r: Reader, container: Any, out: Path, force: bool) -> str:
    """A torch.distributed.checkpoint directory, byte for byte (see nncodecs.formats.dcp)."""
    if out.suffix.lower() in (*WRITE_FORMATS, ".zip"):
        raise ValueError(
            f"{out}: the container restores to a torch.distributed.checkpoint directory: "
            "name a folder, not a file"
        )
    local = local_output(container)
    not_on_a_chain(out, [container])
    with atomic_output(out, force, directory=True, inputs=(local,) if local else ()) as tmp:
        restore_dcp(r, tmp)
    return "dcp"


def check_dense(r: Reader, fmt: str) -> None:
    """A records tensor (GGML blocks) goes as its bytes; a sparse or quantized tensor
    (stored as its parts) has no place in a safetensors or npz file: refused by name
    before any output exists, never densified behind the user's back (a sparse matrix
    may not fit in memory dense; FP4 blocks dequantized are not the stored values)."""
    check_no_quantized(quantized_in_container(r.metadata), "the container", fmt, file=False)
    layouts = {name: r.layout(name) for name in r}
    other = {n: kind for n, kind in layouts.items() if kind not in ("dense", "records")}
    if other:
        name, layout = next(iter(other.items()))
        more = f" (and {len(other) - 1} more)" if len(other) > 1 else ""
        raise ValueError(
            f"tensor {name!r} is {layout}{more}: {fmt} holds dense tensors only; "
            "read its parts with nncodecs.Reader(...).read_tensor"
        )
