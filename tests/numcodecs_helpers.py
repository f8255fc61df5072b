"""numcodecs' own test helpers (``numcodecs/tests/common.py``), loaded for our tests.

numcodecs < 0.17 ships them in its wheel; from 0.17 on the wheel has no
tests, and ``make`` fetches the file from the installed release's source
distribution into the environment (``scripts/fetch_numcodecs_tests.py``),
never into this repository.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: Where scripts/fetch_numcodecs_tests.py puts the helpers in an environment.
FETCHED = Path(sys.prefix) / "share" / "nncodecs" / "numcodecs_common.py"


def load_common() -> ModuleType:
    """numcodecs' ``tests/common.py`` module; ``FileNotFoundError`` when neither the
    installed package ships it nor ``make`` fetched it."""
    try:
        from numcodecs.tests import common  # type: ignore[import-not-found]

        return common
    except ImportError:
        pass
    if not FETCHED.exists():
        raise FileNotFoundError(
            f"numcodecs' test helpers are not at {FETCHED}: `make` fetches them "
            "(scripts/fetch_numcodecs_tests.py)"
        )
    spec = importlib.util.spec_from_file_location("numcodecs_tests_common", FETCHED)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
