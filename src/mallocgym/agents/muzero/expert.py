"""Expert iteration on the exact simulator (``network.version = 2``; issue 18, step 2).

Self-play is the simulator search (:class:`~.simsearch.SimulatorSearch`) guided by the current
network; what the search finds becomes the targets (AlphaZero-style expert iteration, the
search being the expert):

- **policy**: the search's improved policy ``softmax(prior + sigma(q))`` over every legal move
  of a position (:func:`~.simsearch.improved_policy`), never one-hot, no margin;
- **residual** (the value head): ``residual_scale x (XLA-like's completion time from the
  position - the best completion time found below it) / XLA-like's completion time``, ``>= 0``;
  the search backs up the best completion (the game is deterministic: a position is worth the
  best finish found below it, not the mean);
- **advantage**: every legal move's exact completion (the expansion already ran it) against
  XLA-like's move, in the same units;

on every expanded position of the tree (every node with at least two visits: itself and its
children), not only the moves played; forced positions (one legal move) are left out. In the
search a leaf's value is then XLA-like's exact completion plus the predicted residual.
Positions with a positive residual are drawn ``train.positive_weight`` times as often
(:func:`position_weight`).

The dynamics, reward and value heads are not trained by this loss: a version-2 network plays in
simulator mode (``muzero-sim:DIR``) or as the policy alone (``muzero-pol:DIR``). (Issue 18's
learned-dynamics mode, which trained them on the labelled games' trajectories for a search over
the learned model, was removed by issue 31: level with XLA-like, ``baselines/muzero/dynamics``.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ...scenarios import Scenario
from .config import MuZeroConfig
from .game import make_env
from .labels import ExpertRecord, label_game
from .networks import OBS_KEYS, MuZeroNet, ObsSpec, obs_to_tensors
from .simsearch import SimulatorSearch
from .v1 import label_game_v1, network_advantage

__all__ = ["POSITIVE_RESIDUAL", "position_weight", "is_heldout", "ExpertReplay", "ExpertLearner", "ExpertActor",
           "ExpertGame", "expert_loss", "obs_arrays", "is_policy_game"]

# a residual above this (network.residual_scale units; 1e-6 of the program time at the default
# scale) counts as positive: the search found a strictly better completion below the position
POSITIVE_RESIDUAL = 1e-3


def position_weight(residual: np.ndarray, positive_weight: float) -> np.ndarray:
    """Sampling weight of positions: ``positive_weight`` where the residual is positive
    (above :data:`POSITIVE_RESIDUAL`), else 1."""
    return np.where(np.asarray(residual, np.float64) > POSITIVE_RESIDUAL, float(positive_weight), 1.0)


def obs_arrays(capacity: int, spec: ObsSpec, memory_dtype=np.float16) -> dict[str, np.ndarray]:
    """Zeroed observation arrays for ``capacity`` positions (one row each), the memory image in
    ``memory_dtype``."""
    c = capacity
    return {
        "buffer": np.zeros((c, spec.buffer_dim), np.float32),
        "candidates": np.zeros((c, spec.k * spec.candidate_dim), np.float32),
        "next": np.zeros((c, spec.n_next * spec.next_dim), np.float32),
        "memory": np.zeros((c, spec.memory_dim), memory_dtype),
        "progress": np.zeros((c, spec.progress_dim), np.float32),
        "action_mask": np.zeros((c, spec.num_actions), np.int8),
    }


class ExpertReplay:
    """A ring buffer of version-2 training positions (:class:`~.simsearch.ExpertRecord`), drawn
    with probability proportional to :func:`position_weight` (no importance correction: the
    positions where the search found something are meant to count more)."""

    def __init__(self, capacity: int, spec: ObsSpec, *, positive_weight: float, memory_dtype=np.float16):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.spec = spec
        self.positive_weight = float(positive_weight)
        c, a = self.capacity, spec.num_actions
        self.obs = obs_arrays(c, spec, memory_dtype)
        self.legal = np.zeros((c, a), bool)
        self.policy = np.zeros((c, a), np.float32)
        self.residual = np.zeros(c, np.float32)
        self.advantage = np.full((c, a), np.nan, np.float32)
        self.weight = np.zeros(c, np.float64)   # 0 = empty
        self.pointer = 0
        self.positions_added = 0

    @property
    def size(self) -> int:
        """Positions currently stored."""
        return int(np.count_nonzero(self.weight))

    def add(self, records: list[ExpertRecord]) -> int:
        """Store ``records`` (oldest overwritten first); forced positions (fewer than two legal
        actions) are refused. Returns the number stored."""
        stored = 0
        for r in records:
            if int(np.count_nonzero(r.legal)) < 2:
                continue
            i = self.pointer
            for key in OBS_KEYS:
                self.obs[key][i] = np.asarray(r.obs[key]).reshape(-1)
            self.legal[i] = r.legal
            self.policy[i] = r.policy
            self.residual[i] = r.residual
            self.advantage[i] = r.advantage
            self.weight[i] = position_weight(r.residual, self.positive_weight)
            self.pointer = (i + 1) % self.capacity
            stored += 1
        self.positions_added += stored
        return stored

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """``batch_size`` positions drawn with probability proportional to their weight."""
        cumulative = np.cumsum(self.weight)
        total = cumulative[-1]
        if total <= 0:
            raise ValueError("the replay is empty")
        idx = np.searchsorted(cumulative, rng.random(batch_size) * total, side="right")
        return np.minimum(idx, self.capacity - 1).astype(np.int64)

    def batch(self, idx: np.ndarray) -> dict[str, torch.Tensor]:
        """Tensors of positions ``idx``: the observation keys plus ``legal``, ``policy``,
        ``residual`` and ``advantage``."""
        out = obs_to_tensors({key: self.obs[key][idx].astype(np.float32) for key in OBS_KEYS})
        out["legal"] = torch.from_numpy(self.legal[idx])
        out["policy"] = torch.from_numpy(self.policy[idx])
        out["residual"] = torch.from_numpy(self.residual[idx])
        out["advantage"] = torch.from_numpy(self.advantage[idx])
        return out


def expert_loss(net: MuZeroNet, batch: dict[str, torch.Tensor], config: MuZeroConfig) -> tuple[torch.Tensor, dict]:
    """Mean over the batch of ``CE(policy, improved policy) + residual_loss_weight x
    Huber(residual) + advantage_loss_weight x mean over legal actions of Huber(advantage)``;
    returns the loss and its parts (floats; ``residual_mae``: mean absolute residual error)."""
    t = config.train
    logits, residual, advantage = net.expert(batch)
    legal = batch["legal"]
    logits = logits.masked_fill(~legal, -1e9)
    policy = -(batch["policy"] * F.log_softmax(logits, dim=-1)).sum(-1)
    res = F.huber_loss(residual, batch["residual"], reduction="none")
    target = torch.nan_to_num(batch["advantage"], nan=0.0)
    adv = (F.huber_loss(advantage, target, reduction="none") * legal).sum(-1) / legal.sum(-1).clamp(min=1)
    total = (policy + t.residual_loss_weight * res + t.advantage_loss_weight * adv).mean()
    with torch.no_grad():
        parts = {"loss": float(total), "policy": float(policy.mean()), "residual": float(res.mean()),
                 "advantage": float(adv.mean()),
                 "residual_mae": float((residual - batch["residual"]).abs().mean())}
    return total, parts


def _on(net: MuZeroNet, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``batch`` on the device of ``net``'s parameters (``train.device``)."""
    device = next(net.parameters()).device
    return batch if device.type == "cpu" else {k: v.to(device, non_blocking=True) for k, v in batch.items()}


class ExpertLearner:
    """AdamW on :func:`expert_loss`; :meth:`step` draws a batch and takes one optimiser step."""

    def __init__(self, net: MuZeroNet, config: MuZeroConfig, rng: np.random.Generator):
        if config.network.version < 2:
            raise ValueError("the expert-iteration learner trains version-2 networks (network.version = 2)")
        torch.set_num_threads(1)
        self.net, self.config, self.rng = net, config, rng
        t = config.train
        self.optimizer = torch.optim.AdamW(net.parameters(), lr=t.lr, weight_decay=t.weight_decay)
        self.steps = 0

    def step(self, replay: ExpertReplay) -> dict:
        """One update on a batch of ``train.batch_size`` positions; returns the loss parts."""
        t = self.config.train
        self.net.train()
        batch = _on(self.net, replay.batch(replay.sample(t.batch_size, self.rng)))
        total, parts = expert_loss(self.net, batch, self.config)
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), t.grad_clip)
        self.optimizer.step()
        self.net.eval()
        self.steps += 1
        return parts

    @torch.no_grad()
    def residual_error(self, replay: ExpertReplay, idx: np.ndarray) -> float:
        """Mean absolute residual error of the current network on positions ``idx``."""
        self.net.eval()
        batch = _on(self.net, replay.batch(idx))
        _, residual, _ = self.net.expert(batch)
        return float((residual - batch["residual"]).abs().mean())


@dataclass
class ExpertGame:
    """A finished self-play game (normalised returns: ``1 - time / all-slow time``)."""

    scenario: str
    positions: int      # training positions harvested
    ret: float          # the best completion found
    xla_return: float   # XLA-like's
    heldout: bool = False
    policy: bool = False   # a game of the network's policy (train.label_policy): ret is the policy's


def is_heldout(game: int, fraction: float) -> bool:
    """Whether game ``game`` (from 0) is held out at ``train.heldout_fraction = fraction``:
    ``floor((game + 1) f) > floor(game f)``, every ``1 / f``-th game."""
    return math.floor((game + 1) * fraction) > math.floor(game * fraction)


def is_policy_game(seed: int, game: int, fraction: float) -> bool:
    """Whether labelled game ``game`` of a run seeded ``seed`` is played by the network's policy
    (``train.label_policy = fraction``): ``default_rng([seed, game, 1]).random() < fraction``
    (a generator of its own, so the game's other draws are those of a run without it)."""
    return fraction > 0 and bool(np.random.default_rng([seed, game, 1]).random() < fraction)


class ExpertActor:
    """Plays games of the simulator search one move at a time, harvesting training positions.

    Each game draws its scenario from ``source`` with ``rng``; game ``i`` (from 0) is a held-out
    game (its positions go to the held-out pool, never to the replay) when
    ``floor((i + 1) f) > floor(i f)``, ``f = train.heldout_fraction``: every ``1/f``-th game.
    With ``train.label_fraction > 0`` a game is, with that probability (drawn with ``rng``), a
    labelled game (:func:`~.labels.label_game`, no search), played whole in one :meth:`step`;
    on MallocGame-v1 game ``i`` is the policy's (``model``'s advantage head) when
    :func:`is_policy_game` of ``seed`` says so."""

    def __init__(self, config: MuZeroConfig, source, rng: np.random.Generator, model, seed: int = 0):
        self.config = config
        self.seed = int(seed)
        self.source = source
        self.rng = rng
        self.model = model
        self._make_env = make_env
        self.search: SimulatorSearch | None = None
        self.scenario: Scenario | None = None
        self.heldout = False
        self.label = False
        self.positions = 0
        self.games_started = 0
        self.labelled_games = 0

    def start(self) -> None:
        """Begin a new game."""
        self.scenario, _ = self.source.sample(self.rng)
        t = self.config.train
        self.heldout = is_heldout(self.games_started, t.heldout_fraction)
        self.games_started += 1
        self.positions = 0
        # drawn only when labelled games are on, so that runs without them draw as before
        self.label = t.label_fraction > 0 and self.rng.random() < t.label_fraction
        if self.label:
            return
        env = self._make_env(self.scenario, self.config)
        env.reset(seed=int(self.rng.integers(2**31)))
        self.search = SimulatorSearch(env, self.model, self.config,
                                      num_simulations=self.config.simulator.num_simulations, harvest=True)

    def step(self) -> tuple[list[ExpertRecord], bool, ExpertGame | None]:
        """One move: ``(positions harvested, whether they are held out, the game if it ended)``."""
        if self.search is None:
            self.start()
        if self.label:
            policy = is_policy_game(self.seed, self.games_started - 1, self.config.train.label_policy)
            if self.config.env.game == "v1":
                records, ret, xla_return = label_game_v1(self.scenario, self.config, self.rng,
                                                         network_advantage(self.model) if policy else None)
            else:
                records, ret, xla_return = label_game(self.scenario, self.config, self.rng)
            self.labelled_games += 1
            self.label = False
            return records, self.heldout, ExpertGame(self.scenario.name, len(records), ret, xla_return, self.heldout,
                                                     policy)
        search = self.search
        search.move()
        records, search.records = search.records, []
        self.positions += len(records)
        heldout = self.heldout
        game = None
        if search.root.terminal:
            slow = search.slow
            game = ExpertGame(self.scenario.name, self.positions, 1.0 - search.best_time / slow,
                              1.0 - search.start_time / slow, heldout)
            self.search = None
        return records, heldout, game


def finite_mean(values) -> float:
    """Mean of a list (NaN when empty)."""
    return float(np.mean(values)) if len(values) else math.nan
