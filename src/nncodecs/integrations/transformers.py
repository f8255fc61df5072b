"""Hugging Face transformers: models loaded from containers, snapshots to containers and back.

Nothing here touches a hub: configs and tokenizers come from local
directories (a snapshot, or a package that ships one).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from nncodecs.extras import need
from nncodecs.formats import compress, decompress
from nncodecs.formats.paths import inside
from nncodecs.integrations.torch import load_state_dict
from nncodecs.outputs import atomic_output

__all__ = ["containers_to_snapshot", "from_pretrained", "load_model", "snapshot_to_containers"]

SUFFIX = ".zarr.zip"


def _mirror(source: Path, out: Path, convert: Any, force: bool = False) -> Path:
    """Copy a directory tree; ``convert(file, target)`` handles a file and returns
    True, or returns False and the file is copied as it is.

    A link is followed only where it leads inside ``source`` (or into the same
    Hugging Face cache repository's ``blobs/``), and never to a directory; what is
    not a regular file (a FIFO, a socket, a dangling link) is refused, as compress
    refuses it, never skipped; the copy appears at ``out`` only once complete, and
    an existing ``out`` is refused unless ``force``.
    """
    if not source.is_dir():
        raise NotADirectoryError(f"{source}: not a directory")
    with atomic_output(out, force, directory=True, inputs=(source,)) as tmp:
        for file in sorted(source.rglob("*")):
            if file.is_symlink():
                inside(file, source)
                if file.is_dir():  # (as compress: its files would be lost, or taken twice)
                    why = "a link to a directory, which nncodecs does not follow"
                    raise ValueError(f"{file}: {why}: nothing was written")
            elif file.is_dir():
                continue
            if not file.is_file():  # (a FIFO, a socket, a device, a dangling link: as compress)
                raise ValueError(f"{file}: not a regular file: nothing was written")
            target = tmp / file.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not convert(file, target):
                shutil.copyfile(file, target)
    return out


def snapshot_to_containers(
    snapshot: str | Path, out: str | Path, codec: str = "auto", force: bool = False
) -> Path:
    """Copy a snapshot directory with each ``*.safetensors`` file as a container
    (``name.safetensors.zarr.zip``); every other file is copied as it is."""

    def convert(file: Path, target: Path) -> bool:
        if file.suffix != ".safetensors":
            return False
        compress(file, target.with_name(target.name + SUFFIX), codec=codec)
        return True

    return _mirror(Path(snapshot), Path(out), convert, force)


def containers_to_snapshot(directory: str | Path, out: str | Path, force: bool = False) -> Path:
    """The inverse of :func:`snapshot_to_containers`: the original files, byte for byte."""

    def convert(file: Path, target: Path) -> bool:
        if not file.name.endswith(".safetensors" + SUFFIX):
            return False
        decompress(file, target.with_name(target.name[: -len(SUFFIX)]))
        return True

    return _mirror(Path(directory), Path(out), convert, force)


def load_model(container: str | Path, config_dir: str | Path, model_class: Any = None) -> Any:
    """A transformers model built from ``config_dir``'s config, its weights from a container.

    ``model_class`` defaults to ``transformers.AutoModel``; every weight of the
    model must be in the container (a missing or unexpected one raises).
    """
    transformers = need("transformers", "loading a container into transformers")

    config = transformers.AutoConfig.from_pretrained(config_dir, local_files_only=True)
    cls = model_class or transformers.AutoModel
    model = cls.from_config(config)
    state = load_state_dict(container)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Buffers that the checkpoint may or may not carry (position ids) are not weights.
    missing = [m for m in missing if not m.endswith("position_ids")]
    unexpected = [u for u in unexpected if not u.endswith("position_ids")]
    if missing or unexpected:
        raise ValueError(
            f"{container}: weights do not fit {type(model).__name__}: "
            f"missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    return model.eval()


def from_pretrained(container: str | Path, model_class: Any = None, **kwargs: Any) -> Any:
    """The model of a container made from a snapshot directory (``nncodecs compress
    snapshot/``), as ``model_class.from_pretrained(snapshot, **kwargs)`` builds it
    (``model_class``: ``transformers.AutoModel`` by default, or a model class): its config
    from the ``config.json`` the container keeps, its weights from the container, given
    to transformers as its state dict (no weight is initialised twice). Nothing is
    downloaded and nothing is written beside the container."""
    import tempfile

    transformers = need("transformers", "snapshot_to_containers")

    from nncodecs.container import Reader

    with Reader(container) as r:
        kept = [n for n in ("config.json", "generation_config.json") if n in r.files()]
        files = {name: r.read_file(name) for name in kept}
    if "config.json" not in files:
        raise ValueError(
            f"{container}: no config.json kept (compress the whole snapshot directory, "
            "or use load_model(container, config_dir))"
        )
    with tempfile.TemporaryDirectory() as config_dir:
        for name, data in files.items():
            Path(config_dir, name).write_bytes(data)
        try:  # (config attributes among kwargs go to the config, as transformers does)
            config, kwargs = transformers.AutoConfig.from_pretrained(
                config_dir, local_files_only=True, return_unused_kwargs=True, **kwargs
            )
        except (OSError, ValueError) as exc:  # (its message names the temporary directory)
            why = str(exc).replace(config_dir, "").splitlines()[0]
            raise ValueError(f"{container}: its kept config.json is not readable ({why})") from None
    cls = model_class or transformers.AutoModel
    mapping = getattr(cls, "_model_mapping", None)  # an Auto class: the config picks the model
    if mapping is not None:
        cls = mapping[type(config)]
    state = load_state_dict(container)
    model = cls.from_pretrained(None, config=config, state_dict=state, **kwargs)
    return model.eval()
