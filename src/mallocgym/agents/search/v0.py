"""Search agents on the exact simulator: rollout, beam search and MCTS.

All three play MallocGame-v0's game exactly (the default decision order, the ``K`` best-fit
candidates plus skip) but branch on :mod:`mallocgym.sim` states directly rather than through
``env.clone_state()`` / ``restore_state()``: a snapshot of the env also copies the observation
arrays and every env step recomputes the observation features, which a search that only needs
the program time would throw away. A branch here is :func:`~mallocgym.sim.copy_into`
(array copies into preallocated scratch, no allocation) plus the sim's ``place``; the env
gives the same positions and times (``tests/test_search.py`` replays the agents' choices
through the env).

Every leaf is scored by finishing the episode with XLA-like play
(:func:`~mallocgym.heuristics.complete`, numba), and every agent keeps the best complete
mapping it has seen, starting with XLA-like's own: none can return a worse mapping than
XLA-like.

- **rollout** (Bertsekas' rollout algorithm): at each step try every legal action, finish each
  with XLA-like, take the action whose completion is fastest (XLA-like's own action on ties).
  ``(K + 1) * N`` completions at most.
- **beam**: keep the ``width`` best partial mappings (scored by their XLA-like completion);
  expand each by every legal action, keep the ``width`` best children. ``width = 1`` is rollout.
- **mcts**: UCT with ``simulations`` per decision: select by UCB1 on min-max normalised values,
  expand one child, score it by its XLA-like completion, back up mean and best; then commit to
  the child with the best completion found below it and reuse its subtree. With ``pace=1`` (and
  a ``time_limit``) a decision runs at least ``simulations`` and goes on while its share of the
  time left (:func:`pace_allowance`) is not spent, instead of a fixed count that may end the
  game early or late.

**The canonical decision mode** (``order=canonical`` in any of the three specs,
``rollout:order=canonical``): the same three searches play MallocGame-v0's canonical mode
(:mod:`mallocgym.sim.canonical`; the env's ``order="canonical"``) through a small game interface
(:class:`V0Game` and :class:`_CanonicalGame` give each search the same moves); leaves are then
scored by that mode's greedy completion (the lowest candidate placed when it saves time now,
else sent to slow memory), and the incumbent starts from it, so there the guarantee is "never
worse than that greedy", not XLA-like. ``levels=2`` is the default game's only.

Budgets are iteration counts (deterministic) plus an optional wall-clock ``time_limit``; when
that runs out the remaining decisions follow the best mapping found so far. ``info`` reports
``completions`` (XLA-like completions run) and, for MCTS, ``simulations``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ... import sim
from ..._clock import NO_DEADLINE
from ...heuristics.v0 import complete, decide
from ...scenarios import Scenario
from ...sim import STEP, TIME, canonical, copy_into, run_greedy
from ..base import Solution, parse_config
from .base import (UCT, BeamConfig, MCTSConfig, OutOfTime, RolloutConfig, _Budget, _v0_only_settings, _v1_settings)

__all__ = ["RolloutAgent", "BeamAgent", "MCTSAgent", "CompletionScorer", "search_factory", "V0Game"]


# ---------------------------------------------------------------------------------- kernels
@njit(cache=True)
def _candidates(st, state, k, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi):
    """Candidates of the buffer to decide now; returns their count (0 at the end)."""
    step = state.counters[STEP]
    if step >= st.size.shape[0]:
        return 0
    count, _, _ = sim.find_candidates(st, state, st.order[step], k, ids, gap_lo, gap_hi,
                                      cand_off, cand_lo, cand_hi)
    return count


@njit(cache=True)
def _base_action(st, state, count):
    """XLA-like's action here: 0 (best fit) or ``count`` (skip)."""
    b = st.order[state.counters[STEP]]
    if count == 0 or sim.marginal_benefit(st, state, b) <= 0.0:
        return count
    return 0


@njit(cache=True)
def _expand(st, state, k, work, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi,
            times, actions, step_times, best_time, best_offsets, known, deadline):
    """Score every legal action of ``state`` by its XLA-like completion.

    Writes ``actions[i]`` (candidate index, ``count`` = skip), ``times[i]`` and ``step_times[i]``
    (the program time right after the action, before the completion; NaN where not run),
    XLA-like's own action first, then the candidates in order, then skip; updates the incumbent
    ``best_time[0]`` / ``best_offsets`` on strict improvement. ``known >= 0`` is ``state``'s
    own XLA-like completion time, which is also that of XLA-like's action (XLA-like is
    deterministic), so that one is not rerun. A completion that gives up at ``deadline``
    (:func:`mallocgym.sim.run_greedy` with a deadline) ends the expansion there. Returns ``(actions, completions
    run, whether it gave up)``.
    """
    count = _candidates(st, state, k, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi)
    base = _base_action(st, state, count)
    actions[0] = base
    m = 1
    for a in range(count + 1):
        if a != base:
            actions[m] = a
            m += 1
    runs = 0
    for i in range(m):
        if i == 0 and known >= 0.0:
            times[0] = known
            step_times[0] = np.nan
            continue
        a = actions[i]
        copy_into(state, work)
        decide(st, work, cand_off[a] if a < count else -1)
        step_times[i] = work.totals[TIME]
        t = run_greedy(st, work, True, False, deadline)
        if np.isnan(t):
            return m, runs, True
        runs += 1
        times[i] = t
        if t < best_time[0]:
            best_time[0] = t
            best_offsets[:] = work.offsets
    return m, runs, False


@njit(cache=True)
def _first_min(times, m):
    best = 0
    for i in range(1, m):
        if times[i] < times[best]:  # first minimum: XLA-like's action on ties
            best = i
    return best


@njit(cache=True)
def _rollout_run(st, cur, k, work, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi, times, actions,
                 step_times, best_time, best_offsets, counter, limit, deadline):
    """Level-1 rollout from ``cur`` to the end of the episode (``cur`` is played in place).

    Adds the completions it runs to ``counter[0]``; once another step would take it past
    ``limit`` it finishes with XLA-like play. Updates the incumbent. Returns ``cur``'s final time,
    NaN when a completion gave up at ``deadline``.
    """
    n = st.size.shape[0]
    known = -1.0
    while cur.counters[STEP] < n:
        count = _candidates(st, cur, k, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi)
        if count == 0:
            decide(st, cur, -1)
            continue
        if counter[0] + count + (0 if known >= 0.0 else 1) > limit:
            return run_greedy(st, cur, True, False, deadline)
        m, runs, stopped = _expand(st, cur, k, work, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi, times,
                                   actions, step_times, best_time, best_offsets, known, deadline)
        counter[0] += runs
        if stopped:
            return np.nan
        best = _first_min(times, m)
        known = times[best]
        a = actions[best]
        decide(st, cur, cand_off[a] if a < count else -1)
    return cur.totals[TIME]


@njit(cache=True)
def _canonical_apply(st, state, cs, move):
    """Play a canonical-mode move: buffer ``move < N`` placed, ``move - N`` sent to slow memory."""
    n = st.size.shape[0]
    if move < n:
        canonical.place(st, state, cs, move)
    else:
        canonical.send_slow(cs, move - n)


@njit(cache=True)
def _canonical_expand(st, state, cs, rank, k, work, wcs, cand, times, moves, best_time, best_offsets, known,
                      deadline):
    """:func:`_expand` for the canonical decision mode: score every legal move of a position
    that has a candidate by its greedy completion (:func:`~mallocgym.sim.canonical.run_canonical`).

    Moves (``b``: place candidate ``b``, ``b + N``: send it to slow memory) go to ``moves``, the
    completion policy's own first (candidate 0, placed when that saves time now, else sent to
    slow memory), then the placements, then the sends, in candidate order; ``known >= 0`` is the
    position's own completion time, which is the policy's move's. Updates the incumbent on strict
    improvement; a completion that gives up at ``deadline`` ends the expansion. Returns
    ``(moves, completions run, whether it gave up)``.
    """
    n = st.size.shape[0]
    count = canonical.candidates(st, cs, rank, k, cand)
    shown = count if count < k else k
    b0 = cand[0]
    base = b0 if sim.marginal_benefit(st, state, b0) > 0.0 else b0 + n
    moves[0] = base
    m = 1
    for j in range(2 * shown):
        mv = cand[j] if j < shown else cand[j - shown] + n
        if mv != base:
            moves[m] = mv
            m += 1
    runs = 0
    for i in range(m):
        if i == 0 and known >= 0.0:
            times[0] = known
            continue
        canonical.canon_copy_into(state, cs, work, wcs)
        _canonical_apply(st, work, wcs, moves[i])
        t = canonical.run_canonical(st, work, wcs, rank, deadline)
        if np.isnan(t):
            return m, runs, True
        runs += 1
        times[i] = t
        if t < best_time[0]:
            best_time[0] = t
            best_offsets[:] = work.offsets
    return m, runs, False


class _Scratch:
    """Preallocated arrays for the kernels of one scenario."""

    def __init__(self, st: sim.Static, k: int):
        n = st.size.shape[0]
        self.ids = np.empty(n, np.int64)
        self.gap_lo = np.empty(n + 1, np.int64)
        self.gap_hi = np.empty(n + 1, np.int64)
        self.cand_off = np.zeros(k, np.int64)
        self.cand_lo = np.zeros(k, np.int64)
        self.cand_hi = np.zeros(k, np.int64)
        self.times = np.empty(k + 1, np.float64)
        self.actions = np.empty(k + 1, np.int64)
        self.step_times = np.empty(k + 1, np.float64)

    def candidates(self, st, state, k) -> int:
        return int(_candidates(st, state, k, self.ids, self.gap_lo, self.gap_hi, self.cand_off,
                               self.cand_lo, self.cand_hi))

    def expand(self, st, state, k, work, incumbent: "_Incumbent", known: float = -1.0,
               deadline: int = NO_DEADLINE) -> tuple[int, int, bool]:
        m, runs, stopped = _expand(st, state, k, work, self.ids, self.gap_lo, self.gap_hi, self.cand_off,
                                   self.cand_lo, self.cand_hi, self.times, self.actions, self.step_times,
                                   incumbent.time, incumbent.offsets, float(known), deadline)
        return int(m), int(runs), bool(stopped)

    def rollout_run(self, st, cur, k, work, incumbent: "_Incumbent", counter, limit: int,
                    deadline: int = NO_DEADLINE) -> float:
        return float(_rollout_run(st, cur, k, work, self.ids, self.gap_lo, self.gap_hi, self.cand_off,
                                  self.cand_lo, self.cand_hi, self.times, self.actions, self.step_times,
                                  incumbent.time, incumbent.offsets, counter, limit, deadline))


class CompletionScorer:
    """One step of the rollout algorithm as a function: the XLA-like completion time of every
    legal action of a position, in MallocGame-v0's action numbering.

    ``scorer(state)`` returns ``(times, best)``: ``times[a]`` is the final program time after
    action ``a`` (candidate ``a`` for ``a < K``, skip for ``a = K``) and XLA-like play to the end,
    ``inf`` for an illegal action; ``best`` is the rollout's move, the first minimum with
    XLA-like's own action first (so XLA-like's action on ties). ``state`` is untouched. Given
    ``step_times`` (``float[K + 1]``), it also writes there the program time right after each
    legal action, before the completion (``inf``: illegal). Used by mallocMuZero's labelled
    games (:mod:`mallocgym.agents.muzero.labels`).
    """

    def __init__(self, st: sim.Static, k: int):
        self.st = st
        self.k = int(k)
        self.scratch = _Scratch(st, self.k)
        self.work = sim.new_state(st)
        self.best_time = np.array([np.inf])
        self.best_offsets = np.empty(st.size.shape[0], np.int64)

    def __call__(self, state: sim.State, step_times: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        st, k, sc = self.st, self.k, self.scratch
        times = np.full(k + 1, np.inf)
        if state.counters[STEP] >= st.size.shape[0]:
            raise ValueError("the episode is over: no action to score")
        self.best_time[0] = np.inf
        m, _, _ = _expand(st, state, k, self.work, sc.ids, sc.gap_lo, sc.gap_hi, sc.cand_off, sc.cand_lo,
                          sc.cand_hi, sc.times, sc.actions, sc.step_times, self.best_time, self.best_offsets, -1.0,
                          NO_DEADLINE)
        count = m - 1  # every candidate plus skip
        env_actions = np.where(sc.actions[:m] < count, sc.actions[:m], k)
        times[env_actions] = sc.times[:m]
        if step_times is not None:   # recorded by the completions themselves (no known time: all run)
            step_times[:] = np.inf
            step_times[env_actions] = sc.step_times[:m]
        return times, int(env_actions[_first_min(sc.times, m)])


class _Incumbent:
    """The best complete mapping seen: ``time[0]`` seconds, ``offsets``; ``completions`` counts
    the completions run (the first one gave this mapping)."""

    def __init__(self, time_s: float, offsets: np.ndarray):
        self.time = np.array([float(time_s)])
        self.offsets = offsets.copy()
        self.completions = 1

    def offer(self, time_s: float, offsets: np.ndarray) -> None:
        """Keep ``offsets`` if strictly faster."""
        if time_s < self.time[0]:
            self.time[0] = time_s
            self.offsets[:] = offsets


def _setup(scenario: Scenario) -> tuple[sim.Static, sim.State]:
    st = sim.compile_scenario(scenario.workload, scenario.hardware, "boundedness")
    return st, sim.new_state(st)


# ---------------------------------------------------------------------------------- games
class V0Game:
    """MallocGame-v0's default game for the search agents. A position is a
    :class:`~mallocgym.sim.State`; a move is an offset (-1 = skip); leaves are scored by XLA-like
    completions, and the best complete mapping is kept.

    The interface the agents use (:class:`_CanonicalGame` has the same): ``root``, ``root_time``
    (the root's own completion), ``incumbent``; ``done(s)``; ``n_legal(s)`` (legal moves, 0 at
    the end); ``legal(s) -> (moves, index of the completion policy's move)``;
    ``expand(s, known) -> (moves, completion times, completions run)`` (every legal move scored,
    the policy's own first; ``known >= 0`` is ``s``'s own completion, reused for it);
    ``apply(s, move)`` (in place), ``play(s, move)`` (a new position), ``complete(s)``.

    The root's completion (the fallback) always runs in full; every later completion gives up at
    ``deadline`` (nanoseconds on :mod:`mallocgym._clock`'s clock), and ``expand`` or ``complete``
    then raise :class:`OutOfTime`. ``incumbent.completions`` counts the completions run.
    """

    def __init__(self, st: sim.Static, k: int, deadline: int = NO_DEADLINE):
        root = sim.new_state(st)
        self.st, self.k, self.n = st, k, st.size.shape[0]
        self.scratch, self.work = _Scratch(st, k), sim.copy_state(root)
        self.incumbent = _Incumbent(complete(st, root, self.work), self.work.offsets)
        self.root, self.root_time = root, float(self.incumbent.time[0])
        self.root_value = -self.root_time
        self.deadline = int(deadline)

    def done(self, state) -> bool:
        return int(state.counters[STEP]) >= self.n

    def n_legal(self, state) -> int:
        return 0 if self.done(state) else self.scratch.candidates(self.st, state, self.k) + 1

    def left(self, state) -> int:
        """Decisions still to make from ``state`` (the current one included)."""
        return self.n - int(state.counters[STEP])

    def legal(self, state) -> tuple[list, int]:
        count = self.scratch.candidates(self.st, state, self.k)
        return list(np.append(self.scratch.cand_off[:count], -1)), int(_base_action(self.st, state, count))

    def expand(self, state, known: float) -> tuple[np.ndarray, np.ndarray, int]:
        sc = self.scratch
        m, runs, stopped = sc.expand(self.st, state, self.k, self.work, self.incumbent, known, self.deadline)
        self.incumbent.completions += runs
        if stopped:
            raise OutOfTime
        count = m - 1  # every candidate plus skip
        moves = np.array([sc.cand_off[a] if a < count else -1 for a in sc.actions[:m]], np.int64)
        return moves, sc.times[:m].copy(), runs

    def apply(self, state, move) -> None:
        decide(self.st, state, int(move))

    def play(self, state, move):
        state = sim.copy_state(state)
        decide(self.st, state, int(move))
        return state

    def complete(self, state) -> float:
        inc = self.incumbent
        copy_into(state, self.work)
        t = float(run_greedy(self.st, self.work, True, False, self.deadline))
        if t != t:
            raise OutOfTime
        inc.completions += 1
        inc.offer(t, self.work.offsets)
        return t


class _CanonicalGame:
    """MallocGame-v0's canonical decision mode (:mod:`mallocgym.sim.canonical`) for the search
    agents, with :class:`V0Game`'s interface. A position is a pair ``(sim.State, Canon)``; a
    move is a buffer id ``b`` (place it at its lowest free offset) or ``b + N`` (send it to
    slow memory), among the ``K`` candidates shown; leaves are scored by the mode's greedy
    completion (:func:`~mallocgym.sim.canonical.run_canonical`)."""

    def __init__(self, st: sim.Static, k: int, deadline: int = NO_DEADLINE):
        root = (sim.new_state(st), canonical.new_canon(st))
        self.st, self.k, self.n = st, k, st.size.shape[0]
        self.rank = canonical.ranks(st)
        self.cand = np.zeros(k, np.int64)
        self.moves = np.zeros(2 * k, np.int64)
        self.times = np.zeros(2 * k, np.float64)
        self.work = self.copy(root)
        t = canonical.complete(st, *root, self.rank, *self.work)
        self.incumbent = _Incumbent(t, self.work[0].offsets)
        self.root, self.root_time = root, float(t)
        self.root_value = -self.root_time
        self.deadline = int(deadline)

    @staticmethod
    def copy(state):
        return sim.copy_state(state[0]), canonical.copy_canon(state[1])

    def _shown(self, state) -> int:
        return min(int(canonical.candidates(self.st, state[1], self.rank, self.k, self.cand)), self.k)

    def done(self, state) -> bool:
        return self._shown(state) == 0

    def n_legal(self, state) -> int:
        return 2 * self._shown(state)

    def legal(self, state) -> tuple[list, int]:
        shown = self._shown(state)
        moves = [int(b) for b in self.cand[:shown]] + [int(b) + self.n for b in self.cand[:shown]]
        saves = sim.marginal_benefit(self.st, state[0], int(self.cand[0])) > 0.0
        return moves, 0 if saves else shown

    def expand(self, state, known: float) -> tuple[np.ndarray, np.ndarray, int]:
        inc = self.incumbent
        m, runs, stopped = _canonical_expand(self.st, state[0], state[1], self.rank, self.k, self.work[0],
                                             self.work[1], self.cand, self.times, self.moves, inc.time, inc.offsets,
                                             float(known), self.deadline)
        inc.completions += int(runs)
        if stopped:
            raise OutOfTime
        return self.moves[:m].copy(), self.times[:m].copy(), int(runs)

    def apply(self, state, move) -> None:
        _canonical_apply(self.st, state[0], state[1], int(move))

    def play(self, state, move):
        state = self.copy(state)
        self.apply(state, move)
        return state

    def complete(self, state) -> float:
        inc = self.incumbent
        canonical.canon_copy_into(*state, *self.work)
        t = float(canonical.run_canonical(self.st, *self.work, self.rank, self.deadline))
        if t != t:
            raise OutOfTime
        inc.completions += 1
        inc.offer(t, self.work[0].offsets)
        return t


def _game(scenario: Scenario, cfg, max_completions: int | None = None) -> tuple[V0Game | _CanonicalGame, _Budget]:
    """The budget (from now: the set-up and the fallback completion count) and the game
    ``cfg.order`` names, on ``scenario``."""
    budget = _Budget(max_completions, cfg.time_limit)
    st = sim.compile_scenario(scenario.workload, scenario.hardware, "boundedness")
    game = (_CanonicalGame if cfg.order == "canonical" else V0Game)(st, cfg.n_candidates, budget.deadline_ns)
    budget.fallback_done()
    return game, budget


# ---------------------------------------------------------------------------------- rollout
@dataclass
class RolloutAgent:
    """Rollout: one step of lookahead over every legal action, XLA-like completions (or, with
    ``levels=2``, level-1 rollouts)."""

    config: RolloutConfig = RolloutConfig()
    name: str = "rollout"

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        cfg = self.config
        _v0_only_settings(cfg)
        if cfg.levels == 2:
            return self._solve_nested(scenario)
        game, budget = _game(scenario, cfg, cfg.max_completions)
        state, incumbent = game.root, game.incumbent
        known = game.root_time  # the current position's completion
        try:
            while not game.done(state):
                n_legal = game.n_legal(state)
                if n_legal == 1:  # only skip: nothing to search
                    game.apply(state, -1)
                    continue
                if budget.exhausted(incumbent.completions, n_legal - 1):
                    break
                moves, times, _ = game.expand(state, known)
                best = int(np.argmin(times))  # first minimum: the completion policy's move on ties
                known = float(times[best])
                game.apply(state, moves[best])
        except OutOfTime:
            budget.stopped = "time"
        return Solution(incumbent.offsets.copy(), info={"completions": int(incumbent.completions), **budget.info()})

    def _solve_nested(self, scenario: Scenario) -> Solution:
        """``levels=2`` on the default game: each action scored by a level-1 rollout."""
        cfg = self.config
        k = cfg.n_candidates
        budget = _Budget(cfg.max_completions, cfg.time_limit)
        st, state = _setup(scenario)
        n = st.size.shape[0]
        scratch, work = _Scratch(st, k), sim.copy_state(state)
        inner, cur = _Scratch(st, k), sim.copy_state(state)
        incumbent = _Incumbent(complete(st, state, work), work.offsets)
        budget.fallback_done()
        limit = np.iinfo(np.int64).max if cfg.max_completions is None else cfg.max_completions
        counter = np.array([incumbent.completions], np.int64)
        for _ in range(n):
            count = scratch.candidates(st, state, k)
            if count == 0:
                decide(st, state, -1)
                continue
            if budget.exhausted(int(counter[0]), count + 1):
                break
            offsets = scratch.cand_off[:count].copy()
            actions = np.array(_action_order(st, state, count))
            times = np.empty(len(actions))
            for i, a in enumerate(actions):
                copy_into(state, cur)
                decide(st, cur, int(offsets[a]) if a < count else -1)
                times[i] = inner.rollout_run(st, cur, k, work, incumbent, counter, limit, budget.deadline_ns)
                if times[i] != times[i]:  # a completion gave up at the deadline
                    budget.stopped = "time"
                    break
            if budget.stopped:
                break
            scratch.cand_off[:count] = offsets
            a = int(actions[int(np.argmin(times))])  # first minimum: XLA-like's action on ties
            decide(st, state, int(scratch.cand_off[a]) if a < count else -1)
        return Solution(incumbent.offsets.copy(), info={"completions": int(counter[0]), **budget.info()})

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """On MallocGame-v1 (:mod:`mallocgym.agents.search.v1`): ``completion`` completions."""
        from .v1 import rollout_v1

        cfg = self.config
        _v1_settings(cfg)
        if cfg.levels != 1:
            raise ValueError("rollout on MallocGame-v1 has levels=1 only")
        return rollout_v1(scenario, n_candidates=cfg.n_candidates, max_completions=cfg.max_completions,
                          time_limit=cfg.time_limit, completion=cfg.completion)


def _action_order(st, state, count) -> list[int]:
    """Legal actions, XLA-like's own first, then the candidates in order, then skip."""
    base = int(_base_action(st, state, count))
    return [base] + [a for a in range(count + 1) if a != base]


# ---------------------------------------------------------------------------------- beam
@dataclass
class BeamAgent:
    """Beam search over partial mappings, each scored by its completion."""

    config: BeamConfig = BeamConfig()
    name: str = "beam"

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        cfg = self.config
        _v0_only_settings(cfg)
        game, budget = _game(scenario, cfg, cfg.max_completions)
        incumbent = game.incumbent
        beam = [(game.root, game.root_time)]  # (position, its completion time)
        try:
            while not all(game.done(p) for p, _ in beam):
                scored = []  # (completion time, parent rank, move rank, parent, move or None: finished)
                stop = False
                for p, (parent, known) in enumerate(beam):
                    if game.done(parent):  # a finished game competes with its final time
                        scored.append((known, p, 0, parent, None))
                        continue
                    if budget.exhausted(incumbent.completions, game.n_legal(parent) - 1):
                        stop = True
                        break
                    moves, times, _ = game.expand(parent, known)
                    for i in range(len(moves)):
                        scored.append((float(times[i]), p, i, parent, moves[i]))
                if stop:
                    break
                scored.sort(key=lambda x: x[:3])
                beam = [(parent if move is None else game.play(parent, move), t)
                        for t, _, _, parent, move in scored[: cfg.width]]
        except OutOfTime:
            budget.stopped = "time"
        return Solution(incumbent.offsets.copy(), info={"completions": int(incumbent.completions), **budget.info()})

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """On MallocGame-v1 (:mod:`mallocgym.agents.search.v1`): ``completion`` completions."""
        from .v1 import beam_v1

        cfg = self.config
        _v1_settings(cfg)
        return beam_v1(scenario, width=cfg.width, n_candidates=cfg.n_candidates,
                       max_completions=cfg.max_completions, time_limit=cfg.time_limit, completion=cfg.completion)


@dataclass
class MCTSAgent:
    """UCT with ``simulations`` per decision; leaves scored by XLA-like completions."""

    config: MCTSConfig = MCTSConfig()
    name: str = "mcts"

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        cfg = self.config
        _v0_only_settings(cfg)
        if cfg.pace and cfg.order != "boundedness":
            raise ValueError("pace=1 paces the default game only (order=boundedness)")
        game, budget = _game(scenario, cfg)
        sims = UCT(game, game.root, cfg).run(cfg.time_limit, budget=budget)
        inc = game.incumbent
        return Solution(inc.offsets.copy(), info={"simulations": sims, "completions": inc.completions,
                                                  **budget.info()})

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """On MallocGame-v1 (:mod:`mallocgym.agents.search.v1`): ``completion`` completions."""
        from .v1 import mcts_v1

        _v1_settings(self.config)
        return mcts_v1(scenario, self.config)


# ---------------------------------------------------------------------------------- registry
_AGENTS = {
    "rollout": (RolloutAgent, RolloutConfig, "n_candidates"),
    "beam": (BeamAgent, BeamConfig, "width"),
    "mcts": (MCTSAgent, MCTSConfig, "simulations"),
}


def search_factory(kind: str, arg: str | None):
    """``rollout``, ``beam:8`` (width), ``mcts:64`` (simulations per decision), or
    ``KIND:key=value,...`` with any field of the kind's config (``mcts:simulations=64,c_uct=1``)."""
    agent_cls, config_cls, positional = _AGENTS[kind]
    config = parse_config(config_cls, arg, positional=positional, where=f"agent {kind!r}")
    return agent_cls(config, kind if arg is None else f"{kind}:{arg}")

