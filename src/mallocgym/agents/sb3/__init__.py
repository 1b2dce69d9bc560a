"""Stable-Baselines3 agents for MallocGame: MaskablePPO (sb3-contrib), PPO and DQN.

- :mod:`.config`: frozen, validated hyperparameter dataclasses, one per algorithm.
- :mod:`.extractor`: a per-candidate set encoder and policies that score each candidate row.
- :mod:`.vec_env`: SB3 vector envs, including the native numba batch (:mod:`mallocgym.vector`).
- :mod:`.train`: ``mallocgym train sb3 --algo ... --minutes M --out DIR``.
- :mod:`.agent`: trained runs as harness agents (``maskable_ppo:DIR``, ``ppo:DIR``, ``dqn:DIR``).

Importing this package imports torch; the rest of mallocgym does not.
"""

from .config import ALGOS, DQNConfig, EnvConfig, MaskablePPOConfig, PolicyConfig, PPOConfig, default_config

__all__ = ["ALGOS", "DQNConfig", "EnvConfig", "MaskablePPOConfig", "PolicyConfig", "PPOConfig", "default_config"]
