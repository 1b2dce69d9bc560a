"""The Gymnasium environments, one module per version of the game.

- :mod:`mallocgym.env.base`: what both versions share (:class:`~mallocgym.env.base.ScenarioEnv`).
- :mod:`mallocgym.env.v0`: ``MallocGame-v0``, whole-live-range placement (:class:`MallocGameEnv`),
  and :func:`heuristic_env`, the env a heuristic's policy plays on.
- :mod:`mallocgym.env.canonical`: ``MallocGame-v0``'s canonical decision mode
  (``order="canonical"``, :class:`CanonicalGameEnv`); importing it lets
  ``MallocGameEnv(order="canonical")`` build that class.
- :mod:`mallocgym.env.v1`: ``MallocGame-v1``, per-use decisions with prefetch and eviction
  (:class:`MallocGameV1Env`).
"""

from .canonical import CanonicalGameEnv
from .v0 import INVALID_ACTION_MODES, GameState, KernelArrays, MallocGameEnv, heuristic_env

__all__ = ["MallocGameEnv", "GameState", "KernelArrays", "INVALID_ACTION_MODES", "MallocGameV1Env",
           "CanonicalGameEnv", "heuristic_env"]


def __getattr__(name):
    if name == "MallocGameV1Env":
        from .v1 import MallocGameV1Env

        return MallocGameV1Env
    raise AttributeError(f"module 'mallocgym.env' has no attribute {name!r}")
