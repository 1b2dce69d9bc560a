"""The learner: MuZero's loss over a K-step unroll, one optimiser step per call.

Per sample (importance-weighted, prioritised replay):

    value_loss_weight * CE(value_0, z_0) + CE(policy_0, pi_0)
    + 1/K sum_k [ CE(reward_k, r_k) + value_loss_weight * CE(value_k, z_k)
                  + mask_k * (CE(policy_k, pi_k) + consistency_weight * consistency_k) ]
    + action_value_weight * mean_{a in S} [ CE(reward(s_0, a), r_a) + value_loss_weight * CE(value(s_0, a), v_a) ]

with two-hot targets on the h-scaled supports, the gradient into each dynamics step halved,
and ``consistency_k`` = 1 - cosine similarity between the unrolled latent (and candidate
embeddings) and the encoding of the real observation ``k`` steps later (stop-gradient). The last
term (``train.action_value_weight > 0``) applies at teacher positions only: ``S`` is up to
``train.action_value_actions`` legal actions drawn at random and ``r_a`` / ``v_a`` the teacher's
exact per-action reward and XLA-like continuation value
(:func:`~mallocgym.agents.muzero.selfplay.action_value_targets`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .config import MuZeroConfig
from .mcts import NetworkModel, play
from .networks import MuZeroNet, obs_to_tensors, scale_gradient
from .replay import Replay

__all__ = ["Learner", "LossParts", "sample_action_pairs"]


@dataclass
class LossParts:
    """Mean loss terms of one batch (floats) and the new priorities ``[B]``."""

    total: float
    value: float
    reward: float
    policy: float
    consistency: float
    priorities: np.ndarray
    action_value: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {"loss": self.total, "value": self.value, "reward": self.reward, "policy": self.policy,
                "consistency": self.consistency, "action_value": self.action_value}


def _ce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return -(target * F.log_softmax(logits, dim=-1)).sum(-1)


def sample_action_pairs(known: np.ndarray, per_sample: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, actions)``: for each row of ``known`` (``bool[B, A]``), up to ``per_sample`` of
    its True columns drawn uniformly without replacement."""
    keys = np.where(known, rng.random(known.shape), np.inf)
    order = np.argsort(keys, axis=1)[:, :per_sample]
    rows = np.repeat(np.arange(known.shape[0]), order.shape[1])
    actions = order.reshape(-1)
    keep = known[rows, actions]
    return rows[keep], actions[keep]


def _cosine_gap(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 1.0 - F.cosine_similarity(x, y, dim=-1, eps=1e-6)


def consistency_targets(net: MuZeroNet, replay: Replay, positions: np.ndarray) -> tuple:
    """The consistency term's targets for an unroll along ``positions [B, K + 1]`` of ``replay``:
    ``(latent [B, K, H], candidate rows [B, K, C, D], present [B, K, C])``, the encodings (no
    gradient) of the real observations 1..K moves after each sample and which of their
    candidate rows are filled."""
    b, k = positions.shape[0], positions.shape[1] - 1
    later = replay.observations(positions[:, 1:].reshape(-1))
    with torch.no_grad():
        tl, tc = net.represent(obs_to_tensors(later))
    return (tl.reshape(b, k, -1), tc.reshape(b, k, *tc.shape[1:]),
            torch.from_numpy(later["candidates"].reshape(b, k, net.spec.k, -1)[..., 0] > 0).float())


def consistency_gap(step, targets: tuple, k: int) -> torch.Tensor:
    """``[B]``: the unrolled state ``step`` (dynamics step ``k >= 1``) against the encoding of
    the real observation ``k`` moves later (:func:`consistency_targets`): the latent's cosine
    gap plus the mean gap over the filled candidate rows."""
    tl, tc, present = targets[0][:, k - 1], targets[1][:, k - 1], targets[2][:, k - 1]
    slots = (_cosine_gap(step.cands, tc) * present).sum(-1) / present.sum(-1).clamp(min=1.0)
    return _cosine_gap(step.latent, tl) + slots


class Learner:
    """Owns the optimiser; :meth:`step` samples a batch from the replay and updates the net."""

    def __init__(self, net: MuZeroNet, config: MuZeroConfig, rng: np.random.Generator):
        torch.set_num_threads(1)
        self.net = net
        self.config = config
        self.rng = rng
        t = config.train
        self.optimizer = torch.optim.AdamW(net.parameters(), lr=t.lr, weight_decay=t.weight_decay)
        self.steps = 0

    def _reanalyse(self, replay: Replay, idx: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """Fresh bootstrap values for every sample and fresh search policies for a fraction."""
        t, s = self.config.train, self.config.search
        k = np.arange(t.unroll_steps + 1)
        pos = idx[:, None] + k[None, :]
        end = replay.end[idx][:, None]
        boot = pos + t.td_steps
        need = np.unique(boot[boot < end])
        values = replay.values.astype(np.float64).copy()
        model = NetworkModel(self.net)
        if need.size:
            v, _, _ = model.root(replay.observations(need))
            values[need] = v
        policies: dict[int, np.ndarray] = {}
        n_fresh = int(round(t.reanalyse_fraction * len(idx)))
        if n_fresh:
            fresh = pos[:n_fresh][pos[:n_fresh] < end[:n_fresh]]
            fresh = np.unique(fresh)
            result = play(model, replay.observations(fresh), config=s, num_simulations=s.num_simulations)
            policies = {int(p): result.policy[i] for i, p in enumerate(fresh)}
        return values, policies

    def loss(self, replay: Replay, idx: np.ndarray, weights: np.ndarray) -> tuple[torch.Tensor, LossParts]:
        """The weighted loss of samples ``idx`` and its parts."""
        cfg, t = self.config, self.config.train
        net = self.net
        boot_values, fresh = (None, {})
        if t.reanalyse_fraction > 0:
            with torch.no_grad():
                net.eval()
                boot_values, fresh = self._reanalyse(replay, idx)
                net.train()
        tg = replay.targets(idx, unroll_steps=t.unroll_steps, td_steps=t.td_steps,
                            discount=cfg.search.discount, values=boot_values)
        policies = tg.policies
        if fresh:
            policies = policies.copy()
            for (b, k) in zip(*np.nonzero(tg.mask)):
                p = int(tg.positions[b, k])
                if p in fresh:
                    policies[b, k] = fresh[p]
        pi = torch.from_numpy(policies)
        z = torch.from_numpy(tg.values)
        r = torch.from_numpy(tg.rewards)
        mask = torch.from_numpy(tg.mask.astype(np.float32))
        actions = torch.from_numpy(tg.actions)
        vs, rs = net.value_support, net.reward_support
        K = t.unroll_steps

        out = net.initial_inference(obs_to_tensors(replay.observations(idx)))
        value_loss = _ce(out.value_logits, vs.encode(z[:, 0]))
        policy_loss = _ce(out.policy_logits, pi[:, 0])
        reward_loss = torch.zeros_like(value_loss)
        consistency = torch.zeros_like(value_loss)
        with torch.no_grad():
            priorities = (vs.decode(out.value_logits) - z[:, 0]).abs().numpy()
        targets = consistency_targets(net, replay, tg.positions) if t.consistency_weight > 0 else None
        action_value = torch.zeros_like(value_loss)
        if t.action_value_weight > 0:
            action_value = self._action_value_loss(replay, idx, out.latent, out.cands)
        latent, cands = out.latent, out.cands
        for k in range(1, K + 1):
            latent, cands = scale_gradient(latent, 0.5), scale_gradient(cands, 0.5)
            step = net.recurrent_inference(latent, cands, actions[:, k - 1])
            m = mask[:, k]
            reward_loss = reward_loss + _ce(step.reward_logits, rs.encode(r[:, k])) / K
            value_loss = value_loss + _ce(step.value_logits, vs.encode(z[:, k])) / K
            policy_loss = policy_loss + m * _ce(step.policy_logits, pi[:, k]) / K
            if targets is not None:
                consistency = consistency + m * consistency_gap(step, targets, k) / K
            latent, cands = step.latent, step.cands
        per_sample = (t.value_loss_weight * value_loss + policy_loss + reward_loss
                      + t.consistency_weight * consistency + t.action_value_weight * action_value)
        w = torch.from_numpy(weights)
        total = (w * per_sample).mean()
        with torch.no_grad():
            parts = LossParts(float(total), float(value_loss.mean()), float(reward_loss.mean()),
                              float(policy_loss.mean()), float(consistency.mean()), priorities,
                              float(action_value.mean()))
        return total, parts

    def _action_value_loss(self, replay: Replay, idx: np.ndarray, latent: torch.Tensor,
                           cands: torch.Tensor) -> torch.Tensor:
        """Per sample ``[B]``: the mean over drawn actions of the reward CE plus
        ``value_loss_weight`` times the value CE of one dynamics step (0 where no per-action
        targets are stored)."""
        t, net = self.config.train, self.net
        rewards, values = replay.action_rewards[idx], replay.action_values[idx]
        rows, acts = sample_action_pairs(np.isfinite(values), t.action_value_actions, self.rng)
        loss = torch.zeros(len(idx), dtype=latent.dtype)
        if rows.size == 0:
            return loss
        r_rows = torch.from_numpy(rows)
        step = net.recurrent_inference(scale_gradient(latent[r_rows], 0.5), scale_gradient(cands[r_rows], 0.5),
                                       torch.from_numpy(acts))
        pair = (_ce(step.reward_logits, net.reward_support.encode(torch.from_numpy(rewards[rows, acts])))
                + t.value_loss_weight * _ce(step.value_logits, net.value_support.encode(torch.from_numpy(values[rows, acts]))))
        counts = np.bincount(rows, minlength=len(idx))
        loss = loss.index_add(0, r_rows, pair)
        return loss / torch.from_numpy(np.maximum(counts, 1)).to(loss.dtype)

    def step(self, replay: Replay) -> LossParts:
        """Sample a batch, take one optimiser step, update the sampled priorities."""
        t = self.config.train
        self.net.train()
        idx, weights = replay.sample(t.batch_size, self.rng)
        total, parts = self.loss(replay, idx, weights)
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), t.grad_clip)
        self.optimizer.step()
        self.net.eval()
        replay.update_priorities(idx, parts.priorities)
        self.steps += 1
        return parts
