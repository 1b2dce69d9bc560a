"""The search agents on MallocGame-v1: rollout, beam and MCTS over the v1 simulator.

They branch on :mod:`mallocgym.sim.v1` states (array copies; the env's ``clone_state`` would
also copy its observation) and score a position by finishing it with a default policy: ``xla-msa``
in the env (:func:`mallocgym.heuristics.v1.complete_msa`: XLA's Memory Space Assignment's own
action at every decision, which from the initial state leaves exactly ``xla-msa``'s plan; the
default) or ``greedy``
(:func:`mallocgym.heuristics.v1.complete_greedy`), chosen by the agents' ``completion=`` setting.
Every agent keeps the best complete mapping it has seen, starting with the default policy's own,
so none returns worse than it: with ``xla-msa``, never worse than ``xla-msa``'s plan.

Branching: at a decision the agents try ``SLOW``, ``FAST`` at the ``fast_branch`` best-fit
offsets (2 by default; on a later segment the one keep), ``PREFETCH`` at each of the
picker's start times with its best-fit offset, and the default policy's own move: at most
``1 + 2 + J + 1`` moves instead of the env's ``1 + K + J * K`` actions. Forced positions are played as the env plays them. MCTS is
the same UCT as on v0 (:class:`mallocgym.agents.search.UCT`).
"""

from __future__ import annotations

import numpy as np

from ..._clock import NO_DEADLINE
from ...features import v1 as v1_obs
from ...heuristics.v1 import complete_greedy, complete_msa, greedy_move, new_game
from ...pricing.v1 import mapping_from_state
from ...scenarios import Scenario
from ...sim import v1
from ..base import Solution
from .base import MCTSConfig, OutOfTime, _Budget, UCT

__all__ = ["V1Game", "rollout_v1", "beam_v1", "mcts_v1"]


COMPLETIONS = ("xla-msa", "greedy")


class V1Game:
    """MallocGame-v1 for the search agents: legal moves, playing one, default-policy completions
    (``completion``: ``"xla-msa"`` or ``"greedy"``) and the best complete game seen
    (``best_state``, ``best_time``).

    The root's completion (the fallback) always runs in full; every later one gives up at
    ``deadline`` (nanoseconds on :mod:`mallocgym._clock`'s clock; :class:`OutOfTime`)."""

    def __init__(self, scenario: Scenario, *, n_candidates: int = 16, n_starts: int = 4, fast_branch: int = 2,
                 completion: str = "xla-msa", deadline: int = NO_DEADLINE):
        if completion not in COMPLETIONS:
            raise ValueError(f"unknown completion {completion!r}; expected one of {', '.join(COMPLETIONS)}")
        self.scenario = scenario
        self.completion = completion
        self.st, root, self.table, self.work = new_game(scenario, n_candidates=n_candidates, n_starts=n_starts)
        self.k, self.fast_branch = n_candidates, fast_branch
        v1_obs.advance_forced(self.st, root, self.table)
        self.root = root
        self.scratch = v1.copy_state(root)
        self.best_state = v1.copy_state(root)
        self.best_time = float("inf")
        self.completions = 0
        self.deadline = NO_DEADLINE
        self.root_value = -self.complete(root)
        self.deadline = int(deadline)

    def done(self, state) -> bool:
        return int(state.counters[v1.POS]) >= self.st.seg_use.shape[0]

    def policy_move(self, state, s: int) -> int:
        """The default policy's action at segment ``s`` (the table filled for it)."""
        if self.completion == "greedy":
            return int(greedy_move(self.st, state, s, self.table, self.work))
        return int(self.table.msa_action[0])

    def legal(self, state) -> tuple[list, int]:
        """The moves ``(kind, offset, prefetch start)`` at ``state`` and the index of the default
        policy's."""
        st, table, k = self.st, self.table, self.k
        s = int(st.order[state.counters[v1.POS]])
        v1_obs.options(st, state, s, table)
        picks = [0] + [a for a in range(1, 1 + min(self.fast_branch, k)) if table.kind[a] >= 0]
        picks += [a for a in range(1 + k, table.kind.shape[0], k) if table.kind[a] >= 0]
        base = self.policy_move(state, s)
        if base not in picks:
            picks.append(base)
        moves = [(int(table.kind[a]), int(table.off[a]), int(table.pstart[a])) for a in picks]
        return moves, picks.index(base)

    def play(self, state, move):
        """A new state: ``move`` played at ``state``'s segment, then the forced positions."""
        out = v1.copy_state(state)
        v1_obs.play(self.st, out, self.table, int(self.st.order[out.counters[v1.POS]]), *move)
        return out

    def complete(self, state) -> float:
        """The default policy's completion time from ``state`` (the best is kept); raises
        :class:`OutOfTime` when it gives up at the deadline."""
        v1.copy_into(state, self.scratch)
        if self.completion == "greedy":
            t = float(complete_greedy(self.st, self.scratch, self.table, self.work, self.deadline))
        else:
            t = float(complete_msa(self.st, self.scratch, self.table, self.deadline))
        if t != t:
            raise OutOfTime
        self.completions += 1
        if t < self.best_time:
            self.best_time = t
            v1.copy_into(self.scratch, self.best_state)
        return t

    def solution(self, budget: _Budget | None = None, **info) -> Solution:
        mapping = mapping_from_state(self.scenario.workload, self.st, self.best_state)
        info = {"completions": self.completions, **info, **(budget.info() if budget is not None else {})}
        return Solution(None, info=info, mapping=mapping)


def _start(scenario: Scenario, n_candidates: int, completion: str, max_completions: int | None,
           time_limit: float | None) -> tuple[V1Game, _Budget]:
    """The budget (from now: the set-up and the fallback completion count) and the game."""
    budget = _Budget(max_completions, time_limit)
    game = V1Game(scenario, n_candidates=n_candidates, completion=completion, deadline=budget.deadline_ns)
    budget.fallback_done()
    return game, budget


def rollout_v1(scenario: Scenario, *, n_candidates: int, max_completions: int | None,
               time_limit: float | None, completion: str = "xla-msa") -> Solution:
    """One step of lookahead over the branching moves, default-policy completions; ties to the
    policy's move."""
    game, budget = _start(scenario, n_candidates, completion, max_completions, time_limit)
    state = game.root
    try:
        while not game.done(state):
            moves, base = game.legal(state)
            if budget.exhausted(game.completions, len(moves)):
                break
            order = ([base] if base >= 0 else []) + [i for i in range(len(moves)) if i != base]
            children = [game.play(state, moves[i]) for i in order]
            times = [game.complete(c) for c in children]
            state = children[min(range(len(times)), key=times.__getitem__)]
    except OutOfTime:
        budget.stopped = "time"
    return game.solution(budget)


def beam_v1(scenario: Scenario, *, width: int, n_candidates: int, max_completions: int | None,
            time_limit: float | None, completion: str = "xla-msa") -> Solution:
    """Keep the ``width`` best positions (by default-policy completion); expand each by every
    branching move."""
    game, budget = _start(scenario, n_candidates, completion, max_completions, time_limit)
    beam = [(-game.root_value, 0, game.root)]
    tie = 1
    try:
        while any(not game.done(s) for _, _, s in beam):
            scored = []
            for t, _, state in beam:
                if game.done(state):
                    scored.append((t, tie, state))
                    tie += 1
                    continue
                moves, _ = game.legal(state)
                if budget.exhausted(game.completions, len(moves)):
                    return game.solution(budget)
                for move in moves:
                    child = game.play(state, move)
                    scored.append((game.complete(child), tie, child))
                    tie += 1
            scored.sort(key=lambda x: (x[0], x[1]))
            beam = scored[:width]
    except OutOfTime:
        budget.stopped = "time"
    return game.solution(budget)


def mcts_v1(scenario: Scenario, cfg: MCTSConfig) -> Solution:
    """UCT (as on v0) with default-policy completions."""
    game, budget = _start(scenario, cfg.n_candidates, cfg.completion, None, cfg.time_limit)
    sims = UCT(game, game.root, cfg).run(cfg.time_limit, budget=budget)
    return game.solution(budget, simulations=sims)
