"""The game as mallocMuZero sees it: the env of a scenario made with the agent's ``EnvConfig``.

Shared by the agent, self-play, the labelled games and training (a module of its own so that
none of them imports another for it).
"""

from __future__ import annotations

import gymnasium as gym

from .config import MuZeroConfig

__all__ = ["make_env"]


def make_env(scenario, config: MuZeroConfig):
    """A MallocGame env for ``scenario`` as the agent sees it (its ``EnvConfig``; ``env.game``
    picks MallocGame-v0 or -v1)."""
    game = "MallocGame-v1" if config.env.game == "v1" else "MallocGame-v0"
    return gym.make(game, workload=scenario, **config.env.make_kwargs())
