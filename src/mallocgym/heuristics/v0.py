"""MallocGame-v0's greedy mapping heuristics: as numba fast paths over :mod:`mallocgym.sim`, and as env policies.

Five heuristics, each in two forms that give identical mappings (``tests/test_heuristics.py``):

============  ==============  ===================================  =====================
name          decision order  where a buffer goes                  buffers left slow
============  ==============  ===================================  =====================
all-slow      --              nowhere                              all
random        boundedness     uniform over the K candidates + skip none on purpose
first-fit     start           lowest free aligned offset           those that fit nowhere
best-fit      size            best-fit candidate (smallest gap)    those that fit nowhere
xla           boundedness     best-fit candidate                   + those saving nothing
============  ==============  ===================================  =====================

``xla`` is XLA Memory Space Assignment's greedy: buffers in order of memory boundedness
(benefit / sqrt(size), then size, duration, start: :func:`mallocgym.sim.buffer_order`), each
at its best fit, skipping buffers whose placement would save no time now.

**Fast path**: ``HEURISTICS[name](scenario, seed) -> offsets`` (``int64[N]``, -1 = slow).

**Env policy**: ``policy(name, seed=...)`` returns a callable ``(env) -> action`` that reads
``env.unwrapped``'s candidates and state; play it with :func:`play` on the env that
:func:`mallocgym.env.heuristic_env` builds (the right ``order`` and ``n_candidates`` for that heuristic).
First fit needs the lowest-offset candidate, which the env's best-fit-sorted top ``K`` can
drop; with ``n_candidates >= 2 * N`` (what :func:`~mallocgym.env.heuristic_env` sets: a buffer has at most one
fitting gap per placed buffer plus one, two candidates each) no candidate is ever dropped.
With a smaller ``K`` the policy picks the lowest offset among the ``K`` shown.

The kernels :func:`decide` and :func:`complete` (with :func:`mallocgym.sim.copy_into`) are the simulator moves the
search agents (:mod:`mallocgym.agents.search.v0`) branch with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import njit

from .. import sim
from ..scenarios import Scenario
from ..sim import ALIGNMENT, STEP

__all__ = [
    "all_slow", "random_mapping", "first_fit", "best_fit", "xla_like", "greedy", "HEURISTICS",
    "ORDER", "Policy", "GreedyPolicy", "RandomPolicy", "SlowPolicy", "policy", "play",
    "FIT_BEST", "FIT_FIRST", "decide", "complete", "run_fit",
]

FIT_BEST, FIT_FIRST = 0, 1
"""Where :func:`run_fit` puts a buffer: the best-fit candidate, or the lowest free offset."""

ORDER = {"all-slow": "boundedness", "random": "boundedness", "first-fit": "start",
         "best-fit": "size", "xla": "boundedness"}
"""The decision order of each heuristic (the env's ``order=`` argument)."""


# ------------------------------------------------------------------------------ numba kernels
@njit(cache=True)
def run_fit(st, state, fit, skip_no_benefit):
    """Play the rest of the episode greedily (``sim.run_greedy``): each buffer to its best-fit
    candidate (``FIT_BEST``) or the lowest free aligned offset (``FIT_FIRST``); return the time."""
    return sim.run_greedy(st, state, skip_no_benefit, fit == FIT_FIRST)


@njit(cache=True)
def _run_random(st, state, k, u):
    """Uniform legal play: at step ``i``, action ``floor(u[i] * (count + 1))`` among the
    ``count`` candidates (best fit first, at most ``k``) and skip (the last)."""
    n = st.size.shape[0]
    ids = np.empty(n, dtype=np.int64)
    gap_lo = np.empty(n + 1, dtype=np.int64)
    gap_hi = np.empty(n + 1, dtype=np.int64)
    cand_off = np.empty(k, dtype=np.int64)
    cand_lo = np.empty(k, dtype=np.int64)
    cand_hi = np.empty(k, dtype=np.int64)
    for i in range(state.counters[STEP], n):
        b = st.order[i]
        state.counters[STEP] = i + 1
        count, _, _ = sim.find_candidates(st, state, b, k, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi)
        choice = _uniform_choice(u[i], count + 1)
        if choice < count:
            sim.place(st, state, b, cand_off[choice])
    return state.totals[sim.TIME]


@njit(cache=True)
def _uniform_choice(u, n):
    c = int(u * n)
    return c if c < n else n - 1


@njit(cache=True)
def decide(st, state, offset):
    """Decide the current buffer (``st.order[step]``): place it at ``offset``, or leave it slow
    when ``offset < 0``; advance one step. The caller checked the offset is free."""
    b = st.order[state.counters[STEP]]
    if offset >= 0:
        sim.place(st, state, b, offset)
    state.counters[STEP] += 1


@njit(cache=True)
def complete(st, src, work):
    """Copy ``src`` into ``work`` and finish the episode there with XLA-like play; return the
    final program time (``src`` is untouched)."""
    sim.copy_into(src, work)
    return run_fit(st, work, FIT_BEST, True)


# ------------------------------------------------------------------------------ fast paths
def _fresh(scenario: Scenario, order: str) -> tuple[sim.Static, sim.State]:
    st = sim.compile_scenario(scenario.workload, scenario.hardware, order)
    return st, sim.new_state(st)


def greedy(scenario: Scenario, order: str = "boundedness", skip_no_benefit: bool = False,
           fit: int = FIT_BEST) -> np.ndarray:
    """Decide buffers in ``order``, each at its best fit (``FIT_BEST``) or lowest free offset
    (``FIT_FIRST``), or slow when none fits; optionally skip buffers that save nothing."""
    st, state = _fresh(scenario, order)
    run_fit(st, state, fit, skip_no_benefit)
    return state.offsets


def all_slow(scenario: Scenario, seed: int = 0) -> np.ndarray:
    """Every buffer in slow memory: the speedup-1 reference."""
    return np.full(scenario.workload.num_buffers, sim.SLOW, dtype=np.int64)


def random_mapping(scenario: Scenario, seed: int = 0, n_candidates: int = 16) -> np.ndarray:
    """Uniformly random legal MallocGame play (one of the ``n_candidates`` candidates or skip),
    in the boundedness order, drawn from ``numpy.random.default_rng(seed)``."""
    st, state = _fresh(scenario, ORDER["random"])
    u = np.random.default_rng(seed).random(scenario.workload.num_buffers)
    _run_random(st, state, int(n_candidates), u)
    return state.offsets


def first_fit(scenario: Scenario, seed: int = 0) -> np.ndarray:
    """First fit: buffers by start time (then size descending), each at the lowest free aligned
    offset over its live range; slow when none fits."""
    return greedy(scenario, ORDER["first-fit"], False, FIT_FIRST)


def best_fit(scenario: Scenario, seed: int = 0) -> np.ndarray:
    """Best fit: buffers by size descending (then start), each in the smallest free gap that
    holds it (lowest offset of that gap first); slow when none fits."""
    return greedy(scenario, ORDER["best-fit"], False, FIT_BEST)


def xla_like(scenario: Scenario, seed: int = 0) -> np.ndarray:
    """XLA Memory Space Assignment's greedy: memory-boundedness order, best fit, buffers that
    would save nothing left in slow memory."""
    return greedy(scenario, ORDER["xla"], True, FIT_BEST)


HEURISTICS: dict[str, Callable[[Scenario, int], np.ndarray]] = {
    "all-slow": all_slow, "random": random_mapping, "first-fit": first_fit,
    "best-fit": best_fit, "xla": xla_like,
}


# ------------------------------------------------------------------------------ env policies
Policy = Callable[[object], int]
"""``(env) -> action``: reads ``env.unwrapped`` (a :class:`~mallocgym.env.MallocGameEnv`)."""


def _skip(env) -> int:
    return int(env.action_space.n) - 1


@dataclass(frozen=True)
class SlowPolicy:
    """Always skip: the all-slow mapping."""

    def __call__(self, env) -> int:
        return _skip(env.unwrapped)


@dataclass(frozen=True)
class GreedyPolicy:
    """Best fit (candidate 0) or first fit (the lowest candidate offset), skip when nothing
    fits; with ``skip_no_benefit``, also skip buffers that would save no time now."""

    fit: int = FIT_BEST
    skip_no_benefit: bool = False

    def __post_init__(self) -> None:
        if self.fit not in (FIT_BEST, FIT_FIRST):
            raise ValueError(f"fit must be FIT_BEST ({FIT_BEST}) or FIT_FIRST ({FIT_FIRST}), got {self.fit!r}")

    def __call__(self, env) -> int:
        u = env.unwrapped
        if self.skip_no_benefit:
            if sim.marginal_benefit(u.static, u.sim_state, u.current_buffer) <= 0.0:
                return _skip(u)
        offsets = u.candidate_offsets
        if offsets.size == 0:
            return _skip(u)
        return 0 if self.fit == FIT_BEST else int(np.argmin(offsets))


class RandomPolicy:
    """Uniform over the legal actions, the same draws as :func:`random_mapping` with ``seed``:
    at step ``i`` the ``i``-th number of ``default_rng(seed).random(N)`` picks the action."""

    def __init__(self, seed: int = 0):
        self.seed = int(seed)
        self._draws = np.empty(0)

    def __call__(self, env) -> int:
        u = env.unwrapped
        n = u.workload.num_buffers
        if self._draws.shape[0] != n:
            self._draws = np.random.default_rng(self.seed).random(n)
        step = u.step_index
        count = u.candidate_offsets.size
        choice = int(_uniform_choice(self._draws[step], count + 1))
        return choice if choice < count else _skip(u)


def policy(name: str, *, seed: int = 0) -> Policy:
    """The env policy of heuristic ``name`` (a key of :data:`HEURISTICS`)."""
    if name == "all-slow":
        return SlowPolicy()
    if name == "random":
        return RandomPolicy(seed)
    if name == "first-fit":
        return GreedyPolicy(FIT_FIRST, False)
    if name == "best-fit":
        return GreedyPolicy(FIT_BEST, False)
    if name == "xla":
        return GreedyPolicy(FIT_BEST, True)
    raise ValueError(f"unknown heuristic {name!r}; known: {', '.join(HEURISTICS)}")


def play(env, pol: Policy, *, seed: int | None = None) -> np.ndarray:
    """Reset ``env`` and play one episode with ``pol``; return the final ``offsets``."""
    env.reset(seed=seed)
    while True:
        _, _, terminated, truncated, info = env.step(pol(env))
        if terminated or truncated:
            return np.asarray(info["offsets"], dtype=np.int64)
