"""Search agents on the exact simulator: rollout, beam search and MCTS, one module per game.

- :mod:`mallocgym.agents.search.base`: what both games share: the agents' configs
  (:class:`RolloutConfig`, :class:`BeamConfig`, :class:`MCTSConfig`), the budget, and
  :class:`UCT`, which runs on any game object.
- :mod:`mallocgym.agents.search.v0`: MallocGame-v0's search (its games, kernels and
  completion scorer) and the three agents with :func:`search_factory`; an agent's
  ``solve_v1`` plays MallocGame-v1 through :mod:`.v1`.
- :mod:`mallocgym.agents.search.v1`: MallocGame-v1's search (``rollout_v1``, ``beam_v1``,
  ``mcts_v1`` over the v1 simulator).

This package re-exports the agents' public names, so ``mallocgym.agents.search.MCTSAgent``
and the spec strings (``rollout``, ``beam:8``, ``mcts:64``) work as before.
"""

from .base import UCT, BeamConfig, MCTSConfig, RolloutConfig, pace_allowance
from .v0 import BeamAgent, CompletionScorer, MCTSAgent, RolloutAgent, V0Game, search_factory

__all__ = ["RolloutConfig", "BeamConfig", "MCTSConfig", "RolloutAgent", "BeamAgent", "MCTSAgent",
           "CompletionScorer", "search_factory", "pace_allowance", "UCT", "V0Game"]
