"""Evaluating a model while it trains: deterministic play on many scenarios in one batch.

:class:`Evaluator` plays each of its scenarios once, all in lockstep, choosing for every game
with one batched forward pass per step (:func:`~.extractor.greedy_actions`: the best-scored
legal action for MaskablePPO, the best-scored action for PPO and DQN), which is what
:class:`~.agent.SB3Agent` does one game at a time, so its speedups are the harness's (tested).
The envs are built once and reused, so a scenario is compiled once per training run.

:func:`validation_scenarios` is the held-out set the trainer selects checkpoints by: programs
from :mod:`mallocgym.workloads.generator` with seeds at or above ``2**31``, which
:class:`~mallocgym.scenarios.WorkloadGenerator` (and so ``--generator`` training)
never draws (it draws seeds below ``2**31``), at two capacities each. It never contains a
bundled scenario, so selecting on it never looks at the test split.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np

from ...scenarios import Scenario
from ...scoreboard import geomean
from .config import EnvConfig

__all__ = ["Evaluator", "EvalResult", "validation_scenarios", "geomean", "finished_at_reset", "VALIDATION_PRESET",
           "VALIDATION_FIRST_SEED", "VALIDATION_FRACTIONS"]

VALIDATION_PRESET = "medium"
VALIDATION_FIRST_SEED = 2**31  # WorkloadGenerator draws seeds in [0, 2**31): never these
VALIDATION_FRACTIONS = (Fraction(1, 8), Fraction(1, 2))  # the bundled suite's two capacities
MAX_VALIDATION_PROGRAMS = 1024


def validation_scenarios(n_programs: int, preset: str = VALIDATION_PRESET) -> list[Scenario]:
    """``n_programs`` generated programs of ``preset`` (seeds ``2**31, 2**31 + 1, ...``), each at
    fast memory = 1/8 and 1/2 of its peak live bytes: ``2 * n_programs`` scenarios."""
    from ...scenarios import WorkloadGenerator

    if (not isinstance(n_programs, int) or isinstance(n_programs, bool)
            or not 1 <= n_programs <= MAX_VALIDATION_PROGRAMS):
        raise ValueError(f"the number of validation programs must be an integer in [1, {MAX_VALIDATION_PROGRAMS}], "
                         f"got {n_programs!r}")
    generator = WorkloadGenerator(preset, fractions=VALIDATION_FRACTIONS)
    return [generator.scenario(VALIDATION_FIRST_SEED + i, fraction)
            for i in range(n_programs) for fraction in VALIDATION_FRACTIONS]


def finished_at_reset(env) -> bool:
    """Whether ``env``'s episode ended at ``reset()``: MallocGame-v1 plays forced positions
    (only ``SLOW`` legal) itself, so a program whose every use is forced has no decision."""
    return getattr(env, "current_segment", 0) < 0


@dataclass(frozen=True)
class EvalResult:
    """Deterministic play on a set of scenarios.

    Attributes:
      names: the scenarios, in order.
      speedups: each one's speedup over all-slow (``info["speedup"]`` at the episode's end,
        which ``evaluate()`` / ``evaluate_v1()`` give for the mapping).
      steps: decisions the model made in all episodes together.
      infos: each episode's last ``info`` (v0: ``offsets``; v1: ``mapping``).
    """

    names: tuple[str, ...]
    speedups: tuple[float, ...]
    steps: int
    infos: tuple[dict, ...]

    @property
    def geomean(self) -> float:
        """Geometric-mean speedup over the scenarios."""
        return geomean(self.speedups)


class Evaluator:
    """Plays scenarios once each with a model, deterministically, all in one batch.

    Args:
      scenarios: what to play: a list, or named groups of them (``{"valid": [...], "train":
        [...]}``), played together (one forward pass per step for all of them) and scored per
        group. A list is the group ``"all"``.
      env: the env settings the model was trained with (its version picks the game).
      masked: choose among the legal actions (MaskablePPO); otherwise among all (PPO, DQN: a
        masked choice follows ``env.invalid_action``).
    """

    def __init__(self, scenarios: Sequence[Scenario] | Mapping[str, Sequence[Scenario]], env: EnvConfig, *,
                 masked: bool):
        groups = dict(scenarios) if isinstance(scenarios, Mapping) else {"all": scenarios}
        groups = {name: list(group) for name, group in groups.items()}
        empty = [name for name, group in groups.items() if not group]
        if not groups or empty:
            raise ValueError(f"Evaluator: no scenarios to play{' in ' + ', '.join(empty) if empty else ''}")
        cls, kwargs = env.env_class(), env.env_kwargs()
        self.groups = {name: range(0, 0) for name in groups}
        self.envs, names = [], []
        for name, group in groups.items():
            first = len(self.envs)
            self.envs += [cls(scenario, **kwargs) for scenario in group]
            names += [scenario.name for scenario in group]
            self.groups[name] = range(first, len(self.envs))
        self.names = tuple(names)
        self.masked = masked

    def __len__(self) -> int:
        return len(self.envs)

    def run(self, model, *, seed: int = 0) -> dict[str, EvalResult]:
        """Play every scenario to its end with ``model`` (an SB3 model), choosing with
        :func:`~.extractor.greedy_actions`; each group's :class:`EvalResult`."""
        policy = model.policy
        training = policy.training
        policy.set_training_mode(False)
        try:
            infos, counts = self._play(policy, seed)
        finally:
            policy.set_training_mode(training)
        speedups = [float(info["speedup"]) for info in infos]
        return {name: EvalResult(tuple(self.names[i] for i in rows), tuple(speedups[i] for i in rows),
                                 int(sum(counts[i] for i in rows)), tuple(infos[i] for i in rows))
                for name, rows in self.groups.items()}

    def _play(self, policy, seed: int) -> tuple[list[dict], list[int]]:
        from .extractor import greedy_actions

        obs: list[dict] = []
        infos: list[dict | None] = [None] * len(self.envs)
        counts = [0] * len(self.envs)
        active = []
        for i, env in enumerate(self.envs):
            first, info = env.reset(seed=seed)
            obs.append(first)
            if finished_at_reset(env):
                infos[i] = dict(info, mapping=env.mapping())
            else:
                active.append(i)
        while active:
            batch = {key: np.stack([obs[i][key] for i in active]) for key in obs[active[0]]}
            masks = np.stack([self.envs[i].action_masks() for i in active]) if self.masked else None
            still = []
            for i, action in zip(active, greedy_actions(policy, batch, masks)):
                obs[i], _, terminated, truncated, info = self.envs[i].step(int(action))
                counts[i] += 1
                if terminated or truncated:
                    infos[i] = info
                else:
                    still.append(i)
            active = still
        return infos, counts
