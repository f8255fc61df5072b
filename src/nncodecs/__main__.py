"""``python -m nncodecs``: the nncodecs command."""

import sys

try:
    from nncodecs.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python is still importing
    print("nncodecs: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
