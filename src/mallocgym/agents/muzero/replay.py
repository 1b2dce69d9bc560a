"""Prioritised replay of self-play games, with n-step value targets and K-step unroll targets.

Games are stored back to back in flat ring arrays of ``capacity`` positions (a game never wraps:
when it does not fit before the end, writing restarts at 0). Writing over part of an old game
drops the whole old game. Sampling draws positions with probability ``p_i ** alpha / sum`` and
returns importance weights ``(N * P(i)) ** -beta / max``.

Targets for a position ``t`` of a game of length ``L`` (rewards ``r``, search values ``v``):

    z_t = sum_{j < n, t + j < L} gamma^j r_{t+j}  +  [t + n < L] gamma^n v_{t+n}

and for unroll step ``k = 0..K``: value ``z_{t+k}`` (0 past the end), reward ``r_{t+k-1}``
(``k >= 1``; 0 past the end), policy ``pi_{t+k}`` (masked past the end), action ``a_{t+k}``
(skip past the end).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .networks import OBS_KEYS, ObsSpec

__all__ = ["GameRecord", "Replay", "Targets", "nstep_returns"]

PRIORITY_EPS = 1e-3


def nstep_returns(rewards: np.ndarray, values: np.ndarray, td_steps: int, discount: float) -> np.ndarray:
    """``z_t`` for every position of one game (see the module docstring)."""
    rewards = np.asarray(rewards, np.float64)
    values = np.asarray(values, np.float64)
    n_pos = len(rewards)
    z = np.zeros(n_pos)
    for t in range(n_pos):
        for j in range(td_steps):
            if t + j >= n_pos:
                break
            z[t] += discount ** j * rewards[t + j]
        if t + td_steps < n_pos:
            z[t] += discount ** td_steps * values[t + td_steps]
    return z


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


@dataclass
class GameRecord:
    """One finished self-play game: per position ``t`` the observation (batched arrays
    ``{key: [L, ...]}``), the action taken, the (scaled) reward received, the search value and
    the search policy; optionally, per position and action, the (scaled) reward of every action
    and the value of the position it leads to (``[L, A]``, NaN where unknown: the teacher's
    per-action targets, :func:`~mallocgym.agents.muzero.selfplay.action_value_targets`)."""

    obs: dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    values: np.ndarray
    policies: np.ndarray
    action_rewards: np.ndarray | None = None
    action_values: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.actions)


@dataclass
class Targets:
    """Training targets for a batch of ``B`` samples unrolled ``K`` steps.

    Attributes:
      actions: ``int64[B, K]`` actions to unroll with.
      values: ``float32[B, K + 1]`` value targets (scaled units).
      rewards: ``float32[B, K + 1]`` reward targets (column 0 unused).
      policies: ``float32[B, K + 1, A]``.
      mask: ``bool[B, K + 1]`` unroll step inside the game.
      positions: ``int64[B, K + 1]`` flat replay index of each unroll step (clipped).
    """

    actions: np.ndarray
    values: np.ndarray
    rewards: np.ndarray
    policies: np.ndarray
    mask: np.ndarray
    positions: np.ndarray


class Replay:
    """A prioritised replay of :class:`GameRecord` positions (see the module docstring)."""

    def __init__(self, capacity: int, spec: ObsSpec, *, alpha: float = 0.6, beta: float = 0.4,
                 memory_dtype=np.float16):
        self.capacity = int(capacity)
        self.spec = spec
        self.alpha = float(alpha)
        self.beta = float(beta)
        c, a = self.capacity, spec.num_actions
        self.obs = obs_arrays(c, spec, memory_dtype)
        self.actions = np.full(c, a - 1, np.int64)
        self.rewards = np.zeros(c, np.float32)
        self.values = np.zeros(c, np.float32)
        self.policies = np.zeros((c, a), np.float32)
        self.action_rewards = np.full((c, a), np.nan, np.float32)
        self.action_values = np.full((c, a), np.nan, np.float32)
        self.start = np.zeros(c, np.int64)
        self.end = np.zeros(c, np.int64)
        self.weight = np.zeros(c, np.float64)   # priority ** alpha; 0 = empty
        self.max_priority = 1.0
        self.pointer = 0
        self.games_added = 0
        self.positions_added = 0

    @property
    def size(self) -> int:
        """Positions currently stored."""
        return int(np.count_nonzero(self.weight))

    def _drop(self, lo: int, hi: int) -> None:
        """Invalidate every game with a position in ``[lo, hi)``."""
        if hi <= lo:
            return
        live = np.flatnonzero(self.weight[lo:hi]) + lo
        if live.size:
            first, last = int(self.start[live[0]]), int(self.end[live[-1]])
            self.weight[first:last] = 0.0

    def add(self, game: GameRecord, priorities: np.ndarray | None = None) -> None:
        """Store a game; ``priorities`` per position (default: the largest seen so far)."""
        n = len(game)
        if n == 0:
            return
        if n > self.capacity:
            raise ValueError(f"a game of {n} positions does not fit a replay of capacity {self.capacity}")
        for name in ("action_rewards", "action_values"):
            given = getattr(game, name)
            if given is not None and np.shape(given) != (n, self.spec.num_actions):
                raise ValueError(f"GameRecord.{name} has shape {np.shape(given)}, expected "
                                 f"{(n, self.spec.num_actions)}")
        if self.pointer + n > self.capacity:
            self._drop(self.pointer, self.capacity)
            self.pointer = 0
        lo, hi = self.pointer, self.pointer + n
        self._drop(lo, hi)
        for key in OBS_KEYS:
            self.obs[key][lo:hi] = np.asarray(game.obs[key]).reshape(n, -1)
        self.actions[lo:hi] = game.actions
        self.rewards[lo:hi] = game.rewards
        self.values[lo:hi] = game.values
        self.policies[lo:hi] = game.policies
        for name in ("action_rewards", "action_values"):
            given = getattr(game, name)
            getattr(self, name)[lo:hi] = np.nan if given is None else given
        self.start[lo:hi] = lo
        self.end[lo:hi] = hi
        if priorities is None:
            priorities = np.full(n, self.max_priority)
        priorities = np.asarray(priorities, np.float64) + PRIORITY_EPS
        self.max_priority = max(self.max_priority, float(priorities.max()))
        self.weight[lo:hi] = priorities ** self.alpha
        self.pointer = hi
        self.games_added += 1
        self.positions_added += n

    def sample(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``(positions [B], importance weights [B])``."""
        cumulative = np.cumsum(self.weight)
        total = cumulative[-1]
        if total <= 0:
            raise ValueError("the replay is empty")
        idx = np.searchsorted(cumulative, rng.random(batch_size) * total, side="right")
        idx = np.minimum(idx, self.capacity - 1)
        prob = self.weight[idx] / total
        weights = (self.size * prob) ** (-self.beta)
        return idx.astype(np.int64), (weights / weights.max()).astype(np.float32)

    def update_priorities(self, idx: np.ndarray, priorities: np.ndarray) -> None:
        """New priorities for sampled positions (positions dropped meanwhile stay empty)."""
        priorities = np.asarray(priorities, np.float64) + PRIORITY_EPS
        live = self.weight[idx] > 0
        self.weight[idx[live]] = priorities[live] ** self.alpha
        self.max_priority = max(self.max_priority, float(priorities.max(initial=0.0)))

    def observations(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        """Observations at flat ``positions`` (any shape), as float32 ``{key: [..., dim]}``."""
        return {key: self.obs[key][positions].astype(np.float32) for key in OBS_KEYS}

    def targets(self, idx: np.ndarray, *, unroll_steps: int, td_steps: int, discount: float,
                values: np.ndarray | None = None) -> Targets:
        """Unroll targets for sampled positions ``idx [B]``. ``values`` (``float[capacity]``,
        like the stored search values) bootstraps instead of them (reanalyse)."""
        k = np.arange(unroll_steps + 1)
        end = self.end[idx][:, None]
        pos = idx[:, None] + k[None, :]
        mask = pos < end
        clipped = np.minimum(pos, self.capacity - 1)
        boot = self.values if values is None else values
        z = np.zeros(pos.shape)
        for j in range(td_steps):
            p = pos + j
            z += np.where(p < end, discount ** j * self.rewards[np.minimum(p, self.capacity - 1)], 0.0)
        p = pos + td_steps
        z += np.where(p < end, discount ** td_steps * boot[np.minimum(p, self.capacity - 1)], 0.0)
        z = np.where(mask, z, 0.0)
        prev = pos - 1
        rewards = np.where((prev < end) & (k[None, :] >= 1),
                           self.rewards[np.clip(prev, 0, self.capacity - 1)], 0.0)
        policies = np.where(mask[..., None], self.policies[clipped], 0.0)
        skip = self.spec.num_actions - 1
        actions = np.where(mask[:, :-1], self.actions[clipped[:, :-1]], skip)
        return Targets(actions.astype(np.int64), z.astype(np.float32), rewards.astype(np.float32),
                       policies.astype(np.float32), mask, clipped)
