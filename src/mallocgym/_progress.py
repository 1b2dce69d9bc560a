"""Progress bars on stderr, drawn by tqdm and labelled by the command that runs them.

``with Progress(total, "bench") as bar: ... bar.update(label)`` draws one bar. The command line
wraps each command in :func:`command` so that every bar it draws is labelled by that command
(``mallocgym eval``, ``mallocgym train sb3``) whatever the code below it called it, and, with
``--quiet``, draws none::

    with command("mallocgym eval", quiet=args.quiet):
        bench(...)          # its bar reads "mallocgym eval", or is not drawn

In a terminal tqdm redraws the bar in place; into a file or a pipe (a CI log) it writes a whole
line at most every :data:`LOG_INTERVAL_S` seconds (and the first and last), so logs stay short.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from typing import Iterable, Iterator, TypeVar

from tqdm import tqdm

__all__ = ["Progress", "track", "command", "LOG_INTERVAL_S"]

T = TypeVar("T")

LOG_INTERVAL_S = 15.0  # seconds between lines when stderr is not a terminal

# (label, quiet) of the command running now; None outside :func:`command`.
_COMMAND: contextvars.ContextVar[tuple[str, bool] | None] = contextvars.ContextVar("mallocgym_command",
                                                                                  default=None)


@contextlib.contextmanager
def command(label: str, *, quiet: bool = False) -> Iterator[None]:
    """Within this block every :class:`Progress` bar is labelled ``label`` and, when ``quiet``,
    none is drawn."""
    token = _COMMAND.set((label, quiet))
    try:
        yield
    finally:
        _COMMAND.reset(token)


class _Lines:
    """A file for tqdm that is not a terminal: each redraw becomes one whole line (tqdm starts
    a redraw with a carriage return and pads it with spaces), so a log gets one line per update."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        line = text.replace("\r", "").rstrip()
        if line:
            self.stream.write(line + "\n")

    def flush(self) -> None:
        self.stream.flush()


class Progress:
    """A tqdm bar of ``total`` units on ``stream`` (stderr).

    ``desc`` labels it unless a :func:`command` block gives the label; ``enabled=False`` (or a
    quiet command) draws nothing but still counts. ``update(label, advance)`` moves it by
    ``advance`` units, ``update(label, done=x)`` to ``x``; ``label`` is shown after the counts.
    ``tty`` tells whether the bar redraws in a terminal (callers update a log less often).
    """

    def __init__(self, total: float, desc: str = "", *, enabled: bool = True, stream=None, unit: str = ""):
        running = _COMMAND.get()
        if running is not None:
            desc, quiet = running
            enabled = enabled and not quiet
        self.total = total
        self.desc = desc
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.unit = unit
        self.done = 0.0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._bar = None
        if enabled:
            self._bar = tqdm(total=total, desc=desc, unit=unit or "it", leave=True,
                             file=self.stream if self.tty else _Lines(self.stream),
                             dynamic_ncols=self.tty, ascii=not self.tty,
                             mininterval=0.1 if self.tty else LOG_INTERVAL_S,
                             bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt}" + ("" if unit in ("", "%") else " " + unit)
                             + " [{elapsed}<{remaining}{postfix}]")

    def update(self, label: str = "", advance: float = 1.0, *, done: float | None = None) -> None:
        """Move the bar by ``advance`` (or to ``done``) and show ``label`` after the counts."""
        before = self.done
        self.done = self.done + advance if done is None else done
        if self._bar is None:
            return
        if label:
            self._bar.set_postfix_str(label, refresh=False)
        step = self.done - before
        self._bar.update(int(step) if float(step).is_integer() else step)

    def write(self, line: str) -> None:
        """Print ``line`` above the bar (flushed at once); nothing when the bar is not drawn."""
        if not self.enabled:
            return
        if self._bar is not None and self.tty:
            self._bar.write(line, file=self.stream)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Draw the final state and end the bar's line (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def track(items: Iterable[T], total: int, desc: str = "", enabled: bool = True) -> Iterator[T]:
    """Yield ``items`` with a bar of ``total`` steps."""
    with Progress(total, desc, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.update()
