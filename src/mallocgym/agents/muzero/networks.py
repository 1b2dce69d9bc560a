"""mallocMuZero's networks: representation, dynamics and prediction (PyTorch, CPU).

A model state is a pair ``(latent [B, H], cands [B, K, C])``: a latent vector and one embedding
per candidate slot. At the root the candidate embeddings come from a shared per-candidate
encoder applied to the observation's candidate rows (so slot ``i`` is action ``i``); after a
dynamics step they are decoded from the new latent, since the real candidates of a hypothetical
future are unknown.

- representation ``obs -> (latent, cands)``;
- prediction ``(latent, cands) -> (policy logits [B, K + 1], value logits [B, 2 Sv + 1])``: the
  policy is pointer-style, one shared head scoring each candidate embedding against the latent,
  plus a skip logit from the latent;
- version 2: an advantage head (pointer-style, like the policy) and a scalar residual head.

Values are categorical over an h-scaled support (:mod:`.transforms`), in units of
``reward_scale`` x MallocGame's normalised reward. The dynamics and reward head of MuZero's
learned model are still built, untrained since issue 31 removed the search over them
(``muzero:DIR``), so that every checkpoint loads and a seed draws the same initial weights.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ...features.v1 import ACTION_FEATURES, BUFFER_FEATURES, NEXT_FEATURES, PROGRESS_FEATURES, SEGMENT_FEATURES
from .config import NetworkConfig
from .transforms import Support

__all__ = ["NumpyAdvantage", "ObsSpec", "MuZeroNet", "NetOutput", "obs_to_tensors", "stack_obs", "OBS_KEYS"]

OBS_KEYS = ("buffer", "candidates", "next", "memory", "progress", "action_mask")


@dataclass(frozen=True)
class ObsSpec:
    """Shapes of MallocGame's observation, as the network reads it.

    Attributes:
      k: candidate slots ``K`` (actions ``K + 1``).
      candidate_dim: features per candidate row.
      buffer_dim: features of the buffer being decided.
      n_next, next_dim: upcoming-buffer rows and their features.
      memory_dim: size of the flattened occupancy image.
      progress_dim: progress scalars.
      game: ``"v0"``; or ``"v1"`` (MallocGame-v1, :mod:`.v1`): then ``k`` is the number of
        actions, every action has a row (the pointer rows, SLOW is row 0), there is no separate
        skip logit and the buffer vector is v1's buffer and segment features.
    """

    k: int
    candidate_dim: int
    buffer_dim: int
    n_next: int
    next_dim: int
    memory_dim: int
    progress_dim: int
    game: str = "v0"

    @classmethod
    def from_env(cls, env) -> "ObsSpec":
        """Read the shapes off a MallocGame env (wrapped or not)."""
        u = env.unwrapped
        space = u.observation_space
        if "actions" in space.spaces:  # MallocGame-v1
            return obs_spec_v1(env)
        k = int(u.action_space.n) - 1
        n_next = int(u.n_next)
        return cls(k=k, candidate_dim=int(np.prod(space["candidates"].shape)) // k,
                   buffer_dim=int(np.prod(space["buffer"].shape)), n_next=n_next,
                   next_dim=int(np.prod(space["next"].shape)) // n_next,
                   memory_dim=int(np.prod(space["memory"].shape)),
                   progress_dim=int(np.prod(space["progress"].shape)))

    def to_dict(self) -> dict:
        """Plain fields (stored in checkpoints)."""
        return asdict(self)

    @property
    def num_actions(self) -> int:
        """``K + 1`` (the candidates and skip; v1: ``K``, every action a row)."""
        return self.k if self.game == "v1" else self.k + 1


def obs_spec_v1(env) -> ObsSpec:
    """The network's view of a MallocGame-v1 env's observation (:mod:`.v1`): one pointer row per
    action, the buffer vector v1's buffer and segment features joined."""
    u = env.unwrapped
    return ObsSpec(k=int(u.action_space.n), candidate_dim=len(ACTION_FEATURES),
                   buffer_dim=len(BUFFER_FEATURES) + len(SEGMENT_FEATURES), n_next=int(u.n_next),
                   next_dim=len(NEXT_FEATURES), memory_dim=int(np.prod(u.observation_space["memory"].shape)),
                   progress_dim=len(PROGRESS_FEATURES), game="v1")


def stack_obs(observations: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """A batch ``{key: [B, ...]}`` from a list of observations."""
    return {key: np.stack([o[key] for o in observations]) for key in OBS_KEYS}


def obs_to_tensors(obs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Float32 tensors of a batched observation (any float or int dtype in)."""
    return {key: torch.as_tensor(np.asarray(obs[key]), dtype=torch.float32) for key in OBS_KEYS}


class NetOutput(NamedTuple):
    """One network call's results."""

    latent: torch.Tensor          # [B, H]
    cands: torch.Tensor           # [B, K, C]
    policy_logits: torch.Tensor   # [B, K + 1]
    value_logits: torch.Tensor    # [B, 2 Sv + 1]


def _mlp(sizes: list[int], *, last_activation: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class MuZeroNet(nn.Module):
    """Representation and prediction networks for MallocGame (see module docstring)."""

    def __init__(self, spec: ObsSpec, config: NetworkConfig):
        super().__init__()
        self.spec = spec
        self.config = config
        h, c = config.hidden, config.candidate_hidden
        k = spec.k
        self.value_support = Support(config.value_support)
        self.reward_support = Support(config.reward_support)
        # representation
        self.memory_encoder = _mlp([spec.memory_dim, config.memory_hidden], last_activation=True)
        self.candidate_encoder = _mlp([spec.candidate_dim + spec.buffer_dim, c, c])
        trunk_in = spec.buffer_dim + spec.progress_dim + spec.n_next * spec.next_dim + config.memory_hidden + 2 * c
        self.trunk = _mlp([trunk_in, h, h])
        self.norm = nn.LayerNorm(h)
        # prediction
        self.pointer = _mlp([h + c, h // 2, 1])
        self.skip = spec.game != "v1"  # v1: SLOW is a pointer row like every action
        self.skip_head = _mlp([h, h // 2, 1]) if self.skip else None
        self.value_head = _mlp([h, h, self.value_support.n])
        # MuZero's dynamics (untrained since issue 31; the module docstring says why they stay)
        self.skip_embedding = nn.Parameter(torch.zeros(c))
        self.transition = _mlp([h + c, h, h])
        self.dyn_norm = nn.LayerNorm(h)
        self.reward_head = _mlp([h + c, h // 2, self.reward_support.n])
        self.decoder = _mlp([h, h, k * c])
        nn.init.normal_(self.skip_embedding, std=0.1)
        if config.version >= 2:
            # expert iteration (network.version 2): a scalar residual over XLA-like and a
            # per-action advantage over XLA-like's move, both in network.residual_scale units
            self.residual_head = _mlp([h, h, 1])
            self.advantage_pointer = _mlp([h + c, h // 2, 1])
            self.advantage_skip = _mlp([h, h // 2, 1]) if self.skip else None

    def represent(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(latent [B, H], cands [B, K, C])`` of a batched observation."""
        spec = self.spec
        b = obs["buffer"].shape[0]
        buf = obs["buffer"].reshape(b, spec.buffer_dim)
        rows = obs["candidates"].reshape(b, spec.k, spec.candidate_dim)
        present = rows[:, :, :1]
        cand_in = torch.cat([rows, buf.unsqueeze(1).expand(b, spec.k, spec.buffer_dim)], dim=-1)
        cands = self.candidate_encoder(cand_in) * present
        count = present.sum(1).clamp(min=1.0)
        pooled_mean = cands.sum(1) / count
        pooled_max = (cands - (1.0 - present) * 1e4).max(1).values * (present.sum(1) > 0).float()
        memory = self.memory_encoder(obs["memory"].reshape(b, spec.memory_dim))
        x = torch.cat([buf, obs["progress"].reshape(b, spec.progress_dim),
                       obs["next"].reshape(b, spec.n_next * spec.next_dim), memory, pooled_mean, pooled_max], -1)
        return self.norm(self.trunk(x)), cands

    def predict(self, latent: torch.Tensor, cands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(policy logits [B, K + 1], value logits [B, 2 Sv + 1])``."""
        b, k, _ = cands.shape
        keyed = torch.cat([latent.unsqueeze(1).expand(b, k, latent.shape[-1]), cands], dim=-1)
        logits = self.pointer(keyed).squeeze(-1)
        if self.skip:
            logits = torch.cat([logits, self.skip_head(latent)], dim=-1)
        return logits, self.value_head(latent)

    def expert(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Version 2 only: ``(policy logits [B, K + 1], residual [B], advantage [B, K + 1])`` of a
        batched observation (residual and advantage in ``network.residual_scale`` units)."""
        if self.config.version < 2:
            raise ValueError("this network has no residual and advantage heads (network.version 1)")
        latent, cands = self.represent(obs)
        policy, _ = self.predict(latent, cands)
        advantage, residual = self.heads(latent, cands)
        return policy, residual, advantage

    def advantage(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Version 2 only: the advantage ``[B, K + 1]`` of :meth:`expert` alone (what the policy and
        the learned search read at each decision: no policy, value or residual head run)."""
        if self.config.version < 2:
            raise ValueError("this network has no residual and advantage heads (network.version 1)")
        return self._advantage(*self.represent(obs))

    def heads(self, latent: torch.Tensor, cands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Version 2 only: ``(advantage [B, K + 1], residual [B])`` read from a model state
        (:meth:`expert` without the representation)."""
        return self._advantage(latent, cands), self.residual_head(latent).squeeze(-1)

    def _advantage(self, latent: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        b, k, _ = cands.shape
        keyed = torch.cat([latent.unsqueeze(1).expand(b, k, latent.shape[-1]), cands], dim=-1)
        advantage = self.advantage_pointer(keyed).squeeze(-1)
        if self.skip:
            advantage = torch.cat([advantage, self.advantage_skip(latent)], dim=-1)
        return advantage

    def initial_inference(self, obs: dict[str, torch.Tensor]) -> NetOutput:
        """Representation then prediction."""
        latent, cands = self.represent(obs)
        policy, value = self.predict(latent, cands)
        return NetOutput(latent, cands, policy, value)


def _linears(seq: nn.Sequential) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(m.weight.detach().cpu().double().numpy().T.copy(), m.bias.detach().cpu().double().numpy().copy())
            for m in seq if isinstance(m, nn.Linear)]


def _mlp_np(x: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray]], last_activation: bool = False) -> np.ndarray:
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < len(layers) - 1 or last_activation:
            np.maximum(x, 0.0, out=x)
    return x


class NumpyAdvantage:
    """:meth:`MuZeroNet.advantage` of one MallocGame-v1 observation in numpy, from a snapshot of
    the network's weights taken at construction, without torch's per-call overhead: what the
    policy and the learned search call once per decision. The same function, arranged for one
    observation: the candidate encoder runs on the rows of actions present only (an absent row's
    encoding is zero), the first layers of the candidate encoder and of the advantage pointer are
    split into their per-row and shared parts (the buffer vector and the latent enter once), and
    every absent row's advantage is one shared value. Equal to the torch call within float32
    rounding (a test compares them); it computes in float64 and rounds the result to float32, so
    that two identical action rows get the same advantage (a matrix product may round rows
    differently by where they fall in its blocks, which would make a tie look like a gain)."""

    def __init__(self, net: MuZeroNet):
        if net.spec.game != "v1" or net.config.version < 2:
            raise ValueError("NumpyAdvantage reads a MallocGame-v1 network with an advantage head (network.version 2)")
        spec = self.spec = net.spec
        self.memory = _linears(net.memory_encoder)
        (w, b), *self.candidate = _linears(net.candidate_encoder)
        self.candidate_row, self.candidate_buffer, self.candidate_bias = w[:spec.candidate_dim], w[spec.candidate_dim:], b
        self.trunk = _linears(net.trunk)
        (w, b), *self.pointer = _linears(net.advantage_pointer)
        h = net.config.hidden
        self.pointer_latent, self.pointer_row, self.pointer_bias = w[:h], w[h:], b
        self.norm_weight = net.norm.weight.detach().cpu().double().numpy().copy()
        self.norm_bias = net.norm.bias.detach().cpu().double().numpy().copy()
        self.norm_eps = float(net.norm.eps)

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """``float64[K]``: the advantage of every action of one observation (network keys,
        :data:`OBS_KEYS`, unbatched)."""
        return self.features(obs)[0]

    def features(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        """``(advantage, latent, keyed, rows)``: :meth:`__call__`'s advantage, the latent, each action's
        row of the pointer's first layer (after its ReLU; absent rows 0) and the candidate rows (what
        the departure head reads, :mod:`.head`)."""
        spec = self.spec
        f = np.float64
        buf = np.asarray(obs["buffer"], f).reshape(spec.buffer_dim)
        rows = np.asarray(obs["candidates"], f).reshape(spec.k, spec.candidate_dim)
        on = np.flatnonzero(rows[:, 0] != 0.0)        # the rows present (MuZeroNet.represent's mask)
        present = rows[on, :1]
        first = rows[on] @ self.candidate_row + (buf @ self.candidate_buffer + self.candidate_bias)
        np.maximum(first, 0.0, out=first)
        cands = _mlp_np(first, self.candidate) * present
        if on.size:
            pooled_mean = cands.sum(0) / max(float(present.sum()), 1.0)
            pooled_max = (cands - (1.0 - present) * 1e4).max(0)
            if on.size < spec.k:   # an absent row: 0 - 1e4
                np.maximum(pooled_max, -1e4, out=pooled_max)
        else:
            pooled_mean = pooled_max = np.zeros(self.candidate[-1][1].shape[0], f)
        memory = _mlp_np(np.asarray(obs["memory"], f).reshape(spec.memory_dim), self.memory, last_activation=True)
        x = np.concatenate([buf, np.asarray(obs["progress"], f).reshape(-1), np.asarray(obs["next"], f).reshape(-1),
                            memory, pooled_mean, pooled_max])
        h = _mlp_np(x, self.trunk)
        mean = h.mean()
        var = ((h - mean) ** 2).mean()
        latent = (h - mean) / np.sqrt(var + self.norm_eps) * self.norm_weight + self.norm_bias
        shared = latent @ self.pointer_latent + self.pointer_bias
        keyed = np.vstack([shared, cands @ self.pointer_row + shared])   # row 0: an absent action's
        np.maximum(keyed, 0.0, out=keyed)
        out = _mlp_np(keyed, self.pointer)[:, 0]
        advantage = np.full(spec.k, out[0])
        advantage[on] = out[1:]
        keyed_rows = np.zeros((spec.k, keyed.shape[1]))
        keyed_rows[on] = keyed[1:]
        return advantage.astype(np.float32).astype(np.float64), latent, keyed_rows, rows
