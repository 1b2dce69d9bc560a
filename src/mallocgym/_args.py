"""The argument parser every ``mallocgym`` command line uses (the CLI and the training entry points)."""

from __future__ import annotations

import argparse

__all__ = ["Parser", "one_line", "MAX_MESSAGE"]


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line ``mallocgym: error: PROG: ...`` (exit 2), like
    every other bad input; ``--help`` shows the usage."""

    def error(self, message: str):
        self.exit(2, f"mallocgym: error: {self.prog}: {one_line(message)} (see {self.prog} --help)\n")


MAX_MESSAGE = 1000
"""Characters of an error message the CLI prints (a 100 KB argument is not echoed back whole)."""


def one_line(text) -> str:
    """An error message on one line (some libraries' messages span several), cut to
    :data:`MAX_MESSAGE` characters."""
    text = "; ".join(line.strip() for line in str(text).splitlines() if line.strip())
    if len(text) > MAX_MESSAGE:
        text = f"{text[:MAX_MESSAGE]}... ({len(text)} characters)"
    return text
