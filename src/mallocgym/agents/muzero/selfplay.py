"""Self-play: ``num_actors`` games advanced together, one batched search per move.

Each actor owns an env, its own ``numpy.random.Generator`` (scenario draws, env seeds, search
noise) and the positions of its current game. A finished game becomes a :class:`GameRecord`
(rewards in scaled units; with the self-competition reward, 0 per step and a final
``tanh((R - baseline) / temperature)``).

With ``train.teacher_fraction > 0`` that share of games is played by the rollout teacher instead
of the search over the learned model: at each move it scores every legal action by finishing the
episode with XLA-like on the exact simulator (:class:`~mallocgym.agents.search.CompletionScorer`),
plays the best and stores :func:`teacher_targets` (expert iteration with the rollout algorithm
as the improvement operator; the simulator is used in training only, never when the learned
agent plays).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ... import sim
from ...scenarios import Scenario
from ..search import CompletionScorer
from .game import make_env
from .config import MuZeroConfig
from .mcts import NetworkModel, effective_legal, play, xla_move
from .networks import OBS_KEYS, stack_obs
from .replay import GameRecord

__all__ = ["ScenarioSource", "Actor", "SelfPlay", "Episode", "xla_return", "fallback_generator",
           "teacher_targets", "teacher_choice", "action_value_targets"]


def xla_return(static: sim.Static) -> float:
    """Normalised return of XLA-like on a compiled scenario (``1 - time / time_all_slow``)."""
    state = sim.new_state(static)
    time = sim.run_greedy(static, state, True)
    return 1.0 - time / float(static.params[sim.TIME_ALL_SLOW])


def teacher_choice(times: np.ndarray, base: int, margin: float) -> int:
    """The teacher's move: the first minimum of ``times`` (``inf``: illegal), unless it saves
    no more than ``margin`` (relative) over XLA-like's own move ``base``, which is then kept.

    ``margin = 0`` is the rollout algorithm (``base`` on exact ties only). A positive margin
    makes the teacher leave XLA-like's move only where that matters: most positions of a
    program have no such move, and near-ties between actions (differences of a few
    parts per million of the program time) are not worth imitating.
    """
    times = np.asarray(times, np.float64)
    if not np.isfinite(times[base]):
        raise ValueError(f"XLA-like's move {base} is not a legal action")
    best = int(np.argmin(times))
    if times[best] < times[base] * (1.0 - margin):
        return best
    return int(base)


def teacher_targets(times: np.ndarray, best: int, *, time_now: float, time_all_slow: float, scale: float,
                    temperature: float) -> tuple[np.ndarray, float]:
    """The teacher's policy target and value for one position.

    Args:
      times: ``[A]`` final program time of each action followed by XLA-like play (``inf``:
        illegal), from :class:`~mallocgym.agents.search.CompletionScorer`.
      best: the teacher's move.
      time_now: the program time of the position (undecided buffers in slow memory).
      scale: ``network.reward_scale``.
      temperature: 0 for a one-hot policy on ``best``, else ``softmax(Q / temperature)``.

    ``Q(a) = scale * (time_now - times[a]) / time_all_slow`` is the return still to come after
    ``a`` (MallocGame's dense rewards sum to it); the value is ``Q(best)``.
    """
    times = np.asarray(times, np.float64)
    legal = np.isfinite(times)
    if not legal[best]:
        raise ValueError(f"teacher move {best} is not a legal action")
    q = np.where(legal, scale * (time_now - np.where(legal, times, 0.0)) / time_all_slow, -np.inf)
    policy = np.zeros(len(times), np.float32)
    if temperature == 0:
        policy[best] = 1.0
    else:
        z = (q[legal] - q[legal].max()) / temperature
        w = np.exp(z)
        policy[legal] = w / w.sum()
    return policy, float(q[best])


def action_value_targets(times: np.ndarray, step_times: np.ndarray, *, time_now: float, time_all_slow: float,
                         scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-action targets for the learned model at one teacher position: ``(rewards, values)``,
    each ``float32[A]``, NaN for an illegal action.

    ``rewards[a] = scale * (time_now - step_times[a]) / time_all_slow`` is MallocGame's dense
    reward of ``a`` and ``values[a] = scale * (step_times[a] - times[a]) / time_all_slow`` the
    return of XLA-like play from the position ``a`` leads to; they sum to the teacher's ``Q(a)``
    (:func:`teacher_targets`). ``times`` / ``step_times``: the completion and one-step program
    times of :class:`~mallocgym.agents.search.CompletionScorer` (``inf``: illegal).
    """
    times = np.asarray(times, np.float64)
    step_times = np.asarray(step_times, np.float64)
    legal = np.isfinite(times)
    if not np.array_equal(legal, np.isfinite(step_times)):
        raise ValueError("times and step_times disagree on which actions are legal")
    rewards = np.full(len(times), np.nan, np.float32)
    values = np.full(len(times), np.nan, np.float32)
    rewards[legal] = scale * (time_now - step_times[legal]) / time_all_slow
    values[legal] = scale * (step_times[legal] - times[legal]) / time_all_slow
    return rewards, values


def fallback_generator(rng: np.random.Generator) -> Scenario:
    """Seeded MLP training steps (seeds >= 1000, apart from the bundled ones), used when
    :mod:`mallocgym.workloads.generator` is not available."""
    from ...scenarios import resolve
    from ...workloads.synthetic import mlp_training_step

    return resolve(mlp_training_step(int(rng.integers(1000, 2**31))))


def make_generator(preset_name: str, families: str = "",
                   buffers: str = "") -> Callable[[np.random.Generator], Scenario]:
    """The synthetic workload generator's preset (drawing from ``families``, comma-separated,
    when given, and ``buffers``, ``"LOW,HIGH"``, when given), or :func:`fallback_generator`."""
    try:
        from ...scenarios import WorkloadGenerator
        from ...workloads.generator import parse_families, preset
    except ImportError:
        return fallback_generator
    from .config import parse_buffers

    config = preset(preset_name)
    if names := parse_families(families):
        config = replace(config, families=names)
    if buffers:
        config = replace(config, buffers=parse_buffers(buffers))
    return WorkloadGenerator(config)


class ScenarioSource:
    """Draws training scenarios: from the generator with probability ``generator_fraction``,
    else uniformly from ``scenarios``."""

    def __init__(self, scenarios: list[Scenario], generator: Callable | None, generator_fraction: float):
        if not scenarios and generator is None:
            raise ValueError("nothing to train on: no scenarios and no generator")
        self.scenarios = list(scenarios)
        self.generator = generator
        self.fraction = generator_fraction if scenarios else 1.0
        if generator is None:
            self.fraction = 0.0

    def sample(self, rng: np.random.Generator) -> tuple[Scenario, str | None]:
        """A scenario and the key its self-competition baseline is kept under (None for a
        generated, never-repeated instance)."""
        if self.generator is not None and rng.random() < self.fraction:
            return self.generator(rng), None
        s = self.scenarios[int(rng.integers(len(self.scenarios)))]
        return s, s.name


@dataclass
class Episode:
    """A finished game's summary (normalised units)."""

    scenario: str
    key: str | None
    length: int
    ret: float
    xla_return: float
    reward: float = 0.0     # the self-competition reward when used
    teacher: bool = False   # played by the rollout teacher


@dataclass
class Actor:
    """One game slot."""

    env: object
    rng: np.random.Generator
    scenario: Scenario | None = None
    key: str | None = None
    obs: dict | None = None
    xla: float = 0.0
    steps: list = field(default_factory=list)
    scorer: CompletionScorer | None = None   # set while the teacher plays this game
    known: float | None = None               # teacher: XLA-like's completion time from here, if known

    def start(self, source: ScenarioSource, teacher_fraction: float = 0.0) -> None:
        """Begin a new game on a scenario drawn with this actor's generator; the teacher plays
        it with probability ``teacher_fraction``."""
        self.scenario, self.key = source.sample(self.rng)
        teach = teacher_fraction > 0 and self.rng.random() < teacher_fraction
        self.obs, _ = self.env.reset(seed=int(self.rng.integers(2**31)), options={"workload": self.scenario})
        static = self.env.unwrapped.static
        self.xla = xla_return(static)
        self.scorer = CompletionScorer(static, self.env.unwrapped.k) if teach else None
        self.known = None
        self.steps = []

    def teacher_move(self, config: MuZeroConfig,
                     prune_no_benefit: bool) -> tuple[int, np.ndarray, float, tuple[np.ndarray, np.ndarray] | None]:
        """``(move, policy target, value, per-action targets)`` at the current position: the
        teacher's targets; the move is the teacher's (:func:`teacher_choice` with
        ``train.teacher_margin``), or with probability ``train.teacher_epsilon`` a uniformly
        random legal one. The per-action targets (:func:`action_value_targets`) are computed
        when ``train.action_value_weight > 0`` and the position has more than one legal move,
        else None."""
        env = self.env.unwrapped
        state = env.sim_state
        batch = {key: self.obs[key][None] for key in ("action_mask", "buffer")}
        legal = effective_legal(batch, prune_no_benefit=prune_no_benefit)[0]   # the search's rule
        time_now = float(state.totals[sim.TIME])
        time_all_slow = float(env.static.params[sim.TIME_ALL_SLOW])
        scale = config.network.reward_scale
        per_action = None
        if legal.sum() == 1 and self.known is not None:
            # one move (skip, which is XLA-like's move here too): its completion is the one the
            # previous move's score already holds, no need to rerun all K + 1
            times = np.where(legal, self.known, np.inf)
        else:
            step_times = np.empty(len(legal)) if config.train.action_value_weight > 0 else None
            times, _ = self.scorer(state, step_times)
            times[~legal] = np.inf
            if step_times is not None and legal.sum() > 1:
                step_times[~legal] = np.inf
                per_action = action_value_targets(times, step_times, time_now=time_now,
                                                  time_all_slow=time_all_slow, scale=scale)
        best = teacher_choice(times, xla_move(legal), config.train.teacher_margin)
        policy, value = teacher_targets(times, best, time_now=time_now, time_all_slow=time_all_slow,
                                        scale=scale, temperature=config.train.teacher_temperature)
        eps = config.train.teacher_epsilon
        if eps > 0 and self.rng.random() < eps:
            best = int(self.rng.choice(np.flatnonzero(np.isfinite(times))))
        self.known = float(times[best])   # XLA-like's completion from the next position
        return best, policy, value, per_action


class SelfPlay:
    """Advances every actor by one move per :meth:`step`; finished games come back as
    ``(GameRecord, Episode)`` pairs."""

    def __init__(self, config: MuZeroConfig, source: ScenarioSource, rngs: list[np.random.Generator]):
        self.config = config
        self.source = source
        self.baselines: dict[str, float] = {}
        first = source.scenarios[0] if source.scenarios else source.generator(np.random.default_rng(0))
        self.actors = [Actor(make_env(first, config), rng) for rng in rngs]
        for actor in self.actors:
            actor.start(source, config.train.teacher_fraction)

    def step(self, model: NetworkModel) -> list[tuple[GameRecord, Episode]]:
        """One move in every game (one batched search for the games the teacher does not play);
        returns the games that ended."""
        cfg = self.config
        moves: dict[int, tuple[int, np.ndarray, float, None]] = {}
        searched = [i for i, a in enumerate(self.actors) if a.scorer is None]
        if searched:
            obs = stack_obs([self.actors[i].obs for i in searched])
            result = play(model, obs, config=cfg.search, num_simulations=cfg.search.num_simulations,
                          rngs=[self.actors[i].rng for i in searched])
            for j, i in enumerate(searched):
                moves[i] = (int(result.action[j]), result.policy[j], float(result.value[j]), None)
        finished = []
        for i, actor in enumerate(self.actors):
            if actor.scorer is not None:
                action, policy, value, per_action = actor.teacher_move(cfg, cfg.search.prune_no_benefit)
            else:
                action, policy, value, per_action = moves[i]
            nxt, reward, done, _, _ = actor.env.unwrapped.step(action)
            actor.steps.append((actor.obs, action, reward, value, policy, per_action))
            actor.obs = nxt
            if done:
                finished.append(self._finish(actor))
                actor.start(self.source, cfg.train.teacher_fraction)
        return finished

    def _finish(self, actor: Actor) -> tuple[GameRecord, Episode]:
        cfg = self.config
        scale = cfg.network.reward_scale
        steps = actor.steps
        raw = np.array([s[2] for s in steps], np.float64)
        ret = float(raw.sum())
        episode = Episode(actor.scenario.name, actor.key, len(steps), ret, actor.xla,
                          teacher=actor.scorer is not None)
        if cfg.train.reward_mode == "self_competition":
            baseline = self.baselines.get(actor.key, actor.xla) if actor.key else actor.xla
            episode.reward = math.tanh((ret - baseline) / cfg.train.self_competition_temperature)
            rewards = np.zeros(len(steps))
            rewards[-1] = episode.reward
            if actor.key:
                ema = cfg.train.self_competition_ema
                self.baselines[actor.key] = ema * baseline + (1.0 - ema) * ret
        else:
            rewards = raw
        record = GameRecord(
            obs={key: np.stack([s[0][key] for s in steps]) for key in OBS_KEYS},
            actions=np.array([s[1] for s in steps], np.int64),
            rewards=(rewards * scale).astype(np.float32),
            values=np.array([s[3] for s in steps], np.float32),
            policies=np.stack([s[4] for s in steps]).astype(np.float32),
        )
        if any(s[5] is not None for s in steps):
            blank = np.full(len(steps[0][4]), np.nan, np.float32)
            record.action_rewards = np.stack([blank if s[5] is None else s[5][0] for s in steps])
            record.action_values = np.stack([blank if s[5] is None else s[5][1] for s in steps])
        return record, episode
