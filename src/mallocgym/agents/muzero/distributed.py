"""Training on Ray: self-play actors and the learner as Ray actors (``mallocgym train muzero --ray``).

    mallocgym train muzero --minutes M --out DIR --ray [ADDRESS] [--ray-actors N] [the trainer's options]

The same training as :func:`.train.train`, split over processes:

- **Self-play actors** (:class:`ActorWorker`, ``N`` of them, one CPU each) play as local
  self-play does (``network.version`` 1: :class:`~.selfplay.SelfPlay`, ``train.num_actors``
  games searched together; version 2: :class:`~.expert.ExpertActor`, the simulator search with
  expert-iteration records) and send back the same records: finished games as
  ``(GameRecord, Episode)`` pairs (version 1), or each move's ``(ExpertRecord list, held out,
  ExpertGame or None)`` (version 2). Actor 0 draws its random numbers from exactly the
  generators a local run gives its self-play (:func:`actor_seeds`), so with one actor and the
  same weights it plays the local games; actor ``j > 0`` from generators of its own.
- **The learner** (:class:`LearnerWorker`, one CPU) holds the network, the optimiser and the
  replay: it stores what the actors send and owes ``train.replay_ratio / train.batch_size``
  updates per position played (once the replay holds ``train.min_replay``), as the local loop.
- **The driver** (this process) passes the records from actor to learner by reference (they
  go through Ray's object store, not through the driver), asks the learner for its weights
  after each actor's slice of play (about :data:`SLICE_S` seconds) and hands them to that
  actor when they are ready (a learner still busy training is not waited for), writes
  ``log.jsonl`` (the same kinds of lines as a local run, with ``"ray"`` in the start line)
  and, every ``train.checkpoint_every_s`` and at the end, ``checkpoint.pt`` in the local format
  (actor 0's and the learner's generator states), so a Ray run can be continued by a local
  ``--resume``.

Ray is imported only here and only when a run is made (the ``[ray]`` extra): ``ADDRESS`` is
read as ``bench --ray`` reads it (:mod:`mallocgym._ray`; no address: a local Ray started for the
run, or the one already initialised in this process). See ``docs/muzero.md``, "Training on Ray".
"""

from __future__ import annotations

import math
import time
from collections import deque
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..._files import atomic_write
from ..._interrupt import graceful_stop
from ..._progress import Progress
from ...scenarios import Scenario
from .checkpoint import checkpoint_path, save_checkpoint
from .config import MuZeroConfig
from .game import make_env
from .networks import MuZeroNet, ObsSpec
from .runlog import EVAL_POSITIONS, HELDOUT_POSITIONS, JsonLog, game_stats

__all__ = ["ActorWorker", "LearnerWorker", "actor_seeds", "learner_seeds", "first_scenario", "train_ray", "main_ray",
           "SLICE_S", "MAX_UPDATES_PER_CALL"]

SLICE_S = 1.0               # seconds of self-play per actor call (weights are offered between calls)
MAX_UPDATES_PER_CALL = 64   # updates per learner call at most, so that fresh weights go out between calls


def actor_seeds(seed: int, config: MuZeroConfig, index: int) -> list[np.random.SeedSequence]:
    """The seed sequences of Ray actor ``index``'s generators (one per game slot in version 1,
    one in version 2). Actor 0's are those of a local run (:func:`.train.train`: version 1
    spawns ``num_actors + 1`` children of ``SeedSequence(seed)``, the games' and the learner's;
    version 2 spawns 3, the actor's, the learner's and the held-out draws'); actor ``j > 0``
    takes children past those, its own."""
    if index < 0:
        raise ValueError(f"actor index must be >= 0, got {index}")
    root = np.random.SeedSequence(seed)
    if config.network.version >= 2:
        return [root.spawn(3 + index)[0 if index == 0 else 2 + index]]
    a = config.train.num_actors
    children = root.spawn((a + 1) + index * a)
    return children[:a] if index == 0 else children[(a + 1) + (index - 1) * a:(a + 1) + index * a]


def learner_seeds(seed: int, config: MuZeroConfig) -> tuple[np.random.SeedSequence, np.random.SeedSequence | None]:
    """``(learner, held-out draws or None)``: the local run's (:func:`actor_seeds`)."""
    root = np.random.SeedSequence(seed)
    if config.network.version >= 2:
        _, learner, held = root.spawn(3)
        return learner, held
    return root.spawn(config.train.num_actors + 1)[-1], None


def _source(config: MuZeroConfig, scenarios: Sequence[Scenario], use_generator: bool):
    from .selfplay import ScenarioSource, make_generator

    t = config.train
    generator = (make_generator(t.generator_preset, t.generator_families, t.generator_buffers)
                 if use_generator else None)
    return ScenarioSource(list(scenarios), generator, t.generator_fraction), generator


def first_scenario(source) -> Scenario:
    """The scenario whose env gives the observation shapes (as a local run picks it)."""
    return source.scenarios[0] if source.scenarios else source.generator(np.random.default_rng(0))


class ActorWorker:
    """Self-play in a Ray actor (or in this process: the class is plain Python; Ray wraps it
    with ``ray.remote``). Plays with the weights last given to :meth:`set_weights`."""

    def __init__(self, config: dict, scenarios: Sequence[Scenario], use_generator: bool, seed: int, index: int,
                 spec: dict):
        from .mcts import NetworkModel

        torch.set_num_threads(1)
        self.config = MuZeroConfig.from_dict(config)
        self.index = index
        source, _ = _source(self.config, scenarios, use_generator)
        self.net = MuZeroNet(ObsSpec(**spec), self.config.network).eval()
        self.model = NetworkModel(self.net)
        self.weights_version = -1
        rngs = [np.random.default_rng(s) for s in actor_seeds(seed, self.config, index)]
        if self.config.network.version >= 2:
            from .expert import ExpertActor

            self.expert = ExpertActor(self.config, source, rngs[0], self.model)
            self.selfplay = None
        else:
            from .selfplay import SelfPlay

            self.selfplay = SelfPlay(self.config, source, rngs)
            self.expert = None

    def set_weights(self, weights: tuple[int, dict]) -> int:
        """Load ``(version, state_dict)`` from the learner; returns the version now played."""
        version, state = weights
        if version != self.weights_version:
            self.net.load_state_dict(state)
            self.net.eval()
            self.weights_version = version
        return self.weights_version

    def play(self, *, moves: int | None = None, seconds: float | None = None) -> dict:
        """Play ``moves`` moves, or moves until ``seconds`` have passed (at least one); returns
        ``{"items": [...], "env_steps": n, "moves": m, "weights_version": v}``: version 1, the
        finished games' ``(GameRecord, Episode)``; version 2, each move's ``(records, held out,
        game or None)`` (:meth:`.expert.ExpertActor.step`)."""
        if (moves is None) == (seconds is None):
            raise ValueError("give moves or seconds")
        begin = time.perf_counter()
        items: list = []
        steps = done = 0
        while True:
            if self.expert is not None:
                items.append(self.expert.step())
                steps += 1
            else:
                items.extend(self.selfplay.step(self.model))
                steps += self.config.train.num_actors
            done += 1
            if moves is not None and done >= moves:
                break
            if seconds is not None and time.perf_counter() - begin >= seconds:
                break
        return {"items": items, "env_steps": steps, "moves": done, "weights_version": self.weights_version}

    def rng_state(self) -> dict:
        """The generator states a local checkpoint stores for self-play (``actors`` / ``actor``)
        and the self-competition baselines."""
        if self.expert is not None:
            return {"actor": self.expert.rng.bit_generator.state}
        return {"actors": [a.rng.bit_generator.state for a in self.selfplay.actors],
                "baselines": dict(self.selfplay.baselines)}


class LearnerWorker:
    """The learner in a Ray actor: the network (initialised as a local run's, from ``seed``),
    the optimiser, the replay (version 2: and the held-out positions) and the update debt."""

    def __init__(self, config: dict, seed: int, spec: dict):
        torch.set_num_threads(1)
        self.config = config = MuZeroConfig.from_dict(config)
        t = config.train
        learner_seed, held_seed = learner_seeds(seed, config)
        self.rng = np.random.default_rng(learner_seed)
        self.eval_rng = None if held_seed is None else np.random.default_rng(held_seed)
        torch.manual_seed(seed)
        self.spec = ObsSpec(**spec)
        self.net = MuZeroNet(self.spec, config.network)
        self.version = config.network.version
        if self.version >= 2:
            from .expert import ExpertLearner, ExpertReplay

            self.learner = ExpertLearner(self.net, config, self.rng)
            self.replay = ExpertReplay(t.replay_capacity, self.spec, positive_weight=t.positive_weight)
            self.heldout = ExpertReplay(HELDOUT_POSITIONS, self.spec, positive_weight=1.0)
        else:
            from .learner import Learner
            from .replay import Replay

            self.learner = Learner(self.net, config, self.rng)
            self.replay = Replay(t.replay_capacity, self.spec, alpha=t.priority_alpha, beta=t.priority_beta)
            self.heldout = None
        self.net.eval()
        self.owed = 0.0
        self.calls = 0   # add and train calls so far: the driver keeps the latest "owed" it hears
        self.counts = {"env_steps": 0, "episodes": 0}
        if self.version >= 2:
            self.counts.update({"positions": 0, "heldout_positions": 0})

    def weights(self) -> tuple[int, dict]:
        """``(updates so far, state_dict)``: what the actors play with."""
        return self.learner.steps, {k: v.detach().clone() for k, v in self.net.state_dict().items()}

    def add(self, played: dict) -> dict:
        """Store one :meth:`ActorWorker.play` result; returns ``{"env_steps", "positions",
        "heldout_positions", "games": [Episode or ExpertGame], "owed", "call"}`` (``owed``: updates
        owed after it, as of learner call number ``call``)."""
        t = self.config.train
        games = []
        added = held = 0
        if self.version >= 2:
            for records, is_held, game in played["items"]:
                if is_held:
                    held += self.heldout.add(records)
                else:
                    n = self.replay.add(records)
                    added += n
                    if self.replay.size >= max(t.min_replay, 1):
                        self.owed += n * t.replay_ratio / t.batch_size
                if game is not None:
                    games.append(game)
        else:
            from .replay import nstep_returns

            for record, episode in played["items"]:
                z = nstep_returns(record.rewards, record.values, t.td_steps, self.config.search.discount)
                self.replay.add(record, np.abs(z - record.values))
                added += len(record)
                games.append(episode)
            if self.replay.size >= max(t.min_replay, 1):
                self.owed += played["env_steps"] * t.replay_ratio / t.batch_size
        self.counts["env_steps"] += played["env_steps"]
        self.counts["episodes"] += len(games)
        if self.version >= 2:
            self.counts["positions"] += added
            self.counts["heldout_positions"] += held
        self.calls += 1
        return {"env_steps": played["env_steps"], "positions": added, "heldout_positions": held, "games": games,
                "owed": self.owed, "call": self.calls}

    def train(self, max_updates: int = MAX_UPDATES_PER_CALL) -> dict:
        """Take the updates owed (at most ``max_updates``); returns ``{"losses": [loss parts of
        each], "owed", "call"}`` (as :meth:`add`)."""
        losses = []
        while self.owed >= 1.0 and len(losses) < max_updates:
            parts = self.learner.step(self.replay)
            parts = parts if isinstance(parts, dict) else parts.as_dict()
            if not all(math.isfinite(v) for v in parts.values()):
                raise FloatingPointError(f"non-finite loss at train step {self.learner.steps}: {parts}")
            losses.append(parts)
            self.owed -= 1.0
        self.calls += 1
        return {"losses": losses, "owed": self.owed, "call": self.calls}

    def stats(self) -> dict:
        """The counters (what has been stored so far) and replay statistics for a log line
        (version 2: with the train and held-out residual errors, as a local run logs them)."""
        out = {**self.counts, "train_steps": self.learner.steps, "replay_size": self.replay.size}
        if self.version >= 2:
            from .expert import POSITIVE_RESIDUAL

            replay, heldout = self.replay, self.heldout
            out["replay_positive_fraction"] = (float(np.mean(replay.residual[replay.weight > 0] > POSITIVE_RESIDUAL))
                                               if replay.size else math.nan)
            if heldout.size and replay.size:
                n = min(EVAL_POSITIONS, heldout.size, replay.size)
                train_idx = self.eval_rng.choice(np.flatnonzero(replay.weight > 0), size=n, replace=False)
                held_idx = self.eval_rng.choice(np.flatnonzero(heldout.weight > 0), size=n, replace=False)
                out["train_residual_error"] = self.learner.residual_error(replay, train_idx)
                out["heldout_residual_error"] = self.learner.residual_error(heldout, held_idx)
        return out

    def state(self) -> dict:
        """What a checkpoint stores of the learner: weights, optimiser, generator states."""
        rng = {"learner": self.rng.bit_generator.state, "torch": torch.get_rng_state()}
        if self.eval_rng is not None:
            rng["eval"] = self.eval_rng.bit_generator.state
        return {"model": self.net.state_dict(), "optimizer": self.learner.optimizer.state_dict(), "rng": rng,
                "counts": {**self.counts, "train_steps": self.learner.steps}}


def _games_summary(games: list) -> dict:
    """Return statistics of recent games (the keys of a local log line)."""
    played = [g for g in games if not getattr(g, "teacher", False) and not getattr(g, "heldout", False)]
    taught = [g for g in games if getattr(g, "teacher", False)]
    return game_stats(played, taught)


def _get(ray, ref):
    """``ray.get(ref)``, an actor's own exception raised as it was raised there."""
    from ray.exceptions import RayError, RayTaskError

    try:
        return ray.get(ref)
    except RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception) and not isinstance(cause, RayError):
            raise cause from None
        raise OSError(f"Ray failed in training: {' '.join(str(exc).split())[:300]}") from None
    except RayError as exc:
        raise OSError(f"Ray failed in training: {' '.join(str(exc).split())[:300]}") from None


def train_ray(config: MuZeroConfig, *, scenarios: Sequence[Scenario], out_dir: str | Path, minutes: float,
              seed: int = 0, use_generator: bool = True, progress: bool = True, address: str | None = None,
              actors: int = 1) -> dict:
    """Train for ``minutes`` of wall clock with ``actors`` self-play actors and one learner as
    Ray actors (see the module docstring); returns the summary (the log's last line).

    ``address``: as ``bench --ray`` (None: the Ray initialised in this process, else a local
    one started for the run and shut down after it). A malformed or silent address, a missing
    ray and a Ray with fewer than ``actors + 1`` CPUs are refused before anything is written."""
    from ..._ray import RayRunner

    if not (minutes > 0 and math.isfinite(minutes)):
        raise ValueError(f"--minutes must be > 0 and finite, got {minutes}")
    if not (isinstance(actors, int) and actors >= 1):
        raise ValueError(f"--ray-actors must be an integer >= 1, got {actors!r}")
    runner = RayRunner(address)   # checks the address and that ray is installed, before anything runs
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a folder")
    torch.set_num_threads(1)
    source, generator = _source(config, scenarios, use_generator)

    spec = ObsSpec.from_env(make_env(first_scenario(source), config))
    ray = runner._ray
    started = runner._connect()
    try:
        cpus = ray.cluster_resources().get("CPU", 0)
        if cpus < actors + 1:
            raise ValueError(f"--ray-actors {actors}: the Ray cluster has {cpus:g} CPUs, and the actors and "
                             f"the learner need {actors + 1} (one each)")
        return _run(ray, config, scenarios, source, generator, spec, out, minutes, seed, use_generator, progress,
                    actors, address, JsonLog)
    finally:
        if started:
            ray.shutdown()


def _run(ray, config, scenarios, source, generator, spec, out, minutes, seed, use_generator, progress, actors,
         address, log_class) -> dict:
    t = config.train
    version = config.network.version
    remote_actor = ray.remote(num_cpus=1)(ActorWorker)
    remote_learner = ray.remote(num_cpus=1)(LearnerWorker)
    cfg, spec_dict = config.to_dict(), spec.to_dict()
    learner = remote_learner.remote(cfg, seed, spec_dict)
    scenarios_ref = ray.put(list(scenarios))
    workers = [remote_actor.remote(cfg, scenarios_ref, use_generator, seed, i, spec_dict) for i in range(actors)]
    weights = learner.weights.remote()
    _get(ray, [w.set_weights.remote(weights) for w in workers])   # every actor built, with the first weights

    counters = {"env_steps": 0, "episodes": 0, "train_steps": 0, "elapsed_s": 0.0}
    if version >= 2:
        counters.update({"positions": 0, "heldout_positions": 0})
    out.mkdir(parents=True, exist_ok=True)   # the first write into the run folder
    with atomic_write(out / "config.json") as handle:
        handle.write(config.to_json() + "\n")
    log = log_class(out / "log.jsonl")
    net = MuZeroNet(spec, config.network)
    log.write({"event": "start", "seed": seed, "minutes": minutes, "ray": {"address": address, "actors": actors},
               **({"version": 2} if version >= 2 else {}),
               "scenarios": [s.name for s in scenarios], "generator": repr(generator) if generator else None,
               "parameters": sum(p.numel() for p in net.parameters()), **counters})

    def checkpoint(elapsed: float) -> None:
        state = _get(ray, learner.state.remote())
        counters.update(state["counts"])
        rng = _get(ray, workers[0].rng_state.remote())
        extra = {"baselines": rng.pop("baselines")} if "baselines" in rng else {}
        net.load_state_dict(state["model"])
        optimizer = torch.optim.AdamW(net.parameters(), lr=t.lr, weight_decay=t.weight_decay)
        optimizer.load_state_dict(state["optimizer"])
        save_checkpoint(out, net=net, config=config, optimizer=optimizer, progress={**counters, "elapsed_s": elapsed},
                        rng={**rng, **state["rng"]}, extra={**extra, "ray_actors": actors})

    budget = minutes * 60.0
    begin = time.perf_counter()
    last_log = last_ckpt = begin
    recent: deque = deque(maxlen=200 if version < 2 else 50)
    losses: list[dict] = []
    pending: dict = {w.play.remote(seconds=SLICE_S): w for w in workers}   # ref -> worker, "add" or "train"
    training = False
    owed, heard = 0.0, 0   # the learner's update debt, as of its call number ``heard``
    latest, offered = weights, None   # the newest weights ready, and a request in flight
    sent = {id(w): weights for w in workers}
    with graceful_stop() as stop, Progress(round(budget), "muzero", enabled=progress, unit="s") as bar:
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            what = pending.pop(ref)
            now = time.perf_counter()
            over = now - begin >= budget or bool(stop)  # Ctrl-C/SIGTERM: no new work, checkpoint as at the end
            if what in ("train", "add"):
                result = _get(ray, ref)
                if result["call"] > heard:
                    owed, heard = result["owed"], result["call"]
                if what == "train":
                    losses.extend(result["losses"])
                    training = False
                else:
                    recent.extend(result["games"])
            else:   # an actor's slice of play: its records go to the learner without passing through here
                worker = what
                pending[learner.add.remote(ref)] = "add"
                if offered is not None and ray.wait([offered], timeout=0)[0]:
                    latest, offered = offered, None
                if sent[id(worker)] is not latest:
                    worker.set_weights.remote(latest)   # the learner's broadcast, through the object store
                    sent[id(worker)] = latest
                if offered is None:
                    offered = learner.weights.remote()
                if not over:
                    pending[worker.play.remote(seconds=SLICE_S)] = worker
            if not training and not over and owed >= 1.0:
                pending[learner.train.remote()] = "train"
                training = True
            if now - last_log >= t.log_every_s and not over:
                last_log = now
                record = _log_record(ray, learner, counters, now - begin, recent, losses)
                log.write({"event": "progress", **record})
                losses = []
                bar.update(f"steps {counters['env_steps']} train {counters['train_steps']} "
                           f"ret {record.get('return_mean', float('nan')):.3f} vs xla "
                           f"{record.get('xla_return_mean', float('nan')):.3f}",
                           done=min(round(now - begin), round(budget)))
            if now - last_ckpt >= t.checkpoint_every_s and not over:
                last_ckpt = now
                checkpoint(now - begin)
        counters["elapsed_s"] = time.perf_counter() - begin
        checkpoint(counters["elapsed_s"])
        bar.update("done", done=round(budget))
    summary = _log_record(ray, learner, counters, counters["elapsed_s"], recent, losses)
    summary["checkpoint"] = str(checkpoint_path(out))
    if stop:
        summary["interrupted"] = True
    log.write({"event": "end", **summary})
    return summary


def _log_record(ray, learner, counters: dict, elapsed: float, recent, losses: list[dict]) -> dict:
    stats = _get(ray, learner.stats.remote())
    counters.update({k: stats.pop(k) for k in list(counters) if k in stats})
    rec = {**counters, "elapsed_s": round(elapsed, 2), **stats, **_games_summary(list(recent))}
    if losses:
        rec["losses"] = {k: float(np.mean([d[k] for d in losses])) for k in losses[0]}
    return rec


def main_ray(args, config: MuZeroConfig, scenarios: Sequence[Scenario], use_generator: bool) -> dict:
    """``mallocgym train muzero ... --ray [ADDRESS] [--ray-actors N]`` (:func:`.train.main`'s
    parsed ``args``): one ``ValueError`` for ``--ray-actors`` without ``--ray`` or with ``--resume``."""
    if args.ray is None:
        raise ValueError("--ray-actors needs --ray")
    if args.resume:
        raise ValueError("--ray starts a new run; continue one without --ray (--resume reads the checkpoint a Ray "
                         "run writes, which is in the local format)")
    actors = 1 if args.ray_actors is None else args.ray_actors
    if actors < 1:
        raise ValueError(f"--ray-actors must be >= 1, got {actors}")
    return train_ray(config, scenarios=scenarios, out_dir=args.out, minutes=args.minutes, seed=args.seed,
                     use_generator=use_generator, progress=not args.no_progress,
                     address=None if args.ray is True else args.ray, actors=actors)
