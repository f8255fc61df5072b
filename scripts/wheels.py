"""The wheels `make wheel` builds, finished and checked: each carries libzstd's licence
beside nncodecs' own, and the sdist holds what a build needs and nothing of a local
build. Run by `make wheel` (`make test` runs it); prints what it checked.

    python scripts/wheels.py licences dist/*.whl      # libzstd's licence into each wheel
    python scripts/wheels.py sdist dist/*.tar.gz      # the sdist's file list
    python scripts/wheels.py same A.whl B.whl         # two wheels hold the same files
    python scripts/wheels.py installed                # the extension's libzstd is the wheel's

Nothing here is copied into the repository: the licence text is the system's
(Debian's copyright file of the libzstd that auditwheel grafted into the wheel).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

#: Where a system keeps libzstd's licence (Debian's copyright file, Fedora's licence).
ZSTD_LICENCES = [
    "/usr/share/doc/libzstd1/copyright",
    "/usr/share/doc/libzstd-dev/copyright",
    "/usr/share/doc/zstd/copyright",
    "/usr/share/licenses/libzstd/LICENSE",
]
#: What an sdist must hold (a build needs them) and must not (a local build's leftovers).
SDIST_NEEDS = [
    "CMakeLists.txt",
    "pyproject.toml",
    "LICENSE",
    "README.md",
    "cpp/",
    "src/nncodecs/__init__.py",
]
SDIST_NEVER = ["build/", ".venv", "dist/", "__pycache__", ".so"]


def licences(wheels: list[str]) -> None:
    source = next((Path(p) for p in ZSTD_LICENCES if Path(p).is_file()), None)
    if source is None:
        sys.exit(f"no licence of libzstd found (looked in {', '.join(ZSTD_LICENCES)})")
    for wheel in map(Path, wheels):
        with zipfile.ZipFile(wheel) as z:
            if not any(n.startswith("nncodecs.libs/libzstd") for n in z.namelist()):
                sys.exit(f"{wheel}: no libzstd grafted in (auditwheel repair first)")
        with tempfile.TemporaryDirectory() as tmp:
            run(sys.executable, "-m", "wheel", "unpack", "-d", tmp, str(wheel))
            (root,) = Path(tmp).iterdir()
            (info,) = root.glob("*.dist-info")
            (info / "licenses").mkdir(exist_ok=True)
            shutil.copy(source, info / "licenses" / "libzstd-LICENSE")
            run(sys.executable, "-m", "wheel", "pack", "-d", str(wheel.parent), str(root))
        print(f"{wheel.name}: LICENSE and libzstd-LICENSE (from {source})")


def sdist(archives: list[str]) -> None:
    for archive in archives:
        with tarfile.open(archive) as t:
            names = [n.split("/", 1)[1] for n in t.getnames() if "/" in n]
        missing = [n for n in SDIST_NEEDS if not any(x == n or x.startswith(n) for x in names)]
        stray = sorted({n for n in names for bad in SDIST_NEVER if bad in n})
        if missing or stray:
            sys.exit(f"{archive}: missing {missing}, holds {stray[:10]}")
        print(f"{Path(archive).name}: {len(names)} files, with {', '.join(SDIST_NEEDS)}")


def same(a: str, b: str) -> None:
    names = [sorted(zipfile.ZipFile(w).namelist()) for w in (a, b)]
    if names[0] != names[1]:
        sys.exit(f"{a} and {b} differ: {sorted(set(names[0]) ^ set(names[1]))[:10]}")
    print(f"{Path(b).name}: the same {len(names[0])} files as {Path(a).name}")


def installed() -> None:
    import nncodecs._core as core

    out = run("ldd", core.__file__)
    zstd = [line for line in out.splitlines() if "libzstd" in line]
    if not zstd or not all("nncodecs.libs" in line for line in zstd):
        sys.exit(f"{core.__file__}: libzstd is not the wheel's: {zstd}")
    print(f"{Path(core.__file__).name}: {zstd[0].strip()}")


def run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


if __name__ == "__main__":
    what, *args = sys.argv[1:]
    if what == "licences":
        licences(args)
    elif what == "sdist":
        sdist(args)
    elif what == "same":
        same(*args)
    elif what == "installed":
        installed()
    else:
        sys.exit(f"unknown: {what}")
