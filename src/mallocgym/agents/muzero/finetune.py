"""Per-program finetuning: ``mallocgym solve PROGRAM --agent muzero-sim:DIR,finetune=S``.

Continues expert iteration (:mod:`.expert`, ``network.version = 2``) on the one program being
solved, from a checkpoint, for ``S`` seconds of wall clock counted from the start of
:meth:`FinetuneAgent.solve` (everything inside counts: network copies, games, updates), and
returns the best mapping any of its searches found.

- **Games.** Each game is the simulator search (:class:`~.simsearch.SimulatorSearch`,
  ``simulator.num_simulations`` per move, or ``sims=N``) played from the program's start with a
  frozen copy of the network (the *player*). Every position the search expands with a choice
  becomes a training record (the search's improved policy, the residual of the best completion
  found below it over XLA-like's, every legal move's advantage), as in training.
- **Learning.** A second copy (the *learner*; AdamW continuing from the checkpoint's optimiser
  state when it has one) takes ``train.replay_ratio / train.batch_size`` updates per position
  harvested, from a replay of this program's positions only (``train.positive_weight`` as in
  training), starting as soon as the replay holds one batch. Updates run between moves of the
  game, so they share the budget with the search.
- **Weights** go from the learner to the player between games: a game is played by one network
  throughout. The first game is therefore exactly the checkpoint's own search (``muzero-sim:DIR``
  with the same simulations, no finetuning) whenever it ends within the budget, and each later
  game is played by the network trained on every earlier game's positions.
- **The result** is the best mapping seen in any game (each game keeps the best completion it
  ran, XLA-like's own among them), so it is never worse than XLA-like and, when the first game
  ends within the budget, never worse than the checkpoint's own search. At the deadline the
  game in progress stops searching and follows its incumbent to the end (the simulator search's
  wall budget), so a run ends within ``S`` plus one expansion and that replay.
- **The checkpoint on disk is never written**: the networks are copies in memory.

Compare its wall time with ``mcts:time_limit=S`` (the plain search on the same simulator given
the same seconds): ``docs/muzero.md``, "Per-program finetuning".
"""

from __future__ import annotations

import copy
import math
import time
from typing import Callable

import numpy as np
import torch

from ...scenarios import Scenario
from ..base import Solution
from .config import MuZeroConfig
from .expert import ExpertLearner, ExpertReplay
from .mcts import NetworkModel
from .networks import MuZeroNet, ObsSpec
from .simsearch import SimulatorSearch

__all__ = ["FinetuneAgent", "finetune_agent", "check_seconds"]


def check_seconds(seconds, what: str = "finetune") -> float:
    """``seconds`` as a float when it is a finite number > 0, else one ``ValueError`` naming ``what``."""
    if not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and math.isfinite(seconds)
            and seconds > 0):
        raise ValueError(f"{what} must be a finite number of seconds > 0, got {seconds!r}")
    return float(seconds)


class FinetuneAgent:
    """``muzero-sim:DIR,finetune=S``: finetunes a copy of ``net`` on each scenario it solves for
    ``seconds`` of wall clock (see the module docstring) and returns the best mapping found.

    Args:
      net: a version-2 network (expert iteration); it is copied, never modified.
      config: its config (with the agent's options applied).
      seconds: the wall budget per scenario, finetuning and searches together.
      num_simulations: simulations per searched move (default ``simulator.num_simulations``).
      optimizer_state: the checkpoint's AdamW state, continued by the learner (None: a fresh one).
      clock: read for the budget (``time.perf_counter``; tests pass a fake one).
    """

    def __init__(self, net: MuZeroNet, config: MuZeroConfig, *, seconds: float, num_simulations: int | None = None,
                 optimizer_state: dict | None = None, name: str = "muzero-sim",
                 clock: Callable[[], float] = time.perf_counter):
        if config.network.version < 2:
            raise ValueError("finetune=S continues expert iteration on the simulator search, which trains "
                             "version-2 networks (network.version = 2); this checkpoint is version "
                             f"{config.network.version}")
        if num_simulations is not None and num_simulations < 1:
            raise ValueError(f"num_simulations must be >= 1, got {num_simulations!r}")
        torch.set_num_threads(1)
        self.net = net.eval()
        self.config = config
        self.seconds = check_seconds(seconds)
        self.num_simulations = int(num_simulations or config.simulator.num_simulations)
        self.optimizer_state = optimizer_state
        self.name = name
        self.clock = clock
        # torch imports its compiler stack when the first optimiser is made (seconds, once per
        # process): done here, when the agent is built, as loading torch and the checkpoint is
        torch.optim.AdamW([torch.zeros(1, requires_grad=True)])

    def set_budget(self, budget_s: float | None) -> None:
        """A harness-wide ``--budget-s`` replaces the finetuning budget (it is the agent's whole
        wall time per scenario); None keeps it."""
        if budget_s is not None:
            self.seconds = check_seconds(budget_s, "budget_s")

    @property
    def budget_s(self) -> float:
        """The wall budget per scenario (the finetuning seconds)."""
        return self.seconds

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """Finetune on ``scenario`` within the budget; the best mapping found, with details in
        ``info`` (games, updates, positions, each game's program time)."""
        from .agent import make_env

        start = self.clock()
        deadline = start + self.seconds
        config, t = self.config, self.config.train
        learner_net = copy.deepcopy(self.net)
        player_net = copy.deepcopy(self.net).eval()
        model = NetworkModel(player_net)
        learner = ExpertLearner(learner_net, config, np.random.default_rng(seed))
        if self.optimizer_state:
            learner.optimizer.load_state_dict(self.optimizer_state)
        env = make_env(scenario, config)
        spec = ObsSpec.from_env(env)
        if spec != self.net.spec:
            raise ValueError(f"the network was trained on observations {self.net.spec}, the env gives {spec}")
        replay = ExpertReplay(t.replay_capacity, spec, positive_weight=t.positive_weight)
        min_replay = max(1, t.batch_size)
        best_time, best_offsets = math.inf, None
        games: list[dict] = []
        owed = 0.0
        losses: list[dict] = []
        while True:
            env.reset(seed=seed)
            search = SimulatorSearch(env, model, config, num_simulations=self.num_simulations,
                                     deadline=deadline, clock=self.clock, harvest=True)
            while not search.root.terminal:
                search.move()
                if search.exhausted:
                    search.records = None   # out of time: no more training positions
                    continue
                records, search.records = search.records, []
                added = replay.add(records)
                if replay.size >= min_replay:
                    owed += added * t.replay_ratio / t.batch_size
                while owed >= 1.0 and self.clock() < deadline:
                    losses.append(learner.step(replay))
                    owed -= 1.0
            games.append({"time": float(search.best_time), "xla_time": float(search.start_time),
                          "complete": not search.exhausted})
            if search.best_time < best_time:
                best_time, best_offsets = search.best_time, search.best_offsets.copy()
            if self.clock() >= deadline:
                break
            player_net.load_state_dict(learner_net.state_dict())   # the next game plays the new weights
        info = {"mode": "simulator", "simulations": self.num_simulations, "finetune_s": self.seconds,
                "games": len(games), "complete_games": sum(g["complete"] for g in games),
                "train_steps": learner.steps, "positions": replay.positions_added,
                "game_times": [g["time"] for g in games], "xla_time": games[0]["xla_time"],
                "first_game_time": games[0]["time"] if games[0]["complete"] else None,
                "best_game": int(np.argmin([g["time"] for g in games])), "best_time": float(best_time)}
        if losses:
            info["last_losses"] = {k: float(np.mean([d[k] for d in losses[-16:]])) for k in losses[0]}
        return Solution(np.asarray(best_offsets, np.int64), info=info)


def finetune_agent(kind: str, arg: str, net: MuZeroNet, config: MuZeroConfig, payload: dict, *, name: str,
                   finetune: float, num_simulations: int | None = None, budget_s: float | None = None
                   ) -> FinetuneAgent:
    """The agent ``muzero-sim:DIR,finetune=S[,sims=N]`` (``agent.muzero_factory`` calls this with
    the parsed options and the loaded checkpoint's payload); one ``ValueError`` naming the spec
    for a ``budget_s`` next to ``finetune`` (S is already the whole wall budget) or a version-1
    checkpoint."""
    if budget_s is not None:
        raise ValueError(f"agent {kind}:{arg}: finetune=S is the agent's whole wall budget per scenario; "
                         f"drop budget_s")
    if config.network.version < 2:
        raise ValueError(f"agent {kind}:{arg}: finetune=S continues expert iteration, which trains version-2 "
                         f"networks; {payload['path']} holds a version-{config.network.version} network "
                         f"(train one with --set network.version=2)")
    return FinetuneAgent(net, config, seconds=finetune, num_simulations=num_simulations,
                         optimizer_state=payload.get("optimizer"), name=name)
