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
  the child with the best completion found below it and reuse its subtree.

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
from ..sim import copy_into
from ..scenarios import Scenario
from ..sim import STEP, TIME
from .base import Solution, parse_config

__all__ = ["RolloutConfig", "BeamConfig", "MCTSConfig", "RolloutAgent", "BeamAgent", "MCTSAgent",
           "CompletionScorer", "search_factory"]


# ---------------------------------------------------------------------------------- configs
V1_COMPLETIONS = ("xla-msa", "greedy")


def _check_common(cfg) -> None:
    if cfg.completion not in V1_COMPLETIONS:
        raise ValueError(f"completion must be one of {', '.join(V1_COMPLETIONS)}, got {cfg.completion!r}")
    if cfg.n_candidates < 1:
        raise ValueError(f"n_candidates must be >= 1, got {cfg.n_candidates}")
    if cfg.time_limit is not None and not cfg.time_limit > 0:
        raise ValueError(f"time_limit must be > 0 seconds or None, got {cfg.time_limit}")


def _v0_only_settings(cfg) -> None:
    """On MallocGame-v0 the completion is XLA-like: a ``completion=`` other than the default is
    not silently ignored."""
    if cfg.completion != "xla-msa":
        raise ValueError(f"completion={cfg.completion} is a MallocGame-v1 setting (use --env v1); on v0 the "
                         "search agents complete with XLA-like")


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
    """

    n_candidates: int = 16
    levels: int = 1
    max_completions: int | None = None
    time_limit: float | None = None
    completion: str = "xla-msa"

    def __post_init__(self) -> None:
        _check_common(self)
        if self.levels not in (1, 2):
            raise ValueError(f"levels must be 1 or 2, got {self.levels}")
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
    """

    width: int = 4
    n_candidates: int = 16
    max_completions: int | None = None
    time_limit: float | None = None
    completion: str = "xla-msa"

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
    """

    simulations: int = 32
    c_uct: float = 0.5
    n_candidates: int = 16
    time_limit: float | None = None
    completion: str = "xla-msa"

    def __post_init__(self) -> None:
        _check_common(self)
        if self.simulations < 1:
            raise ValueError(f"simulations must be >= 1, got {self.simulations}")
        if not (math.isfinite(self.c_uct) and self.c_uct >= 0):
            raise ValueError(f"c_uct must be a finite number >= 0, got {self.c_uct}")


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
    """The best complete mapping seen: ``time[0]`` seconds, ``offsets``."""

    def __init__(self, st: sim.Static, root: sim.State):
        work = sim.copy_state(root)
        self.time = np.array([complete(st, root, work)])
        self.offsets = work.offsets.copy()
        self.completions = 1


class _Budget:
    def __init__(self, max_completions: int | None, time_limit: float | None):
        self.max_completions = max_completions
        self.deadline = None if time_limit is None else time.perf_counter() + time_limit

    def exhausted(self, completions: int, upcoming: int = 0) -> bool:
        if self.max_completions is not None and completions + upcoming > self.max_completions:
            return True
        return self.deadline is not None and time.perf_counter() >= self.deadline


def _setup(scenario: Scenario) -> tuple[sim.Static, sim.State]:
    st = sim.compile_scenario(scenario.workload, scenario.hardware, "boundedness")
    return st, sim.new_state(st)


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
        k = cfg.n_candidates
        st, state = _setup(scenario)
        n = st.size.shape[0]
        scratch, work = _Scratch(st, k), sim.copy_state(state)
        inner, cur = _Scratch(st, k), sim.copy_state(state)
        incumbent = _Incumbent(st, state)
        budget = _Budget(cfg.max_completions, cfg.time_limit)
        limit = np.iinfo(np.int64).max if cfg.max_completions is None else cfg.max_completions
        counter = np.array([incumbent.completions], np.int64)
        known = float(incumbent.time[0])  # the current position's XLA-like completion
        for _ in range(n):
            count = scratch.candidates(st, state, k)
            if count == 0:
                decide(st, state, -1)
                continue
            if budget.exhausted(int(counter[0]), count if cfg.levels == 1 else count + 1):
                break
            if cfg.levels == 1:
                m, runs = scratch.expand(st, state, k, work, incumbent, known)
                counter[0] += runs
                times, actions = scratch.times[:m], scratch.actions[:m]
                known = float(times.min())
            else:
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
    """Beam search over partial mappings, each scored by its XLA-like completion."""

    config: BeamConfig = BeamConfig()
    name: str = "beam"

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        cfg = self.config
        _v0_only_settings(cfg)
        k = cfg.n_candidates
        st, root = _setup(scenario)
        n = st.size.shape[0]
        scratch, work = _Scratch(st, k), sim.copy_state(root)
        incumbent = _Incumbent(st, root)
        budget = _Budget(cfg.max_completions, cfg.time_limit)
        done = incumbent.completions
        beam = [(root, float(incumbent.time[0]))]  # (position, its XLA-like completion time)
        for _ in range(n):
            scored = []  # (completion time, parent rank, action rank, parent, offset)
            stop = False
            for p, (parent, known) in enumerate(beam):
                count = scratch.candidates(st, parent, k)
                if budget.exhausted(done, count):
                    stop = True
                    break
                m, runs = scratch.expand(st, parent, k, work, incumbent, known)
                done += runs
                for i in range(m):
                    a = int(scratch.actions[i])
                    off = int(scratch.cand_off[a]) if a < count else -1
                    scored.append((float(scratch.times[i]), p, i, parent, off))
            if stop:
                break
            scored.sort(key=lambda x: x[:3])
            beam = []
            for t, _, _, parent, off in scored[: cfg.width]:
                child = sim.copy_state(parent)
                decide(st, child, off)
                beam.append((child, t))
        return Solution(incumbent.offsets.copy(), info={"completions": done})


# ---------------------------------------------------------------------------------- MCTS
    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """On MallocGame-v1 (:mod:`mallocgym.agents.search_v1`): ``completion`` completions."""
        from .search_v1 import beam_v1

        cfg = self.config
        return beam_v1(scenario, width=cfg.width, n_candidates=cfg.n_candidates,
                       max_completions=cfg.max_completions, time_limit=cfg.time_limit, completion=cfg.completion)


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


class _V0Game:
    """MallocGame-v0 for :class:`_UCT`: actions are candidate offsets then -1 (skip), leaves
    are scored by XLA-like completions, and the best complete mapping is kept."""

    def __init__(self, st: sim.Static, root: sim.State, k: int):
        self.st, self.k, self.n = st, k, st.size.shape[0]
        self.scratch, self.work = _Scratch(st, k), sim.copy_state(root)
        self.incumbent = _Incumbent(st, root)
        self.root_value = -float(self.incumbent.time[0])

    def done(self, state) -> bool:
        return int(state.counters[STEP]) >= self.n

    def legal(self, state) -> tuple[list, int]:
        count = self.scratch.candidates(self.st, state, self.k)
        return list(np.append(self.scratch.cand_off[:count], -1)), int(_base_action(self.st, state, count))

    def play(self, state, action):
        state = sim.copy_state(state)
        decide(self.st, state, int(action))
        return state

    def complete(self, state) -> float:
        inc = self.incumbent
        t = float(complete(self.st, state, self.work))
        inc.completions += 1
        if t < inc.time[0]:
            inc.time[0] = t
            inc.offsets[:] = self.work.offsets
        return t


class _UCT:
    """One MCTS run on one scenario (the agent itself keeps no search state). ``game`` gives
    the rules: ``done``, ``legal``, ``play``, ``complete`` (see :class:`_V0Game`)."""

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

    def run(self, time_limit: float | None) -> int:
        """Search and commit decision by decision to the end; return the simulations run."""
        budget = _Budget(None, time_limit)
        sims = 0
        while not self.game.done(self.root.state):
            self.expand(self.root)
            if len(self.root.actions) > 1:
                if budget.exhausted(0):
                    break  # out of time: the best mapping found so far stands
                for _ in range(self.cfg.simulations):
                    self.simulate()
                    sims += 1
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
        st, state = _setup(scenario)
        game = _V0Game(st, state, cfg.n_candidates)
        sims = _UCT(game, state, cfg).run(cfg.time_limit)
        inc = game.incumbent
        return Solution(inc.offsets.copy(), info={"simulations": sims, "completions": inc.completions})

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """On MallocGame-v1 (:mod:`mallocgym.agents.search_v1`): ``completion`` completions."""
        from .search_v1 import mcts_v1

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

