"""Greedy mapping heuristics, one module per version of the game.

- :mod:`mallocgym.heuristics.v0`: MallocGame-v0's heuristics (all-slow, random, first-fit,
  best-fit, XLA-like) as numba fast paths and as env policies, and the simulator moves
  (:func:`decide`, :func:`complete`) the v0 search agents branch with. Its names are
  re-exported here: ``mallocgym.heuristics.xla_like`` is v0's.
- :mod:`mallocgym.heuristics.v1`: MallocGame-v1's policies on the v1 simulator (all-slow,
  random, the greedy completion).

The env a v0 heuristic's policy plays on is :func:`mallocgym.env.heuristic_env` (the env sits a
layer above the heuristics).
"""

from .v0 import (FIT_BEST, FIT_FIRST, HEURISTICS, ORDER, GreedyPolicy, Policy, RandomPolicy, SlowPolicy, all_slow,
                 best_fit, complete, decide, first_fit, greedy, play, policy, random_mapping, run_fit, xla_like)

__all__ = [
    "all_slow", "random_mapping", "first_fit", "best_fit", "xla_like", "greedy", "HEURISTICS",
    "ORDER", "Policy", "GreedyPolicy", "RandomPolicy", "SlowPolicy", "policy", "play",
    "FIT_BEST", "FIT_FIRST", "decide", "complete", "run_fit",
]
