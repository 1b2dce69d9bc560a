"""The agent interface and the heuristic agents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from .. import heuristics
from ..scenarios import Scenario

__all__ = ["Agent", "Solution", "HeuristicAgent", "heuristic_factory"]


@dataclass
class Solution:
    """What an agent returns: a mapping, and optionally a proven lower bound on program time.

    Attributes:
      offsets: ``int64[N]``, -1 = slow memory.
      time_lower_bound: seconds no mapping can beat (exact solvers), or None.
      info: anything else worth reporting (iterations, nodes, ...).
    """

    offsets: np.ndarray
    time_lower_bound: float | None = None
    info: dict = field(default_factory=dict)


class Agent(Protocol):
    """Maps a scenario to a :class:`Solution`; ``seed`` makes stochastic agents repeatable."""

    name: str

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution: ...


@dataclass
class HeuristicAgent:
    """Wraps a heuristic ``(scenario, seed) -> offsets``."""

    name: str
    fn: Callable[[Scenario, int], np.ndarray]

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        return Solution(np.asarray(self.fn(scenario, seed), dtype=np.int64))


def heuristic_factory(kind: str, arg: str | None) -> HeuristicAgent:
    if arg is not None:
        raise ValueError(f"agent {kind!r} takes no argument, got {kind}:{arg}")
    return HeuristicAgent(kind, heuristics.HEURISTICS[kind])
