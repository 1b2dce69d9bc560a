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
simulator mode (``muzero-sim:DIR``) or as the policy alone (``muzero-pol:DIR``), unless
``train.dynamics_weight > 0`` (issue 18, step 6, the learned-dynamics mode, the paper's MuZero)
also trained them, from the labelled games' played trajectories (:class:`TrajectoryReplay`,
:func:`dynamics_loss`); such a checkpoint plays ``muzero:DIR``, the search over the learned model
(:mod:`.mcts`), in the frame ``search.frame`` (:class:`AdvantageModel` for ``"advantage"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ...scenarios import Scenario
from .config import MuZeroConfig
from .learner import Learner, _ce, consistency_gap, consistency_targets
from .mcts import NetworkModel
from .networks import OBS_KEYS, MuZeroNet, ObsSpec, obs_to_tensors, scale_gradient
from .game import make_env
from .labels import ExpertRecord, label_game
from .replay import GameRecord, Replay, obs_arrays
from .simsearch import SimulatorSearch
from .v1 import label_game_v1

__all__ = ["POSITIVE_RESIDUAL", "position_weight", "is_heldout", "ExpertReplay", "ExpertLearner", "ExpertActor",
           "ExpertGame", "expert_loss", "TrajectoryReplay", "dynamics_loss", "AdvantageModel"]

# a residual above this (network.residual_scale units; 1e-6 of the program time at the default
# scale) counts as positive: the search found a strictly better completion below the position
POSITIVE_RESIDUAL = 1e-3


def position_weight(residual: np.ndarray, positive_weight: float) -> np.ndarray:
    """Sampling weight of positions: ``positive_weight`` where the residual is positive
    (above :data:`POSITIVE_RESIDUAL`), else 1."""
    return np.where(np.asarray(residual, np.float64) > POSITIVE_RESIDUAL, float(positive_weight), 1.0)


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


class TrajectoryReplay(Replay):
    """The labelled games' played trajectories (:class:`~.labels.LabelledTrajectory`), stored
    back to back as :class:`~.replay.Replay` stores games (uniform sampling: every priority
    equal), with the exact targets the unroll reads (:meth:`targets` of :class:`Replay`):

    - reward: the exact step reward x ``network.reward_scale``;
    - value: the played game's return-to-go from the position x ``reward_scale`` (stored as the
      "search value", so that the one-step target ``r_t + v_{t+1}`` is exactly it);
    - policy: the label policy where the position is labelled (:attr:`labelled`), else zeros;

    and per position :attr:`legal`, :attr:`labelled`, :attr:`residual` and :attr:`advantage`
    (:class:`~.labels.LabelledTrajectory`'s).
    """

    def __init__(self, capacity: int, spec: ObsSpec, *, reward_scale: float, memory_dtype=np.float16):
        super().__init__(capacity, spec, memory_dtype=memory_dtype)
        c, a = self.capacity, spec.num_actions
        self.reward_scale = float(reward_scale)
        self.legal = np.zeros((c, a), bool)
        self.labelled = np.zeros(c, bool)
        self.residual = np.full(c, np.nan, np.float32)
        self.advantage = np.full((c, a), np.nan, np.float32)

    def add_trajectory(self, trajectory) -> None:
        """Store one :class:`~.labels.LabelledTrajectory` (an old game it overwrites is dropped)."""
        n = len(trajectory)
        if n == 0:
            return
        scale = self.reward_scale
        super().add(GameRecord(trajectory.obs, trajectory.actions, trajectory.rewards * scale,
                               trajectory.returns_to_go() * scale, trajectory.policy),
                    priorities=np.zeros(n))
        lo, hi = self.pointer - n, self.pointer
        self.legal[lo:hi] = trajectory.legal
        self.labelled[lo:hi] = trajectory.labelled
        self.residual[lo:hi] = trajectory.residual
        self.advantage[lo:hi] = trajectory.advantage

    def unroll_targets(self, idx: np.ndarray, unroll_steps: int) -> dict[str, np.ndarray]:
        """The targets of samples ``idx [B]`` unrolled ``K = unroll_steps`` moves along the moves
        played: :class:`~.replay.Targets`' ``actions [B, K]``, ``values``, ``rewards``,
        ``policies``, ``mask`` (inside the game), ``positions`` (``[B, K + 1]``, ``rewards[:, 0]``
        unused; past the game's end the value and reward are 0 and the action is skip, MuZero's
        absorbing state), plus ``labelled [B, K + 1]`` (inside and labelled), ``residual
        [B, K + 1]`` and ``advantage [B, K + 1, A]`` (NaN where unknown or past the end)."""
        tg = self.targets(idx, unroll_steps=unroll_steps, td_steps=1, discount=1.0)
        pos, inside = tg.positions, tg.mask
        out = {name: getattr(tg, name) for name in ("actions", "values", "rewards", "policies", "mask", "positions")}
        out["labelled"] = self.labelled[pos] & inside
        out["residual"] = np.where(out["labelled"], self.residual[pos], np.nan).astype(np.float32)
        out["advantage"] = np.where(inside[..., None], self.advantage[pos], np.nan).astype(np.float32)
        return out


def dynamics_loss(net: MuZeroNet, replay: TrajectoryReplay, idx: np.ndarray,
                  config: MuZeroConfig) -> tuple[torch.Tensor, dict]:
    """MuZero's unroll loss on labelled trajectories (issue 18, step 6): from the encoding of
    position ``t`` the dynamics are unrolled ``K = train.unroll_steps`` moves along the moves
    actually played, and at each step ``k = 0..K`` (mean over the ``K + 1`` steps, batch mean):

    - ``k >= 1``: CE of the reward head on the exact step reward (two-hot on the reward
      support, ``reward_scale`` units);
    - ``value_loss_weight`` x CE of the value head on the **return-to-go of the played game**
      (``reward_scale`` units). Why this target: it is defined and exact at every position of
      the trajectory, labelled or not (XLA-like's completion plus the residual is known only
      at the ~48 labelled positions of a game), and it is consistent with the rewards along
      the unroll (``z_t = r_t + z_{t+1}`` exactly), which is what a search adding predicted
      rewards and values needs. Its scale is issue 18's finding 3 (50-75 units where siblings
      differ by hundredths), so it is not the only frame: see the advantage below;
    - CE of the policy head on the label policy where the position is labelled (logits not
      masked: interior nodes of the learned search allow every action);
    - ``advantage_loss_weight`` x Huber of the advantage head, read from the (unrolled)
      state, on the exact advantages known there (every legal move's at a labelled position,
      the played move's, 0, elsewhere), and ``residual_loss_weight`` x Huber of the residual
      head on the label residual where labelled: the frame ``search.frame = "advantage"``
      (``residual_scale`` units, where siblings differ);
    - ``consistency_weight`` x the consistency term of :class:`~.learner.Learner` (the unrolled
      state against the encoding of the real observation ``k`` moves later).

    The gradient into each dynamics step is halved (:func:`~.networks.scale_gradient`).
    Returns the loss and its parts (floats, ``dyn_`` names; ``dyn_reward_mae`` and
    ``dyn_advantage_mae``: mean absolute errors of the decoded reward, ``reward_scale`` units,
    and of the advantage, ``residual_scale`` units, at the unrolled steps ``k >= 1``)."""
    t = config.train
    K = t.unroll_steps
    tg = replay.unroll_targets(idx, K)
    vs, rs = net.value_support, net.reward_support
    z, r = torch.from_numpy(tg["values"]), torch.from_numpy(tg["rewards"])
    pi = torch.from_numpy(tg["policies"])
    labelled = torch.from_numpy(tg["labelled"].astype(np.float32))
    inside = torch.from_numpy(tg["mask"].astype(np.float32))
    known = np.isfinite(tg["advantage"])
    adv_target = torch.from_numpy(np.nan_to_num(tg["advantage"], nan=0.0))
    adv_known = torch.from_numpy(known.astype(np.float32))
    res_target = torch.from_numpy(np.nan_to_num(tg["residual"], nan=0.0))
    actions = torch.from_numpy(tg["actions"])
    out = net.initial_inference(obs_to_tensors(replay.observations(idx)))
    latent, cands, value_logits, policy_logits = out.latent, out.cands, out.value_logits, out.policy_logits
    later = consistency_targets(net, replay, tg["positions"]) if t.consistency_weight > 0 else None
    zero = torch.zeros(len(idx))
    value, reward, policy, adv, res, consistency = zero, zero, zero, zero, zero, zero
    reward_err, adv_err, adv_count = 0.0, 0.0, 0.0
    for k in range(K + 1):
        if k > 0:
            step = net.recurrent_inference(scale_gradient(latent, 0.5), scale_gradient(cands, 0.5), actions[:, k - 1])
            reward = reward + _ce(step.reward_logits, rs.encode(r[:, k]))
            if later is not None:
                consistency = consistency + inside[:, k] * consistency_gap(step, later, k)
            latent, cands, value_logits, policy_logits = step.latent, step.cands, step.value_logits, step.policy_logits
            with torch.no_grad():
                reward_err += float((rs.decode(step.reward_logits) - r[:, k]).abs().mean())
        value = value + _ce(value_logits, vs.encode(z[:, k]))
        policy = policy + labelled[:, k] * _ce(policy_logits, pi[:, k])
        advantage, residual = net.heads(latent, cands)
        a_known = adv_known[:, k]
        adv = adv + (F.huber_loss(advantage, adv_target[:, k], reduction="none") * a_known).sum(-1) \
            / a_known.sum(-1).clamp(min=1.0)
        res = res + labelled[:, k] * F.huber_loss(residual, res_target[:, k], reduction="none")
        if k > 0:
            with torch.no_grad():
                adv_err += float(((advantage - adv_target[:, k]).abs() * a_known).sum())
                adv_count += float(a_known.sum())
    per_sample = (t.value_loss_weight * value + reward + policy + t.advantage_loss_weight * adv
                  + t.residual_loss_weight * res + t.consistency_weight * consistency) / (K + 1)
    total = per_sample.mean()
    with torch.no_grad():
        parts = {"dyn_loss": float(total), "dyn_value": float(value.mean()) / (K + 1),
                 "dyn_reward": float(reward.mean()) / max(K, 1), "dyn_policy": float(policy.mean()) / (K + 1),
                 "dyn_advantage": float(adv.mean()) / (K + 1), "dyn_residual": float(res.mean()) / (K + 1),
                 "dyn_consistency": float(consistency.mean()) / max(K, 1),
                 "dyn_reward_mae": reward_err / max(K, 1),
                 "dyn_advantage_mae": adv_err / adv_count if adv_count else math.nan}
    return total, parts


class AdvantageModel(NetworkModel):
    """A dynamics-trained version-2 network as the learned search's model in the frame
    ``search.frame = "advantage"`` (``residual_scale`` units): a node's value is the residual
    head's prediction (the best gain over XLA-like's completion from there) and a move's reward
    the advantage head's prediction for it at the parent (its gain over XLA-like's move), both
    read from the (unrolled) state (:meth:`~.networks.MuZeroNet.heads`). A child's Q, ``advantage(s, a) +
    residual(s')``, is then the gain of playing ``a`` over playing XLA-like's move, on the scale
    where siblings differ, where the return frame adds a 50-75-unit value to a step reward."""

    @torch.no_grad()
    def root(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, tuple]:
        """``(residual [B], logits [B, A], embedding)`` of a batch of observations."""
        out = self.net.initial_inference(obs_to_tensors(obs))
        _, residual = self.net.heads(out.latent, out.cands)
        return residual.double().numpy(), out.policy_logits.double().numpy(), (out.latent, out.cands)

    @torch.no_grad()
    def recurrent(self, embedding: tuple, actions: np.ndarray):
        """``(advantage of the move at the parent [B], residual of the child [B], logits [B, A],
        child embedding)``."""
        latent, cands = embedding
        a = torch.from_numpy(np.asarray(actions, np.int64))
        advantage, _ = self.net.heads(latent, cands)
        out = self.net.recurrent_inference(latent, cands, a)
        _, residual = self.net.heads(out.latent, out.cands)
        reward = advantage[torch.arange(len(a)), a]
        return (reward.double().numpy(), residual.double().numpy(), out.policy_logits.double().numpy(),
                (out.latent, out.cands))


def _on(net: MuZeroNet, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``batch`` on the device of ``net``'s parameters (``train.device``)."""
    device = next(net.parameters()).device
    return batch if device.type == "cpu" else {k: v.to(device, non_blocking=True) for k, v in batch.items()}


class ExpertLearner(Learner):
    """AdamW on :func:`expert_loss` (plus ``train.dynamics_weight`` x :func:`dynamics_loss` when
    given trajectories); :meth:`step` draws a batch and takes one optimiser step."""

    def __init__(self, net: MuZeroNet, config: MuZeroConfig, rng: np.random.Generator):
        if config.network.version < 2:
            raise ValueError("the expert-iteration learner trains version-2 networks (network.version = 2)")
        super().__init__(net, config, rng)

    def step(self, replay: ExpertReplay, trajectories: TrajectoryReplay | None = None) -> dict:
        """One update on a batch of ``train.batch_size`` positions; returns the loss parts.
        With ``train.dynamics_weight > 0`` and a non-empty ``trajectories``, the update adds
        that weight x :func:`dynamics_loss` on ``batch_size`` trajectory positions drawn
        uniformly (without, the dynamics are not updated)."""
        t = self.config.train
        self.net.train()
        batch = _on(self.net, replay.batch(replay.sample(t.batch_size, self.rng)))
        total, parts = expert_loss(self.net, batch, self.config)
        if t.dynamics_weight > 0 and trajectories is not None and trajectories.size:
            idx, _ = trajectories.sample(t.batch_size, self.rng)
            dyn, dyn_parts = dynamics_loss(self.net, trajectories, idx, self.config)
            total = total + t.dynamics_weight * dyn
            parts.update(dyn_parts)
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
    trajectory: object = None   # a labelled game's played trajectory (.labels.LabelledTrajectory) when kept


def is_heldout(game: int, fraction: float) -> bool:
    """Whether game ``game`` (from 0) is held out at ``train.heldout_fraction = fraction``:
    ``floor((game + 1) f) > floor(game f)``, every ``1 / f``-th game."""
    return math.floor((game + 1) * fraction) > math.floor(game * fraction)


class ExpertActor:
    """Plays games of the simulator search one move at a time, harvesting training positions.

    Each game draws its scenario from ``source`` with ``rng``; game ``i`` (from 0) is a held-out
    game (its positions go to the held-out pool, never to the replay) when
    ``floor((i + 1) f) > floor(i f)``, ``f = train.heldout_fraction``: every ``1/f``-th game.
    With ``train.label_fraction > 0`` a game is, with that probability (drawn with ``rng``), a
    labelled game (:func:`~.labels.label_game`, no search), played whole in one :meth:`step`."""

    def __init__(self, config: MuZeroConfig, source, rng: np.random.Generator, model):
        self.config = config
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
            # train.dynamics_weight > 0 (v0): the played trajectory too (the same draws from rng)
            keep = self.config.train.dynamics_weight > 0
            if self.config.env.game == "v1":
                records, ret, xla_return = label_game_v1(self.scenario, self.config, self.rng)
                trajectory = []
            else:
                records, ret, xla_return, *trajectory = label_game(self.scenario, self.config, self.rng,
                                                                   trajectory=keep)
            self.labelled_games += 1
            self.label = False
            return records, self.heldout, ExpertGame(self.scenario.name, len(records), ret, xla_return, self.heldout,
                                                     trajectory[0] if keep else None)
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
