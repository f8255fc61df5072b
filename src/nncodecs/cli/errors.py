"""The one line an error is on the command line: what kind, and a path the user gave."""

from __future__ import annotations

import argparse
import re

from nncodecs.errors import CorruptDataError, ReferenceProblemError, plain_message
from nncodecs.extras import EXTRAS, MissingExtraError, missing_message

__all__ = ["error_line"]

#: An output's temporary name in a message (``dir/.NAME.nncodecs-PID.tmp``): the user
#: named ``dir/NAME``.
_TEMPORARY = re.compile(r"(?P<dir>(?:^|[\s'\"/]))\.(?P<name>[^\s'\"/]+)\.nncodecs-\d+\.(?:tmp|old)")


def error_line(exc: Exception, args: argparse.Namespace) -> str:
    """``nncodecs: <kind>: <message>``: the message one plain line (another package's
    cleaned, a missing optional package's naming its extra), naming a path of ``args``."""
    kind = "corrupt data" if isinstance(exc, CorruptDataError) else "error"
    kind = "reference" if isinstance(exc, ReferenceProblemError) else kind
    text = plain_message(str(exc)) or type(exc).__name__
    text = text.replace("--force (overwrite=True)", "--force")  # (the API's name: not here)
    text = _TEMPORARY.sub(r"\g<dir>\g<name>", text)  # (the output's name, not its temporary's)
    if isinstance(exc, ModuleNotFoundError):  # (another package's import of an extra's)
        package = (exc.name or "").partition(".")[0]
        if not isinstance(exc, MissingExtraError) and package in EXTRAS:
            text = missing_message(package)
    return f"nncodecs: {kind}: {_with_path(text, exc, args)}"


def _with_path(text: str, exc: Exception, args: argparse.Namespace) -> str:
    """The message names a path the user gave: an error from deep down (a full disk, a
    tensor's dtype) gets the output's (for errors of the file system) or the input's."""
    inputs = [getattr(args, "input", None), *(getattr(args, "inputs", None) or [])]
    # (as the message shows them: a name with escapes or newlines made plain)
    named = [plain_message(str(p)) for p in (*inputs, getattr(args, "output", None)) if p]
    if any(p in text for p in named):
        return text
    output = getattr(args, "output", None)
    if isinstance(exc, OSError) and output and not getattr(exc, "filename", None):
        return f"{plain_message(str(output))}: {text}"
    return f"{named[0]}: {text}" if named else text
