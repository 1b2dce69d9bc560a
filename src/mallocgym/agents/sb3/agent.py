"""Trained SB3 models as harness agents: ``maskable_ppo:DIR``, ``ppo:DIR``, ``dqn:DIR``.

The agent plays one episode of MallocGame-v0 on the scenario with the env settings it was
trained with, choosing deterministically (argmax). MaskablePPO predicts with
``action_masks=env.action_masks()``; PPO and DQN predict without masks, so a masked choice
follows the env's ``invalid_action`` (by default: the buffer goes to slow memory; the count is
reported in ``Solution.info["invalid_actions"]``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch as th

from ...env import MallocGameEnv
from ...scenarios import Scenario
from ..base import Solution
from .checkpoint import load_checkpoint

__all__ = ["SB3Agent", "sb3_factory"]


class SB3Agent:
    """A trained model from a run directory (or its ``model.zip``)."""

    def __init__(self, path: str | Path, *, algo: str, name: str | None = None):
        th.set_num_threads(1)
        self.model, self.meta, self.config = load_checkpoint(path, algo=algo)
        self.algo = algo
        self.path = Path(path)
        self.name = name or f"{algo}:{self.path.name}"
        self.masked = algo == "maskable_ppo"
        self.env_kwargs = self.config.env.env_kwargs()

    def act(self, env: MallocGameEnv, obs: dict[str, np.ndarray]) -> int:
        """The model's deterministic action in ``env``'s current position."""
        if self.masked:
            action, _ = self.model.predict(obs, deterministic=True, action_masks=env.action_masks())
        else:
            action, _ = self.model.predict(obs, deterministic=True)
        return int(np.asarray(action).reshape(()))

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        env = MallocGameEnv(scenario, **self.env_kwargs)
        obs, _ = env.reset(seed=seed)
        invalid = 0
        steps = 0
        while True:
            obs, _, terminated, _, info = env.step(self.act(env, obs))
            steps += 1
            invalid += int(info["invalid_action"])
            if terminated:
                return Solution(np.asarray(info["offsets"], dtype=np.int64),
                                info={"steps": steps, "invalid_actions": invalid})


def sb3_factory(kind: str, arg: str | None) -> SB3Agent:
    """``make_agent("maskable_ppo:DIR")`` and friends."""
    if not arg:
        raise ValueError(f"agent {kind!r} needs a trained run: {kind}:DIR (from `mallocgym train sb3 --algo {kind}`)")
    return SB3Agent(arg, algo=kind)
