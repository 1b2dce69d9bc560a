"""``xla-msa``: XLA's Memory Space Assignment as a MallocGame-v1 baseline.

A port of MSA's ``AllocateSegment`` loop (openxla/xla ``xla/service/memory_space_assignment/``;
the rules and the functions they follow are in :mod:`mallocgym.sim.msa` and
``docs/baselines.md``). Two ways to run it:

- ``xla-msa`` (plan): MSA's own choices, with any prefetch start its picker gives, in its own
  value order (``order=``: ``boundedness``, MSA's cost-analysis order, by default; ``spatial``,
  its order without a cost model); the v1 mapping it leaves is validated by ``evaluate``.
- ``xla-msa:in_env=1`` (policy): played through the env, MSA's own action at each decision
  (the env offers it: :func:`mallocgym.features.v1.options`); it leaves exactly the plan's
  mapping, bit for bit. This is the default policy of rollout, beam and MCTS on v1, which
  therefore never end below the plan. The env's MSA is the cost picker with the scenario's
  ratios, so ``in_env=1`` takes no picker settings.

Settings (``xla-msa:key=value,...``): ``picker`` = ``cost`` (ratios ``min_ratio``,
``preferred_ratio``, ``max_ratio``: MSA's test values 0.8 / 1.5 / 10) or ``count`` (``min``,
``max`` ops: ``InstructionCountPrefetchIntervalPicker``, MSA's test values 2 / 10).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..heuristics.v1 import complete_msa, new_game
from ..pricing.v1 import mapping_from_state
from ..scenarios import Scenario
from ..sim import ORDERS, msa, v1
from .base import Solution, parse_config

__all__ = ["MSAConfig", "MSAAgent", "msa_factory", "plan_msa"]


@dataclass(frozen=True)
class MSAConfig:
    """Settings of the ``xla-msa`` agent (see the module docstring)."""

    picker: str = "cost"
    min: int = 2
    max: int = 10
    min_ratio: float = 0.8
    preferred_ratio: float = 1.5
    max_ratio: float = 10.0
    order: str = "boundedness"
    in_env: bool = False

    def __post_init__(self) -> None:
        if self.picker not in msa.PICKERS:
            raise ValueError(f"picker must be one of {', '.join(msa.PICKERS)}, got {self.picker!r}")
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if not 0 <= self.min <= self.max:
            raise ValueError(f"the instruction-count picker needs 0 <= min <= max, got min={self.min}, max={self.max}")
        if not 0 < self.min_ratio <= self.preferred_ratio <= self.max_ratio:
            raise ValueError("the cost picker needs 0 < min_ratio <= preferred_ratio <= max_ratio, got "
                             f"{self.min_ratio}, {self.preferred_ratio}, {self.max_ratio}")
        if self.in_env and self.order != "boundedness":
            raise ValueError("in_env=1 plays in the env's decision order; order= applies to the plan only")
        if self.in_env and (self.picker != "cost" or self.ratios != (0.8, 1.5, 10.0)):
            raise ValueError("in_env=1 plays the env's own MSA action (cost picker, MSA's ratios 0.8 / 1.5 / 10); "
                             "picker=, min_ratio=, preferred_ratio= and max_ratio= apply to the plan only")
        defaults = MSAConfig.__dataclass_fields__
        if self.picker == "cost" and (self.min, self.max) != (defaults["min"].default, defaults["max"].default):
            raise ValueError("min= and max= are settings of picker=count (the cost picker uses the ratios)")
        if self.picker == "count" and self.ratios != tuple(defaults[f].default for f in
                                                           ("min_ratio", "preferred_ratio", "max_ratio")):
            raise ValueError("min_ratio=, preferred_ratio= and max_ratio= are settings of picker=cost")

    @property
    def ratios(self) -> tuple[float, float, float]:
        return (self.min_ratio, self.preferred_ratio, self.max_ratio)


def plan_msa(scenario: Scenario, cfg: MSAConfig = MSAConfig()) -> tuple[v1.Static1, v1.State1]:
    """MSA's plan on ``scenario``: the compiled scenario (in ``cfg.order``) and the final state."""
    st = v1.compile_v1(scenario.workload, scenario.hardware, cfg.order)
    state = v1.new_state(st)
    ms = msa.msa_static(st, cfg.picker, count_min=cfg.min, count_max=cfg.max, ratios=cfg.ratios)
    msa.plan(st, state, ms, np.empty(st.seg_use.shape[0] + 1, np.int64), np.empty(st.compute_time.shape[0] + 2,
                                                                                     np.int64))
    return st, state


@dataclass
class MSAAgent:
    """XLA's Memory Space Assignment on MallocGame-v1 (plan, or the in-env policy)."""

    config: MSAConfig = MSAConfig()
    name: str = "xla-msa"

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        raise ValueError("agent 'xla-msa' plays MallocGame-v1 only (use --env v1); on v0 the XLA-like "
                         "baseline is 'xla'")

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        cfg = self.config
        if cfg.in_env:
            st, state, table, _ = new_game(scenario)
            complete_msa(st, state, table)
        else:
            st, state = plan_msa(scenario, cfg)
        n_copies = int(state.counters[v1.N_COPIES])
        prefetches = int(np.count_nonzero(state.cp_kind == 0))
        info = {"prefetches": prefetches, "evictions": n_copies - prefetches}
        return Solution(None, info=info, mapping=mapping_from_state(scenario.workload, st, state))


def msa_factory(kind: str, arg: str | None) -> MSAAgent:
    """``xla-msa`` or ``xla-msa:key=value,...`` (:class:`MSAConfig` fields)."""
    config = parse_config(MSAConfig, arg, where=f"agent {kind!r}")
    return MSAAgent(config, kind if arg is None else f"{kind}:{arg}")
