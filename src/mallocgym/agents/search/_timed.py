"""The search agents' completions with a deadline: each plays exactly what its untimed original
plays (``tests/test_search_budget.py`` checks it move for move), but reads the clock
(:func:`mallocgym._clock.past`) every :data:`EVERY` decisions and gives up, returning NaN, once
the deadline (absolute nanoseconds, :data:`mallocgym._clock.NO_DEADLINE` for none) has passed.
A search discards a completion that gave up and keeps its incumbent.

- :func:`greedy_until`: :func:`mallocgym.heuristics.v0.complete`'s play (``sim.run_greedy``,
  best fit, no placement that saves nothing), MallocGame-v0's default game;
- :func:`canonical_until`: :func:`mallocgym.sim.canonical.run_canonical`, the canonical mode;
- :func:`msa_until`, :func:`greedy_v1_until`: :func:`mallocgym.heuristics.v1.complete_msa` and
  :func:`~mallocgym.heuristics.v1.complete_greedy`, MallocGame-v1.

The state is left part-played when a completion gives up (callers complete into scratch).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ... import sim
from ..._clock import past
from ...features.v1 import advance_forced
from ...heuristics.v1 import greedy_move, play_action
from ...sim import STEP, TIME, canonical, v1

__all__ = ["EVERY", "greedy_until", "canonical_until", "msa_until", "greedy_v1_until"]

EVERY = 8
"""Decisions between two reads of the clock (a read costs well under a decision)."""


@njit(cache=True)
def greedy_until(st, state, deadline):
    """``sim.run_greedy(st, state, True)`` (best fit) that gives up at ``deadline`` (NaN)."""
    n = st.size.shape[0]
    ids = np.empty(n, dtype=np.int64)
    gap_lo = np.empty(n + 1, dtype=np.int64)
    gap_hi = np.empty(n + 1, dtype=np.int64)
    cand_off = np.empty(1, dtype=np.int64)
    cand_lo = np.empty(1, dtype=np.int64)
    cand_hi = np.empty(1, dtype=np.int64)
    for i in range(state.counters[STEP], n):
        if i % EVERY == 0 and past(deadline):
            return np.nan
        b = st.order[i]
        state.counters[STEP] = i + 1
        if sim.marginal_benefit(st, state, b) <= 0.0:
            continue
        count, _, _ = sim.find_candidates(st, state, b, 1, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi)
        if count > 0 and cand_off[0] >= 0:
            sim.place(st, state, b, cand_off[0])
    return state.totals[TIME]


@njit(cache=True)
def canonical_until(st, state, cs, rank, deadline):
    """``canonical.run_canonical`` that gives up at ``deadline`` (NaN)."""
    out = np.empty(1, np.int64)
    i = 0
    while True:
        if i % EVERY == 0 and past(deadline):
            return np.nan
        i += 1
        count = canonical.candidates(st, cs, rank, 1, out)
        if count == 0:
            break
        b = out[0]
        if sim.marginal_benefit(st, state, b) > 0.0:
            canonical.place(st, state, cs, b)
        else:
            canonical.send_slow(cs, b)
    canonical.finish(cs)
    return state.totals[TIME]


@njit(cache=True)
def msa_until(st, state, table, deadline):
    """``heuristics.v1.complete_msa`` (MSA's own action at each decision) that gives up at
    ``deadline`` (NaN)."""
    s = advance_forced(st, state, table)
    i = 0
    while s >= 0:
        if i % EVERY == 0 and past(deadline):
            return np.nan
        i += 1
        s = play_action(st, state, s, table, table.msa_action[0])
    return state.totals[v1.TIME]


@njit(cache=True)
def greedy_v1_until(st, state, table, work, deadline):
    """``heuristics.v1.complete_greedy`` that gives up at ``deadline`` (NaN)."""
    s = advance_forced(st, state, table)
    i = 0
    while s >= 0:
        if i % EVERY == 0 and past(deadline):
            return np.nan
        i += 1
        a = greedy_move(st, state, s, table, work)
        s = play_action(st, state, s, table, a)
    return state.totals[v1.TIME]
