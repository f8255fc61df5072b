"""What the command shows while it works: sizes for people and a progress bar."""

from __future__ import annotations

import sys
from typing import Any

from nncodecs.sizes import human

__all__ = ["ProgressBar", "human"]


class ProgressBar:
    """A progress bar (tqdm) on stderr, only when stderr is a terminal; ends at 100%."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label = label
        self.on = not quiet and sys.stderr.isatty()
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self.on:
            return
        if self.bar is None:
            import shutil

            from tqdm import tqdm

            # a terminal that reports no size (a bare pty) gets 80 x 24: tqdm would print
            # nothing on a terminal of 0 rows
            size = shutil.get_terminal_size((80, 24))
            self.bar = tqdm(
                total=total,
                desc=self.label,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                file=sys.stderr,
                ncols=size.columns,
                nrows=max(size.lines, 2),
            )
        # (done, total) may be a final (1, 1): the bar shows the same fraction
        done = done * self.bar.total // total if total and total != self.bar.total else done
        self.bar.update(max(0, min(done, self.bar.total) - self.bar.n))

    def finish(self) -> None:
        """Fill the bar (the last update may fall short of the total) and end its line."""
        if self.bar is not None:
            self.bar.update(self.bar.total - self.bar.n)
            self.bar.close()
            self.bar = None
