"""What the search agents share across games: their configs, the wall/completion budget and UCT.

The configs (:class:`RolloutConfig`, :class:`BeamConfig`, :class:`MCTSConfig`) are the agents'
for both games; :class:`UCT` runs on any game object with ``done``, ``legal``, ``play``,
``complete`` (MallocGame-v0's :class:`~mallocgym.agents.search.v0.V0Game`, v1's
:class:`~mallocgym.agents.search.v1.V1Game`). Nothing here knows a game's rules.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


from ..._clock import NO_DEADLINE, deadline_after
from ..._validate import MAX_CANDIDATES

__all__ = ["RolloutConfig", "BeamConfig", "MCTSConfig", "pace_allowance", "UCT", "SEARCH_ORDERS", "V1_COMPLETIONS",
           "OutOfTime"]

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


# ---------------------------------------------------------------------------------- budget
class OutOfTime(Exception):
    """A completion gave up at the search's deadline (its kernel read :mod:`mallocgym._clock`): the search stops and
    returns its incumbent."""


class _Budget:
    """Completions and wall seconds (from its creation, read on ``clock``) a search may spend.

    A search creates its budget first thing, so the time limit covers its whole run: setting up
    the scenario and the base policy's completion (the fallback, which always runs in full)
    included. ``deadline_ns`` is the same deadline on the kernels' clock
    (:mod:`mallocgym._clock`), for the completions that give up at it; with a ``clock`` other
    than the default (tests) the kernels get none.
    """

    def __init__(self, max_completions: int | None, time_limit: float | None, clock=time.perf_counter):
        self.max_completions = max_completions
        self.time_limit = time_limit
        self.clock = clock
        self.begin = clock()
        self.deadline = None if time_limit is None else self.begin + time_limit
        self.deadline_ns = NO_DEADLINE
        if self.deadline is not None and clock is time.perf_counter:  # the time left, on the kernels' clock
            self.deadline_ns = deadline_after(self.deadline - clock())
        self.fallback_s: float | None = None
        self.stopped: str | None = None

    def exhausted(self, completions: int, upcoming: int = 0) -> bool:
        if self.max_completions is not None and completions + upcoming > self.max_completions:
            self.stopped = self.stopped or "completions"
            return True
        if self.deadline is not None and self.clock() >= self.deadline:
            self.stopped = self.stopped or "time"
            return True
        return False

    def fallback_done(self) -> None:
        """Record the seconds spent so far: the set-up and the fallback completion."""
        self.fallback_s = self.clock() - self.begin

    def info(self) -> dict:
        """What the result records: ``fallback_s`` (set-up plus the base policy's completion);
        ``stopped`` (``"time"`` or ``"completions"``) when the budget ended the search before the
        game's end; ``over_budget_s`` when the run (so far) took longer than ``time_limit``, as
        when the fallback alone exceeds it."""
        out: dict = {}
        if self.fallback_s is not None:
            out["fallback_s"] = round(self.fallback_s, 6)
        if self.stopped:
            out["stopped"] = self.stopped
        if self.deadline is not None:
            over = self.clock() - self.deadline
            if over > 0:
                out["over_budget_s"] = round(over, 6)
        return out


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

    def run(self, time_limit: float | None, clock=time.perf_counter, budget: _Budget | None = None) -> int:
        """Search and commit decision by decision to the end; return the simulations run. With
        ``cfg.pace`` (and a ``time_limit``) a decision with a choice runs at least
        ``cfg.simulations`` and goes on while its :func:`pace_allowance` is not spent; the
        allowance is read on ``clock`` at the decision's start from the buffers left
        (``game.left(state)``, the default v0 game's only) and the share of decisions searched.

        ``budget`` (default: ``time_limit`` from now on ``clock``) is read before every
        simulation: once it is spent, and when a completion gives up at its deadline
        (:class:`OutOfTime`), the search stops where it is and the game's incumbent stands."""
        if budget is None:
            budget = _Budget(None, time_limit, clock)
        if self.cfg.pace and budget.deadline is None:
            raise ValueError("pace=1 spends a wall budget: give the search a time_limit (or the harness's --budget-s)")
        clock = budget.clock
        self.sims = made = searched = 0
        try:
            while not self.game.done(self.root.state):
                self.expand(self.root)
                made += 1
                if len(self.root.actions) > 1:
                    if budget.exhausted(0):
                        break  # out of time: the best mapping found so far stands
                    searched += 1
                    start = clock()
                    allowance = (pace_allowance(budget.deadline - start, self.game.left(self.root.state), searched,
                                                made, by_length=True) if self.cfg.pace else 0.0)
                    done = 0
                    while done < self.cfg.simulations or clock() - start < allowance:
                        if done and budget.exhausted(0):
                            return self.sims
                        self.simulate()
                        done += 1
                        self.sims += 1
                self.commit()
        except OutOfTime:
            budget.stopped = budget.stopped or "time"
        return self.sims
