"""Labelled games in worker processes (``train.label_workers > 0``, issue 31).

A labelled game (:func:`.labels.label_game` on MallocGame-v0, :func:`.v1.label_game_v1` on v1)
needs no network: it is XLA's game with every move of some positions scored by an exact
completion. Its cost is those completions, so labels scale with cores: ``N`` worker processes
play labelled games while the trainer's process learns from what they return.

Game ``i`` draws its scenario, env seed, labelled positions and exploring moves from its own
generator, ``default_rng([seed, i])``, and is held out on
:class:`.expert.ExpertActor`'s rule (:func:`.expert.is_heldout`). Games come back
in the order they were started (the learner sees the same games in the same order whatever the
workers' speeds; only the wall-clock budget decides how many).

With ``train.label_policy > 0`` some games are the network's policy's (DAgger,
:func:`.expert.is_policy_game`): a worker plays them with the network of the run's checkpoint
file (``policy_path``) as it is when the game starts, reloaded when the trainer has written a
newer one. Those games depend on how far training was when they started, so a run with them is
reproducible in its games and draws but not in its policy games' moves.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque

import numpy as np

from ...scenarios import Scenario
from .config import MuZeroConfig
from .expert import ExpertGame, is_heldout, is_policy_game

__all__ = ["LabelWorkers"]

# set in each worker process by _start_worker
_WORKER: dict = {}


def _start_worker(config: dict, scenarios: list[Scenario], use_generator: bool, policy_path: str | None) -> None:
    import signal

    import torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the trainer's: it checkpoints and ends the pool
    torch.set_num_threads(1)
    from .source import ScenarioSource, make_generator

    cfg = MuZeroConfig.from_dict(config)
    t = cfg.train
    generator = make_generator(t.generator_preset, t.generator_families, t.generator_buffers) if use_generator else None
    _WORKER.update(config=cfg, source=ScenarioSource(list(scenarios), generator, t.generator_fraction),
                   policy_path=policy_path, policy=None, policy_stamp=None)


def _policy_advantage():
    """Worker: the advantage head of the network in the run's checkpoint file, reloaded when
    the file changed since the last game (:func:`.v1.network_advantage`)."""
    from .checkpoint import load_network
    from .model import NetworkModel
    from .v1 import network_advantage

    path = _WORKER["policy_path"]
    if path is None:
        raise ValueError("train.label_policy > 0 needs the run's checkpoint file for the label workers")
    stamp = os.stat(path).st_mtime_ns
    if stamp != _WORKER["policy_stamp"]:
        net, _, _ = load_network(path)
        _WORKER.update(policy=network_advantage(NetworkModel(net)), policy_stamp=stamp)
    return _WORKER["policy"]


def _play(seed: int, index: int) -> tuple[str, list, float, float, bool]:
    """Worker: labelled game ``index`` (module docstring): ``(scenario, records, return, XLA's
    return, whether the policy played it)``."""
    from .labels import label_game
    from .v1 import label_game_v1

    config, source = _WORKER["config"], _WORKER["source"]
    rng = np.random.default_rng([seed, index])
    scenario, _ = source.sample(rng)
    policy = is_policy_game(seed, index, config.train.label_policy)
    if config.env.game == "v1":
        records, ret, xla_return = label_game_v1(scenario, config, rng, _policy_advantage() if policy else None)
    else:
        records, ret, xla_return = label_game(scenario, config, rng)
    return scenario.name, records, ret, xla_return, policy


class LabelWorkers:
    """``workers`` processes playing labelled games (module docstring); :meth:`step` returns the
    next game in start order as :class:`.expert.ExpertActor.step` does. Use as a context manager
    (the processes are ended on exit)."""

    def __init__(self, config: MuZeroConfig, scenarios: list[Scenario], *, use_generator: bool, seed: int,
                 workers: int, games_started: int = 0, policy_path: str | os.PathLike | None = None):
        if workers < 1:
            raise ValueError(f"label workers must be >= 1, got {workers}")
        self.config = config
        self.seed = int(seed)
        self.workers = int(workers)
        self.games_started = int(games_started)
        context = multiprocessing.get_context("spawn")   # no fork of a process that holds torch threads
        self.pool = context.Pool(self.workers, initializer=_start_worker,
                                 initargs=(config.to_dict(), list(scenarios), use_generator,
                                           None if policy_path is None else str(policy_path)))
        self.pending: deque = deque()

    def _fill(self) -> None:
        while len(self.pending) < 2 * self.workers:
            index = self.games_started
            self.games_started += 1
            self.pending.append((index, self.pool.apply_async(_play, (self.seed, index))))

    def step(self, timeout: float | None = None) -> tuple[list, bool, ExpertGame | None]:
        """The next finished game: ``(positions, whether they are held out, the game)``; after
        ``timeout`` seconds without it, ``([], False, None)`` (the game stays next)."""
        self._fill()
        index, result = self.pending[0]
        result.wait(timeout)
        if not result.ready():
            return [], False, None
        self.pending.popleft()
        name, records, ret, xla_return, policy = result.get()
        heldout = is_heldout(index, self.config.train.heldout_fraction)
        self._fill()
        return records, heldout, ExpertGame(name, len(records), ret, xla_return, heldout, policy)

    def close(self) -> None:
        """End the worker processes (games in flight are dropped)."""
        self.pool.terminate()
        self.pool.join()

    def __enter__(self) -> "LabelWorkers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
