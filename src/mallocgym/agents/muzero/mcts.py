"""Batched MCTS over a learned model: one model call per simulation for all ``B`` searches.

The tree bookkeeping is numba (:mod:`.tree`); this module prepares the roots (legality, noise,
Gumbel top-k and the sequential-halving schedule), stores the model's embeddings per node in
preallocated arrays, and turns the trees into actions and policy targets.

A model is anything with ``recurrent(embedding, actions) -> (reward [B], value [B],
logits [B, A], embedding')`` where an embedding is a tuple of arrays or tensors with a
leading batch axis; :class:`NetworkModel` adapts :class:`~.networks.MuZeroNet`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import torch

from . import tree as T
from .config import SearchConfig
from .networks import MuZeroNet, obs_to_tensors

__all__ = ["LatentModel", "NetworkModel", "SearchResult", "considered_visit_sequence", "run_search",
           "prepare_roots", "search_params", "play", "finish", "effective_legal", "xla_move", "BENEFIT_NOW"]

# index of "benefit now / largest single-buffer benefit" in obs["buffer"] (features.BUFFER_FEATURES)
BENEFIT_NOW = 5


class LatentModel(Protocol):
    def recurrent(self, embedding: tuple, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
        """``(reward [B], value [B], logits [B, A], next embedding)`` after ``actions [B]``."""


@dataclass
class SearchResult:
    """Per game: ``action [B]``, ``policy [B, A]`` (the training target), ``value [B]`` (the
    root's search value), ``visits [B, A]``, ``q [B, A]`` (root Q-values, 0 where unvisited)."""

    action: np.ndarray
    policy: np.ndarray
    value: np.ndarray
    visits: np.ndarray
    q: np.ndarray


@functools.lru_cache(maxsize=512)
def considered_visit_sequence(m: int, n: int) -> tuple[int, ...]:
    """Sequential halving's schedule (Danihelka et al. 2022): the visit count the root action
    chosen at each of ``n`` simulations must have, with ``m`` considered actions.

    Each phase gives every remaining action ``max(1, n // (ceil(log2 m) * remaining))`` more
    visits, then halves the remaining actions (down to 2); ``m = 4, n = 8`` gives
    ``(0, 0, 0, 0, 1, 1, 2, 2)``.
    """
    if m <= 1:
        return tuple(range(n))
    log2m = math.ceil(math.log2(m))
    seq: list[int] = []
    visits = [0] * m
    remaining = m
    while len(seq) < n:
        extra = max(1, n // (log2m * remaining))
        for _ in range(extra):
            seq.extend(visits[:remaining])
            for i in range(remaining):
                visits[i] += 1
        remaining = max(2, remaining // 2)
    return tuple(seq[:n])


def search_params(config: SearchConfig) -> np.ndarray:
    """The ``params`` array of :func:`.tree.new_tree` for ``config``."""
    return np.array([config.discount, config.pb_c_init, config.pb_c_base, config.c_visit, config.c_scale,
                     T.GUMBEL if config.algorithm == "gumbel" else T.PUCT, config.min_q_span], dtype=np.float64)


def prepare_roots(tree: T.Tree, *, values: np.ndarray, logits: np.ndarray, legal: np.ndarray,
                  config: SearchConfig, num_simulations: int, rngs: Sequence[np.random.Generator] | None) -> None:
    """Initialise the roots; with ``rngs`` (one Generator per game) add exploration noise:
    Dirichlet noise on pUCT's priors, Gumbel noise for Gumbel MuZero's root sampling."""
    legal = legal.astype(np.uint8)
    T.init_roots(tree, values.astype(np.float64), logits.astype(np.float64), legal)
    num_actions = legal.shape[1]
    if config.algorithm == "puct":
        if rngs is not None and config.exploration_fraction > 0:
            for b, rng in enumerate(rngs):
                ids = np.flatnonzero(legal[b])
                noise = rng.dirichlet([config.dirichlet_alpha] * len(ids))
                prior = tree.prior[b, 0]
                prior[ids] = (1 - config.exploration_fraction) * prior[ids] + config.exploration_fraction * noise
        return
    for b in range(legal.shape[0]):
        ids = np.flatnonzero(legal[b])
        g = np.zeros(num_actions)
        if rngs is not None and config.gumbel_scale > 0:
            g[ids] = rngs[b].gumbel(size=len(ids)) * config.gumbel_scale
        m = min(config.max_considered, len(ids), num_simulations)
        score = np.full(num_actions, -np.inf)
        score[ids] = g[ids] + logits[b, ids]
        top = np.argsort(-score, kind="stable")[:m]
        tree.gumbel[b] = g
        tree.considered[b] = 0
        tree.considered[b, top] = 1
        tree.seq[b, :num_simulations] = considered_visit_sequence(m, num_simulations)


def _alloc_like(x, batch: int, max_nodes: int):
    if isinstance(x, torch.Tensor):
        return torch.empty((batch, max_nodes) + tuple(x.shape[1:]), dtype=x.dtype)
    x = np.asarray(x)
    return np.empty((batch, max_nodes) + x.shape[1:], dtype=x.dtype)


def _index(store, rows: np.ndarray, cols: np.ndarray):
    if isinstance(store, torch.Tensor):
        return store[torch.from_numpy(rows), torch.from_numpy(cols)]
    return store[rows, cols]


def _put(store, rows: np.ndarray, cols: np.ndarray, values) -> None:
    if isinstance(store, torch.Tensor):
        store[torch.from_numpy(rows), torch.from_numpy(cols)] = values
    else:
        store[rows, cols] = values


def finish(tree: T.Tree, *, config: SearchConfig, rngs: Sequence[np.random.Generator] | None) -> SearchResult:
    """Actions and targets from searched trees (pUCT samples from ``visits ** (1 / temperature)``
    with ``rngs``, else takes the most visited action)."""
    batch, num_actions = tree.gumbel.shape
    visits = np.zeros((batch, num_actions), np.int64)
    policy = np.zeros((batch, num_actions))
    q = np.zeros((batch, num_actions))
    action = np.zeros(batch, np.int64)
    T.root_results(tree, visits, policy, q, action)
    if config.algorithm == "puct":
        for b in range(batch):
            if rngs is None:
                action[b] = int(np.argmax(visits[b] + 1e-6 * tree.prior[b, 0]))
            else:
                weights = visits[b].astype(np.float64) ** (1.0 / config.temperature)
                action[b] = int(rngs[b].choice(num_actions, p=weights / weights.sum()))
    value = tree.value_sum[:, 0] / np.maximum(tree.visits[:, 0], 1)
    return SearchResult(action, policy.astype(np.float32), value, visits, q)


def run_search(model: LatentModel, *, values: np.ndarray, logits: np.ndarray, embedding: tuple,
               legal: np.ndarray, config: SearchConfig, num_simulations: int,
               rngs: Sequence[np.random.Generator] | None = None) -> SearchResult:
    """Search ``B`` roots with the learned model; one ``model.recurrent`` call per simulation.

    Args:
      values, logits: ``[B]`` and ``[B, A]`` root evaluations.
      embedding: the roots' model state (tuple of ``[B, ...]`` arrays or tensors).
      legal: ``bool[B, A]`` root legality (the env's mask); interior nodes allow every action.
      rngs: one Generator per game for exploration noise and sampling (None: no noise, greedy).
    """
    batch, num_actions = legal.shape
    max_nodes = num_simulations + 1
    tree = T.new_tree(batch, max_nodes, num_actions, num_simulations, search_params(config))
    prepare_roots(tree, values=values, logits=logits, legal=legal, config=config,
                  num_simulations=num_simulations, rngs=rngs)
    stores = [_alloc_like(e, batch, max_nodes) for e in embedding]
    rows = np.arange(batch, dtype=np.int64)
    zeros = np.zeros(batch, np.int64)
    for store, e in zip(stores, embedding):
        _put(store, rows, zeros, e)
    nodes = np.zeros(batch, np.int64)
    actions = np.zeros(batch, np.int64)
    children = np.zeros(batch, np.int64)
    all_legal = np.ones((batch, num_actions), np.uint8)
    not_terminal = np.zeros(batch, np.uint8)
    for sim in range(num_simulations):
        T.select(tree, sim, nodes, actions)
        parent = tuple(_index(store, rows, nodes) for store in stores)
        reward, value, child_logits, child = model.recurrent(parent, actions)
        T.expand(tree, nodes, actions, np.asarray(reward, np.float64), np.asarray(value, np.float64),
                 np.asarray(child_logits, np.float64), all_legal, not_terminal, children)
        for store, e in zip(stores, child):
            _put(store, rows, children, e)
    return finish(tree, config=config, rngs=rngs)


class NetworkModel:
    """:class:`MuZeroNet` as a search model (no gradients, scalar values and rewards)."""

    def __init__(self, net: MuZeroNet):
        self.net = net

    @torch.no_grad()
    def root(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, tuple]:
        """``(value [B], logits [B, A], embedding)`` of a batch of observations."""
        out = self.net.initial_inference(obs_to_tensors(obs))
        value = self.net.value_support.decode(out.value_logits)
        return value.double().numpy(), out.policy_logits.double().numpy(), (out.latent, out.cands)

    @torch.no_grad()
    def evaluate(self, obs: dict[str, np.ndarray], *, values: bool = True) -> tuple[np.ndarray | None, np.ndarray]:
        """``(value [B] or None, logits [B, A])`` of a batch of observations; ``values=False``
        skips decoding the value head (the simulator search with exact values needs only logits)."""
        out = self.net.initial_inference(obs_to_tensors(obs))
        value = self.net.value_support.decode(out.value_logits).double().numpy() if values else None
        return value, out.policy_logits.double().numpy()

    @torch.no_grad()
    def expert(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Version-2 networks: ``(logits [B, A], residual [B], advantage [B, A])`` as float64
        arrays (:meth:`MuZeroNet.expert`)."""
        logits, residual, advantage = self.net.expert(obs_to_tensors(obs))
        return logits.double().numpy(), residual.double().numpy(), advantage.double().numpy()

    @torch.no_grad()
    def recurrent(self, embedding: tuple, actions: np.ndarray):
        latent, cands = embedding
        out = self.net.recurrent_inference(latent, cands, torch.from_numpy(np.asarray(actions, np.int64)))
        reward = self.net.reward_support.decode(out.reward_logits).double().numpy()
        value = self.net.value_support.decode(out.value_logits).double().numpy()
        return reward, value, out.policy_logits.double().numpy(), (out.latent, out.cands)


def effective_legal(obs: dict[str, np.ndarray], *, prune_no_benefit: bool) -> np.ndarray:
    """``bool[B, A]`` legal actions: the env's mask, minus placements of buffers that would save
    nothing now when ``prune_no_benefit``."""
    legal = np.asarray(obs["action_mask"]).astype(bool).copy()
    if prune_no_benefit:
        useless = np.asarray(obs["buffer"])[:, BENEFIT_NOW] <= 0.0
        legal[useless, :-1] = False
    return legal


def xla_move(legal: np.ndarray) -> int:
    """XLA-like's move among the search's legal actions (``effective_legal``): the best-fit
    candidate (action 0) when it is legal, else skip (the last action)."""
    return 0 if legal[0] else len(legal) - 1


def play(model: NetworkModel, obs: dict[str, np.ndarray], *, config: SearchConfig, num_simulations: int,
         rngs: Sequence[np.random.Generator] | None = None) -> SearchResult:
    """Choose moves for a batch of positions: one network call for the roots, then a batched
    search over the positions with more than one legal action (the others skip at once, with a
    one-hot policy target and the network's value)."""
    legal = effective_legal(obs, prune_no_benefit=config.prune_no_benefit)
    values, logits, (latent, cands) = model.root(obs)
    batch, num_actions = legal.shape
    action = np.full(batch, num_actions - 1, np.int64)
    policy = np.zeros((batch, num_actions), np.float32)
    policy[:, -1] = 1.0
    value = values.copy()
    visits = np.zeros((batch, num_actions), np.int64)
    q = np.zeros((batch, num_actions))
    active = np.flatnonzero(legal.sum(1) > 1)
    if active.size:
        idx = torch.from_numpy(active)
        res = run_search(model, values=values[active], logits=logits[active], embedding=(latent[idx], cands[idx]),
                         legal=legal[active], config=config, num_simulations=num_simulations,
                         rngs=None if rngs is None else [rngs[i] for i in active])
        action[active] = res.action
        policy[active] = res.policy
        value[active] = res.value
        visits[active] = res.visits
        q[active] = res.q
    return SearchResult(action, policy, value, visits, q)
