"""The trained mallocMuZero as a harness agent: one checkpoint, two ways to play it.

- ``muzero-pol:DIR`` (a version-2 checkpoint): the policy alone, one network call per decision
  with a choice; XLA-like's move (xla-msa's on MallocGame-v1) unless the advantage head predicts
  another better by more than ``margin=X`` (``simulator.policy_margin``;
  :func:`.labels.policy_move`; a v1 checkpoint's departure head, :mod:`.head`, must agree: ``head=T``).
- ``muzero-sim:DIR``: search on the exact simulator guided by the network
  (:class:`.simsearch.SimulatorSearch`, ``sims=N`` simulations per move with a choice, default
  ``simulator.num_simulations``); it returns the best completion it has seen, so it is never
  worse than XLA-like. ``gate=G`` (``simulator.gate``, version 2) searches only where the
  predicted gain exceeds G. On a MallocGame-v1 checkpoint: the gated one-step search of
  :func:`.v1.play_v1`.

Both take ``budget_s=S`` (wall seconds per scenario, from the start of ``solve``; once spent,
the policy plays XLA-like's moves and the search follows the best mapping found so far).
Everything else comes from the checkpoint's config. An unknown option, an option of the other
mode or an unreadable value is a ``ValueError``; so is a mode or an option issue 31 removed
(:data:`REMOVED`, each with its replacement), ``muzero:DIR`` (the search over the learned
model) among them.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np
import torch

from ...scenarios import Scenario
from ..base import Solution
from .checkpoint import load_network
from .config import MuZeroConfig
from .game import make_env
from .head import DepartureHead
from .labels import policy_move
from .model import NetworkModel, effective_legal, xla_move
from .networks import MuZeroNet, ObsSpec, stack_obs
from .simsearch import SimulatorSearch
from .v1 import check_v1_agent, network_advantage, play_v1

__all__ = ["MuZeroAgent", "muzero_factory", "MODES", "REMOVED", "REMOVED_KINDS", "make_env"]

MODES = ("simulator", "policy")
KINDS = {"muzero-sim": "simulator", "muzero-pol": "policy"}

# option -> (config field or None for an agent argument, the kinds it applies to)
_OPTIONS = {
    "sims": (None, ("muzero-sim",)),
    "budget_s": (None, ("muzero-sim", "muzero-pol")),
    "gate": ("simulator.gate", ("muzero-sim",)),
    "margin": ("simulator.policy_margin", ("muzero-pol",)),
    "top": ("simulator.top_moves", ("muzero-sim",)),
    "head": ("simulator.head_threshold", ("muzero-pol",)),
}
_KNOWN = "sims=N, budget_s=S, gate=G, top=K (muzero-sim); margin=X, head=T, budget_s=S (muzero-pol)"

# Options issue 18 measured and did not choose, removed by issue 31 (their numbers:
# baselines/muzero/README.md): option -> why, and what to use instead.
_SETTING = "the checkpoint's {} applies (set it when training: --set {}=...)"
REMOVED = {
    "tree": "tree=uct (the mcts tree in the network's order) was removed: level with mcts at equal time; "
            "use muzero-sim:DIR or mcts",
    "then": "then= (a second search after the first) was removed: level with mcts at equal time; "
            "use muzero-sim:DIR,budget_s=S or mcts:pace=1",
    "share": "share= (then='s budget share) was removed with then=; use muzero-sim:DIR,budget_s=S",
    "pace": "pace=1 was removed: spending the whole budget did not win; use muzero-sim:DIR,sims=N,budget_s=S "
            "or mcts:simulations=1,pace=1,time_limit=S",
    "pace_by": "pace_by= was removed with pace=; use mcts:simulations=1,pace=1,time_limit=S",
    "width": "width= (a narrower, deeper tree) was removed: it did not win; use muzero-sim:DIR (every legal move)",
    "ens": "ensembles (muzero:A+B, ens=) were removed: play one checkpoint, muzero-sim:DIR or muzero-pol:DIR",
    "frame": "frame= (the learned search's value frame) was removed with muzero:DIR; use muzero-sim:DIR",
    "keep": "keep= (a departure margin at play time) was removed: not chosen by its rule; "
            "use muzero-pol:DIR,margin=X",
    "span": "span= (search.min_q_span, the learned search's) was removed with muzero:DIR; use muzero-sim:DIR",
    "mix": "mix= was removed: " + _SETTING.format("simulator.value_mix", "simulator.value_mix"),
    "lead": "lead= was removed: " + _SETTING.format("simulator.max_logit_lead", "simulator.max_logit_lead"),
    "ptemp": "ptemp= was removed: " + _SETTING.format("simulator.prior_temperature", "simulator.prior_temperature"),
    "finetune": "finetune= (per-program finetuning) was removed: it tied mcts at equal wall time; "
                "use muzero-sim:DIR,sims=N,budget_s=S",
}
# the mode issue 31 removed: kind -> why, and what to use instead
REMOVED_KINDS = {
    "muzero": "muzero:DIR (MuZero's search over the learned model) was removed by issue 31: about level with "
              "XLA-like, and no entry plays it (numbers: baselines/muzero/README.md); play the same checkpoint "
              "with muzero-sim:DIR (search on the exact simulator) or muzero-pol:DIR (the policy alone)",
}


class MuZeroAgent:
    """Plays MallocGame with one network; ``mode`` is one of :data:`MODES`. ``budget_s``: wall
    seconds per scenario (None: no limit), read on ``clock``."""

    def __init__(self, net: MuZeroNet, config: MuZeroConfig, *, mode: str = "simulator",
                 num_simulations: int | None = None, name: str | None = None, budget_s: float | None = None,
                 clock: Callable[[], float] = time.perf_counter, head: DepartureHead | None = None):
        if mode == "learned":
            raise ValueError(REMOVED_KINDS["muzero"])
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not isinstance(net, MuZeroNet):
            raise ValueError(f"MuZeroAgent plays one network ({REMOVED['ens']})")
        if num_simulations is not None and num_simulations < 1:
            raise ValueError(f"num_simulations must be >= 1, got {num_simulations!r}")
        if mode == "policy" and config.network.version < 2:
            raise ValueError("the policy agent (muzero-pol) reads a version-2 network's advantage head "
                             "(network.version = 2)")
        # the game the network was trained on; the harness reads plays_v0 / plays_v1 before anything runs
        self.game = net.spec.game
        self.plays_v0, self.plays_v1 = self.game == "v0", self.game == "v1"
        if self.game == "v1":
            check_v1_agent(mode, config, num_simulations)
        elif config.simulator.top_moves != 0:
            raise ValueError("top= (simulator.top_moves) applies to a MallocGame-v1 checkpoint's muzero-sim; the v0 "
                             "simulator search scores every legal move")
        torch.set_num_threads(1)
        self.net = net.eval()
        self.model = NetworkModel(self.net)
        self.config = config
        self.mode = mode
        self.head = head
        self.num_simulations = int(num_simulations or config.simulator.num_simulations)
        self.budget_s: float | None = None
        self.set_budget(budget_s)
        self.clock = clock
        self.name = name or {"simulator": "muzero-sim", "policy": "muzero-pol"}[mode]

    def set_budget(self, budget_s: float | None) -> None:
        """Set the wall budget per scenario in seconds (None: no limit); a harness-wide
        ``--budget-s`` can apply it to an agent made from a spec."""
        if budget_s is not None and not (isinstance(budget_s, (int, float)) and not isinstance(budget_s, bool)
                                         and math.isfinite(budget_s) and budget_s > 0):
            raise ValueError(f"budget_s must be a finite number of seconds > 0, got {budget_s!r}")
        self.budget_s = None if budget_s is None else float(budget_s)

    def moves(self, scenario: Scenario, *, seed: int = 0):
        """Play one MallocGame-v0 game, yielding ``(env, legal, action)`` before each move is made
        (``env``: the unwrapped env at the position, ``legal``: the search's legal actions);
        returns the final ``info`` and a dict of details (searched moves; in simulator mode the
        search itself under ``"search"``). :meth:`solve` plays it out;
        ``baselines/muzero/departures.py`` inspects it."""
        start = self.clock()
        deadline = None if self.budget_s is None else start + self.budget_s
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
            else:   # the policy
                _, _, advantage = self.model.expert(batch)
                action = policy_move(advantage[0], legal, self.config.simulator.policy_margin)
                searched += 1
            yield u, legal, action
            obs, _, done, _, info = u.step(action)
        if search is not None:
            return info, {"searched_moves": search.searched_moves, "search": search}
        return info, {"searched_moves": searched, "budget_exhausted": out_of_time}

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """One MallocGame-v1 game (a checkpoint trained on v1 only): :func:`.v1.play_v1`."""
        self._check_game("v1")
        start = self.clock()
        deadline = None if self.budget_s is None else start + self.budget_s
        sim = self.config.simulator
        gate = sim.gate if self.mode == "simulator" else None
        head = self.head if self.mode == "policy" else None   # the search does not read the head
        solution = play_v1(scenario, self.config, network_advantage(self.model, head), margin=sim.policy_margin,
                           gate=gate, top=sim.top_moves, spec=self.net.spec, seed=seed, deadline=deadline,
                           clock=self.clock)
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
        game = self.moves(scenario, seed=seed)
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
        search = extra.get("search")
        if search is None:
            if self.budget_s is not None:
                details["budget_exhausted"] = extra["budget_exhausted"]
            return Solution(offsets, info=details)
        # the game followed the incumbent to its end: the played mapping is the best one seen
        if not np.array_equal(offsets, search.best_offsets):
            raise RuntimeError("the simulator search's game did not end at its best mapping (a bug)")
        details.update(search.info())
        details["kept_xla"] = bool(search.best_time >= search.start_time)
        return Solution(offsets, info=details)


def _parse(kind: str, arg: str | None) -> tuple[str, dict, list[str]]:
    """``(checkpoint folder, agent arguments, config overrides)`` of ``kind:arg``."""
    if kind in REMOVED_KINDS:
        raise ValueError(f"agent {kind}:{arg or 'DIR'}: {REMOVED_KINDS[kind]}")
    if not arg:
        raise ValueError(f"agent {kind!r} needs a checkpoint: {kind}:DIR (a `mallocgym train muzero --out DIR` folder)")
    path, *options = arg.split(",")
    if "+" in path:
        raise ValueError(f"agent {kind}:{arg}: {REMOVED['ens']}")
    parsed: dict = {}
    overrides: list[str] = []
    for option in options:
        key, sep, value = option.partition("=")
        if key in REMOVED:
            raise ValueError(f"agent {kind}:{arg}: {REMOVED[key]}")
        if key not in _OPTIONS or not sep:
            raise ValueError(f"agent {kind}:{arg}: unknown option {option!r} (known: {_KNOWN})")
        field, kinds = _OPTIONS[key]
        if kind not in kinds:
            raise ValueError(f"agent {kind}:{arg}: option {key}= applies to {' and '.join(kinds)} only")
        if key == "sims":
            if not (value.isdigit() and int(value) >= 1):
                raise ValueError(f"agent {kind}:{arg}: sims must be an integer >= 1, got {value!r}")
            parsed["num_simulations"] = int(value)
            continue
        if key == "top":
            if not value.isdigit():
                raise ValueError(f"agent {kind}:{arg}: top must be an integer >= 0, got {value!r}")
            overrides.append(f"{field}={int(value)}")
            continue
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"agent {kind}:{arg}: unknown option {option!r} ({key} takes a number)") from None
        if not math.isfinite(number):
            raise ValueError(f"agent {kind}:{arg}: {key} must be finite, got {value!r}")
        if key == "budget_s":
            if number <= 0:
                raise ValueError(f"agent {kind}:{arg}: {key} must be > 0 seconds, got {value!r}")
            parsed[key] = number
        else:
            overrides.append(f"{field}={number!r}")
    return path, parsed, overrides


def muzero_factory(kind: str, arg: str | None) -> MuZeroAgent:
    """``muzero-sim:DIR[,sims=N][,budget_s=S][,gate=G][,top=K]`` (the simulator search) and
    ``muzero-pol:DIR[,margin=X][,head=T][,budget_s=S]`` (the policy alone); ``muzero:DIR`` is refused
    (:data:`REMOVED_KINDS`)."""
    path, options, overrides = _parse(kind, arg)
    net, config, payload = load_network(path)
    state = payload.get("extra", {}).get("departure_head")
    if state is None and any(o.startswith(_OPTIONS["head"][0] + "=") for o in overrides):
        raise ValueError(f"agent {kind}:{arg}: head= applies to a checkpoint with a departure head; {path} has none")
    try:
        config = config.with_overrides(overrides)
    except ValueError as exc:
        raise ValueError(f"agent {kind}:{arg}: {exc}") from None
    # options name the agent, so variants stay apart in one bench
    head = None if state is None else DepartureHead(state, config.simulator.head_threshold)
    return MuZeroAgent(net, config, mode=KINDS[kind], name=kind + arg[len(path):], head=head, **options)
