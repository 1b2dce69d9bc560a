"""Policies for MallocGame-v1 on the simulator: all-slow, random, XLA's MSA and the greedy completion.

**xla-msa** (:func:`complete_msa`, the v1 search agents' default completion): at each real
decision it plays the env's MSA action (``table.msa_action``: XLA's Memory Space Assignment's
own choice, :func:`mallocgym.sim.msa.decide`), so it leaves exactly ``xla-msa``'s plan from the
initial state, and MSA's continuation from any other.

**greedy** (the v1 search agents' completion with ``completion=greedy``; their default is
``xla-msa``, :mod:`mallocgym.sim.msa`): at each segment it tries at most three moves, ``SLOW``,
``FAST`` at the best-fit offset (produce and keep, or keep) and ``PREFETCH`` at the picker's
preferred start and best-fit offset, and plays the one with the lowest program time (the rest
of the game priced slow), ties to the first of ``SLOW``, ``FAST``, ``PREFETCH`` (so a tie keeps
the value slow: no copy). It is v0's XLA-like choice (best fit) played per use, with the
one-step exact cost deciding whether a copy pays.

The game's forced positions (only ``SLOW`` legal) are played as the env plays them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._clock import CHECK_EVERY, NO_DEADLINE, past
from ..features import v1 as v1_obs
from ..features.v1 import advance_forced, play
from ..scenarios import Scenario
from ..sim import msa, v1

__all__ = ["V1_POLICIES", "complete_greedy", "complete_msa", "greedy_move", "play_v1", "new_game"]


@njit(cache=True)
def greedy_move(st, state, s, table, work):
    """The greedy move at segment ``s`` (table filled): an action index of the table."""
    k = table.fast_off.shape[0]
    best_a = 0
    v1.copy_into(state, work)
    best_t = v1.apply(st, work, s, v1.SLOW, -1, -1)
    for a in (1, 1 + k):
        if a >= table.kind.shape[0] or table.kind[a] < 0:
            continue
        v1.copy_into(state, work)
        t = v1.apply(st, work, s, table.kind[a], table.off[a], table.pstart[a])
        if t < best_t:
            best_t = t
            best_a = a
    return best_a


@njit(cache=True, inline="always")
def play_action(st, state, s, table, a):
    """Play table action ``a`` at segment ``s`` (:func:`mallocgym.features.v1.play`)."""
    return play(st, state, table, s, table.kind[a], table.off[a], table.pstart[a])


@njit(cache=True)
def complete_greedy(st, state, table, work, deadline=NO_DEADLINE):
    """Play the rest of the game greedily (in place); return the final program time (NaN, the
    state part-played, once ``deadline`` has passed: absolute nanoseconds on
    :mod:`mallocgym._clock`'s clock, read every :data:`~mallocgym._clock.CHECK_EVERY` decisions)."""
    s = advance_forced(st, state, table)
    i = 0
    while s >= 0:
        if i % CHECK_EVERY == 0 and past(deadline):
            return np.nan
        i += 1
        a = greedy_move(st, state, s, table, work)
        s = play_action(st, state, s, table, a)
    return state.totals[v1.TIME]


@njit(cache=True)
def complete_msa(st, state, table, deadline=NO_DEADLINE):
    """Play the rest of the game with MSA's own action at each real decision (forced positions
    as the env plays them); return the final program time (NaN, the state part-played, once
    ``deadline`` has passed: absolute nanoseconds on :mod:`mallocgym._clock`'s clock, read every
    :data:`~mallocgym._clock.CHECK_EVERY` segments).

    The same moves and final state as playing ``table.msa_action`` through
    :func:`mallocgym.features.v1.play` (:func:`complete_msa_env`), without what only a step needs:
    the legal moves are listed only where MSA stays slow (to tell a forced position from a
    chosen ``SLOW``), and the program is simulated once at the end (the incremental simulation
    gives the same figures bit for bit)."""
    n = st.seg_use.shape[0]
    mo = table.msa_out
    pf_count = table.pf_count
    while state.counters[v1.POS] < n:
        if state.counters[v1.POS] % CHECK_EVERY == 0 and past(deadline):
            return np.nan
        s = st.order[state.counters[v1.POS]]
        msa.decide(st, state, table.msa, table.ids, s, table.pick, mo)
        chosen = mo[0] != v1.SLOW
        if not chosen:
            n_fast, n_starts = v1.segment_options(st, state, s, table.fast_off, table.starts, pf_count,
                                                  table.pf_off, table.ids, mo[3], mo[4], mo[5])
            legal = n_fast
            for j in range(min(n_starts, table.starts.shape[0])):
                legal += pf_count[j]
            chosen = legal > 0
        v1.apply_rules(st, state, s, mo[0], mo[1], mo[2])
        state.counters[v1.POS] += 1
        state.counters[v1.CHOSEN if chosen else v1.FORCED] += 1
    return v1.current_time(st, state)


@njit(cache=True)
def complete_msa_env(st, state, table):
    """:func:`complete_msa` step by step as the env plays it (the action table filled and the
    program re-simulated at every step): the reference it is tested against."""
    s = advance_forced(st, state, table)
    while s >= 0:
        s = play_action(st, state, s, table, table.msa_action[0])
    return state.totals[v1.TIME]


@njit(cache=True)
def complete_random(st, state, table, seed):
    """Play the rest uniformly at random over the legal actions; return the final time."""
    np.random.seed(seed)
    s = advance_forced(st, state, table)
    while s >= 0:
        m = 0
        for a in range(table.kind.shape[0]):
            if table.kind[a] >= 0:
                m += 1
        pick = np.random.randint(m)
        for a in range(table.kind.shape[0]):
            if table.kind[a] >= 0:
                if pick == 0:
                    break
                pick -= 1
        s = play_action(st, state, s, table, a)
    return state.totals[v1.TIME]


@njit(cache=True)
def complete_slow(st, state, table):
    s = advance_forced(st, state, table)
    while s >= 0:
        s = play_action(st, state, s, table, 0)
    return state.totals[v1.TIME]


def new_game(scenario: Scenario, *, n_candidates: int = 16, n_starts: int = 4, order: str = "boundedness"):
    """``(static, state, table, work)`` of a fresh v1 game on ``scenario``."""
    st = v1.compile_v1(scenario.workload, scenario.hardware, order, n_starts=n_starts, n_candidates=n_candidates)
    state = v1.new_state(st)
    return st, state, v1_obs.make_table(st), v1.copy_state(state)


def play_v1(scenario: Scenario, policy: str, seed: int = 0) -> dict:
    """The v1 mapping a policy (``all-slow``, ``random``, ``greedy``) leaves on ``scenario``."""
    from ..pricing.v1 import mapping_from_state

    st, state, table, work = new_game(scenario)
    if policy == "all-slow":
        complete_slow(st, state, table)
    elif policy == "random":
        complete_random(st, state, table, np.int64(seed))
    elif policy == "greedy":
        complete_greedy(st, state, table, work)
    else:
        raise ValueError(f"unknown v1 policy {policy!r}; known: {', '.join(V1_POLICIES)}")
    return mapping_from_state(scenario.workload, st, state)


V1_POLICIES = ("all-slow", "random", "greedy")
