"""The trained mallocMuZero as a harness agent: ``muzero:DIR`` and ``muzero-sim:DIR``.

``muzero:DIR`` plays each move with search over the learned model; ``muzero-sim:DIR`` searches
the exact simulator with the network's priors and values (and, with ``keep_xla``, returns
XLA-like's mapping when that is better). Options follow the path after commas:
``muzero:runs/a,sims=64`` (simulations per move), ``muzero:runs/a,span=2`` (the search's
``min_q_span``), ``muzero:runs/a,keep=1`` (``search.departure_margin``: keep XLA-like's move
unless the search values another higher by more than 1). ``muzero:A+B,ens=agree`` is an
ensemble: each checkpoint searches every position over its own learned model and the rule
(``search.ensemble``: ``mean`` or ``agree``) picks the move; the first checkpoint's config
(with the options) applies to all.
"""

from __future__ import annotations

from typing import Sequence

import gymnasium as gym
import numpy as np
import torch

from ...evaluate import evaluate
from ...heuristics import xla_like
from ...scenarios import Scenario
from ..base import Solution
from .checkpoint import load_network
from .config import ENSEMBLE_RULES, MuZeroConfig
from .mcts import NetworkModel, check_ensemble, effective_legal, ensemble_move, play
from .networks import MuZeroNet, ObsSpec, stack_obs
from .simsearch import simulator_search

__all__ = ["MuZeroAgent", "muzero_factory", "MODES", "make_env"]

MODES = ("learned", "simulator")


def make_env(scenario, config: MuZeroConfig):
    """A MallocGame env for ``scenario`` as the agent sees it (its ``EnvConfig``)."""
    return gym.make("MallocGame-v0", workload=scenario, **config.env.make_kwargs())


class MuZeroAgent:
    """Plays MallocGame with search; ``mode`` is ``"learned"`` or ``"simulator"``. ``net`` is one
    network or, in learned mode, several (an ensemble combined by ``config.search.ensemble``)."""

    def __init__(self, net: MuZeroNet | Sequence[MuZeroNet], config: MuZeroConfig, *, mode: str = "learned",
                 num_simulations: int | None = None, name: str | None = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        nets = [net] if isinstance(net, MuZeroNet) else list(net)
        if not nets:
            raise ValueError("MuZeroAgent needs at least one network")
        if len(nets) > 1:
            if mode != "learned":
                raise ValueError("an ensemble plays over the learned models only: muzero-sim takes one checkpoint")
            if any(n.spec != nets[0].spec for n in nets):
                raise ValueError(f"the ensemble's networks were trained on different observations: "
                                 f"{[n.spec for n in nets]}")
            check_ensemble(config.search.ensemble, config.search.departure_margin)
        torch.set_num_threads(1)
        self.nets = [n.eval() for n in nets]
        self.models = [NetworkModel(n) for n in self.nets]
        self.net, self.model = self.nets[0], self.models[0]
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
                search = self.config.search
                results = [play(model, batch, config=search, num_simulations=self.num_simulations)
                           for model in self.models]
                action = int(ensemble_move(results, legal[None], rule=search.ensemble,
                                           margin=search.departure_margin)[0])
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
        if len(self.nets) > 1:
            details["ensemble"] = {"members": len(self.nets), "rule": self.config.search.ensemble}
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
        if key == "ens" and sep and value in ENSEMBLE_RULES:
            overrides.append(f"search.ensemble={value}")
            continue
        if key in ("span", "keep") and sep:
            field = "min_q_span" if key == "span" else "departure_margin"
            try:
                overrides.append(f"search.{field}={float(value)!r}")
                continue
            except ValueError:
                pass
        raise ValueError(f"agent {kind}:{arg}: unknown option {option!r} (known: sims=N, span=X, keep=X, "
                         f"ens={'|'.join(ENSEMBLE_RULES)})")
    return path, parsed, overrides


def muzero_factory(kind: str, arg: str | None) -> MuZeroAgent:
    """``muzero:DIR[,sims=N][,span=X][,keep=X]`` (learned model), ``muzero-sim:DIR[,...]``
    (simulator) and ``muzero:DIR+DIR2[,...][,ens=mean|agree]`` (an ensemble, learned models)."""
    path, options, overrides = _parse(kind, arg)
    paths = path.split("+")
    if not all(paths):
        raise ValueError(f"agent {kind}:{arg}: an empty checkpoint folder in {path!r} (an ensemble is A+B)")
    if len(paths) > 1 and kind == "muzero-sim":
        raise ValueError(f"agent {kind}:{arg}: an ensemble (A+B) plays over the learned models only; "
                         f"use muzero:{arg}")
    loaded = [load_network(p) for p in paths]
    config = loaded[0][1]
    for p, (_, other, _) in zip(paths[1:], loaded[1:]):
        if other.env != config.env:
            raise ValueError(f"agent {kind}:{arg}: {p} was trained with another env config than {paths[0]} "
                             f"({other.env} vs {config.env})")
    mode = "simulator" if kind == "muzero-sim" else "learned"
    # options name the agent, so variants stay apart in one bench; an ensemble is muzero-x2,...
    name = kind + (f"-x{len(paths)}" if len(paths) > 1 else "") + arg[len(path):]
    nets = [net for net, _, _ in loaded]
    return MuZeroAgent(nets if len(nets) > 1 else nets[0], config.with_overrides(overrides), mode=mode,
                       name=name, **options)

