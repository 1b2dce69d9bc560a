"""A warm start for MaskablePPO on MallocGame-v1: behaviour cloning of XLA's own moves.

``mallocgym train sb3 --algo maskable_ppo --env v1 --warm-start xla-msa`` plays, before the
first PPO step, ``--warm-start-games`` games with XLA's Memory Space Assignment's choice at
every decision (``MallocGameV1Env.msa_action()``, which played to the end leaves exactly the
``xla-msa`` baseline's plan) on programs drawn as training draws them (the same ``workload``:
the split's programs, or the ``--generator`` mix), and records each position's observation,
action mask, XLA's action and discounted return-to-go (:func:`collect_xla_msa`). Then
:func:`clone` trains the policy by cross-entropy on the masked logits (the log-probability
MaskablePPO gives XLA's action among the legal ones) and the value head on the returns-to-go
(the targets PPO's critic learns, with the run's ``gamma``), for ``--warm-start-epochs``
passes over the positions of all but every :data:`HELDOUT_EVERY`-th game. The games left out
measure the imitation accuracy (how often the deterministic policy, the argmax of the masked
logits, picks XLA's action) on programs the warm start did not train on; the accuracy on the
trained positions is logged beside it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th
from torch.nn import functional as F

from .extractor import greedy_actions

__all__ = ["TEACHERS", "HELDOUT_EVERY", "DEFAULT_GAMES", "DEFAULT_EPOCHS", "Demonstrations", "collect_xla_msa",
           "clone", "accuracy"]

TEACHERS = ("xla-msa",)
HELDOUT_EVERY = 8  # every 8th game (the 8th, 16th, ...; the last one of fewer than 8) scores accuracy only
DEFAULT_GAMES = 64
DEFAULT_EPOCHS = 8
BATCH_SIZE = 256
LEARNING_RATE = 1e-3
MASK_KEY = "action_mask"


@dataclass
class Demonstrations:
    """XLA's games: one row per decision.

    Attributes:
      obs: the observations (every entry but the mask stored as float16: they are in [0, 1]).
      masks: bool ``[N, n_actions]``, the legal actions.
      actions: int64 ``[N]``, XLA's action.
      returns: float32 ``[N]``, the discounted return-to-go from the position (with ``gamma``).
      game: int32 ``[N]``, the game each position comes from.
      scenarios: each game's scenario name.
      speedups: each game's final speedup (xla-msa's).
    """

    obs: dict[str, np.ndarray]
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    game: np.ndarray
    scenarios: list[str]
    speedups: list[float]

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    def heldout(self) -> np.ndarray:
        """bool ``[N]``: positions of the held-out games (every :data:`HELDOUT_EVERY`-th, and the
        last game when there are fewer than :data:`HELDOUT_EVERY`; none with one game)."""
        games = len(self.scenarios)
        held = {g for g in range(games) if (g + 1) % HELDOUT_EVERY == 0}
        if not held and games >= 2:
            held = {games - 1}
        return np.isin(self.game, sorted(held))

    def batch(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The observations of ``rows`` as float32 arrays (the mask as the env gives it, int8)."""
        return {key: (value[rows] if key == MASK_KEY else value[rows].astype(np.float32))
                for key, value in self.obs.items()}


def collect_xla_msa(env_kwargs: dict[str, Any], games: int, *, seed: int, gamma: float) -> Demonstrations:
    """Play ``games`` MallocGame-v1 games with ``msa_action()`` at every decision, in one env
    built from ``env_kwargs`` (the training env's arguments, its ``workload`` included), seeded
    with ``seed`` at the first reset; a program whose every use is forced has no decision and
    adds no position (it still counts as a game)."""
    from ...env.v1 import MallocGameV1Env

    if not isinstance(games, int) or isinstance(games, bool) or games < 1:
        raise ValueError(f"the warm start needs at least one game, got {games!r}")
    env = MallocGameV1Env(**env_kwargs)
    columns: dict[str, list[np.ndarray]] = {}
    actions: list[int] = []
    returns: list[float] = []
    owner: list[int] = []
    scenarios: list[str] = []
    speedups: list[float] = []
    for g in range(games):
        obs, info = env.reset(seed=seed if g == 0 else None)
        scenarios.append(env.scenario.name)
        done = env.current_segment < 0
        rewards: list[float] = []
        while not done:
            action = env.msa_action()
            if not obs[MASK_KEY][action]:
                raise RuntimeError(f"{env.scenario.name}: XLA's action {action} is masked at segment "
                                   f"{env.current_segment}")
            for key, value in obs.items():
                columns.setdefault(key, []).append(value if key == MASK_KEY else value.astype(np.float16))
            actions.append(action)
            owner.append(g)
            obs, reward, done, _, info = env.step(action)
            rewards.append(float(reward))
        speedups.append(float(info["speedup"]) if "speedup" in info else 1.0)
        togo, tail = np.empty(len(rewards), np.float32), 0.0
        for i in range(len(rewards) - 1, -1, -1):
            tail = rewards[i] + gamma * tail
            togo[i] = tail
        returns.extend(togo.tolist())
    env.close()
    if not actions:
        raise ValueError(f"the warm start's {games} game(s) ({', '.join(sorted(set(scenarios)))}) have no decision "
                         f"to imitate (every use forced)")
    obs_arrays = {key: np.stack(values) for key, values in columns.items()}
    return Demonstrations(obs=obs_arrays, masks=obs_arrays[MASK_KEY].astype(bool),
                          actions=np.asarray(actions, np.int64), returns=np.asarray(returns, np.float32),
                          game=np.asarray(owner, np.int32), scenarios=scenarios, speedups=speedups)


def accuracy(policy, demos: Demonstrations, rows: np.ndarray, chunk: int = 1024) -> float | None:
    """The share of ``rows`` where the deterministic policy (:func:`greedy_actions` among the
    legal actions) picks XLA's action; ``None`` for no rows."""
    if rows.size == 0:
        return None
    training = policy.training
    policy.set_training_mode(False)
    try:
        hits = 0
        for start in range(0, rows.size, chunk):
            part = rows[start:start + chunk]
            chosen = greedy_actions(policy, demos.batch(part), demos.masks[part])
            hits += int((chosen == demos.actions[part]).sum())
    finally:
        policy.set_training_mode(training)
    return hits / rows.size


def clone(model, demos: Demonstrations, *, epochs: int, value_weight: float, max_grad_norm: float, seed: int,
          batch_size: int = BATCH_SIZE, lr: float = LEARNING_RATE, log=None) -> dict[str, Any]:
    """Train ``model``'s policy (a MaskablePPO policy) on ``demos``' trained positions for
    ``epochs`` passes: the loss is ``-log pi(a_xla | s)`` under the action mask plus
    ``value_weight`` times the squared error of the value head against the return-to-go; Adam
    (``lr``), gradients clipped to ``max_grad_norm``. ``log(record)``, when given, gets one
    record per epoch (epoch, loss, policy loss, value loss, train and held-out accuracy; epoch 0
    is the untrained policy). Returns the summary written to ``train.json``."""
    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
        raise ValueError(f"the warm start needs at least one epoch, got {epochs!r}")
    policy = model.policy
    held = demos.heldout()
    train_rows, held_rows = np.flatnonzero(~held), np.flatnonzero(held)
    if train_rows.size == 0:
        raise ValueError(f"the warm start's trained games ({len(demos.scenarios)} games, every "
                         f"{HELDOUT_EVERY}th held out) have no decision to imitate; play more games")
    rng = np.random.default_rng(seed)
    optimizer = th.optim.Adam(policy.parameters(), lr=lr)
    t0 = time.perf_counter()
    history = []

    def record(epoch: int, losses: list[tuple[float, float, float]]) -> dict[str, Any]:
        mean = np.mean(losses, axis=0) if losses else (None, None, None)
        rec = {"epoch": epoch, "loss": _num(mean[0]), "policy_loss": _num(mean[1]), "value_loss": _num(mean[2]),
               "train_accuracy": accuracy(policy, demos, train_rows),
               "heldout_accuracy": accuracy(policy, demos, held_rows),
               "seconds": time.perf_counter() - t0}
        history.append(rec)
        if log is not None:
            log(rec)
        return rec

    record(0, [])
    policy.set_training_mode(True)
    for epoch in range(1, epochs + 1):
        order = train_rows[rng.permutation(train_rows.size)]
        losses = []
        for start in range(0, order.size, batch_size):
            rows = np.sort(order[start:start + batch_size])
            obs = {key: th.as_tensor(value) for key, value in demos.batch(rows).items()}
            obs[MASK_KEY] = obs[MASK_KEY].float()
            actions = th.as_tensor(demos.actions[rows])
            values, log_prob, _ = policy.evaluate_actions(obs, actions, action_masks=demos.masks[rows])
            policy_loss = -log_prob.mean()
            value_loss = F.mse_loss(values.flatten(), th.as_tensor(demos.returns[rows]))
            loss = policy_loss + value_weight * value_loss
            optimizer.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
            optimizer.step()
            losses.append((loss.item(), policy_loss.item(), value_loss.item()))
        record(epoch, losses)
    policy.set_training_mode(False)
    last = history[-1]
    return {"teacher": "xla-msa", "games": len(demos.scenarios), "positions": len(demos),
            "train_positions": int(train_rows.size), "heldout_positions": int(held_rows.size),
            "heldout_games": sorted({int(g) for g in demos.game[held_rows]}), "epochs": epochs,
            "batch_size": batch_size, "learning_rate": lr, "value_weight": value_weight,
            "train_accuracy": last["train_accuracy"], "heldout_accuracy": last["heldout_accuracy"],
            "initial_heldout_accuracy": history[0]["heldout_accuracy"],
            "teacher_geomean_speedup": float(np.exp(np.mean(np.log(demos.speedups)))),
            "seconds": time.perf_counter() - t0}


def _num(value) -> float | None:
    return None if value is None else float(value)
