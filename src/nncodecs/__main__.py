"""``python -m nncodecs``: the nncodecs command."""

import os
import sys

try:
    from nncodecs.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python is still importing
    print("nncodecs: interrupted", file=sys.stderr)
    sys.exit(130)

code = main()
if code == 130:
    # Interrupted, its clean-up done. CPython (3.11, 3.12) ends a ``-m`` run by SIGINT (status
    # -2, whatever sys.exit says) once a KeyboardInterrupt has crossed an exec() on its
    # way, as one landing in a lazy import does: the status would not say 130.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)
sys.exit(code)
