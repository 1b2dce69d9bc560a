"""A set encoder for MallocGame's Dict observations, and SB3 policies that score each action row.

MallocGame-v0: the candidate rows of an observation are a set whose order is fixed by the env
(best fit first), and action ``i`` means "place at candidate row ``i``". Flattening them into
one vector makes a network learn the same thing K times, once per position. Here one small MLP
encodes every row the same way, and the policy scores every row with one shared scorer, so the
score of row ``i`` *is* the logit (or Q-value) of action ``i``.

How the per-candidate scores reach the action logits, inside SB3's policy structure
(``features_extractor -> mlp_extractor -> action_net``)::

    CandidateSetExtractor            obs -> [context c (H) | pooled p (H) | rows h_1..h_K (K*H)]
      c   = MLP(buffer, progress, next, avgpool(memory image))
      h_i = MLP(candidate_i, c)                (shared weights: one encoder for every row)
      p   = mean of h_i over present candidates
    CandidateHeads (mlp_extractor)
      actor:  rows r_i = MLP(h_i) for i < K, and r_K = MLP(MLP_skip(c, p)) for skip
              latent_pi = [r_0 .. r_K] flattened ((K+1)*H)
      critic: latent_vf = MLP(c, p)            (value from the permutation-invariant summary)
    RowScorer (action_net)           logit_i = w . r_i + b, one shared linear map per row

Permuting the candidate rows permutes ``h``, leaves ``c`` and ``p`` unchanged, and so permutes
the first ``K`` logits the same way while the skip logit stays put (tested).

MallocGame-v1: ``obs["actions"]`` already has one row of features per action (``SLOW``, ``K``
``FAST`` offsets, ``J x K`` ``PREFETCH`` start/offset pairs), so every action, ``SLOW``
included, is scored from its own row; the context also reads ``obs["segment"]``. A row's
features do not say which kind of action it is, so each row gets a constant tag: a one-hot of
its kind (slow, fast, prefetch) and, for prefetches, a one-hot of its start-time slot ``j``
(the picker's preferred, latest, earliest, ... start). The tags depend on the kind and slot,
never on the candidate index ``i``, so permuting the ``K`` offsets of one slot permutes those
logits the same way (tested). With ``xla_tag=True`` one more tag column marks the two rows of
XLA's own offset (``FAST`` ``i = 0``, XLA MSA's look-ahead best fit, and ``PREFETCH`` ``j = 0,
i = 0``, XLA's start and offset), which the other features do not tell from the other offsets
(without it a policy cannot learn to play XLA's moves: it picks the right kind but not XLA's
offset); then only the offsets ``i >= 1`` permute freely. An env built with ``xla_hint=True``
adds ``obs["xla_action"]`` (1 at XLA's own choice), read as one more column of each row, which
tells the policy which of those moves XLA plays::

    c   = MLP(buffer, segment, progress, next, avgpool(memory image))
    h_a = MLP(action row a, tag(a), c)       for every action a (1 + K + J*K rows)
    p   = mean of h_a over legal actions;  logit_a = w . MLP(h_a) + b;  value = MLP(c, p)

MallocGame-v0's canonical decision mode (``order="canonical"``, ``Discrete(2K)``): candidate
row ``i`` is a *buffer* (at its lowest free offset), and two actions belong to it: ``i`` places
it, ``K + i`` sends it to slow memory. There is no row-less skip. The extractor encodes the rows
as above (the canonical candidate features), and the actor gives each row two embeddings, one
per action, from two small heads over the shared row encoding and the pooled summary::

    r_i = MLP_place(h_i, p),  s_i = MLP_slow(h_i, p)      for i < K
    latent_pi = [r_0 .. r_{K-1}, s_0 .. s_{K-1}];  logit_a = w . latent_a + b  (RowScorer)

so permuting the candidate rows permutes both halves of the ``2K`` logits the same way (tested).
The observation spaces of the two v0 modes can have the same shapes (both have 9 features per
row; with ``K = 1`` the action counts agree too), so the extractor is told the mode:
``canonical=True``, which the pipeline passes when ``EnvConfig.order == "canonical"``. A
``canonical`` flag that does not fit the observation space is one ``ValueError``.

Policies: :class:`MaskableCandidatePolicy` (sb3-contrib MaskablePPO), :class:`CandidatePolicy`
(PPO), :class:`CandidateDQNPolicy` (DQN, whose ``q_net`` is ``CandidateActor`` then
``RowScorer``, so each candidate's Q-value comes out of its own row). The same classes serve
both versions and both v0 modes: the extractor reads the version from the observation space
and the mode from its ``canonical`` argument.
"""

from __future__ import annotations

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.dqn.policies import MultiInputPolicy as DQNMultiInputPolicy
from stable_baselines3.dqn.policies import QNetwork
from torch import nn

from ...env.canonical import CANONICAL_CANDIDATE_FEATURES
from ...features.v0 import CANDIDATE_FEATURES
from ...features.v1 import ACTION_FEATURES

__all__ = ["CandidateSetExtractor", "action_tags", "CandidateHeads", "CandidateActor", "RowScorer", "CandidatePolicy",
           "MaskableCandidatePolicy", "CandidateDQNPolicy", "CandidateQNetwork", "action_scores",
           "greedy_actions"]

_CONTEXT_KEYS = ("buffer", "progress", "next")
_CONTEXT_KEYS_V1 = ("buffer", "segment", "progress", "next")


def _mlp(n_in: int, hidden: int, layers: int = 2) -> nn.Sequential:
    mods: list[nn.Module] = []
    for i in range(layers):
        mods += [nn.Linear(n_in if i == 0 else hidden, hidden), nn.ReLU()]
    return nn.Sequential(*mods)


class CandidateSetExtractor(BaseFeaturesExtractor):
    """Features ``[context (H) | pooled rows (H) | row 1 .. row R (R*H)]`` of a MallocGame
    observation (``features_dim = (R + 2) * H``): on v0 ``R = K`` candidate rows (the skip
    action is scored from the summary; in the canonical mode each row carries two actions), on
    v1 ``R = 1 + K + J * K``, one row per action.

    Args:
      observation_space: MallocGame-v0's or -v1's ``Dict`` (flat entries; the version is read
        from it: v1 has ``"actions"``, v0 ``"candidates"``; ``K`` is read from it).
      hidden: ``H``, the embedding width.
      memory_bins: ``(A, B)`` of the env (the flat ``memory`` entry is ``2 * A * B`` long).
      memory_pool: the image is average-pooled to ``memory_pool x memory_pool`` per channel.
      n_starts: ``J`` of a v1 env (needed to tell which rows are ``FAST`` and which
        ``PREFETCH``); must be ``None`` for v0.
      canonical: the observation is MallocGame-v0's canonical decision mode
        (``order="canonical"``: ``2K`` actions, buffer rows). Must be ``False`` for v1 and for
        v0's default mode; the shapes alone cannot always tell the two v0 modes apart.
      xla_tag: v1 only: tag the rows of XLA's own offset (see the module docstring).
    """

    def __init__(self, observation_space: spaces.Dict, hidden: int = 64, memory_bins=(32, 32),
                 memory_pool: int = 8, n_starts: int | None = None, canonical: bool = False,
                 xla_tag: bool = False):
        try:
            self.version = "v1" if "actions" in observation_space.spaces else "v0"
            keys = _CONTEXT_KEYS_V1 if self.version == "v1" else _CONTEXT_KEYS
            n_actions = observation_space["action_mask"].shape[0]
            n_rows_flat = observation_space["actions" if self.version == "v1" else "candidates"].shape[0]
            n_mem = observation_space["memory"].shape[0]
            n_context = sum(observation_space[key].shape[0] for key in keys)
        except (AttributeError, KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"CandidateSetExtractor needs a MallocGame Dict observation ({exc!r})") from None
        a_bins, t_bins = (int(x) for x in memory_bins)
        if n_mem != 2 * a_bins * t_bins:
            raise ValueError(f"obs['memory'] has {n_mem} entries, expected 2 * {a_bins} * {t_bins} "
                             f"(pass the env's memory_bins)")
        if not isinstance(canonical, bool):
            raise ValueError(f"canonical must be True or False, got {canonical!r}")
        if not isinstance(xla_tag, bool):
            raise ValueError(f"xla_tag must be True or False, got {xla_tag!r}")
        if xla_tag and self.version != "v1":
            raise ValueError("xla_tag=True marks MallocGame-v1's XLA offset rows; this is a v0 observation")
        if canonical and self.version != "v0":
            raise ValueError("canonical=True is MallocGame-v0's canonical decision mode; this is a v1 observation")
        if self.version == "v0":
            if n_starts is not None:
                raise ValueError(f"n_starts={n_starts!r} is for MallocGame-v1; this is a v0 observation")
            if canonical:
                n_feat = len(CANONICAL_CANDIDATE_FEATURES)
                k, rest = divmod(n_actions, 2)
                if rest or k < 1 or n_rows_flat != k * n_feat:
                    raise ValueError(f"canonical=True needs a MallocGame-v0 order='canonical' observation (2K actions, "
                                     f"K * {n_feat} candidate entries); this one has {n_actions} actions and "
                                     f"{n_rows_flat} candidate entries (an env of the default mode?)")
            else:
                n_feat, k = len(CANDIDATE_FEATURES), n_actions - 1
                if n_rows_flat != k * n_feat:
                    raise ValueError(f"obs['candidates'] has {n_rows_flat} entries, expected K * {n_feat} = "
                                     f"{k * n_feat} for K + 1 = {n_actions} actions (an order='canonical' env "
                                     f"needs canonical=True)")
            n_rows, tags = k, None
        else:
            n_feat = len(ACTION_FEATURES)
            if not isinstance(n_starts, int) or isinstance(n_starts, bool) or n_starts < 1:
                raise ValueError(f"a MallocGame-v1 observation needs n_starts (the env's J), got {n_starts!r}")
            k, rest = divmod(n_actions - 1, 1 + n_starts)
            if rest or k < 1:
                raise ValueError(f"{n_actions} actions is not 1 + K + {n_starts} * K for any K (wrong n_starts?)")
            n_rows, tags = n_actions, action_tags(k, n_starts)
            if n_rows_flat != n_actions * n_feat:
                raise ValueError(f"obs['actions'] has {n_rows_flat} entries, expected {n_actions} * {n_feat}")
        super().__init__(observation_space, features_dim=(n_rows + 2) * hidden)
        self.k, self.n_rows, self.hidden, self.n_feat = k, n_rows, int(hidden), n_feat
        self.canonical = canonical  # two actions per row: place (i) and slow (K + i)
        self.has_skip = self.version == "v0" and not canonical  # v0's skip has no row: scored from the summary
        self.context_keys = keys
        self.image_shape = (2, a_bins, t_bins)
        self.pool = nn.AdaptiveAvgPool2d(int(memory_pool))
        self.context = _mlp(n_context + 2 * int(memory_pool) ** 2, self.hidden)
        n_tag = 0 if tags is None else tags.shape[1]
        self.hint = "xla_action" in observation_space.spaces  # MallocGameV1Env(xla_hint=True): one more row column
        self.candidate = _mlp(n_feat + n_tag + int(self.hint) + self.hidden, self.hidden)
        if tags is not None:
            self.register_buffer("tags", th.as_tensor(tags), persistent=False)
        else:
            self.tags = None
        self.xla_weight = None
        if xla_tag:  # one more tag column (1 on XLA's rows, actions 1 and 1 + K) into the row MLP's
            # first layer, as its own weight vector: zero at the start (the untagged network's
            # function), drawn from no random generator and left alone by SB3's orthogonal init
            xla_rows = th.zeros(n_rows)
            xla_rows[[1, 1 + k]] = 1.0
            self.register_buffer("xla_rows", xla_rows, persistent=False)
            self.xla_weight = nn.Parameter(th.zeros(self.hidden))

    def forward(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        batch = obs["buffer"].shape[0]
        image = self.pool(obs["memory"].reshape(batch, *self.image_shape)).flatten(1)
        context = self.context(th.cat([obs[key] for key in self.context_keys] + [image], dim=1))
        table = obs["actions"] if self.version == "v1" else obs["candidates"]
        rows = table.reshape(batch, self.n_rows, self.n_feat)
        parts = [rows]
        if self.tags is not None:
            parts.append(self.tags.unsqueeze(0).expand(batch, -1, -1))
        parts.append(context.unsqueeze(1).expand(batch, self.n_rows, self.hidden))
        if self.hint:
            parts.append(obs["xla_action"].unsqueeze(2))
        x = th.cat(parts, dim=2)
        if self.xla_weight is None:
            h = self.candidate(x)
        else:
            first = self.candidate[0](x) + self.xla_rows[None, :, None] * self.xla_weight
            h = self.candidate[1:](first)
        present = rows[:, :, :1]  # feature 0: 1 for a real candidate / a legal action, 0 otherwise
        pooled = (h * present).sum(dim=1) / present.sum(dim=1).clamp(min=1.0)
        return th.cat([context, pooled, h.flatten(1)], dim=1)


def action_tags(k: int, n_starts: int) -> np.ndarray:
    """``float32[1 + K + J*K, 3 + J]``: per MallocGame-v1 action, a one-hot of its kind (slow,
    fast, prefetch) then a one-hot of its prefetch start slot ``j`` (zeros unless a prefetch)."""
    tags = np.zeros((1 + k + n_starts * k, 3 + n_starts), dtype=np.float32)
    tags[0, 0] = 1.0
    tags[1:1 + k, 1] = 1.0
    for j in range(n_starts):
        rows = slice(1 + k + j * k, 1 + k + (j + 1) * k)
        tags[rows, 2] = 1.0
        tags[rows, 3 + j] = 1.0
    return tags


def _split(features: th.Tensor, k: int, hidden: int) -> tuple[th.Tensor, th.Tensor]:
    """``(summary [B, 2H] = context | pooled, rows [B, K, H])`` of the extractor's output."""
    return features[:, : 2 * hidden], features[:, 2 * hidden:].reshape(features.shape[0], k, hidden)


class CandidateActor(nn.Module):
    """``features -> [B, n_actions * H]``: one embedding per row, plus (v0, ``skip=True``) one
    for the skip action made from the summary; with ``canonical=True`` (v0's canonical mode,
    no skip) two per row, all "place" embeddings then all "slow" ones (actions ``i`` and
    ``K + i``), each from its own head over the row and the pooled summary."""

    def __init__(self, k: int, hidden: int, skip: bool = True, canonical: bool = False):
        super().__init__()
        if skip and canonical:
            raise ValueError("the canonical mode has no skip action (each row has a place and a slow action)")
        self.k, self.hidden, self.canonical = k, hidden, canonical
        self.skip = _mlp(2 * hidden, hidden, layers=1) if skip else None
        if canonical:
            self.row = None
            self.place = _mlp(2 * hidden, hidden, layers=1)
            self.slow = _mlp(2 * hidden, hidden, layers=1)
        else:
            self.row = _mlp(hidden, hidden, layers=1)

    @property
    def n_actions(self) -> int:
        """The number of embeddings (actions) :meth:`forward` returns per observation."""
        return 2 * self.k if self.canonical else self.k + int(self.skip is not None)

    def forward(self, features: th.Tensor) -> th.Tensor:
        summary, rows = _split(features, self.k, self.hidden)
        if self.canonical:
            pooled = summary[:, self.hidden:].unsqueeze(1).expand(-1, self.k, -1)
            both = th.cat([rows, pooled], dim=2)
            return th.cat([self.place(both), self.slow(both)], dim=1).flatten(1)
        if self.skip is not None:
            rows = th.cat([rows, self.skip(summary).unsqueeze(1)], dim=1)
        return self.row(rows).flatten(1)


class CandidateHeads(nn.Module):
    """The ``mlp_extractor`` of the actor-critic policies: ``forward_actor`` is
    :class:`CandidateActor`; ``forward_critic`` reads only the permutation-invariant summary.
    ``k`` is the number of rows of the extractor (v0: candidates; v1: all actions);
    ``canonical``: v0's canonical mode (two actions per row, no skip)."""

    def __init__(self, k: int, hidden: int, skip: bool = True, canonical: bool = False):
        super().__init__()
        self.actor = CandidateActor(k, hidden, skip, canonical)
        self.critic = _mlp(2 * hidden, hidden)
        self.k, self.hidden = k, hidden
        self.latent_dim_pi = self.actor.n_actions * hidden
        self.latent_dim_vf = hidden

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return self.actor(features)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.critic(features[:, : 2 * self.hidden])


class RowScorer(nn.Module):
    """The action net: ``[B, n_actions*H] -> [B, n_actions]``, the same linear score for every row."""

    def __init__(self, hidden: int, gain: float = 0.01):
        super().__init__()
        self.hidden = hidden
        self.score = nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.score.weight, gain=gain)
        nn.init.zeros_(self.score.bias)

    def forward(self, latent: th.Tensor) -> th.Tensor:
        return self.score(latent.reshape(latent.shape[0], -1, self.hidden)).squeeze(-1)


def _require_set(extractor) -> CandidateSetExtractor:
    if not isinstance(extractor, CandidateSetExtractor):
        raise ValueError(f"the candidate policies need features_extractor_class=CandidateSetExtractor, "
                         f"got {type(extractor).__name__}")
    return extractor


class _CandidateActorCritic:
    """Mixin for SB3 actor-critic policies: :class:`CandidateHeads` as ``mlp_extractor`` and
    :class:`RowScorer` as ``action_net`` (``net_arch`` is not used)."""

    def _build_mlp_extractor(self) -> None:
        fe = _require_set(self.features_extractor)
        self.mlp_extractor = CandidateHeads(fe.n_rows, fe.hidden, fe.has_skip, fe.canonical)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        # SB3 built a Linear(latent_dim_pi, K+1) action net; swap in the row scorer and rebuild
        # the optimizer so that it holds the scorer's parameters instead.
        self.action_net = RowScorer(self.features_extractor.hidden)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)


class CandidatePolicy(_CandidateActorCritic, MultiInputActorCriticPolicy):
    """PPO policy with per-candidate logits (see the module docstring)."""

    def __init__(self, *args, features_extractor_class=CandidateSetExtractor, **kwargs):
        super().__init__(*args, features_extractor_class=features_extractor_class, **kwargs)


class MaskableCandidatePolicy(_CandidateActorCritic, MaskableMultiInputActorCriticPolicy):
    """MaskablePPO policy with per-candidate logits (see the module docstring)."""

    def __init__(self, *args, features_extractor_class=CandidateSetExtractor, **kwargs):
        super().__init__(*args, features_extractor_class=features_extractor_class, **kwargs)


class CandidateQNetwork(QNetwork):
    """DQN's Q-network with one Q-value per candidate row (plus skip; in v0's canonical mode two
    per row, place and slow)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        fe = _require_set(self.features_extractor)
        self.q_net = nn.Sequential(CandidateActor(fe.n_rows, fe.hidden, fe.has_skip, fe.canonical),
                                   RowScorer(fe.hidden, gain=1.0))


class CandidateDQNPolicy(DQNMultiInputPolicy):
    """DQN policy whose online and target networks are :class:`CandidateQNetwork`."""

    def __init__(self, *args, features_extractor_class=CandidateSetExtractor, **kwargs):
        super().__init__(*args, features_extractor_class=features_extractor_class, **kwargs)

    def make_q_net(self) -> CandidateQNetwork:
        net_args = self._update_features_extractor(self.net_args, features_extractor=None)
        return CandidateQNetwork(**net_args).to(self.device)


def _scores(policy, tensor: dict[str, th.Tensor]) -> th.Tensor:
    if hasattr(policy, "q_net"):
        return policy.q_net(tensor)
    features = policy.extract_features(tensor)
    if isinstance(features, tuple):
        features = features[0]
    return policy.action_net(policy.mlp_extractor.forward_actor(features))


def action_scores(policy, obs: dict[str, np.ndarray]) -> np.ndarray:
    """The unmasked logits (actor-critic policies) or Q-values (DQN) of a batch of
    observations (or of one), ``float[B, n_actions]`` (v0: ``K + 1``; v0's canonical mode:
    ``2K``, place scores then slow scores; v1: ``1 + K + J*K``)."""
    tensor, _ = policy.obs_to_tensor(obs)
    with th.no_grad():
        return _scores(policy, tensor).cpu().numpy()


def greedy_actions(policy, obs: dict[str, np.ndarray], masks: np.ndarray | None = None) -> np.ndarray:
    """``int64[B]``: for each observation of a batch (``[B, ...]`` arrays), the action with the
    highest score (:func:`action_scores`) among the legal ones (``masks``, bool ``[B, n_actions]``,
    True = legal; ``None``: among all, as PPO and DQN act). The deterministic play of
    :class:`~.agent.SB3Agent` and :class:`~.evaluation.Evaluator`: SB3's
    ``predict(deterministic=True)`` picks the same action, up to ties it breaks on rounded
    probabilities. Skips SB3's per-call checks, so it is several times faster."""
    tensor = {key: th.as_tensor(value) for key, value in obs.items()}
    with th.no_grad():
        scores = _scores(policy, tensor)
        if masks is not None:
            legal = th.as_tensor(np.asarray(masks, dtype=bool))
            if legal.shape != scores.shape:
                raise ValueError(f"masks of shape {tuple(legal.shape)} for scores of shape {tuple(scores.shape)}")
            scores = scores.masked_fill(~legal, -th.inf)
        return scores.argmax(dim=1).cpu().numpy().astype(np.int64)
