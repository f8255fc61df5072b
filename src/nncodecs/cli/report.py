"""What a command prints for a script: ``--json``, one object on stdout."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["JSON_VERSION", "emit"]

#: The version of the ``--json`` objects' schema (docs/cli.md); a field renamed or removed
#: moves it on.
JSON_VERSION = 1


def emit(args: argparse.Namespace, **fields: Any) -> None:
    """``--json``: one object on stdout, its schema's version and the command first."""
    print(json.dumps({"version": JSON_VERSION, "command": args.command, **fields}))
