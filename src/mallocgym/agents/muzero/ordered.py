"""mallocMuZero's UCT mode (``muzero-sim:DIR,tree=uct``): the plain ``mcts`` search with each
position's moves tried in the network's order.

The plain ``mcts`` agent (:class:`mallocgym.agents.search.UCT`) adds one child per simulation
and tries a position's unvisited moves first, in the game's order (the candidates by offset
rank, skip last). With ``K = 16`` candidates and 8-16 simulations per decision, that order
decides which moves are ever scored. Here the same search, with the same constants and the same
XLA-like completions, plays a game (:class:`OrderedGame`) whose ``legal`` lists XLA-like's move
first (its child costs no completion: it reuses the parent's) and then the others by the
network's ranking (:class:`NetworkOrder`: a version-2 network's advantage head, else its policy
logits; ties keep the game's order). Everything else is the plain search, so the difference
between the two at equal wall time measures what the network's order is worth against the time
its calls take (one call per position the search expands, none at forced positions).
"""

from __future__ import annotations

import numpy as np

from ...features import v0 as features
from .simsearch import rank_moves

__all__ = ["NetworkOrder", "OrderedGame"]


class NetworkOrder:
    """Ranks the moves of MallocGame-v0 positions by one network call each.

    ``env``: the MallocGame-v0 env the network was trained on (read for its static program, its
    ``K``, its observation sizes; not stepped). ``model``: a :class:`.mcts.NetworkModel`;
    ``version2``: read its advantage head (else its policy logits). :attr:`calls` counts the
    network calls."""

    def __init__(self, env, model, *, version2: bool):
        u = env.unwrapped
        self.st, self.k = u.static, int(u.k)
        self.scratch = features.make_scratch(int(self.st.size.shape[0]), self.k)
        self.norm = features.make_norm(self.st, u.workload.peak_live_bytes)
        self.obs = features.make_obs(self.k, int(u.n_next), *u.memory_bins)
        self.image = np.zeros(tuple(u.memory_bins), np.float64)
        self.model, self.version2 = model, version2
        self.calls = 0

    def scores(self, state) -> tuple[np.ndarray, np.ndarray]:
        """``(score [K + 1], candidate offsets)`` at ``state``: the network's score of each env
        action (candidate ``i`` is action ``i``, skip is ``K``) and the offsets of the
        candidates the observation shows."""
        features.paint_placed(self.st, state, self.image)
        count = features.observe(self.st, state, self.norm, self.scratch, self.image, self.obs, self.k)
        batch = {key: np.asarray(arr).reshape(1, -1) for key, arr in zip(features.Obs._fields, self.obs)}
        if self.version2:
            _, _, score = self.model.expert(batch)
        else:
            _, score = self.model.evaluate(batch, values=False)
        self.calls += 1
        return np.asarray(score[0], np.float64), self.scratch.cand_off[:count].copy()

    def __call__(self, state, moves: list, base: int) -> list[int]:
        """A permutation of ``range(len(moves))``: ``base`` (XLA-like's move) first, then the other
        moves by the network's score, highest first (ties: the game's order). ``moves`` are
        :class:`~mallocgym.agents.search.V0Game`'s: the candidates' offsets, then ``-1`` (skip)."""
        if len(moves) < 2:
            return list(range(len(moves)))
        score, offsets = self.scores(state)
        count = len(moves) - 1
        if len(offsets) != count or any(int(o) != int(m) for o, m in zip(offsets, moves[:count])):
            raise RuntimeError(f"the network's observation shows candidates {offsets.tolist()}, the game "
                               f"{list(moves[:count])} (a bug)")
        actions = np.append(np.arange(count), self.k)   # move i is env action i, skip is K
        return rank_moves(score, actions, int(actions[base]))


class OrderedGame:
    """A :class:`~mallocgym.agents.search.V0Game` whose ``legal`` lists the moves in ``order``'s
    order (a :class:`NetworkOrder`; the completion policy's move first, at index 0); every other
    attribute is the game's."""

    def __init__(self, game, order: NetworkOrder):
        self._game, self.order = game, order

    def __getattr__(self, name):
        return getattr(self._game, name)

    def legal(self, state) -> tuple[list, int]:
        moves, base = self._game.legal(state)
        permutation = self.order(state, moves, base)
        return [moves[i] for i in permutation], permutation.index(base)
