"""Greedy mapping heuristics, as numba fast paths over the simulator.

Each heuristic takes a :class:`~mallocgym.scenarios.Scenario` and returns ``offsets``
(``int64[N]``, -1 = slow memory).
"""

from __future__ import annotations

import numpy as np

from . import sim
from .scenarios import Scenario

__all__ = ["all_slow", "random_mapping", "xla_like", "greedy", "HEURISTICS"]


def all_slow(scenario: Scenario, seed: int = 0) -> np.ndarray:
    """Every buffer in slow memory: the speedup-1 reference."""
    return np.full(scenario.workload.num_buffers, sim.SLOW, dtype=np.int64)


def greedy(scenario: Scenario, order: str = "boundedness", skip_no_benefit: bool = False) -> np.ndarray:
    """Decide buffers in ``order``, each at its best-fit candidate (or slow when none fits)."""
    st = sim.compile_scenario(scenario.workload, scenario.hardware, order)
    state = sim.new_state(st)
    sim.run_greedy(st, state, skip_no_benefit)
    return state.offsets


def xla_like(scenario: Scenario, seed: int = 0) -> np.ndarray:
    """XLA Memory Space Assignment's greedy: memory-boundedness order, best fit, buffers that
    would save nothing left in slow memory."""
    return greedy(scenario, "boundedness", skip_no_benefit=True)


def random_mapping(scenario: Scenario, seed: int = 0, n_candidates: int = 16) -> np.ndarray:
    """Uniformly random legal MallocGame play (one of the candidates or skip), seeded."""
    st = sim.compile_scenario(scenario.workload, scenario.hardware, "boundedness")
    state = sim.new_state(st)
    sim.run_random(st, state, n_candidates, seed)
    return state.offsets


HEURISTICS = {"all-slow": all_slow, "random": random_mapping, "xla": xla_like}
