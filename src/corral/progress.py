"""A progress bar on stderr for batch jobs and long copies (tqdm when installed, else a plain
counter)."""

from __future__ import annotations

import sys
from typing import Any


class Progress:
    """Counts ``done`` of ``total`` items (``unit="item"``) or bytes (``unit="B"``: shown in MiB)."""

    def __init__(self, total: int, desc: str, enabled: bool = True, unit: str = "item") -> None:
        self.total = total
        self.done = 0
        self.desc = desc
        self.unit = unit
        self.enabled = enabled and total > 1
        self._bar: Any = None
        if self.enabled:
            try:
                from tqdm import tqdm

                scale = unit == "B"
                self._bar = tqdm(
                    total=total, desc=desc, unit=unit, unit_scale=scale, unit_divisor=1024, file=sys.stderr
                )
            except ImportError:
                pass

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
        elif self.unit == "B":
            mib = 1 << 20
            print(
                f"\r{self.desc}: {self.done // mib}/{self.total // mib} MiB",
                end="",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(f"\r{self.desc}: {self.done}/{self.total}", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled:
            print(file=sys.stderr)
