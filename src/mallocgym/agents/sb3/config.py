"""Hyperparameters of the Stable-Baselines3 agents: frozen dataclasses, validated on construction.

One config per algorithm (:class:`MaskablePPOConfig`, :class:`PPOConfig`, :class:`DQNConfig`),
each holding the env's shape (:class:`EnvConfig`) and the network (:class:`PolicyConfig`).
Configs round-trip through JSON (:func:`config_to_dict` / :func:`config_from_dict`) and take
``key=value`` overrides from the command line (:func:`override`, e.g. ``policy.extractor=flat``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Union

from ..._validate import MAX_CANDIDATES
from ...env import INVALID_ACTION_MODES
from ...sim import ORDERS

__all__ = ["EnvConfig", "PolicyConfig", "MaskablePPOConfig", "PPOConfig", "DQNConfig", "AlgoConfig",
           "ALGOS", "VEC_KINDS", "EXTRACTORS", "VERSIONS", "CANONICAL", "V0_ORDERS", "default_config", "config_to_dict",
           "config_from_dict", "override"]

VEC_KINDS = ("native", "dummy", "subproc")
EXTRACTORS = ("set", "flat")
VERSIONS = ("v0", "v1")
V1_DEFAULT_STARTS = 4  # MallocGameV1Env's n_starts default
CANONICAL = "canonical"  # MallocGame-v0's canonical decision mode (mallocgym.env.canonical)
V0_ORDERS = ORDERS + (CANONICAL,)  # what EnvConfig.order takes on v0 (v1: ORDERS)


def _positive(obj, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
                and math.isfinite(value)):
            raise ValueError(f"{type(obj).__name__}.{name} must be a positive number, got {value!r}")


def _unit(obj, *names: str, closed: bool = True) -> None:
    for name in names:
        value = getattr(obj, name)
        ok = isinstance(value, (int, float)) and (0.0 <= value <= 1.0 if closed else 0.0 < value <= 1.0)
        if not ok:
            raise ValueError(f"{type(obj).__name__}.{name} must be in [0, 1], got {value!r}")


def _integers(obj, *names: str, minimum: int = 1) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"{type(obj).__name__}.{name} must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class EnvConfig:
    """How the training and evaluation envs are built (``MallocGameEnv`` or
    ``MallocGameV1Env`` arguments, and which of the two).

    Attributes:
      n_candidates: ``K``, candidates offered per decision (v0: ``K`` offsets of the current
        buffer, ``Discrete(K + 1)``; v0 with ``order="canonical"``: ``K`` buffers, each at its
        lowest free offset, ``Discrete(2 * K)``; v1: ``Discrete(1 + K + J * K)``).
      n_next: ``L``, upcoming buffers shown in ``obs["next"]``.
      memory_bins: ``(A, B)``, address x time bins of the fast-memory image.
      order: decision order of the buffers: ``"boundedness"`` (XLA's), ``"start"``, ``"size"``
        or ``"spatial"``; or, on v0 only, ``"canonical"``: MallocGame-v0's canonical decision
        mode (:class:`~mallocgym.env.canonical.CanonicalGameEnv`), where each move chooses which
        buffer goes at its lowest free offset (action ``i < K``) or which goes to slow memory
        (``K + i``). The native vector env does not run that mode (use ``vec=dummy`` or
        ``subproc``; ``mallocgym train sb3 --set env.order=canonical`` picks ``dummy`` unless
        told otherwise), and the ``"set"`` policy scores each candidate row twice (see
        :mod:`.extractor`). A trained agent plays the mode it was trained in.
      invalid_action: what a masked action does in the env (``"skip"``, ``"terminate"``,
        ``"raise"``). PPO and DQN act without masks, so with ``"skip"`` a masked choice leaves
        the buffer in slow memory (v1: the use reads slow memory).
      version: the game, ``"v0"`` (MallocGame-v0, whole-live-range placement) or ``"v1"``
        (MallocGame-v1, per-use decisions with prefetch). A trained agent plays only this one.
      n_starts: ``J``, prefetch start times per decision (MallocGame-v1 only, ``1..4``; ``None``
        means the env's default, 4). Must be ``None`` on v0, which has no prefetches.
      xla_hint: MallocGame-v1 only: the observation gains ``"xla_action"`` (1 at XLA's own
        choice, ``MallocGameV1Env(xla_hint=True)``), which the ``"set"`` extractor reads as one
        more column of every action row, so the policy can learn a residual over XLA.
    """

    n_candidates: int = 16
    n_next: int = 8
    memory_bins: tuple[int, int] = (32, 32)
    order: str = "boundedness"
    invalid_action: str = "skip"
    version: str = "v0"
    n_starts: int | None = None
    xla_hint: bool = False

    def __post_init__(self):
        _integers(self, "n_candidates", "n_next")
        if not isinstance(self.xla_hint, bool):
            raise ValueError(f"EnvConfig.xla_hint must be true or false, got {self.xla_hint!r}")
        if self.xla_hint and self.version != "v1":
            raise ValueError(f"EnvConfig.xla_hint shows MallocGame-v1's XLA choice; {self.version} has none "
                             f"(set env.version=v1 or env.xla_hint=false)")
        for name in ("n_candidates", "n_next"):
            if getattr(self, name) > MAX_CANDIDATES:
                raise ValueError(f"EnvConfig.{name} must be <= {MAX_CANDIDATES} (the env's own bound), "
                                 f"got {getattr(self, name)}")
        if self.version not in VERSIONS:
            raise ValueError(f"EnvConfig.version must be one of {VERSIONS}, got {self.version!r}")
        if self.n_starts is not None:
            if self.version != "v1":
                raise ValueError(f"EnvConfig.n_starts is MallocGame-v1's number of prefetch start times; "
                                 f"{self.version} has no prefetches, so leave it unset (got {self.n_starts!r})")
            if not isinstance(self.n_starts, int) or isinstance(self.n_starts, bool) or not 1 <= self.n_starts <= 4:
                raise ValueError(f"EnvConfig.n_starts must be an integer in [1, 4], got {self.n_starts!r}")
        bins = tuple(self.memory_bins)
        if len(bins) != 2 or not all(isinstance(b, int) and b >= 1 for b in bins):
            raise ValueError(f"EnvConfig.memory_bins must be two integers >= 1, got {self.memory_bins!r}")
        object.__setattr__(self, "memory_bins", bins)
        orders = V0_ORDERS if self.version == "v0" else ORDERS
        if self.order not in orders:
            if self.order == CANONICAL:
                raise ValueError(f"EnvConfig.order 'canonical' is a MallocGame-v0 decision mode; "
                                 f"on {self.version} use one of {orders}")
            raise ValueError(f"EnvConfig.order must be one of {orders}, got {self.order!r}")
        if self.invalid_action not in INVALID_ACTION_MODES:
            raise ValueError(f"EnvConfig.invalid_action must be one of {INVALID_ACTION_MODES}, "
                             f"got {self.invalid_action!r}")

    def env_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``MallocGameEnv`` / ``gym.make("MallocGame-v0", ...)``, or on v1
        for ``MallocGameV1Env`` / ``gym.make("MallocGame-v1", ...)`` (with ``n_starts``)."""
        kwargs = dict(n_candidates=self.n_candidates, n_next=self.n_next, memory_bins=self.memory_bins,
                      order=self.order, invalid_action=self.invalid_action)
        if self.version == "v1":
            kwargs["n_starts"] = self.starts
        if self.xla_hint:
            kwargs["xla_hint"] = True
        return kwargs

    @property
    def starts(self) -> int:
        """``J`` on v1 (``n_starts``, or the env's default 4); 0 on v0."""
        if self.version != "v1":
            return 0
        return V1_DEFAULT_STARTS if self.n_starts is None else self.n_starts

    @property
    def canonical(self) -> bool:
        """Whether the env is MallocGame-v0's canonical decision mode (``order="canonical"``)."""
        return self.order == CANONICAL

    @property
    def n_actions(self) -> int:
        """The size of the env's action space: ``K + 1`` on v0, ``2 * K`` in v0's canonical mode,
        ``1 + K + J * K`` on v1."""
        if self.version == "v1":
            return 1 + self.n_candidates * (1 + self.starts)
        return 2 * self.n_candidates if self.canonical else self.n_candidates + 1

    def env_class(self):
        """``MallocGameEnv`` (v0; with ``order="canonical"`` it builds a ``CanonicalGameEnv``)
        or ``MallocGameV1Env`` (v1)."""
        if self.version == "v1":
            from ...env.v1 import MallocGameV1Env

            return MallocGameV1Env
        from ...env import MallocGameEnv

        return MallocGameEnv


@dataclass(frozen=True)
class PolicyConfig:
    """The network.

    Attributes:
      extractor: ``"set"``: :class:`~mallocgym.agents.sb3.extractor.CandidateSetExtractor`, a
        shared per-candidate encoder whose outputs line up with the actions, and a head that
        scores each candidate row (one logit / Q-value per candidate, plus one for skip).
        ``"flat"``: SB3's default ``CombinedExtractor`` (every entry flattened and concatenated)
        and an MLP of ``net_arch`` (the baseline it is compared with in docs/sb3.md).
      hidden: width of the context, candidate and head embeddings (``"set"``).
      memory_pool: the memory image is average-pooled (adaptively) to
        ``memory_pool x memory_pool`` per channel before its linear layer (``"set"``).
      net_arch: hidden layers of the MLP after the flat extractor (``"flat"``).
      xla_tag: MallocGame-v1 with ``"set"`` only: tag the action rows of XLA's own offset
        (``FAST`` at offset 0 and ``PREFETCH`` at start 0, offset 0), which the row features do
        not tell from the other offsets (see :mod:`.extractor`). ``mallocgym train sb3`` turns
        it on for new v1 runs with the ``"set"`` extractor unless ``--set policy.xla_tag=false``;
        the default ``False`` is the architecture of runs from before it existed, whose
        ``train.json`` does not name it.
    """

    extractor: str = "set"
    hidden: int = 64
    memory_pool: int = 8
    net_arch: tuple[int, ...] = (64, 64)
    xla_tag: bool = False

    def __post_init__(self):
        if self.extractor not in EXTRACTORS:
            raise ValueError(f"PolicyConfig.extractor must be one of {EXTRACTORS}, got {self.extractor!r}")
        _integers(self, "hidden", "memory_pool")
        arch = tuple(self.net_arch)
        if not all(isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in arch):
            raise ValueError(f"PolicyConfig.net_arch must be positive integers, got {self.net_arch!r}")
        object.__setattr__(self, "net_arch", arch)
        if not isinstance(self.xla_tag, bool):
            raise ValueError(f"PolicyConfig.xla_tag must be true or false, got {self.xla_tag!r}")


@dataclass(frozen=True)
class _Common:
    """Fields every algorithm has (documented on the subclasses)."""

    n_envs: int = 8
    vec: str = "native"
    learning_rate: float = 3e-4
    gamma: float = 0.95
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)

    def __post_init__(self):
        _integers(self, "n_envs")
        if self.vec not in VEC_KINDS:
            raise ValueError(f"{type(self).__name__}.vec must be one of {VEC_KINDS}, got {self.vec!r}")
        _positive(self, "learning_rate")
        _unit(self, "gamma")
        for name, kind in (("env", EnvConfig), ("policy", PolicyConfig)):
            if not isinstance(getattr(self, name), kind):
                raise ValueError(f"{type(self).__name__}.{name} must be a {kind.__name__}")
        if self.env.version == "v1" and self.vec == "native":
            raise ValueError(f"{type(self).__name__}.vec 'native' (mallocgym's numba batch) plays MallocGame-v0 "
                             f"only; on v1 use vec=dummy or vec=subproc")
        if self.policy.xla_tag and (self.env.version != "v1" or self.policy.extractor != "set"):
            raise ValueError(f"{type(self).__name__}.policy.xla_tag marks MallocGame-v1's XLA offset rows for the "
                             f"'set' extractor; this config has env.version={self.env.version}, "
                             f"policy.extractor={self.policy.extractor} (set policy.xla_tag=false)")
        if self.env.canonical and self.vec == "native":
            raise ValueError(f"{type(self).__name__}.vec 'native' (mallocgym's numba batch) does not run "
                             f"env.order=canonical; use vec=dummy or vec=subproc")


@dataclass(frozen=True)
class MaskablePPOConfig(_Common):
    """sb3-contrib ``MaskablePPO``: PPO whose policy only puts probability on legal actions
    (masks from the env's ``action_masks()``).

    Attributes:
      n_envs: games played in parallel.
      vec: ``"native"`` (:mod:`mallocgym.vector`, one numba loop), ``"dummy"`` (SB3
        ``DummyVecEnv``) or ``"subproc"`` (SB3 ``SubprocVecEnv``, one process per game).
      learning_rate: Adam step size (constant).
      gamma: discount factor. Rewards are the per-buffer time savings; the undiscounted return
        of an episode is ``1 - time / time_all_slow``. 0.95 (a short horizon of ~20 decisions)
        beat 0.99 and 0.999 clearly and 0.9 too in 3-minute MaskablePPO runs (docs/sb3.md).
      n_steps: steps per game between updates (a rollout holds ``n_steps * n_envs`` steps).
      batch_size: minibatch size of each gradient step.
      n_epochs: passes over each rollout.
      gae_lambda: GAE's bias/variance trade-off.
      clip_range: PPO's policy-ratio clip.
      ent_coef: entropy bonus (keeps exploring between candidates).
      vf_coef: weight of the value loss.
      max_grad_norm: gradient clipping.
      env: :class:`EnvConfig`.
      policy: :class:`PolicyConfig`.
    """

    n_steps: int = 256
    batch_size: int = 256
    n_epochs: int = 4
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5

    def __post_init__(self):
        super().__post_init__()
        _integers(self, "n_steps", "n_epochs")
        _integers(self, "batch_size", minimum=2)
        _unit(self, "gae_lambda")
        _unit(self, "clip_range", closed=False)
        _positive(self, "vf_coef", "max_grad_norm")
        if not (isinstance(self.ent_coef, (int, float)) and self.ent_coef >= 0):
            raise ValueError(f"{type(self).__name__}.ent_coef must be >= 0, got {self.ent_coef!r}")

    def algo_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the SB3 algorithm's constructor."""
        return dict(learning_rate=self.learning_rate, gamma=self.gamma, n_steps=self.n_steps,
                    batch_size=self.batch_size, n_epochs=self.n_epochs, gae_lambda=self.gae_lambda,
                    clip_range=self.clip_range, ent_coef=self.ent_coef, vf_coef=self.vf_coef,
                    max_grad_norm=self.max_grad_norm)


@dataclass(frozen=True)
class PPOConfig(MaskablePPOConfig):
    """Stable-Baselines3 ``PPO``, without masks: a masked choice follows the env's
    ``invalid_action`` (by default: the buffer goes to slow memory). Same fields as
    :class:`MaskablePPOConfig`."""


@dataclass(frozen=True)
class DQNConfig(_Common):
    """Stable-Baselines3 ``DQN``, without masks (a masked choice follows ``invalid_action``).

    Attributes:
      n_envs, vec, gamma, env, policy: as in :class:`MaskablePPOConfig`.
      learning_rate: Adam step size (constant).
      buffer_size: replay buffer capacity (transitions). Not saved in checkpoints: a resumed
        run starts with an empty buffer.
      learning_starts: transitions collected before the first update.
      batch_size: minibatch size.
      train_freq: env steps (per game) between updates.
      gradient_steps: gradient steps per update.
      target_update_interval: env steps between target-network copies.
      exploration_steps: env steps over which epsilon falls linearly from
        ``exploration_initial_eps`` to ``exploration_final_eps`` (absolute, so it works with a
        wall-clock budget).
      exploration_initial_eps, exploration_final_eps: epsilon at the start and after
        ``exploration_steps``.
      max_grad_norm: gradient clipping.
    """

    learning_rate: float = 1e-4
    n_envs: int = 4
    buffer_size: int = 50_000
    learning_starts: int = 1_000
    batch_size: int = 64
    train_freq: int = 4
    gradient_steps: int = 1
    target_update_interval: int = 2_000
    exploration_steps: int = 20_000
    exploration_initial_eps: float = 1.0
    exploration_final_eps: float = 0.05
    max_grad_norm: float = 10.0

    def __post_init__(self):
        super().__post_init__()
        _integers(self, "buffer_size", "batch_size", "train_freq", "gradient_steps", "target_update_interval",
                  "exploration_steps")
        _integers(self, "learning_starts", minimum=0)
        _unit(self, "exploration_initial_eps", "exploration_final_eps")
        _positive(self, "max_grad_norm")

    def algo_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the SB3 algorithm's constructor (the exploration fraction is
        set by the trainer from ``exploration_steps`` and the step budget)."""
        return dict(learning_rate=self.learning_rate, gamma=self.gamma, buffer_size=self.buffer_size,
                    learning_starts=self.learning_starts, batch_size=self.batch_size,
                    train_freq=self.train_freq, gradient_steps=self.gradient_steps,
                    target_update_interval=self.target_update_interval,
                    exploration_initial_eps=self.exploration_initial_eps,
                    exploration_final_eps=self.exploration_final_eps, max_grad_norm=self.max_grad_norm)


AlgoConfig = Union[MaskablePPOConfig, PPOConfig, DQNConfig]
ALGOS: dict[str, type] = {"maskable_ppo": MaskablePPOConfig, "ppo": PPOConfig, "dqn": DQNConfig}


def default_config(algo: str, version: str = "v0", *, canonical: bool = False) -> AlgoConfig:
    """The default hyperparameters of ``algo`` (``maskable_ppo``, ``ppo`` or ``dqn``) on game
    ``version`` (``"v0"`` or ``"v1"``), with ``canonical=True`` in v0's canonical decision mode
    (``env.order="canonical"``). v1 and the canonical mode run their games in SB3's
    ``DummyVecEnv``, as the native batch plays v0's default mode only."""
    if algo not in ALGOS:
        raise ValueError(f"unknown algorithm {algo!r}; expected one of {', '.join(ALGOS)}")
    if version not in VERSIONS:
        raise ValueError(f"unknown game version {version!r}; expected one of {', '.join(VERSIONS)}")
    if canonical:
        if version != "v0":
            raise ValueError(f"env.order=canonical is a MallocGame-v0 decision mode; not available on {version}")
        return ALGOS[algo](vec="dummy", env=EnvConfig(order=CANONICAL))
    if version == "v0":
        return ALGOS[algo]()
    return ALGOS[algo](vec="dummy", env=EnvConfig(version="v1"))


def config_to_dict(config) -> dict[str, Any]:
    """A JSON-ready dict (tuples become lists)."""
    return dataclasses.asdict(config)


def _build(cls, data: dict[str, Any], where: str):
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown} for {cls.__name__}")
    kwargs = {}
    for name, value in data.items():
        if name == "env":
            value = _build(EnvConfig, value, f"{where}.env")
        elif name == "policy":
            value = _build(PolicyConfig, value, f"{where}.policy")
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def config_from_dict(algo: str, data: dict[str, Any], *, where: str = "config") -> AlgoConfig:
    """The config of ``algo`` from :func:`config_to_dict`'s output; ``where`` names the source
    (a file) in errors."""
    if algo not in ALGOS:
        raise ValueError(f"{where}: unknown algorithm {algo!r}; expected one of {', '.join(ALGOS)}")
    return _build(ALGOS[algo], data, where)


def _parse(text: str, current: Any, where: str) -> Any:
    try:
        if isinstance(current, bool):
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return text.lower() in ("true", "1")
        if isinstance(current, int):
            return int(float(text)) if float(text).is_integer() else int(text)
        if isinstance(current, float):
            return float(text)
        if isinstance(current, tuple):
            return tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{where}: cannot read {text!r} as {type(current).__name__}") from None
    return text


def override(config, assignment: str):
    """``config`` with one field replaced: ``"learning_rate=1e-4"``, ``"policy.extractor=flat"``,
    ``"env.memory_bins=16,16"``. Unknown fields and unreadable values raise ``ValueError``."""
    key, sep, text = assignment.partition("=")
    if not sep or not key:
        raise ValueError(f"--set {assignment!r}: expected FIELD=VALUE")
    head, _, rest = key.strip().partition(".")
    names = {f.name for f in dataclasses.fields(config)}
    if head not in names:
        raise ValueError(f"--set {assignment!r}: {type(config).__name__} has no field {head!r}; "
                         f"fields: {', '.join(sorted(names))}")
    current = getattr(config, head)
    if rest:
        if not dataclasses.is_dataclass(current):
            raise ValueError(f"--set {assignment!r}: {head!r} has no sub-fields")
        return dataclasses.replace(config, **{head: override(current, f"{rest}={text}")})
    if dataclasses.is_dataclass(current):
        raise ValueError(f"--set {assignment!r}: set one of {head}'s fields, e.g. {head}.FIELD=VALUE")
    if current is None:  # an optional integer (EnvConfig.n_starts); "none" leaves it unset
        if text.strip().lower() == "none":
            return dataclasses.replace(config, **{head: None})
        current = 0
    return dataclasses.replace(config, **{head: _parse(text.strip(), current, f"--set {assignment!r}")})
