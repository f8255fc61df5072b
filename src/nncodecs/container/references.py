"""Where a container's references lie, as recorded and as followed.

A container records each reference's container as a string. Written beside it (in
the same directory or bucket prefix, or below it), that string is the path relative
to the container's own directory (``ckpt-1000.zarr``), so a store can move whole. A
reference anywhere else is recorded as the absolute path or URL the writer named.

A Reader follows a relative reference only inside its container's directory (never
``..``, never an absolute path smuggled in, never through a linked directory; that
directory is the one the container was named in, or, for a container that is a link
with no reference beside it, its target's), and an absolute path or URL only where
the reader named it too (``Reader(..., references=[...])``, or a mapping from the
recorded string to where the container is now): a container from elsewhere cannot
make a Reader open files it was not pointed at.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path, PurePosixPath
from typing import Any

from nncodecs.errors import ReferenceProblemError
from nncodecs.store.files import local_target

__all__ = ["allowed_references", "recorded_location", "resolve_reference"]


def _url_parent(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[0]


def recorded_location(container: Any, reference: Any) -> str:
    """What ``container`` (a path or URL being written) records of ``reference``'s
    place: relative to the container's directory where it lies inside it."""
    here, there = local_target(container), local_target(reference)
    if here is not None and there is not None:
        # (the paths as named first, so a reference that is a link beside the container,
        # as in a Hugging Face cache, is recorded by its own name, then as resolved)
        for base, target in (
            (_absolute(here).parent, _absolute(there)),
            (here.resolve().parent, there.resolve()),
        ):
            try:
                return target.relative_to(base).as_posix()
            except ValueError:
                pass
        return str(there.resolve())
    if isinstance(container, str) and isinstance(reference, str) and here is None:
        base = _url_parent(container) + "/"
        if reference.startswith(base) and ".." not in reference[len(base) :].split("/"):
            return reference[len(base) :]
        return reference
    if isinstance(reference, str | os.PathLike):
        return str(Path(reference).resolve()) if there is not None else str(reference)
    raise ValueError(f"a reference is a container's path or URL, got {type(reference).__name__}")


def allowed_references(references: Any) -> dict[str, str]:
    """``Reader(..., references=)`` as {recorded string: where to open it}: a mapping
    as given; a list of paths or URLs each under its own (absolute) place, and under
    ``name:<its file name>``, which stands for any recorded place of that file name
    (a store moved, or a copy of a reference elsewhere)."""
    if references is None:
        return {}
    if isinstance(references, dict):
        return {str(k): str(v) for k, v in references.items()}
    if isinstance(references, str | os.PathLike):
        references = [references]
    out = {}
    for ref in references:
        there = local_target(ref)
        if there is not None:
            out[str(_absolute(there))] = str(ref)
        out[str(there.resolve()) if there is not None else str(ref)] = str(ref)
        out[_BY_NAME + PurePosixPath(str(ref).replace("\\", "/").rstrip("/")).name] = str(ref)
    return out


_BY_NAME = "name:"


def _relative(recorded: str) -> bool:
    """Whether a recorded place is a path relative to the container's directory that
    stays inside it."""
    if "://" in recorded or "\\" in recorded or recorded.startswith("/") or not recorded:
        return False
    parts = PurePosixPath(recorded).parts
    return bool(parts) and ".." not in parts and not (len(recorded) > 1 and recorded[1] == ":")


def _absolute(path: Path) -> Path:
    """A local path made absolute without following links (``..`` removed as written)."""
    return Path(os.path.abspath(path))


def _directories(here: Path) -> list[Path]:
    """The directories a container's relative references may lie in: the one it was
    named in, then, where it is a link, each link target's along the way."""
    out, at = [_absolute(here).parent], _absolute(here)
    for _ in range(40):  # (the kernel's own bound on links followed)
        if not at.is_symlink():
            break
        at = _absolute(at.parent / os.readlink(at))
        if at.parent not in out:
            out.append(at.parent)
    return out


def _beside(directory: Path, recorded: str) -> str:
    """A relative place opened from ``directory`` (the container's, as it was named):
    through no linked directory (the container itself may be a link, as in a Hugging
    Face cache), and a directory or regular file where anything is there."""
    at = directory
    parts = PurePosixPath(recorded).parts
    for part in parts[:-1]:
        at = at / part
        if at.is_symlink():
            raise ReferenceProblemError(
                f"reference {recorded!r} passes through a linked directory ({at}): a Reader "
                "follows a relative place only inside its container's directory"
            )
    at = at / parts[-1]
    if at.exists() and not (at.is_dir() or at.is_file()):
        raise ReferenceProblemError(f"reference {recorded!r}: {at} is not a file or directory")
    return str(at)


def resolve_reference(container: Any, recorded: Any, allowed: dict[str, str]) -> str:
    """Where to open the container a reference records as ``recorded``, seen from
    ``container`` (the path or URL being read); ReferenceProblemError where it may not
    be followed."""
    if not isinstance(recorded, str):
        raise ReferenceProblemError(f"a reference's container is {recorded!r}, not a path")
    if recorded in allowed:
        return allowed[recorded]
    named = allowed.get(_BY_NAME + PurePosixPath(recorded.replace("\\", "/").rstrip("/")).name)
    if named is not None:
        return named
    if "\x00" in recorded:
        raise ReferenceProblemError(f"a reference's container is {recorded!r}: not a path")
    if _relative(recorded):
        here = local_target(container)
        if here is not None:  # (beside the container as named; else beside a link's target)
            places = [_beside(d, recorded) for d in _directories(here)]
            return next((p for p in places if Path(p).exists()), places[0])
        if isinstance(container, str):
            return posixpath.join(_url_parent(container), recorded)
        raise ReferenceProblemError(
            f"reference {recorded!r} lies beside its container, which was opened as a store "
            "object: name its place with references={...}"
        )
    raise ReferenceProblemError(
        f"reference {recorded!r} lies outside its container's directory: a Reader follows "
        "it only where named (references=[...]; the CLI's --reference)"
    )
