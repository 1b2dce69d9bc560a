"""The trained mallocMuZero as a harness agent: ``muzero:DIR`` and ``muzero-sim:DIR``.

``muzero:DIR`` plays each move with search over the learned model; ``muzero-sim:DIR`` searches
the exact simulator guided by the network (:class:`.simsearch.SimulatorSearch`: it returns the
best completion it has seen, so it is never worse than XLA-like). Options follow the path after
commas:

- both modes: ``sims=N`` (simulations per move), ``budget_s=S`` (wall seconds per scenario, counted from the start of ``solve``: once spent,
  the learned mode plays XLA-like's moves and the simulator mode follows the best mapping found
  so far, so a game ends within the budget plus one search step);
- ``muzero`` only: ``span=X`` (``search.min_q_span``), ``keep=X`` (``search.departure_margin``: keep XLA-like's move unless the
  search values another higher by more than X), ``ens=mean|agree`` (``search.ensemble``) for an
  ensemble ``muzero:A+B`` (each checkpoint searches every position over its own learned model;
  the first checkpoint's config, with the options, applies to all);
- ``muzero-sim`` only: ``mix=M`` (``simulator.value_mix``; 1: exact leaf values),
  ``lead=L`` (``simulator.max_logit_lead``; 0: the prior zeroed) and ``ptemp=T``
  (``simulator.prior_temperature``); ``finetune=S`` (version-2 checkpoints: S seconds of
  expert iteration on the program being solved, :mod:`.finetune`).

``muzero-sim:DIR,gate=G`` (``simulator.gate``, version 2; issue 18 step 4) searches only where
the predicted gain exceeds G. ``muzero-sim:DIR,pace=1`` (``simulator.pace``) spends its wall
budget (``budget_s=S`` or the harness's) instead of stopping at ``sims`` per move; without a
budget it is an error. ``muzero-sim:DIR,width=W`` (``simulator.width``) expands only XLA-like's
move and the W - 1 moves the network ranks highest. ``muzero-sim:DIR,tree=uct``
(``simulator.tree``) plays the plain ``mcts`` search with every position's moves tried in the
network's order (:mod:`.ordered`); it takes ``sims=N``, ``pace=1`` and ``budget_s=S`` only.
``muzero-sim:DIR,then=uct|mcts[,share=S]`` (``simulator.then``, needs a budget) gives the
Gumbel tree ``1 - S`` of the budget (default S = 0.5) and then runs the ``tree=uct`` search
(``uct``) or the plain ``mcts`` search (``mcts``, no network), paced, on the rest, from the
first search's best mapping. ``muzero-pol:DIR`` (version 2; issue 18 step 5) is the policy
alone: one network call per decision with a choice, XLA-like's move unless the advantage head
predicts a move better by more than ``margin=X`` (``simulator.policy_margin``;
:func:`.labels.policy_move`); it takes ``budget_s=S`` too.

``muzero:DIR`` on a version-2 checkpoint (issue 18 step 6) needs one whose dynamics were trained
(``train.dynamics_weight > 0`` in its config; others are refused); ``frame=return|advantage``
(``search.frame``) picks what its search adds up: MuZero's predicted rewards and values, or the
advantage and residual heads (:class:`.expert.AdvantageModel`).

A checkpoint trained on MallocGame-v1 (``train muzero --env v1``, issue 18 step 7) plays v1
only (``solve_v1``; :mod:`.v1`): ``muzero-pol:DIR,margin=X`` with xla-msa's in-env move as the
base, and ``muzero-sim:DIR,gate=G``, a one-step exact search where the predicted gain exceeds G.

An option given to the mode it does not apply to is an error, as is an unknown option or an
unreadable value.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import gymnasium as gym
import numpy as np
import torch

from ...scenarios import Scenario
from ..base import Solution
from .checkpoint import load_network
from .config import ENSEMBLE_RULES, FRAMES, PACE_BY, THENS, TREES, MuZeroConfig
from .labels import policy_move
from .mcts import NetworkModel, check_ensemble, effective_legal, ensemble_move, play, xla_move
from .networks import MuZeroNet, ObsSpec, stack_obs
from .simsearch import SimulatorSearch

__all__ = ["MuZeroAgent", "muzero_factory", "MODES", "make_env"]

MODES = ("learned", "simulator", "policy")


def make_env(scenario, config: MuZeroConfig):
    """A MallocGame env for ``scenario`` as the agent sees it (its ``EnvConfig``; ``env.game``
    picks MallocGame-v0 or -v1)."""
    game = "MallocGame-v1" if config.env.game == "v1" else "MallocGame-v0"
    return gym.make(game, workload=scenario, **config.env.make_kwargs())


class MuZeroAgent:
    """Plays MallocGame with search; ``mode`` is ``"learned"`` or ``"simulator"``. ``net`` is one
    network or, in learned mode, several (an ensemble combined by ``config.search.ensemble``).
    ``budget_s``: wall seconds per scenario (None: no limit), read on ``clock``."""

    def __init__(self, net: MuZeroNet | Sequence[MuZeroNet], config: MuZeroConfig, *, mode: str = "learned",
                 num_simulations: int | None = None, name: str | None = None, budget_s: float | None = None,
                 clock: Callable[[], float] = time.perf_counter):
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
        if num_simulations is not None and num_simulations < 1:
            raise ValueError(f"num_simulations must be >= 1, got {num_simulations!r}")
        if mode == "policy" and config.network.version < 2:
            raise ValueError("the policy agent (muzero-pol) reads a version-2 network's advantage head "
                             "(network.version = 2)")
        # the game the network was trained on (MallocGame-v1: the policy alone, .v1); the harness
        # reads plays_v0 / plays_v1 before anything runs
        self.game = nets[0].spec.game
        self.plays_v0, self.plays_v1 = self.game == "v0", self.game == "v1"
        if self.game == "v1":
            from .v1 import check_v1_agent

            check_v1_agent(mode, config, num_simulations)
        if mode == "learned" and config.network.version >= 2 and config.train.dynamics_weight == 0:
            raise ValueError("a network.version 2 checkpoint is trained by expert iteration on the simulator "
                             "(its learned dynamics are untrained, train.dynamics_weight = 0): play it with "
                             "muzero-sim:DIR or muzero-pol:DIR")
        torch.set_num_threads(1)
        self.nets = [n.eval() for n in nets]
        self.models = [NetworkModel(n) for n in self.nets]
        if mode == "learned" and config.search.frame == "advantage":   # version 2, dynamics trained
            from .expert import AdvantageModel

            self.models = [AdvantageModel(n) for n in self.nets]
        self.net, self.model = self.nets[0], self.models[0]
        self.config = config
        self.mode = mode
        default = config.search.eval_simulations if mode == "learned" else config.simulator.num_simulations
        self.num_simulations = int(num_simulations or default)
        self.budget_s: float | None = None
        self.set_budget(budget_s)
        self.clock = clock
        self.name = name or {"learned": "muzero", "simulator": "muzero-sim", "policy": "muzero-pol"}[mode]

    def set_budget(self, budget_s: float | None) -> None:
        """Set the wall budget per scenario in seconds (None: no limit); a harness-wide
        ``--budget-s`` can apply it to an agent made from a spec."""
        if budget_s is not None and not (isinstance(budget_s, (int, float)) and not isinstance(budget_s, bool)
                                         and math.isfinite(budget_s) and budget_s > 0):
            raise ValueError(f"budget_s must be a finite number of seconds > 0, got {budget_s!r}")
        self.budget_s = None if budget_s is None else float(budget_s)

    def moves(self, scenario: Scenario, *, seed: int = 0, start: float | None = None,
              budget_s: float | None = None):
        """Play one game, yielding ``(env, legal, action)`` before each move is made (``env``:
        the unwrapped MallocGame env at the position, ``legal``: the search's legal actions);
        returns the final ``info`` and a dict of details (searched moves; in simulator mode the
        search itself under ``"search"``). :meth:`solve` plays it out;
        ``baselines/muzero/departures.py`` inspects it. ``start``: the ``clock`` reading the
        budget counts from (default: now); ``budget_s``: the game's budget in place of the
        agent's (a first stage's share of it)."""
        start = self.clock() if start is None else start
        budget_s = self.budget_s if budget_s is None else budget_s
        deadline = None if budget_s is None else start + budget_s
        env = self._env(scenario)
        u = env.unwrapped
        obs, info = env.reset(seed=seed)
        search = None
        if self.mode == "simulator":
            search = SimulatorSearch(u, self.model, self.config, num_simulations=self.num_simulations,
                                     deadline=deadline, clock=self.clock)
        done = False
        searched = 0
        out_of_time = False
        while not done:
            batch = stack_obs([obs])
            legal = effective_legal(batch, prune_no_benefit=self.config.search.prune_no_benefit)[0]
            if search is not None:
                action = search.move()
                if not legal[action]:
                    raise RuntimeError(f"the simulator search chose action {action}, illegal at step "
                                       f"{u.step_index} (legal: {np.flatnonzero(legal).tolist()})")
            elif legal.sum() <= 1:
                action = int(np.flatnonzero(legal)[0])
            elif out_of_time or (deadline is not None and self.clock() >= deadline):
                out_of_time = True
                action = xla_move(legal)
            elif self.mode == "policy":
                _, _, advantage = self.model.expert(batch)
                action = policy_move(advantage[0], legal, self.config.simulator.policy_margin)
                searched += 1
            else:
                config = self.config.search
                results = [play(model, batch, config=config, num_simulations=self.num_simulations)
                           for model in self.models]
                action = int(ensemble_move(results, legal[None], rule=config.ensemble,
                                           margin=config.departure_margin)[0])
                searched += 1
            yield u, legal, action
            obs, _, done, _, info = u.step(action)
        if search is not None:
            return info, {"searched_moves": search.searched_moves, "search": search}
        return info, {"searched_moves": searched, "budget_exhausted": out_of_time}

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """One MallocGame-v1 game (a checkpoint trained on v1 only): :func:`.v1.play_v1`."""
        self._check_game("v1")
        from .v1 import network_advantage, play_v1

        start = self.clock()
        deadline = None if self.budget_s is None else start + self.budget_s
        sim = self.config.simulator
        gate = sim.gate if self.mode == "simulator" else None
        solution = play_v1(scenario, self.config, network_advantage(self.model), margin=sim.policy_margin,
                           gate=gate, spec=self.net.spec, seed=seed, deadline=deadline, clock=self.clock)
        if self.budget_s is not None:
            solution.info["budget_s"] = self.budget_s
        return solution

    def _env(self, scenario: Scenario):
        """The env of ``scenario`` as the network sees it; refused when its observations are not
        those the network was trained on."""
        env = make_env(scenario, self.config)
        spec = ObsSpec.from_env(env)
        if spec != self.net.spec:
            raise ValueError(f"the network was trained on observations {self.net.spec}, the env gives {spec}")
        return env

    def _check_game(self, game: str) -> None:
        """Refuse to play MallocGame-``game`` with a network trained on the other game."""
        if self.game != game:
            raise ValueError(f"agent {self.name!r} was trained on MallocGame-{self.game} and plays it only "
                             f"(use --env {self.game})")

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        self._check_game("v0")
        start = self.clock()
        sim_config = self.config.simulator
        if self.mode == "simulator" and sim_config.tree == "uct":
            if sim_config.pace and self.budget_s is None:
                raise ValueError("simulator.pace spends a wall budget: give the search one "
                                 "(muzero-sim:DIR,tree=uct,pace=1,budget_s=S or the harness's --budget-s)")
            return self._solve_uct(scenario, start, network_order=True, simulations=self.num_simulations,
                                   pace=sim_config.pace)
        if self.mode == "simulator" and sim_config.then != "none":
            return self._solve_then(scenario, start, seed)
        solution, _ = self._play(scenario, seed, start)
        return solution

    def _solve_then(self, scenario: Scenario, start: float, seed: int) -> Solution:
        """``simulator.then``: the Gumbel tree with ``1 - then_share`` of the budget, then the
        second search (paced, one simulation per decision at least) with the rest, from the
        first one's best mapping."""
        sim_config = self.config.simulator
        if self.budget_s is None:
            raise ValueError(f"simulator.then = {sim_config.then} splits a wall budget between two searches: give "
                             "one (muzero-sim:DIR,then=...,budget_s=S or the harness's --budget-s)")
        first, search = self._play(scenario, seed, start, budget_s=self.budget_s * (1.0 - sim_config.then_share))
        second = self._solve_uct(scenario, start, network_order=sim_config.then == "uct", simulations=1, pace=True,
                                 incumbent=(search.best_time, search.best_offsets))
        details = dict(first.info)
        details["then"] = {"search": sim_config.then, "share": sim_config.then_share, **second.info}
        details["improved_by_then"] = bool(second.info["best_time"] < search.best_time)
        return Solution(second.offsets, info=details)

    def _play(self, scenario: Scenario, seed: int, start: float, budget_s: float | None = None):
        """One game of :meth:`moves` played out: ``(solution, the simulator search or None)``."""
        game = self.moves(scenario, seed=seed, start=start, budget_s=budget_s)
        try:
            while True:
                next(game)
        except StopIteration as end:
            info, extra = end.value
        offsets = np.asarray(info["offsets"], np.int64)
        details = {"mode": self.mode, "simulations": self.num_simulations,
                   "searched_moves": extra["searched_moves"]}
        if self.budget_s is not None:
            details["budget_s"] = self.budget_s
        if len(self.nets) > 1:
            details["ensemble"] = {"members": len(self.nets), "rule": self.config.search.ensemble}
        search = extra.get("search")
        if search is None:
            if self.budget_s is not None:
                details["budget_exhausted"] = extra["budget_exhausted"]
            return Solution(offsets, info=details), None
        # the game followed the incumbent to its end: the played mapping is the best one seen
        if not np.array_equal(offsets, search.best_offsets):
            raise RuntimeError("the simulator search's game did not end at its best mapping (a bug)")
        details.update(search.info())
        details["kept_xla"] = bool(search.best_time >= search.start_time)
        return Solution(offsets, info=details), search

    def _solve_uct(self, scenario: Scenario, start: float, *, network_order: bool, simulations: int, pace: bool,
                   incumbent: tuple[float, np.ndarray] | None = None) -> Solution:
        """The plain ``mcts`` search (:class:`~..search.UCT`, its default constants) until the
        budget counted from ``start`` is spent, ``simulations`` per decision (``pace``: at
        least that many, then the decision's share of the budget); with ``network_order`` over
        :class:`.ordered.OrderedGame` (``simulator.tree = uct``). ``incumbent``: a mapping
        ``(completion time, offsets)`` to start from (``simulator.then``); the solution is the
        best mapping seen, its time in ``info["best_time"]``."""
        from ..search import UCT, MCTSConfig, V0Game
        from .ordered import NetworkOrder, OrderedGame

        if self.config.env.order != "boundedness":
            raise ValueError(f"tree=uct and then= play MallocGame-v0's default decision order; this checkpoint "
                             f"was trained with order={self.config.env.order!r}")
        env = self._env(scenario)
        u = env.unwrapped
        game = V0Game(u.static, int(u.k))
        if incumbent is not None:
            game.incumbent.offer(*incumbent)
        order = NetworkOrder(env, self.model, version2=self.config.network.version >= 2) if network_order else None
        time_limit = None
        if self.budget_s is not None:
            time_limit = max(self.budget_s - (self.clock() - start), 1e-9)
        config = MCTSConfig(simulations=simulations, n_candidates=int(u.k), time_limit=time_limit, pace=pace)
        sims = UCT(game if order is None else OrderedGame(game, order), game.root, config).run(time_limit,
                                                                                              clock=self.clock)
        details = {"mode": self.mode, "tree": "uct" if network_order else "mcts", "simulations": simulations,
                   "simulations_run": sims, "completions": game.incumbent.completions,
                   "network_calls": 0 if order is None else order.calls, "best_time": float(game.incumbent.time[0])}
        if self.budget_s is not None:
            details["budget_s"] = self.budget_s
        return Solution(game.incumbent.offsets.copy(), info=details)


# option -> (config field or None for an agent argument, the modes it applies to)
_OPTIONS = {
    "sims": (None, ("muzero", "muzero-sim")),
    "budget_s": (None, ("muzero", "muzero-sim", "muzero-pol")),
    "span": ("search.min_q_span", ("muzero",)),
    "keep": ("search.departure_margin", ("muzero",)),
    "ens": ("search.ensemble", ("muzero",)),
    "frame": ("search.frame", ("muzero",)),               # version 2 with trained dynamics (step 6)
    "mix": ("simulator.value_mix", ("muzero-sim",)),
    "lead": ("simulator.max_logit_lead", ("muzero-sim",)),
    "ptemp": ("simulator.prior_temperature", ("muzero-sim",)),
    "gate": ("simulator.gate", ("muzero-sim",)),            # version 2: search where it pays
    "pace": ("simulator.pace", ("muzero-sim",)),            # 1: spend the wall budget (needs one)
    "pace_by": ("simulator.pace_by", ("muzero-sim",)),      # share|length: how pace shares the time
    "width": ("simulator.width", ("muzero-sim",)),          # expand the top W moves only
    "tree": ("simulator.tree", ("muzero-sim",)),            # uct: plain mcts in the network's order
    "then": ("simulator.then", ("muzero-sim",)),            # a second search after the Gumbel tree
    "share": ("simulator.then_share", ("muzero-sim",)),     # the second search's share of the budget
    "margin": ("simulator.policy_margin", ("muzero-pol",)),  # version 2: the policy alone
    "finetune": (None, ("muzero-sim",)),   # per-program finetuning (.finetune), version-2 checkpoints
}
# options with a fixed set of values: option value -> the config override's value
_CHOICES = {"frame": {v: v for v in FRAMES}, "ens": {v: v for v in ENSEMBLE_RULES},
            "pace": {"0": "false", "1": "true"}, "tree": {v: v for v in TREES},
            "then": {v: v for v in THENS}, "pace_by": {v: v for v in PACE_BY}}
_KNOWN = ("sims=N, budget_s=S; span=X, keep=X, ens=mean|agree (muzero); mix=M, lead=L, ptemp=T, finetune=S "
          "(muzero-sim)")

_KNOWN += ("; gate=G, pace=0|1, pace_by=share|length, width=W, tree=gumbel|uct, then=none|uct|mcts, share=S "
           "(muzero-sim); margin=X, budget_s=S (muzero-pol); frame=return|advantage (muzero)")


def _parse(kind: str, arg: str | None) -> tuple[str, dict, list[str]]:
    if not arg:
        raise ValueError(f"agent {kind!r} needs a checkpoint: {kind}:DIR (a `mallocgym train muzero --out DIR` folder)")
    path, *options = arg.split(",")
    parsed: dict = {}
    overrides: list[str] = []
    for option in options:
        key, sep, value = option.partition("=")
        if key not in _OPTIONS or not sep:
            raise ValueError(f"agent {kind}:{arg}: unknown option {option!r} (known: {_KNOWN})")
        field, modes = _OPTIONS[key]
        if kind not in modes:
            raise ValueError(f"agent {kind}:{arg}: option {key}= applies to {' and '.join(modes)} only")
        if key == "sims":
            if not (value.isdigit() and int(value) >= 1):
                raise ValueError(f"agent {kind}:{arg}: sims must be an integer >= 1, got {value!r}")
            parsed["num_simulations"] = int(value)
            continue
        if key == "width":
            if not (value.isdigit() and (int(value) == 0 or int(value) >= 2)):
                raise ValueError(f"agent {kind}:{arg}: width must be 0 or an integer >= 2, got {value!r}")
            overrides.append(f"{field}={int(value)}")
            continue
        if key in _CHOICES:
            if value not in _CHOICES[key]:
                raise ValueError(f"agent {kind}:{arg}: unknown option {option!r} ({key} is one of "
                                 f"{'|'.join(_CHOICES[key])})")
            overrides.append(f"{field}={_CHOICES[key][value]}")
            continue
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"agent {kind}:{arg}: unknown option {option!r} ({key} takes a number)") from None
        if not math.isfinite(number):
            raise ValueError(f"agent {kind}:{arg}: {key} must be finite, got {value!r}")
        if key in ("budget_s", "finetune"):
            if number <= 0:
                raise ValueError(f"agent {kind}:{arg}: {key} must be > 0 seconds, got {value!r}")
            parsed[key] = number
        else:
            overrides.append(f"{field}={number!r}")
    given = {option.partition("=")[0] for option in options}
    if "share" in given and not any(o.startswith("then=") and o != "then=none" for o in options):
        raise ValueError(f"agent {kind}:{arg}: share= is the second search's share of the budget: give then=uct|mcts")
    if "finetune" in given and "then" in given:
        raise ValueError(f"agent {kind}:{arg}: finetune= and then= do not combine (finetuning plays its own search)")
    if "tree=uct" in options:
        extra = sorted(given & set(_GUMBEL_ONLY))
        if extra:
            raise ValueError(f"agent {kind}:{arg}: tree=uct (the plain mcts search in the network's order) takes "
                             f"sims=, pace= and budget_s= only, not {', '.join(k + '=' for k in extra)}")
    return path, parsed, overrides


# the muzero-sim options that only the Gumbel tree (simulator.tree = gumbel) reads
_GUMBEL_ONLY = ("mix", "lead", "ptemp", "gate", "width", "finetune", "then", "share", "pace_by")


def muzero_factory(kind: str, arg: str | None) -> MuZeroAgent:
    """``muzero:DIR[,sims=N][,budget_s=S][,span=X][,keep=X]`` (learned model),
    ``muzero-sim:DIR[,sims=N][,budget_s=S][,mix=M][,lead=L][,ptemp=T]`` (simulator) and
    ``muzero:DIR+DIR2[,...][,ens=mean|agree]`` (an ensemble, learned models)."""
    path, options, overrides = _parse(kind, arg)
    paths = path.split("+")
    if not all(paths):
        raise ValueError(f"agent {kind}:{arg}: an empty checkpoint folder in {path!r} (an ensemble is A+B)")
    if len(paths) > 1 and kind != "muzero":
        raise ValueError(f"agent {kind}:{arg}: an ensemble (A+B) plays over the learned models only; "
                         f"use muzero:{arg}")
    loaded = [load_network(p) for p in paths]
    config = loaded[0][1]
    for p, (_, other, _) in zip(paths[1:], loaded[1:]):
        if other.env != config.env:
            raise ValueError(f"agent {kind}:{arg}: {p} was trained with another env config than {paths[0]} "
                             f"({other.env} vs {config.env})")
    try:
        config = config.with_overrides(overrides)
    except ValueError as exc:
        raise ValueError(f"agent {kind}:{arg}: {exc}") from None
    mode = {"muzero-sim": "simulator", "muzero-pol": "policy"}.get(kind, "learned")
    # options name the agent, so variants stay apart in one bench; an ensemble is muzero-x2,...
    name = kind + (f"-x{len(paths)}" if len(paths) > 1 else "") + arg[len(path):]
    nets = [net for net, _, _ in loaded]
    if "finetune" in options:
        from .finetune import finetune_agent

        if config.env.game != "v0":
            raise ValueError(f"agent {kind}:{arg}: finetune=S runs on MallocGame-v0 checkpoints only")

        return finetune_agent(kind, arg, nets[0], config, loaded[0][2], name=name, **options)
    return MuZeroAgent(nets if len(nets) > 1 else nets[0], config, mode=mode, name=name, **options)
