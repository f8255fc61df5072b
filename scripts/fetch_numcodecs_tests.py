"""Put numcodecs' own test helpers (``tests/common.py``) into this environment.

numcodecs >= 0.17 wheels ship no tests. This takes the installed release's
source distribution from the package index (pip download, no build) and
copies its ``tests/common.py`` to ``<prefix>/share/nncodecs/numcodecs_common.py``,
where tests/numcodecs_helpers.py loads it. Nothing lands in the repository.
Where the installed numcodecs ships ``numcodecs.tests.common`` it does nothing.
Run by ``make`` with the environment's interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

TARGET = Path(sys.prefix) / "share" / "nncodecs" / "numcodecs_common.py"


def main() -> int:
    import numcodecs

    try:
        import numcodecs.tests.common

        print(f"numcodecs {numcodecs.__version__} ships its test helpers")
        return 0
    except ImportError:
        pass
    version = numcodecs.__version__
    stamp = TARGET.with_suffix(".version")
    if TARGET.exists() and stamp.exists() and stamp.read_text() == version:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                "numcodecs",
                f"numcodecs=={version}",
                "-d",
                tmp,
            ],
            check=True,
        )
        (sdist,) = Path(tmp).glob("numcodecs-*.tar.gz")
        with tarfile.open(sdist) as tar:
            names = [m for m in tar.getmembers() if m.name.endswith("tests/common.py")]
            if not names:
                print(f"no tests/common.py in {sdist.name}", file=sys.stderr)
                return 1
            data = tar.extractfile(min(names, key=lambda m: len(m.name)))
            assert data is not None
            TARGET.parent.mkdir(parents=True, exist_ok=True)
            TARGET.write_bytes(data.read())
    stamp.write_text(version)
    print(f"numcodecs {version}: test helpers at {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
