"""mallocMuZero's configuration: frozen dataclasses, validated on construction.

``MuZeroConfig`` groups five parts (env, network, search, simulator, train). Every field has a
documented default; ``MuZeroConfig.from_dict`` rejects unknown names and ``with_overrides``
takes dotted ``"simulator.num_simulations=8"`` strings (the ``--set`` option of the trainer).
Fields issue 31 removed are refused naming their replacement, and still load from the
checkpoints that record them (:data:`REMOVED_FIELDS`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..._validate import nearest_hint

__all__ = ["EnvConfig", "NetworkConfig", "SearchConfig", "SimulatorConfig", "TrainConfig", "MuZeroConfig"]

ORDERS = ("boundedness", "start", "size")
NETWORK_VERSIONS = (1, 2)
GAMES = ("v0", "v1")


def parse_buffers(text: str) -> tuple[int, int]:
    """``"100,1100"`` -> ``(100, 1100)`` (``train.generator_buffers``); one ``ValueError`` otherwise."""
    parts = text.split(",")
    try:
        lo, hi = (int(p) for p in parts)
    except ValueError:
        lo = hi = 0
    if len(parts) != 2 or not 1 <= lo <= hi:
        raise ValueError(f"train.generator_buffers must be 'LOW,HIGH' with 1 <= LOW <= HIGH, got {text!r}")
    return lo, hi


def _typed(obj, owner: str) -> None:
    """Check (and coerce ints to floats for) every field against its annotation."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        kind = f.type
        if kind == "bool":
            ok = isinstance(value, bool)
        elif kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "float":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if ok:
                object.__setattr__(obj, f.name, float(value))
        elif kind == "str":
            ok = isinstance(value, str)
        else:
            continue
        if not ok:
            raise ValueError(f"{owner}.{f.name} must be {kind}, got {value!r}")


def _positive(owner: str, **values) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{owner}.{name} must be > 0, got {value!r}")


def _unit(owner: str, **values) -> None:
    for name, value in values.items():
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{owner}.{name} must be in [0, 1], got {value!r}")


@dataclass(frozen=True)
class EnvConfig:
    """How the agent sees MallocGame (the env is made with these arguments).

    Attributes:
      n_candidates: ``K``, candidate offsets per decision (actions ``K + 1`` with skip).
      n_next: ``L``, upcoming buffers in the observation.
      memory_bins: ``(A, B)`` address x time bins of the occupancy image.
      order: the buffer decision order (MallocGame's ``order``).
      game: ``"v0"`` (MallocGame-v0) or ``"v1"`` (MallocGame-v1, issue 18 step 7: version-2
        networks trained on labelled games only, :mod:`mallocgym.agents.muzero.v1`); set by
        ``mallocgym train muzero --env v1``. Checkpoints record it; older ones are v0.
    """

    n_candidates: int = 16
    n_next: int = 8
    memory_bins: tuple[int, int] = (16, 16)
    order: str = "boundedness"
    game: str = "v0"

    def __post_init__(self) -> None:
        _typed(self, "env")
        object.__setattr__(self, "memory_bins", tuple(int(b) for b in self.memory_bins))
        _positive("env", n_candidates=self.n_candidates, n_next=self.n_next)
        if len(self.memory_bins) != 2 or min(self.memory_bins) < 1:
            raise ValueError(f"env.memory_bins must be two integers >= 1, got {self.memory_bins!r}")
        if self.order not in ORDERS:
            raise ValueError(f"env.order must be one of {ORDERS}, got {self.order!r}")
        if self.game not in GAMES:
            raise ValueError(f"env.game must be one of {GAMES}, got {self.game!r}")

    def make_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``gym.make("MallocGame-v0", ...)``."""
        return {"n_candidates": self.n_candidates, "n_next": self.n_next,
                "memory_bins": self.memory_bins, "order": self.order}


@dataclass(frozen=True)
class NetworkConfig:
    """Network sizes and value units.

    Attributes:
      hidden: width of the latent state and of the MLPs.
      candidate_hidden: width of each candidate's embedding (pointer keys and action embeddings).
      memory_hidden: width of the occupancy-image encoder's output.
      value_support: value distribution over ``[-S, S]`` in h-space (``S = 10`` covers values up
        to 130 in magnitude).
      reward_support: the same for the per-step reward.
      reward_scale: values and rewards the network sees are MallocGame's normalised reward
        times this (100: a return is in percent of the all-slow time).
      version: 2 (the default), expert iteration on the exact simulator
        (:mod:`mallocgym.agents.muzero.expert`): the policy head learns the simulator search's
        improved policy or the label policy, a scalar residual head the best completion found
        below a position minus XLA-like's completion from it, and an advantage head every legal
        move's exact completion against XLA-like's move; it plays ``muzero-sim`` and
        ``muzero-pol``. 1: MuZero's heads and targets (the published
        ``baselines/muzero/checkpoint*``, and a checkpoint that records no version): it plays
        ``muzero-sim`` only, and is no longer trained (issue 31 removed MuZero's self-play over
        the learned model).
      residual_scale: version 2: residuals and advantages are ``residual_scale x (time saved) /
        (XLA-like's completion time from the position)``; 400 makes 1 unit 0.25 % of the
        program time, about the median non-zero residual (0.28 % in the positions the search
        harvested from ten small generated programs, two per family, 8 simulations per move).
    """

    hidden: int = 128
    candidate_hidden: int = 64
    memory_hidden: int = 64
    value_support: int = 10
    reward_support: int = 10
    reward_scale: float = 100.0
    version: int = 2
    residual_scale: float = 400.0

    def __post_init__(self) -> None:
        _typed(self, "network")
        _positive("network", hidden=self.hidden, candidate_hidden=self.candidate_hidden,
                  memory_hidden=self.memory_hidden, value_support=self.value_support,
                  reward_support=self.reward_support, reward_scale=self.reward_scale,
                  residual_scale=self.residual_scale)
        if self.version not in NETWORK_VERSIONS:
            raise ValueError(f"network.version must be one of {NETWORK_VERSIONS}, got {self.version!r}")


@dataclass(frozen=True)
class SearchConfig:
    """The legal moves the agents and the labels consider (the search over the learned model
    that this part configured until issue 31 was removed with ``muzero:DIR``; its fields are in
    :data:`REMOVED_FIELDS`).

    Attributes:
      prune_no_benefit: leave in slow memory, without search, a buffer whose placement would
        save nothing now (``obs["buffer"][5] == 0``): under the roofline model its benefit can
        only shrink as more is placed, so placing it only takes space (XLA's rule).
    """

    prune_no_benefit: bool = True

    def __post_init__(self) -> None:
        _typed(self, "search")


@dataclass(frozen=True)
class SimulatorConfig:
    """The simulator mode (``muzero-sim``): search on the exact simulator guided by the network
    (:class:`mallocgym.agents.muzero.simsearch.SimulatorSearch`).

    Attributes:
      num_simulations: simulations per move with a choice; each walks to an unexpanded position
        and expands it: every legal action played and scored by its XLA-like completion, one
        network call for the new positions.
      value_mix: a new position's value is ``(1 - value_mix) * network estimate + value_mix *
        exact return of finishing the episode with XLA-like`` (0: the network alone; 1: exact
        values alone).
      c_visit, c_scale: the selection's Q bonus ``sigma(q) = (c_visit + max_b N(b)) * c_scale *
        qn`` (``qn``: the children's Q-values min-max normalised within the node, ``N``:
        simulations through each child). Smaller is more exploratory. The simulator search has
        its own constants (``search.c_visit``, ``c_scale`` and ``min_q_span`` are the learned
        search's): its values are exact, and the learned search's ``c_visit = 50`` made it
        greedy (it kept to the child with the best one-step completion).
      prior_temperature: the network's logits are divided by this before the lead bound.
      max_logit_lead: the prior's logits are raised to at least ``max - max_logit_lead`` (0: the
        prior zeroed, uniform; then with ``value_mix = 1`` the network is not called, except by a
        version-2 network, whose predicted residual still values the leaves). Must be
        below ``c_visit * c_scale``, the smallest Q bonus between a node's best and worst child,
        so that Q can always overrule the prior
        (:func:`mallocgym.agents.muzero.simsearch.bounded_logits` shows the arithmetic).
      gate: version 2 only (issue 18, step 4: search where it pays): ``>= 0`` expands a
        position only where the network's predicted gain (its best predicted advantage over
        XLA-like's move, :func:`mallocgym.agents.muzero.labels.predicted_gain`, in
        ``network.residual_scale`` units) exceeds ``gate``; elsewhere the game follows the best
        mapping found so far (at first XLA-like's completion) without any completion. Negative
        (the default): every position with a choice is searched.
      policy_margin: the policy agent (``muzero-pol``, issue 18, step 5): leave XLA-like's move
        only where the best predicted advantage over it exceeds this (``residual_scale``
        units; 0: wherever one is predicted higher).
      top_moves: MallocGame-v1's search (``muzero-sim`` on a v1 checkpoint, issue 31): at a
        position the gate passes, only the ``top_moves`` moves with the highest predicted
        advantage (other than xla-msa's) are finished by an exact completion; 0: every move of
        the branching subset (the ``rollout`` step).
      head_threshold: the policy of a checkpoint with a departure head (issue 31,
        :mod:`mallocgym.agents.muzero.head`): depart only where the head's score is below this.
    """

    num_simulations: int = 8
    value_mix: float = 1.0
    c_visit: float = 5.0
    c_scale: float = 0.1
    prior_temperature: float = 1.0
    max_logit_lead: float = 0.25
    gate: float = -1.0
    policy_margin: float = 0.0
    top_moves: int = 0
    head_threshold: float = 0.0

    def __post_init__(self) -> None:
        _typed(self, "simulator")
        if not (math.isfinite(self.gate) and math.isfinite(self.head_threshold) and math.isfinite(self.policy_margin)
                and self.policy_margin >= 0):
            raise ValueError(f"simulator.gate and head_threshold must be finite and simulator.policy_margin finite and "
                             f">= 0, got {self.gate!r}, {self.head_threshold!r} and {self.policy_margin!r}")
        _positive("simulator", num_simulations=self.num_simulations)
        if self.top_moves < 0:
            raise ValueError(f"simulator.top_moves must be >= 0, got {self.top_moves!r}")
        _unit("simulator", value_mix=self.value_mix)
        if not (math.isfinite(self.prior_temperature) and self.prior_temperature > 0):
            raise ValueError(f"simulator.prior_temperature must be a finite number > 0, got {self.prior_temperature!r}")
        if not (math.isfinite(self.max_logit_lead) and self.max_logit_lead >= 0):
            raise ValueError(f"simulator.max_logit_lead must be a finite number >= 0, got {self.max_logit_lead!r}")
        _positive("simulator", c_visit=self.c_visit, c_scale=self.c_scale)
        if not self.max_logit_lead < self.c_visit * self.c_scale:
            raise ValueError(f"simulator.max_logit_lead ({self.max_logit_lead!r}) must be below simulator.c_visit * "
                             f"simulator.c_scale ({self.c_visit * self.c_scale!r}), the smallest Q bonus between a "
                             f"node's best and worst child: otherwise the prior could outrank Q")


@dataclass(frozen=True)
class TrainConfig:
    """Training games, replay and optimisation (version 2: expert iteration, :mod:`.expert`).

    Attributes:
      generator_fraction: share of games drawn from the synthetic generator (the rest from the
        training scenarios); ignored when training on named scenarios only.
      generator_preset: the generator's preset.
      generator_families: comma-separated network families the generator draws from instead
        of the preset's (``"transformer,cnn,mlp,unet,rnn"``); empty: the preset's.
      replay_capacity: positions kept in the replay buffer.
      min_replay: positions collected before learning starts.
      batch_size: positions per gradient step.
      replay_ratio: positions trained on per position generated (sets the update rate).
      lr, weight_decay, grad_clip: AdamW and gradient-norm clipping.
      positive_weight: a position whose residual is positive
        (the search found something better than XLA-like below it) is drawn this many times as
        often as one without (1: uniform).
      residual_loss_weight, advantage_loss_weight: weights of the residual and
        advantage regressions (Huber) next to the improved-policy cross-entropy.
      heldout_fraction: share of games whose positions are kept out of the replay
        (every ``1 / heldout_fraction``-th game; the latest 16,384 of their positions kept aside)
        and scored at every log line next to as many replay positions, so that train and
        held-out residual errors are logged side by side (held-out games are drawn like the
        others: mostly fresh generated programs; 0: none).
      generator_buffers: ``"LOW,HIGH"``: the generator's buffer-count range instead of the
        preset's (``"100,1100"``); empty: the preset's.
      label_fraction: issue 18, step 3: share of games that are not searched but labelled
        exactly (:func:`mallocgym.agents.muzero.labels.label_game`): XLA-like's game,
        and at about ``label_positions`` positions of it drawn at random, every legal move
        scored by its XLA-like completion (the advantages exact, the residual the best
        one-step gain); 1 (the default): every game; 0: every game is the simulator search's
        (how ``baselines/muzero/expert`` was trained: about one program a minute).
      label_positions: positions labelled per labelled game, on average (each position with
        a choice is labelled with probability ``min(1, label_positions / buffers)``).
      label_explore: at a labelled position, the probability that the game goes on with the
        best-scoring move instead of XLA-like's (so that positions after a departure are seen).
      label_temperature: the policy target of a labelled position is ``softmax(advantage /
        label_temperature)`` over its legal moves (``residual_scale`` units).
      label_workers: with ``label_fraction = 1``: labelled games are played in this
        many worker processes (:mod:`mallocgym.agents.muzero.workers`) while the trainer's
        process learns; 0: one game at a time in the trainer's process.
      label_policy: share of labelled games (MallocGame-v1) played by the network's own policy
        instead of xla-msa (DAgger, issue 31): the game goes on with the policy's move
        (:func:`.labels.policy_move` at ``label_policy_margin``); every position where it departs
        from xla-msa's move is labelled (up to ``label_positions`` of them) besides the random
        ones, so the network learns what its own departures are worth and what follows them.
        Game ``i`` is such a game when ``default_rng([seed, i, 1]).random() < label_policy``;
        it plays the network of the run's latest checkpoint (:func:`.v1.label_game_v1`). 0: none.
      label_policy_margin: the policy's margin in those games (``residual_scale`` units).
      device: where the learner's network trains: ``"cpu"`` or ``"cuda"`` (the checkpoint is the same either way and plays on the CPU).
      checkpoint_every_s: seconds between checkpoints (one is also written at the end).
      log_every_s: seconds between JSON-lines log records.
    """

    generator_fraction: float = 0.5
    generator_preset: str = "small"
    generator_families: str = ""
    replay_capacity: int = 100_000
    min_replay: int = 1_000
    batch_size: int = 128
    replay_ratio: float = 4.0
    lr: float = 1e-3
    weight_decay: float = 1e-4
    grad_clip: float = 5.0
    positive_weight: float = 4.0
    residual_loss_weight: float = 1.0
    advantage_loss_weight: float = 1.0
    heldout_fraction: float = 0.0
    generator_buffers: str = ""
    label_fraction: float = 1.0
    label_positions: int = 48
    label_explore: float = 0.5
    label_temperature: float = 0.25
    label_workers: int = 0
    label_policy: float = 0.0
    label_policy_margin: float = 0.0
    device: str = "cpu"
    checkpoint_every_s: float = 120.0
    log_every_s: float = 10.0

    def __post_init__(self) -> None:
        _typed(self, "train")
        _positive("train", replay_capacity=self.replay_capacity, batch_size=self.batch_size,
                  replay_ratio=self.replay_ratio, lr=self.lr, grad_clip=self.grad_clip,
                  checkpoint_every_s=self.checkpoint_every_s, log_every_s=self.log_every_s)
        _unit("train", generator_fraction=self.generator_fraction)
        if self.min_replay < 0 or self.weight_decay < 0:
            raise ValueError("train.min_replay and weight_decay must be >= 0")
        if self.generator_families:
            from ...workloads.generator import parse_families

            try:
                parse_families(self.generator_families)
            except ValueError as exc:
                raise ValueError(f"train.generator_families = {self.generator_families!r}: {exc}") from None
        if not self.positive_weight >= 1:
            raise ValueError(f"train.positive_weight must be >= 1, got {self.positive_weight!r}")
        if self.residual_loss_weight < 0 or self.advantage_loss_weight < 0:
            raise ValueError("train.residual_loss_weight and advantage_loss_weight must be >= 0")
        _unit("train", heldout_fraction=self.heldout_fraction, label_fraction=self.label_fraction,
              label_explore=self.label_explore, label_policy=self.label_policy)
        if not (math.isfinite(self.label_policy_margin) and self.label_policy_margin >= 0):
            raise ValueError(f"train.label_policy_margin must be finite and >= 0, got {self.label_policy_margin!r}")
        _positive("train", label_positions=self.label_positions, label_temperature=self.label_temperature)
        if self.generator_buffers:
            parse_buffers(self.generator_buffers)
        if self.min_replay > self.replay_capacity:
            raise ValueError(f"train.min_replay ({self.min_replay}) exceeds train.replay_capacity "
                             f"({self.replay_capacity})")
        if self.label_workers < 0:
            raise ValueError(f"train.label_workers must be >= 0, got {self.label_workers!r}")
        if self.label_workers > 0 and self.label_fraction != 1.0:
            raise ValueError("train.label_workers > 0 plays labelled games only: it needs train.label_fraction = 1")
        if self.device not in DEVICES:
            raise ValueError(f"train.device must be one of {DEVICES}, got {self.device!r}")


DEVICES = ("cpu", "cuda")

_PARTS = {"env": EnvConfig, "network": NetworkConfig, "search": SearchConfig,
          "simulator": SimulatorConfig, "train": TrainConfig}


@dataclass(frozen=True)
class MuZeroConfig:
    """Everything that defines a mallocMuZero run (saved in every checkpoint)."""

    env: EnvConfig = field(default_factory=EnvConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    simulator: SimulatorConfig = field(default_factory=SimulatorConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        for name, cls in _PARTS.items():
            if not isinstance(getattr(self, name), cls):
                raise ValueError(f"config.{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}")
        if self.env.game == "v1" and (self.network.version != 2 or self.train.label_fraction != 1.0):
            raise ValueError("on MallocGame-v1 mallocMuZero trains only on labelled games: it needs "
                             "network.version=2 and train.label_fraction=1, got "
                             f"network.version={self.network.version} and "
                             f"train.label_fraction={self.train.label_fraction!r}")
        if self.network.version == 2 and self.simulator.value_mix != 1.0:
            raise ValueError("network.version = 2 predicts a residual over XLA-like's exact completion, "
                             f"not a return: simulator.value_mix must be 1, got {self.simulator.value_mix!r}")
        if self.train.label_policy > 0 and self.env.game != "v1":
            raise ValueError("train.label_policy (labelled games played by the network's policy) is built for "
                             "MallocGame-v1 only: train with --env v1")
        if (self.train.label_workers > 0 or self.train.device != "cpu") and self.network.version != 2:
            raise ValueError("train.label_workers and train.device apply to the expert-iteration trainer: they need "
                             "network.version = 2")

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """``{part: {field: value}}`` (what checkpoints and ``config.json`` hold)."""
        return {name: dataclasses.asdict(getattr(self, name)) for name in _PARTS}

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON."""
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, saved: bool = False) -> "MuZeroConfig":
        """Build from :meth:`to_dict`'s shape; unknown parts or fields raise ``ValueError``.

        A field issue 31 removed (:data:`REMOVED_FIELDS`) is accepted at the value that had the
        behaviour the code keeps (older checkpoints record it) and refused otherwise, naming
        what to use instead; ``saved=True`` (a checkpoint's own config) also accepts a training
        field (:data:`TRAINING_RECORD`) at any value of its type, since it records how the
        network was trained and changes nothing in how it plays, and gives the fields that
        checkpoints written before they existed lack the value they had then
        (:data:`SAVED_DEFAULTS`)."""
        if not isinstance(data, dict):
            raise ValueError(f"config must be a dict of parts, got {type(data).__name__}")
        unknown = sorted(map(str, set(data) - set(_PARTS)))
        if unknown:
            raise ValueError(f"unknown config part {unknown[0]!r}{nearest_hint(unknown[0], _PARTS)}; "
                             f"known: {list(_PARTS)}")
        parts = {}
        for name, part_cls in _PARTS.items():
            values = dict(data.get(name, {}))
            for key in [k for k in values if f"{name}.{k}" in REMOVED_FIELDS]:
                default, why = REMOVED_FIELDS[f"{name}.{key}"]
                value = values.pop(key)
                if _same_kind(value, default) and value == default:
                    continue
                if saved and f"{name}.{key}" in TRAINING_RECORD and _same_kind(value, default):
                    continue
                raise ValueError(f"config field {name}.{key} = {value!r} was removed (issue 31): {why}")
            if saved:
                for key, value in SAVED_DEFAULTS.get(name, {}).items():
                    values.setdefault(key, value)
            names = {f.name for f in dataclasses.fields(part_cls)}
            bad = sorted(map(str, set(values) - names))
            if bad:
                raise ValueError(f"unknown config field {name}.{bad[0]}{nearest_hint(bad[0], names)}")
            parts[name] = part_cls(**values)
        return cls(**parts)

    def with_overrides(self, assignments: list[str] | tuple[str, ...]) -> "MuZeroConfig":
        """A copy with ``"part.field=value"`` assignments applied (values parsed as JSON, else
        taken as strings), e.g. ``["search.num_simulations=8", "train.reward_mode=dense"]``."""
        data = self.to_dict()
        for text in assignments:
            key, sep, raw = text.partition("=")
            part, dot, name = key.strip().partition(".")
            if not sep or not dot:
                raise ValueError(f"config override {text!r} must look like part.field=value")
            if key.strip() in REMOVED_FIELDS:
                raise ValueError(f"config override {text!r}: the field was removed (issue 31): "
                                 f"{REMOVED_FIELDS[key.strip()][1]}")
            if part not in data or name not in data[part]:
                hint = nearest_hint(name, data[part]) if part in data else nearest_hint(part, data)
                raise ValueError(f"config override {text!r}: unknown field {key.strip()!r}{hint}")
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
            data[part][name] = value
        return MuZeroConfig.from_dict(data)


def _same_kind(value: Any, default: Any) -> bool:
    """Whether ``value`` has the type of ``default`` (an int where a float is recorded too)."""
    if isinstance(default, bool) or isinstance(default, str):
        return type(value) is type(default)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_LEARNED = "removed with muzero:DIR (the search over the learned model); the simulator search has its own settings, simulator.*"
VERSION_1 = ("the version-1 trainer (MuZero's self-play over the learned model, its teacher and its per-action "
             "targets) was removed by issue 31; train network.version=2 with train.label_fraction=1 (the "
             "defaults); version-1 checkpoints still play muzero-sim:DIR")
_DYNAMICS = ("the learned-dynamics mode (issue 18, step 6) was removed with muzero:DIR by issue 31; train "
             "network.version=2 with train.label_fraction=1 and play muzero-sim:DIR or muzero-pol:DIR")

# Fields issue 31 removed: field -> (the value that has the behaviour the code keeps, which older
# checkpoints record; why it went and what to use instead). Their numbers: baselines/muzero/README.md.
REMOVED_FIELDS = {
    # play-time options issue 18 measured and did not choose
    "search.departure_margin": (0.0, "a departure margin at play time was not chosen; the policy's margin is "
                                     "simulator.policy_margin"),
    "search.ensemble": ("mean", "ensembles of checkpoints were removed; play one checkpoint"),
    "simulator.pace": (False, "the simulator search runs num_simulations per move within its budget"),
    "simulator.pace_by": ("share", "removed with simulator.pace"),
    "simulator.width": (0, "the simulator search expands every legal move"),
    "simulator.tree": ("gumbel", "the simulator search is the Gumbel tree; the UCT tree is the mcts agent"),
    "simulator.then": ("none", "one search per game"),
    "simulator.then_share": (0.5, "removed with simulator.then"),
    "simulator.keep_xla": (True, "the simulator search always returns the best completion it has seen, "
                                 "XLA-like's own among them"),
    # the search over the learned model (muzero:DIR)
    **{f"search.{name}": (default, _LEARNED) for name, default in (
        ("algorithm", "gumbel"), ("num_simulations", 16), ("max_considered", 8), ("gumbel_scale", 1.0),
        ("min_q_span", 0.0), ("frame", "return"), ("pb_c_init", 1.25), ("pb_c_base", 19652.0),
        ("dirichlet_alpha", 0.3), ("exploration_fraction", 0.25), ("temperature", 1.0), ("discount", 1.0))},
    "search.eval_simulations": (32, _LEARNED + "; muzero-sim:DIR,sims=N"),
    "search.c_visit": (50.0, _LEARNED + " (simulator.c_visit)"),
    "search.c_scale": (0.1, _LEARNED + " (simulator.c_scale)"),
    # the version-1 trainer (self-play over the learned model), and the learned dynamics of version 2
    **{f"train.{name}": (default, VERSION_1) for name, default in (
        ("num_actors", 16), ("unroll_steps", 5), ("td_steps", 10), ("value_loss_weight", 0.25),
        ("consistency_weight", 0.5), ("priority_alpha", 0.6), ("priority_beta", 0.4),
        ("reanalyse_fraction", 0.0), ("teacher_fraction", 0.0), ("teacher_temperature", 0.0),
        ("teacher_epsilon", 0.0), ("teacher_margin", 0.0), ("action_value_weight", 0.0),
        ("action_value_actions", 4), ("reward_mode", "dense"), ("self_competition_ema", 0.9),
        ("self_competition_temperature", 0.01))},
    "train.dynamics_weight": (0.0, _DYNAMICS),
}
# removed fields that only record how a checkpoint was trained (or searched over its learned
# model): a checkpoint's own config may hold any value of them (MuZeroConfig.from_dict(saved=True))
TRAINING_RECORD = frozenset(k for k, (_, why) in REMOVED_FIELDS.items() if why in (VERSION_1, _DYNAMICS)
                            or why.startswith(_LEARNED))
# fields that checkpoints written before they existed lack, with the value they had then (their
# defaults changed with issue 31: version 2 and labelled games are the trainer's defaults now)
SAVED_DEFAULTS = {"network": {"version": 1}, "train": {"label_fraction": 0.0}}
