"""Self-play: ``num_actors`` games advanced together, one batched search per move.

Each actor owns an env, its own ``numpy.random.Generator`` (scenario draws, env seeds, search
noise) and the positions of its current game. A finished game becomes a :class:`GameRecord`
(rewards in scaled units; with the self-competition reward, 0 per step and a final
``tanh((R - baseline) / temperature)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ... import sim
from ...scenarios import Scenario
from .agent import make_env
from .config import MuZeroConfig
from .mcts import NetworkModel, play
from .networks import OBS_KEYS, stack_obs
from .replay import GameRecord

__all__ = ["ScenarioSource", "Actor", "SelfPlay", "Episode", "xla_return", "fallback_generator"]


def xla_return(static: sim.Static) -> float:
    """Normalised return of XLA-like on a compiled scenario (``1 - time / time_all_slow``)."""
    state = sim.new_state(static)
    time = sim.run_greedy(static, state, True)
    return 1.0 - time / float(static.params[sim.TIME_ALL_SLOW])


def fallback_generator(rng: np.random.Generator) -> Scenario:
    """Seeded MLP training steps (seeds >= 1000, apart from the bundled ones), used when
    :mod:`mallocgym.workloads.generator` is not available."""
    from ...scenarios import resolve
    from ...workloads.synthetic import mlp_training_step

    return resolve(mlp_training_step(int(rng.integers(1000, 2**31))))


def make_generator(preset_name: str) -> Callable[[np.random.Generator], Scenario]:
    """The synthetic workload generator's preset, or :func:`fallback_generator`."""
    try:
        from ...workloads.generator import WorkloadGenerator, preset
    except ImportError:
        return fallback_generator
    return WorkloadGenerator(preset(preset_name))


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

    def start(self, source: ScenarioSource) -> None:
        """Begin a new game on a scenario drawn with this actor's generator."""
        self.scenario, self.key = source.sample(self.rng)
        self.obs, _ = self.env.reset(seed=int(self.rng.integers(2**31)), options={"workload": self.scenario})
        self.xla = xla_return(self.env.unwrapped.static)
        self.steps = []


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
            actor.start(source)

    def step(self, model: NetworkModel) -> list[tuple[GameRecord, Episode]]:
        """One batched search and one move in every game; returns the games that ended."""
        cfg = self.config
        obs = stack_obs([a.obs for a in self.actors])
        result = play(model, obs, config=cfg.search, num_simulations=cfg.search.num_simulations,
                      rngs=[a.rng for a in self.actors])
        finished = []
        for i, actor in enumerate(self.actors):
            action = int(result.action[i])
            nxt, reward, done, _, _ = actor.env.unwrapped.step(action)
            actor.steps.append((actor.obs, action, reward, float(result.value[i]), result.policy[i]))
            actor.obs = nxt
            if done:
                finished.append(self._finish(actor))
                actor.start(self.source)
        return finished

    def _finish(self, actor: Actor) -> tuple[GameRecord, Episode]:
        cfg = self.config
        scale = cfg.network.reward_scale
        steps = actor.steps
        raw = np.array([s[2] for s in steps], np.float64)
        ret = float(raw.sum())
        episode = Episode(actor.scenario.name, actor.key, len(steps), ret, actor.xla)
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
        return record, episode
