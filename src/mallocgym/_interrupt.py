"""Stopping a long run cleanly on Ctrl-C (SIGINT) or SIGTERM, and the run folder's log rules.

:func:`graceful_stop` turns the first SIGINT or SIGTERM into a flag that a training loop reads
between steps (it then leaves its loop and writes its checkpoint as at the end of its budget); a
second signal interrupts at once (``KeyboardInterrupt``). :func:`terminate_as_interrupt` makes
SIGTERM raise ``KeyboardInterrupt`` as Ctrl-C does, for a trainer that checkpoints in a
``finally``. Both act only in the main thread (signal handlers live there).
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from pathlib import Path
from typing import Callable, Iterator

__all__ = ["StopFlag", "graceful_stop", "terminate_as_interrupt", "truncate_jsonl", "refuse_other_run"]


class StopFlag:
    """Truthy once a stop signal arrived; ``signal`` is its number."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __bool__(self) -> bool:
        return self.signal is not None


@contextlib.contextmanager
def graceful_stop() -> Iterator[StopFlag]:
    """A :class:`StopFlag` set by the first SIGINT or SIGTERM inside the block; a second one
    raises ``KeyboardInterrupt``. The previous handlers come back at the end."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if flag.signal is not None:
            raise KeyboardInterrupt
        flag.signal = signum

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Inside the block SIGTERM raises ``KeyboardInterrupt``, as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def truncate_jsonl(path: Path, keep: Callable[[dict], bool]) -> int:
    """Rewrite the JSON-lines log ``path`` (atomically) without the lines after the last one
    ``keep`` accepts (and without a torn last line); return how many lines were dropped."""
    from ._files import atomic_write

    if not path.is_file():
        return 0
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    kept = 0
    for i, line in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and keep(record) and line.endswith("\n"):
            kept = i + 1
    if kept == len(lines):
        return 0
    with atomic_write(path, "w") as handle:
        handle.writelines(lines[:kept])
    return len(lines) - kept


def refuse_other_run(out: Path, logs: list[Path]) -> None:
    """A fresh run may not write into a folder holding another run's log: one clear error."""
    found = [p for p in logs if p.exists()]
    if found:
        name = found[0].relative_to(out) if found[0].is_relative_to(out) else found[0]
        raise ValueError(f"{out} already holds a run; pass --resume to continue it or choose another --out "
                         f"(it has {name})")
