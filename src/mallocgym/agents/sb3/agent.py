"""Trained SB3 models as harness agents: ``maskable_ppo:DIR``, ``ppo:DIR``, ``dqn:DIR``.

The agent plays one episode of the game it was trained on (MallocGame-v0 or -v1, recorded in
the run's ``train.json`` as ``config.env.version``) on the scenario, with the env settings it
was trained with, choosing deterministically (the highest logit or Q-value; MaskablePPO among
the legal actions of ``env.action_masks()``, as its ``predict(deterministic=True)`` does); PPO
and DQN choose without masks, so a masked choice follows the env's ``invalid_action`` (by
default: the buffer goes to slow memory, on v1 the use reads slow memory; the count is reported
in ``Solution.info["invalid_actions"]``).

Asking an agent to play the other version is one ``ValueError``: :meth:`SB3Agent.solve` (v0)
of a v1 run and :meth:`SB3Agent.solve_v1` of a v0 run refuse, and ``plays_v1`` tells the
harness before anything runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch as th

from ...scenarios import Scenario
from ..base import Solution
from .checkpoint import load_checkpoint
from .evaluation import finished_at_reset
from .extractor import greedy_actions

__all__ = ["SB3Agent", "sb3_factory"]


class SB3Agent:
    """A trained model from a run directory (or its ``model.zip``).

    Attributes:
      version: the game it was trained on and plays, ``"v0"`` or ``"v1"``.
      plays_v1: ``version == "v1"`` (read by the harness, which refuses a v0 agent on v1
        before anything runs).
      plays_v0: ``version == "v0"`` (the harness does not read it yet: a v1 agent asked to play
        v0 is refused by :meth:`solve`, at the first scenario).
    """

    def __init__(self, path: str | Path, *, algo: str, name: str | None = None):
        th.set_num_threads(1)
        self.model, self.meta, self.config = load_checkpoint(path, algo=algo)
        self.model.policy.set_training_mode(False)
        self.algo = algo
        self.path = Path(path)
        self.name = name or f"{algo}:{self.path.name}"
        self.masked = algo == "maskable_ppo"
        self.version = self.config.env.version
        self.plays_v1 = self.version == "v1"
        self.plays_v0 = self.version == "v0"
        self.env_kwargs = self.config.env.env_kwargs()

    def act(self, env, obs: dict[str, np.ndarray]) -> int:
        """The model's deterministic action in ``env``'s current position
        (:func:`~.extractor.greedy_actions`: the best-scored legal action for MaskablePPO, the
        best-scored action for PPO and DQN)."""
        batch = {key: value[None] for key, value in obs.items()}
        masks = env.action_masks()[None] if self.masked else None
        return int(greedy_actions(self.model.policy, batch, masks)[0])

    def _refuse(self, version: str) -> None:
        if version != self.version:
            how = "--env v1" if self.version == "v1" else "the default --env v0"
            raise ValueError(f"agent {self.name!r} was trained on MallocGame-{self.version} and plays only that "
                             f"version, not MallocGame-{version} (use {how}, or train a {version} agent: "
                             f"mallocgym train sb3 --env {version})")

    def _play(self, scenario: Scenario, seed: int) -> tuple[dict, int, int]:
        """``(last info, steps, invalid actions)`` of one deterministic episode."""
        env = self.config.env.env_class()(scenario, **self.env_kwargs)
        obs, info = env.reset(seed=seed)
        if finished_at_reset(env):
            return dict(info, mapping=env.mapping()), 0, 0
        invalid = steps = 0
        while True:
            obs, _, terminated, _, info = env.step(self.act(env, obs))
            steps += 1
            invalid += int(info["invalid_action"])
            if terminated:
                return info, steps, invalid

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """One MallocGame-v0 episode (only for a run trained on v0)."""
        self._refuse("v0")
        info, steps, invalid = self._play(scenario, seed)
        return Solution(np.asarray(info["offsets"], dtype=np.int64), info={"steps": steps, "invalid_actions": invalid})

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """One MallocGame-v1 episode (only for a run trained on v1); the v1 mapping."""
        self._refuse("v1")
        info, steps, invalid = self._play(scenario, seed)
        return Solution(None, mapping=info["mapping"], info={"steps": steps, "invalid_actions": invalid})


def sb3_factory(kind: str, arg: str | None) -> SB3Agent:
    """``make_agent("maskable_ppo:DIR")`` and friends."""
    if not arg:
        raise ValueError(f"agent {kind!r} needs a trained run: {kind}:DIR (from `mallocgym train sb3 --algo {kind}`)")
    return SB3Agent(arg, algo=kind)
