"""A small progress bar on stderr (no dependency): redraws in a terminal, one line per update
otherwise (so CI logs stay readable)."""

from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


class Progress:
    """``with Progress(total, "bench") as bar: ... bar.update(label)``."""

    def __init__(self, total: float, desc: str = "", *, enabled: bool = True, stream=None, unit: str = ""):
        self.total = total
        self.desc = desc
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.unit = unit
        self.done = 0.0
        self.start = time.perf_counter()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, label: str = "", advance: float = 1.0, *, done: float | None = None) -> None:
        self.done = self.done + advance if done is None else done
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        frac = min(self.done / self.total, 1.0) if self.total else 1.0
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        width = 24
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        count = f"{self.done:g}/{self.total:g}{self.unit}"
        text = f"{self.desc} [{bar}] {count} {elapsed:5.1f}s eta {eta:5.1f}s {label}"
        if self.tty:
            self.stream.write("\r" + text[:160].ljust(160))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def track(items: Iterable[T], total: int, desc: str = "", enabled: bool = True) -> Iterator[T]:
    with Progress(total, desc, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.update()
