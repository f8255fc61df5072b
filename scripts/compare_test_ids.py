"""Compare two lists of collected test ids (``pytest --collect-only -q``) across a move
of test files: each id of ``before`` is mapped through the renames (``old new`` per
line, paths under tests/) and must be in ``after``, and ``after`` holds no other.

    python scripts/compare_test_ids.py before.txt after.txt renames.txt

Prints the renames and every id lost or gained; exits 1 if any.
"""

from __future__ import annotations

import sys
from pathlib import Path


def _ids(path: str) -> list[str]:
    return [line.strip() for line in Path(path).read_text().splitlines() if "::" in line]


def main(before_path: str, after_path: str, renames_path: str) -> int:
    renames = dict(
        (f"tests/{old}", f"tests/{new}")
        for old, new in (
            line.split() for line in Path(renames_path).read_text().splitlines() if line.strip()
        )
    )
    before, after = _ids(before_path), _ids(after_path)
    mapped = []
    for test_id in before:
        file, _, rest = test_id.partition("::")
        mapped.append(f"{renames.get(file, file)}::{rest}")
    lost = sorted(set(mapped) - set(after))
    gained = sorted(set(after) - set(mapped))
    for old, new in sorted(renames.items()):
        print(f"renamed {old} -> {new}")
    print(f"{len(before)} ids before, {len(after)} after; {len(lost)} lost, {len(gained)} gained")
    for test_id in lost:
        print(f"lost   {test_id}")
    for test_id in gained:
        print(f"gained {test_id}")
    return 1 if lost or gained or len(before) != len(after) else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
