"""The Gymnasium environments, one module per version of the game.

- :mod:`mallocgym.env.v0`: ``MallocGame-v0``, whole-live-range placement (:class:`MallocGameEnv`).
- :mod:`mallocgym.env.canonical`: ``MallocGame-v0``'s canonical decision mode
  (``order="canonical"``, :class:`CanonicalGameEnv`).
- :mod:`mallocgym.env.v1`: ``MallocGame-v1``, per-use decisions with prefetch and eviction
  (:class:`MallocGameV1Env`).
"""

from .v0 import INVALID_ACTION_MODES, GameState, KernelArrays, MallocGameEnv

__all__ = ["MallocGameEnv", "GameState", "KernelArrays", "INVALID_ACTION_MODES", "MallocGameV1Env",
           "CanonicalGameEnv"]


def __getattr__(name):
    if name == "MallocGameV1Env":
        from .v1 import MallocGameV1Env

        return MallocGameV1Env
    if name == "CanonicalGameEnv":
        from .canonical import CanonicalGameEnv

        return CanonicalGameEnv
    raise AttributeError(f"module 'mallocgym.env' has no attribute {name!r}")
