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
  game early or late. mallocMuZero's ``muzero-sim:DIR,tree=uct`` plays this same search with
  the children of every position created in the network's order (:mod:`.muzero.ordered`).

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

import math
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from .. import sim
from ..heuristics import FIT_BEST, complete, decide, run_fit
from ..sim import canonical, copy_into
from .._validate import MAX_CANDIDATES
from ..scenarios import Scenario
from ..sim import STEP, TIME
from .base import Solution, parse_config

__all__ = ["RolloutConfig", "BeamConfig", "MCTSConfig", "RolloutAgent", "BeamAgent", "MCTSAgent",
           "CompletionScorer", "search_factory", "pace_allowance", "UCT", "V0Game"]


# ---------------------------------------------------------------------------------- configs
V1_COMPLETIONS = ("xla-msa", "greedy")


SEARCH_ORDERS = ("boundedness", "canonical")
"""The v0 games a search agent plays: the default one, or the canonical decision mode
(``order="canonical"``, :mod:`mallocgym.sim.canonical`)."""


def _check_common(cfg) -> None:
    if cfg.order not in SEARCH_ORDERS:
        raise ValueError(f"order must be one of {', '.join(SEARCH_ORDERS)}, got {cfg.order!r}")
    if cfg.completion not in V1_COMPLETIONS:
        raise ValueError(f"completion must be one of {', '.join(V1_COMPLETIONS)}, got {cfg.completion!r}")
    if not 1 <= cfg.n_candidates <= MAX_CANDIDATES:
        raise ValueError(f"n_candidates must be in [1, {MAX_CANDIDATES}] (the env's own bound), got {cfg.n_candidates}")
    if cfg.time_limit is not None and not cfg.time_limit > 0:
        raise ValueError(f"time_limit must be > 0 seconds or None, got {cfg.time_limit}")


def _v0_only_settings(cfg) -> None:
    """On MallocGame-v0 the completion is XLA-like: a ``completion=`` other than the default is
    not silently ignored."""
    if cfg.completion != "xla-msa":
        raise ValueError(f"completion={cfg.completion} is a MallocGame-v1 setting (use --env v1); on v0 the "
                         "search agents complete with XLA-like")


def _v1_settings(cfg) -> None:
    """``order=canonical`` and ``pace=1`` are MallocGame-v0 settings."""
    if cfg.order != "boundedness":
        raise ValueError(f"order={cfg.order} is a MallocGame-v0 mode; on MallocGame-v1 leave order unset")
    if getattr(cfg, "pace", False):
        raise ValueError("pace=1 is a MallocGame-v0 setting (the v1 searches run a fixed count per decision)")


def _check_max_completions(cfg) -> None:
    if cfg.max_completions is not None and cfg.max_completions < 1:
        raise ValueError(f"max_completions must be >= 1 or None, got {cfg.max_completions}")


@dataclass(frozen=True)
class RolloutConfig:
    """Rollout with XLA-like completions.

    Attributes:
      n_candidates: ``K``, candidates per decision (the env's ``n_candidates``).
      levels: 1 scores each action by an XLA-like completion; 2 (nested rollout) by a whole
        level-1 rollout from the position it leads to: about ``N * (K + 1)`` times slower.
      max_completions: stop branching after this many completions (None: no limit).
      time_limit: stop branching after this many seconds (None: no limit).
      completion: MallocGame-v1's default policy, ``xla-msa`` (XLA's MSA in the env) or
        ``greedy``; on v0 the completion is always XLA-like (another value is an error there).
      order: the v0 game played: ``boundedness`` (the default game, XLA-like completions) or
        ``canonical`` (the canonical decision mode; completions by its greedy policy: the
        lowest candidate placed when it saves time, else sent to slow memory).
    """

    n_candidates: int = 16
    levels: int = 1
    max_completions: int | None = None
    time_limit: float | None = None
    completion: str = "xla-msa"
    order: str = "boundedness"

    def __post_init__(self) -> None:
        _check_common(self)
        if self.levels not in (1, 2):
            raise ValueError(f"levels must be 1 or 2, got {self.levels}")
        if self.levels == 2 and self.order != "boundedness":
            raise ValueError("levels=2 (nested rollout) plays the default game only; leave order unset")
        _check_max_completions(self)


@dataclass(frozen=True)
class BeamConfig:
    """Beam search scored by XLA-like completions.

    Attributes:
      width: partial mappings kept per depth.
      n_candidates: ``K``, candidates per decision.
      max_completions: stop expanding after this many completions (None: no limit).
      time_limit: stop expanding after this many seconds (None: no limit).
      completion: MallocGame-v1's default policy (as :class:`RolloutConfig`).
      order: the v0 game played: ``boundedness`` (the default game, XLA-like completions) or
        ``canonical`` (the canonical decision mode; completions by its greedy policy: the
        lowest candidate placed when it saves time, else sent to slow memory).
    """

    width: int = 4
    n_candidates: int = 16
    max_completions: int | None = None
    time_limit: float | None = None
    completion: str = "xla-msa"
    order: str = "boundedness"

    def __post_init__(self) -> None:
        _check_common(self)
        if self.width < 1:
            raise ValueError(f"width must be >= 1, got {self.width}")
        _check_max_completions(self)


@dataclass(frozen=True)
class MCTSConfig:
    """UCT on the exact simulator, leaves scored by XLA-like completions.

    Attributes:
      simulations: simulations per decision (each expands one node and runs one completion).
      c_uct: exploration constant of UCB1 on values normalised to ``[0, 1]``.
      n_candidates: ``K``, candidates per decision.
      time_limit: stop searching after this many seconds (None: no limit).
      completion: MallocGame-v1's default policy (as :class:`RolloutConfig`).
      order: the v0 game played: ``boundedness`` (the default game, XLA-like completions) or
        ``canonical`` (the canonical decision mode; completions by its greedy policy: the
        lowest candidate placed when it saves time, else sent to slow memory).
      pace: spend ``time_limit`` (v0 only; needs a ``time_limit``): a decision with a choice
        runs at least ``simulations`` and goes on while its share of the time left
        (:func:`pace_allowance`) is not spent. False: exactly ``simulations`` per decision.
    """

    simulations: int = 32
    c_uct: float = 0.5
    n_candidates: int = 16
    time_limit: float | None = None
    completion: str = "xla-msa"
    order: str = "boundedness"
    pace: bool = False

    def __post_init__(self) -> None:
        _check_common(self)
        if self.simulations < 1:
            raise ValueError(f"simulations must be >= 1, got {self.simulations}")
        if not (math.isfinite(self.c_uct) and self.c_uct >= 0):
            raise ValueError(f"c_uct must be a finite number >= 0, got {self.c_uct}")
        if not isinstance(self.pace, bool):
            raise ValueError(f"pace must be 0 or 1 (false or true), got {self.pace!r}")


def pace_allowance(time_left: float, left: int, searched: int, made: int, *, by_length: bool = False) -> float:
    """Seconds a searched decision may take when a search spends its wall budget (``pace``).

    ``left``: the buffers still to place (this one included); ``searched`` of ``made``: the
    decisions so far that were searched (this one counted in both; forced decisions are not
    searched), so ``f = searched / made`` is the fraction expected to be searched from here on.

    - ``by_length=False``: an equal share, ``time_left`` divided by the searched decisions
      expected (``max(1, f * left)``).
    - ``by_length=True``: a share proportional to the length of the game still to play, which is
      what a simulation's XLA-like completion costs: decision ``j`` (``left_j`` buffers to go)
      weighs ``left_j``, the decisions expected from here weigh ``f * left * (left + 1) / 2`` in
      all, so this one gets ``time_left * 2 / (f * (left + 1))`` (at most ``time_left``): about
      the same number of simulations at every decision, as a fixed count gives.
    """
    f = searched / max(made, 1)
    if by_length:
        return max(0.0, time_left) / max(1.0, f * (left + 1) / 2)
    return max(0.0, time_left) / max(1.0, left * f)


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
            times, actions, step_times, best_time, best_offsets, known):
    """Score every legal action of ``state`` by its XLA-like completion.

    Writes ``actions[i]`` (candidate index, ``count`` = skip), ``times[i]`` and ``step_times[i]``
    (the program time right after the action, before the completion; NaN where not run),
    XLA-like's own action first, then the candidates in order, then skip; updates the incumbent
    ``best_time[0]`` / ``best_offsets`` on strict improvement. ``known >= 0`` is ``state``'s
    own XLA-like completion time, which is also that of XLA-like's action (XLA-like is
    deterministic), so that one is not rerun. Returns ``(actions, completions run)``.
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
        t = run_fit(st, work, FIT_BEST, True)
        runs += 1
        times[i] = t
        if t < best_time[0]:
            best_time[0] = t
            best_offsets[:] = work.offsets
    return m, runs


@njit(cache=True)
def _first_min(times, m):
    best = 0
    for i in range(1, m):
        if times[i] < times[best]:  # first minimum: XLA-like's action on ties
            best = i
    return best


@njit(cache=True)
def _rollout_run(st, cur, k, work, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi, times, actions,
                 step_times, best_time, best_offsets, counter, limit):
    """Level-1 rollout from ``cur`` to the end of the episode (``cur`` is played in place).

    Adds the completions it runs to ``counter[0]``; once another step would take it past
    ``limit`` it finishes with XLA-like play. Updates the incumbent. Returns ``cur``'s final time.
    """
    n = st.size.shape[0]
    known = -1.0
    while cur.counters[STEP] < n:
        count = _candidates(st, cur, k, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi)
        if count == 0:
            decide(st, cur, -1)
            continue
        if counter[0] + count + (0 if known >= 0.0 else 1) > limit:
            run_fit(st, cur, FIT_BEST, True)
            break
        m, runs = _expand(st, cur, k, work, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi, times,
                          actions, step_times, best_time, best_offsets, known)
        counter[0] += runs
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
def _canonical_expand(st, state, cs, rank, k, work, wcs, cand, times, moves, best_time, best_offsets, known):
    """:func:`_expand` for the canonical decision mode: score every legal move of a position
    that has a candidate by its greedy completion (:func:`~mallocgym.sim.canonical.run_canonical`).

    Moves (``b``: place candidate ``b``, ``b + N``: send it to slow memory) go to ``moves``, the
    completion policy's own first (candidate 0, placed when that saves time now, else sent to
    slow memory), then the placements, then the sends, in candidate order; ``known >= 0`` is the
    position's own completion time, which is the policy's move's. Updates the incumbent on strict
    improvement. Returns ``(moves, completions run)``.
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
        t = canonical.run_canonical(st, work, wcs, rank)
        runs += 1
        times[i] = t
        if t < best_time[0]:
            best_time[0] = t
            best_offsets[:] = work.offsets
    return m, runs


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

    def expand(self, st, state, k, work, incumbent: "_Incumbent", known: float = -1.0) -> tuple[int, int]:
        m, runs = _expand(st, state, k, work, self.ids, self.gap_lo, self.gap_hi, self.cand_off,
                          self.cand_lo, self.cand_hi, self.times, self.actions, self.step_times,
                          incumbent.time, incumbent.offsets, float(known))
        return int(m), int(runs)

    def rollout_run(self, st, cur, k, work, incumbent: "_Incumbent", counter, limit: int) -> float:
        return float(_rollout_run(st, cur, k, work, self.ids, self.gap_lo, self.gap_hi, self.cand_off,
                                  self.cand_lo, self.cand_hi, self.times, self.actions, self.step_times,
                                  incumbent.time, incumbent.offsets, counter, limit))


class CompletionScorer:
    """One step of the rollout algorithm as a function: the XLA-like completion time of every
    legal action of a position, in MallocGame-v0's action numbering.

    ``scorer(state)`` returns ``(times, best)``: ``times[a]`` is the final program time after
    action ``a`` (candidate ``a`` for ``a < K``, skip for ``a = K``) and XLA-like play to the end,
    ``inf`` for an illegal action; ``best`` is the rollout's move, the first minimum with
    XLA-like's own action first (so XLA-like's action on ties). ``state`` is untouched. Given
    ``step_times`` (``float[K + 1]``), it also writes there the program time right after each
    legal action, before the completion (``inf``: illegal). Used as mallocMuZero's training
    teacher (:mod:`mallocgym.agents.muzero.selfplay`).
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
        m, _ = _expand(st, state, k, self.work, sc.ids, sc.gap_lo, sc.gap_hi, sc.cand_off, sc.cand_lo,
                       sc.cand_hi, sc.times, sc.actions, sc.step_times, self.best_time, self.best_offsets, -1.0)
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


class _Budget:
    """Completions and wall seconds (from its creation, read on ``clock``) a search may spend."""

    def __init__(self, max_completions: int | None, time_limit: float | None, clock=time.perf_counter):
        self.max_completions = max_completions
        self.clock = clock
        self.deadline = None if time_limit is None else clock() + time_limit

    def exhausted(self, completions: int, upcoming: int = 0) -> bool:
        if self.max_completions is not None and completions + upcoming > self.max_completions:
            return True
        return self.deadline is not None and self.clock() >= self.deadline


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
    """

    def __init__(self, st: sim.Static, k: int):
        root = sim.new_state(st)
        self.st, self.k, self.n = st, k, st.size.shape[0]
        self.scratch, self.work = _Scratch(st, k), sim.copy_state(root)
        self.incumbent = _Incumbent(complete(st, root, self.work), self.work.offsets)
        self.root, self.root_time = root, float(self.incumbent.time[0])
        self.root_value = -self.root_time

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
        m, runs = sc.expand(self.st, state, self.k, self.work, self.incumbent, known)
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
        t = float(complete(self.st, state, self.work))
        inc.completions += 1
        inc.offer(t, self.work.offsets)
        return t


class _CanonicalGame:
    """MallocGame-v0's canonical decision mode (:mod:`mallocgym.sim.canonical`) for the search
    agents, with :class:`V0Game`'s interface. A position is a pair ``(sim.State, Canon)``; a
    move is a buffer id ``b`` (place it at its lowest free offset) or ``b + N`` (send it to
    slow memory), among the ``K`` candidates shown; leaves are scored by the mode's greedy
    completion (:func:`~mallocgym.sim.canonical.run_canonical`)."""

    def __init__(self, st: sim.Static, k: int):
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
        m, runs = _canonical_expand(self.st, state[0], state[1], self.rank, self.k, self.work[0], self.work[1],
                                    self.cand, self.times, self.moves, inc.time, inc.offsets, float(known))
        return self.moves[:m].copy(), self.times[:m].copy(), int(runs)

    def apply(self, state, move) -> None:
        _canonical_apply(self.st, state[0], state[1], int(move))

    def play(self, state, move):
        state = self.copy(state)
        self.apply(state, move)
        return state

    def complete(self, state) -> float:
        inc = self.incumbent
        t = float(canonical.complete(self.st, *state, self.rank, *self.work))
        inc.completions += 1
        inc.offer(t, self.work[0].offsets)
        return t


def _game(scenario: Scenario, cfg):
    """The game ``cfg.order`` names, on ``scenario``."""
    st = sim.compile_scenario(scenario.workload, scenario.hardware, "boundedness")
    return (_CanonicalGame if cfg.order == "canonical" else V0Game)(st, cfg.n_candidates)


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
        game = _game(scenario, cfg)
        state, incumbent = game.root, game.incumbent
        budget = _Budget(cfg.max_completions, cfg.time_limit)
        counter = incumbent.completions
        known = game.root_time  # the current position's completion
        while not game.done(state):
            n_legal = game.n_legal(state)
            if n_legal == 1:  # only skip: nothing to search
                game.apply(state, -1)
                continue
            if budget.exhausted(counter, n_legal - 1):
                break
            moves, times, runs = game.expand(state, known)
            counter += runs
            best = int(np.argmin(times))  # first minimum: the completion policy's move on ties
            known = float(times[best])
            game.apply(state, moves[best])
        return Solution(incumbent.offsets.copy(), info={"completions": int(counter)})

    def _solve_nested(self, scenario: Scenario) -> Solution:
        """``levels=2`` on the default game: each action scored by a level-1 rollout."""
        cfg = self.config
        k = cfg.n_candidates
        st, state = _setup(scenario)
        n = st.size.shape[0]
        scratch, work = _Scratch(st, k), sim.copy_state(state)
        inner, cur = _Scratch(st, k), sim.copy_state(state)
        incumbent = _Incumbent(complete(st, state, work), work.offsets)
        budget = _Budget(cfg.max_completions, cfg.time_limit)
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
                times[i] = inner.rollout_run(st, cur, k, work, incumbent, counter, limit)
            scratch.cand_off[:count] = offsets
            a = int(actions[int(np.argmin(times))])  # first minimum: XLA-like's action on ties
            decide(st, state, int(scratch.cand_off[a]) if a < count else -1)
        return Solution(incumbent.offsets.copy(), info={"completions": int(counter[0])})

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """On MallocGame-v1 (:mod:`mallocgym.agents.search_v1`): ``completion`` completions."""
        from .search_v1 import rollout_v1

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
        game = _game(scenario, cfg)
        incumbent = game.incumbent
        budget = _Budget(cfg.max_completions, cfg.time_limit)
        done = incumbent.completions
        beam = [(game.root, game.root_time)]  # (position, its completion time)
        while not all(game.done(p) for p, _ in beam):
            scored = []  # (completion time, parent rank, move rank, parent, move or None: finished)
            stop = False
            for p, (parent, known) in enumerate(beam):
                if game.done(parent):  # a finished game competes with its final time
                    scored.append((known, p, 0, parent, None))
                    continue
                if budget.exhausted(done, game.n_legal(parent) - 1):
                    stop = True
                    break
                moves, times, runs = game.expand(parent, known)
                done += runs
                for i in range(len(moves)):
                    scored.append((float(times[i]), p, i, parent, moves[i]))
            if stop:
                break
            scored.sort(key=lambda x: x[:3])
            beam = [(parent if move is None else game.play(parent, move), t)
                    for t, _, _, parent, move in scored[: cfg.width]]
        return Solution(incumbent.offsets.copy(), info={"completions": done})

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """On MallocGame-v1 (:mod:`mallocgym.agents.search_v1`): ``completion`` completions."""
        from .search_v1 import beam_v1

        cfg = self.config
        _v1_settings(cfg)
        return beam_v1(scenario, width=cfg.width, n_candidates=cfg.n_candidates,
                       max_completions=cfg.max_completions, time_limit=cfg.time_limit, completion=cfg.completion)


# ---------------------------------------------------------------------------------- MCTS
class _Node:
    """A position: its state, its own completion value (``-time``), its legal actions and
    children (created lazily), and UCT statistics. ``base`` is the completion policy's own
    action (its child has the parent's completion value)."""

    __slots__ = ("state", "value", "actions", "base", "children", "visits", "total", "best")

    def __init__(self, state, value: float):
        self.state = state
        self.value = value
        self.actions: list | None = None  # None until expanded
        self.base = -1
        self.children: list[_Node | None] = []
        self.visits = 1
        self.total = value
        self.best = value


class UCT:
    """One MCTS run on one scenario (the agent itself keeps no search state). ``game`` gives
    the rules: ``done``, ``legal``, ``play``, ``complete`` (see :class:`V0Game`)."""

    def __init__(self, game, root, cfg: MCTSConfig):
        self.game, self.cfg = game, cfg
        value = game.root_value
        self.lo = self.hi = value  # min-max of values seen
        self.root = _Node(root, value)

    def expand(self, node: _Node) -> None:
        """Fill in ``node``'s legal actions (children are created lazily)."""
        if node.actions is not None:
            return
        if self.game.done(node.state):
            node.actions = []
        else:
            node.actions, node.base = self.game.legal(node.state)
        node.children = [None] * len(node.actions)

    def child(self, node: _Node, i: int) -> _Node:
        """Create child ``i``: play the action, score it by its completion (the completion
        policy's own action keeps the parent's completion, which is the same)."""
        state = self.game.play(node.state, node.actions[i])
        value = node.value if i == node.base else -self.game.complete(state)
        node.children[i] = c = _Node(state, value)
        return c

    def select(self, node: _Node) -> int:
        """Unvisited actions first (in the game's order), then UCB1 on min-max normalised values."""
        for i, c in enumerate(node.children):
            if c is None:
                return i
        span = self.hi - self.lo
        log_n = math.log(node.visits)
        best, best_i = -math.inf, 0
        for i, c in enumerate(node.children):
            q = (c.total / c.visits - self.lo) / span if span > 0 else 0.5
            u = q + self.cfg.c_uct * math.sqrt(log_n / c.visits)
            if u > best:
                best, best_i = u, i
        return best_i

    def simulate(self) -> None:
        """Select down to a new leaf (or a terminal position), score it, back the value up."""
        path = [self.root]
        node = self.root
        while True:
            self.expand(node)
            if len(node.actions) == 0:  # terminal: its value is exact, count the visit again
                value = node.value
                break
            i = self.select(node)
            if node.children[i] is None:
                value = self.child(node, i).value  # the new leaf is born with this visit
                break
            node = node.children[i]
            path.append(node)
        self.lo, self.hi = min(self.lo, value), max(self.hi, value)
        for p in path:
            p.visits += 1
            p.total += value
            if value > p.best:
                p.best = value

    def commit(self) -> None:
        """Move the root to the child with the best completion below it (then most visits)."""
        root = self.root
        self.expand(root)
        best_i, key = 0, None
        for i, c in enumerate(root.children):
            if c is not None and (key is None or (c.best, c.visits, -i) > key):
                best_i, key = i, (c.best, c.visits, -i)
        self.root = root.children[best_i] or self.child(root, best_i)

    def run(self, time_limit: float | None, clock=time.perf_counter) -> int:
        """Search and commit decision by decision to the end; return the simulations run. With
        ``cfg.pace`` (and a ``time_limit``) a decision with a choice runs at least
        ``cfg.simulations`` and goes on while its :func:`pace_allowance` is not spent; the
        allowance is read on ``clock`` at the decision's start from the buffers left
        (``game.left(state)``, the default v0 game's only) and the share of decisions searched."""
        budget = _Budget(None, time_limit, clock)
        if self.cfg.pace and budget.deadline is None:
            raise ValueError("pace=1 spends a wall budget: give the search a time_limit (or the harness's --budget-s)")
        clock = budget.clock
        sims = made = searched = 0
        while not self.game.done(self.root.state):
            self.expand(self.root)
            made += 1
            if len(self.root.actions) > 1:
                if budget.exhausted(0):
                    break  # out of time: the best mapping found so far stands
                searched += 1
                start = clock()
                allowance = (pace_allowance(budget.deadline - start, self.game.left(self.root.state), searched, made,
                                            by_length=True) if self.cfg.pace else 0.0)
                done = 0
                while done < self.cfg.simulations or (clock() - start < allowance and not budget.exhausted(0)):
                    self.simulate()
                    done += 1
                sims += done
            self.commit()
        return sims


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
        game = _game(scenario, cfg)
        sims = UCT(game, game.root, cfg).run(cfg.time_limit)
        inc = game.incumbent
        return Solution(inc.offsets.copy(), info={"simulations": sims, "completions": inc.completions})

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """On MallocGame-v1 (:mod:`mallocgym.agents.search_v1`): ``completion`` completions."""
        from .search_v1 import mcts_v1

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

