"""``python -m nncodecs``: the nncodecs command."""

import sys

from nncodecs.cli import main

sys.exit(main())
