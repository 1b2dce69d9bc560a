"""The trained mallocMuZero as a harness agent: ``muzero:DIR`` and ``muzero-sim:DIR``.

``muzero:DIR`` plays each move with search over the learned model; ``muzero-sim:DIR`` searches
the exact simulator with the network's priors and values (and, with ``keep_xla``, returns
XLA-like's mapping when that is better). Options follow the path after commas:
``muzero:runs/a,sims=64`` (simulations per move), ``muzero:runs/a,span=2`` (the search's
``min_q_span``), ``muzero:runs/a,keep=1`` (``search.departure_margin``: keep XLA-like's move
unless the search values another higher by more than 1).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from ...evaluate import evaluate
from ...heuristics import xla_like
from ...scenarios import Scenario
from ..base import Solution
from .checkpoint import load_network
from .config import MuZeroConfig
from .mcts import NetworkModel, effective_legal, keep_xla_move, play
from .networks import MuZeroNet, ObsSpec, stack_obs
from .simsearch import simulator_search

__all__ = ["MuZeroAgent", "muzero_factory", "MODES", "make_env"]

MODES = ("learned", "simulator")


def make_env(scenario, config: MuZeroConfig):
    """A MallocGame env for ``scenario`` as the agent sees it (its ``EnvConfig``)."""
    return gym.make("MallocGame-v0", workload=scenario, **config.env.make_kwargs())


class MuZeroAgent:
    """Plays MallocGame with search; ``mode`` is ``"learned"`` or ``"simulator"``."""

    def __init__(self, net: MuZeroNet, config: MuZeroConfig, *, mode: str = "learned",
                 num_simulations: int | None = None, name: str | None = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        torch.set_num_threads(1)
        self.net = net.eval()
        self.model = NetworkModel(self.net)
        self.config = config
        self.mode = mode
        default = config.search.eval_simulations if mode == "learned" else config.simulator.num_simulations
        self.num_simulations = int(num_simulations or default)
        self.name = name or ("muzero" if mode == "learned" else "muzero-sim")

    def moves(self, scenario: Scenario, *, seed: int = 0):
        """Play one game, yielding ``(env, legal, action)`` before each move is made (``env``:
        the unwrapped MallocGame env at the position, ``legal``: the search's legal actions);
        returns the final ``info`` and the number of searched moves. :meth:`solve` plays it out;
        ``baselines/muzero/departures.py`` inspects it."""
        env = make_env(scenario, self.config)
        u = env.unwrapped
        spec = ObsSpec.from_env(env)
        if spec != self.net.spec:
            raise ValueError(f"the network was trained on observations {self.net.spec}, the env gives {spec}")
        obs, info = env.reset(seed=seed)
        done = False
        searched = 0
        while not done:
            batch = stack_obs([obs])
            legal = effective_legal(batch, prune_no_benefit=self.config.search.prune_no_benefit)[0]
            if legal.sum() <= 1:
                action = int(np.flatnonzero(legal)[0])
            elif self.mode == "learned":
                result = play(self.model, batch, config=self.config.search, num_simulations=self.num_simulations)
                action = int(keep_xla_move(result, legal[None], self.config.search.departure_margin)[0])
                searched += 1
            else:
                action = int(simulator_search(self.model, [u], config=self.config,
                                              num_simulations=self.num_simulations).action[0])
                searched += 1
            yield u, legal, action
            obs, _, done, _, info = u.step(action)
        return info, searched

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        game = self.moves(scenario, seed=seed)
        try:
            while True:
                next(game)
        except StopIteration as end:
            info, searched = end.value
        offsets = np.asarray(info["offsets"], np.int64)
        details = {"mode": self.mode, "simulations": self.num_simulations, "searched_moves": searched}
        if self.mode == "simulator" and self.config.simulator.keep_xla:
            xla = xla_like(scenario)
            own = evaluate(scenario.workload, offsets, scenario.hardware).time
            if evaluate(scenario.workload, xla, scenario.hardware).time < own:
                offsets = xla
                details["kept_xla"] = True
            else:
                details["kept_xla"] = False
        return Solution(offsets, info=details)


def _parse(kind: str, arg: str | None) -> tuple[str, dict, list[str]]:
    if not arg:
        raise ValueError(f"agent {kind!r} needs a checkpoint: {kind}:DIR (a `mallocgym train muzero --out DIR` folder)")
    path, *options = arg.split(",")
    parsed: dict = {}
    overrides: list[str] = []
    for option in options:
        key, sep, value = option.partition("=")
        if key == "sims" and sep and value.isdigit() and int(value) >= 1:
            parsed["num_simulations"] = int(value)
            continue
        if key in ("span", "keep") and sep:
            field = "min_q_span" if key == "span" else "departure_margin"
            try:
                overrides.append(f"search.{field}={float(value)!r}")
                continue
            except ValueError:
                pass
        raise ValueError(f"agent {kind}:{arg}: unknown option {option!r} (known: sims=N, span=X, keep=X)")
    return path, parsed, overrides


def muzero_factory(kind: str, arg: str | None) -> MuZeroAgent:
    """``muzero:DIR[,sims=N][,span=X][,keep=X]`` (learned model) and ``muzero-sim:DIR[,...]`` (simulator)."""
    path, options, overrides = _parse(kind, arg)
    net, config, _ = load_network(path)
    mode = "simulator" if kind == "muzero-sim" else "learned"
    name = kind + arg[len(path):]    # options name the agent, so variants stay apart in one bench
    return MuZeroAgent(net, config.with_overrides(overrides), mode=mode, name=name, **options)

