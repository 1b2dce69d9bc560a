"""How results are summed up against a baseline: the geometric mean of speedups, and wins, ties
and losses scenario by scenario. The headline run (``mallocgym run``), the leaderboard
(``baselines/make_readme.py``) and the SB3 trainer's checkpoint choice all count with these, so
they never disagree.

A tie is a speedup within :data:`TIE_RTOL` (relative) of the baseline's: a search that
completes with the baseline and finds nothing better returns the baseline's own plan, whose time
is equal up to rounding.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

__all__ = ["TIE_RTOL", "geomean", "outcome", "tally", "XLA_BASELINE"]

TIE_RTOL = 1e-6
XLA_BASELINE = {"v0": "xla", "v1": "xla-msa"}
"""Each game's XLA baseline: XLA-like greedy on v0, XLA's Memory Space Assignment on v1."""


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of positive numbers; no values or a value <= 0 is a ``ValueError``."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("geomean of no values")
    bad = [v for v in values if not (math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"geomean takes positive finite numbers, got {bad[0]!r}")
    return float(np.exp(np.log(values).mean()))


def outcome(speedup: float, base: float, rtol: float = TIE_RTOL) -> str:
    """``"win"``, ``"tie"`` or ``"loss"`` of ``speedup`` against the baseline's ``base``."""
    if not (base > 0 and speedup > 0):
        raise ValueError(f"speedups must be > 0, got {speedup!r} against {base!r}")
    if abs(speedup - base) <= rtol * base:
        return "tie"
    return "win" if speedup > base else "loss"


def tally(pairs: Iterable[tuple[float, float]], rtol: float = TIE_RTOL) -> tuple[int, int, int]:
    """``(wins, ties, losses)`` over ``(speedup, baseline speedup)`` pairs, one per scenario."""
    counts = {"win": 0, "tie": 0, "loss": 0}
    for speedup, base in pairs:
        counts[outcome(speedup, base, rtol)] += 1
    return counts["win"], counts["tie"], counts["loss"]
