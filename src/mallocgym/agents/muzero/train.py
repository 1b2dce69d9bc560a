"""Training mallocMuZero by expert iteration (:mod:`.expert`) under a wall-clock budget.

    mallocgym train muzero --suite default --minutes 30 --out runs/mz [--seed 0] [--resume | --init DIR]
                           [--scenario NAME ...] [--config FILE.json] [--set part.field=VALUE ...]

Games (labelled games, :mod:`.labels`, by default; the simulator search's with
``train.label_fraction < 1``; in worker processes with ``train.label_workers``) and the learner
alternate: each game's positions owe the learner ``replay_ratio * positions / batch_size``
updates (once the replay holds ``min_replay`` positions). ``DIR`` receives ``config.json``, ``checkpoint.pt``
(atomic, every ``checkpoint_every_s`` and at the end) and ``log.jsonl`` (one JSON object per
line, flushed to disk as it is written; a resumed run appends). ``--resume`` continues from
``DIR``'s checkpoint with its config (the replay refills). ``DIR`` is created only once the
checkpoint (with ``--resume``), the scenarios and the networks are in hand, so a refused run
leaves nothing behind; the command refuses a ``DIR`` that holds a run unless ``--resume``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from collections import deque
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..._files import atomic_write
from ..._interrupt import graceful_stop, refuse_other_run, truncate_jsonl
from ..._progress import Progress
from ..._validate import read_json
from ...scenarios import Scenario, resolve, suite
from .checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from .config import VERSION_1, MuZeroConfig
from .expert import POSITIVE_RESIDUAL, ExpertActor, ExpertLearner, ExpertReplay, finite_mean
from .game import make_env
from .model import NetworkModel
from .networks import MuZeroNet, ObsSpec
from .runlog import EVAL_POSITIONS, HELDOUT_POSITIONS, JsonLog
from .source import ScenarioSource, make_generator

__all__ = ["train", "main", "build_parser"]

MAX_SEED = 2**32 - 1
RAY_REMOVED = ("train muzero --ray (the Ray trainer of MuZero's self-play) was removed by issue 31 with the "
               "version-1 trainer; play labelled games in worker processes: --set train.label_workers=N")


def _resume_weights(payload: dict, spec, net, learner) -> None:
    """Load a resumed run's network and optimiser, refusing one trained on other observations."""
    if payload["spec"] != spec:
        raise ValueError(f"{payload['path']}: trained on observations {payload['spec']}, the env gives {spec}")
    net.load_state_dict(payload["model"])
    if payload.get("optimizer"):
        learner.optimizer.load_state_dict(payload["optimizer"])


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


POLICY_WINDOW = 20
INIT_AND_RESUME = "--init starts a fresh run from another run's weights; --resume continues this one: use one of them"


def policy_speedups(games: Sequence[tuple[float, float]]) -> dict:
    """Log fields of the policy's latest games (``train.label_policy``): ``(return, xla-msa's
    return)`` pairs, returns ``1 - time / all-slow time``. Each game's speedup over xla-msa is
    ``xla_time / policy_time = (1 - xla_return) / (1 - return)``, on a program the network had
    not trained on when it played it: ``policy_window`` (how many), ``policy_speedup`` (their
    geometric mean), ``policy_beats_xla_fraction`` (above 1 by more than 1e-12) and
    ``policy_worst`` (the smallest)."""
    ratios = np.array([(1.0 - x) / (1.0 - r) for r, x in games], np.float64)
    return {"policy_window": int(ratios.size), "policy_speedup": float(np.exp(np.mean(np.log(ratios)))),
            "policy_beats_xla_fraction": float(np.mean(ratios > 1 + 1e-12)), "policy_worst": float(ratios.min())}


def _rng_state(rng: np.random.Generator) -> dict:
    return rng.bit_generator.state


def _set_rng_state(rng: np.random.Generator, state: dict) -> None:
    rng.bit_generator.state = state


def train(config: MuZeroConfig, *, scenarios: Sequence[Scenario], out_dir: str | Path, minutes: float,
          seed: int = 0, resume: bool = False, use_generator: bool = True, progress: bool = True,
          init: str | Path | None = None) -> dict:
    """Train for ``minutes`` of wall-clock time; return a summary (also the log's last line).

    Args:
      scenarios: training scenarios (may be empty when ``use_generator``).
      use_generator: also play generated instances (``train.generator_fraction`` of episodes).
      resume: continue from ``out_dir``'s checkpoint (its config replaces ``config``).
      init: a run folder (or checkpoint file) whose network's weights this fresh run starts from
        (a new optimiser, counters from zero); its observation spec and ``network`` config must
        be this run's.
    """
    if not (minutes > 0 and math.isfinite(minutes)):
        raise ValueError(f"--minutes must be > 0 and finite, got {minutes}")
    torch.set_num_threads(1)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a folder")
    payload = None
    if init is not None and resume:
        raise ValueError(INIT_AND_RESUME)
    init_payload = None
    if init is not None:
        try:
            init_payload = load_checkpoint(init)
        except ValueError as exc:
            raise ValueError(one_line(str(exc))) from None
        if init_payload["config"].network != config.network:
            raise ValueError(f"--init {init}: its network config {init_payload['config'].network} is not this "
                             f"run's {config.network}")
    if not resume:  # a fresh run never appends to another run's log
        refuse_other_run(out, [checkpoint_path(out), out / "log.jsonl"])
    else:
        try:  # before anything is written: a bad --out stays as it was
            payload = load_checkpoint(out)
        except ValueError as exc:  # torch's messages span lines; the CLI prints one
            raise ValueError(one_line(str(exc))) from None
        config = payload["config"]
        # the log goes back to the checkpoint: lines written after it (a killed run) are dropped
        saved = float(payload["progress"].get("elapsed_s", 0.0)) + 0.01
        truncate_jsonl(out / "log.jsonl", lambda r: float(r.get("elapsed_s", 0.0)) <= saved)
    if config.network.version < 2:
        raise ValueError(f"network.version = 1: {VERSION_1}")
    return _train_expert(config, payload, scenarios=scenarios, out=out, minutes=minutes, seed=seed,
                         resume=resume, use_generator=use_generator, progress=progress, init=init_payload)


def _to_device(net: torch.nn.Module, learner: ExpertLearner, device: str) -> None:
    """Move the network and the optimiser's state (a resumed run's) to ``device``
    (``train.device``); one clear error where it is not available."""
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("train.device = 'cuda' but torch sees no CUDA device")
    net.to(device)
    for state in learner.optimizer.state.values():
        for key, value in state.items():
            if torch.is_tensor(value) and key != "step":
                state[key] = value.to(device)


def _train_expert(config: MuZeroConfig, payload: dict | None, *, scenarios: Sequence[Scenario], out: Path,
                  minutes: float, seed: int, resume: bool, use_generator: bool, progress: bool,
                  init: dict | None = None) -> dict:
    """:func:`train`'s loop: expert iteration (:mod:`.expert`), one game at a time. Each log line holds the loss parts, and with
    ``train.heldout_fraction > 0`` the mean absolute residual error on replay positions
    and on held-out games' positions (``train_residual_error``, ``heldout_residual_error``: the
    same number of each, drawn uniformly), side by side."""
    t = config.train
    actor_seed, learner_seed, eval_seed = np.random.SeedSequence(seed).spawn(3)
    actor_rng, learner_rng = np.random.default_rng(actor_seed), np.random.default_rng(learner_seed)
    eval_rng = np.random.default_rng(eval_seed)
    torch.manual_seed(seed)
    counters = {"env_steps": 0, "episodes": 0, "train_steps": 0, "elapsed_s": 0.0, "positions": 0,
                "heldout_positions": 0}
    if payload is not None:
        counters.update({k: payload["progress"].get(k, v) for k, v in counters.items()})
        for rng, key in ((actor_rng, "actor"), (learner_rng, "learner"), (eval_rng, "eval")):
            if key in payload["rng"]:
                _set_rng_state(rng, payload["rng"][key])
        if "torch" in payload["rng"]:
            torch.set_rng_state(payload["rng"]["torch"])
    generator = (make_generator(t.generator_preset, t.generator_families, t.generator_buffers)
                 if use_generator else None)
    source = ScenarioSource(list(scenarios), generator, t.generator_fraction)
    first = source.scenarios[0] if source.scenarios else source.generator(np.random.default_rng(0))
    spec = ObsSpec.from_env(make_env(first, config))
    net = MuZeroNet(spec, config.network)
    learner = ExpertLearner(net, config, learner_rng)
    if payload is not None:
        _resume_weights(payload, spec, net, learner)
    elif init is not None:
        _resume_weights({**init, "optimizer": None}, spec, net, learner)
    learner.steps = int(counters["train_steps"])
    if t.device != "cpu":
        _to_device(net, learner, t.device)
    net.eval()
    model = NetworkModel(net)
    replay = ExpertReplay(t.replay_capacity, spec, positive_weight=t.positive_weight)
    heldout = ExpertReplay(HELDOUT_POSITIONS, spec, positive_weight=1.0)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "config.json") as handle:
        handle.write(config.to_json() + "\n")
    log = JsonLog(out / "log.jsonl")
    log.write({"event": "resume" if resume else "start", "seed": seed, "minutes": minutes, "version": 2,
               "scenarios": [s.name for s in scenarios], "generator": repr(generator) if generator else None,
               "parameters": sum(p.numel() for p in net.parameters()),
               "init": None if init is None else str(init["path"]), **counters})

    def checkpoint(elapsed: float) -> None:
        save_checkpoint(out, net=net, config=config, optimizer=learner.optimizer,
                        progress={**counters, "elapsed_s": elapsed},
                        rng={"actor": _rng_state(actor_rng), "learner": _rng_state(learner_rng),
                             "eval": _rng_state(eval_rng), "torch": torch.get_rng_state()})

    if t.label_policy > 0:   # the policy's games read the network from the checkpoint file: one from the start
        checkpoint(float(counters["elapsed_s"]))
    if t.label_workers > 0:   # labelled games in worker processes (.workers); the actor's rng is not drawn
        from .workers import LabelWorkers

        actor = LabelWorkers(config, list(scenarios), use_generator=use_generator, seed=seed,
                             workers=t.label_workers, games_started=int(counters["episodes"]),
                             policy_path=checkpoint_path(out))
    else:
        actor = ExpertActor(config, source, actor_rng, model, seed=seed)

    policy_games: deque = deque(maxlen=POLICY_WINDOW)   # the latest games of the policy (train.label_policy)

    def record(elapsed: float, losses: list[dict], games: list) -> dict:
        rec = {**counters, "elapsed_s": round(elapsed, 2), "replay_size": replay.size,
               "replay_positive_fraction": float(np.mean(replay.residual[replay.weight > 0] > POSITIVE_RESIDUAL))
               if replay.size else math.nan}
        if losses:
            rec["losses"] = {k: float(np.mean([d[k] for d in losses])) for k in losses[0]}
        played = [g for g in games if not g.heldout]
        if played:
            rec["return_mean"] = finite_mean([g.ret for g in played])
            rec["xla_return_mean"] = finite_mean([g.xla_return for g in played])
            rec["beats_xla_fraction"] = finite_mean([g.ret > g.xla_return + 1e-12 for g in played])
        if policy_games:
            rec.update(policy_speedups([(g.ret, g.xla_return) for g in policy_games]))
        if heldout.size and replay.size:
            # the same number of positions from each, drawn uniformly (no positive weighting)
            n = min(EVAL_POSITIONS, heldout.size, replay.size)
            train_idx = eval_rng.choice(np.flatnonzero(replay.weight > 0), size=n, replace=False)
            held_idx = eval_rng.choice(np.flatnonzero(heldout.weight > 0), size=n, replace=False)
            rec["train_residual_error"] = learner.residual_error(replay, train_idx)
            rec["heldout_residual_error"] = learner.residual_error(heldout, held_idx)
            rec["train_positive_fraction"] = float(np.mean(replay.residual[train_idx] > POSITIVE_RESIDUAL))
            rec["heldout_positive_fraction"] = float(np.mean(heldout.residual[held_idx] > POSITIVE_RESIDUAL))
        return rec

    budget = minutes * 60.0
    begin = time.perf_counter()
    base_elapsed = float(counters["elapsed_s"])
    last_log = last_ckpt = begin
    owed = 0.0
    losses: list[dict] = []
    games: deque = deque(maxlen=50)
    with graceful_stop() as stop, Progress(round(budget), "muzero", enabled=progress, unit="s") as bar, \
            (actor if t.label_workers > 0 else contextlib.nullcontext()):
        while time.perf_counter() - begin < budget and not stop:  # Ctrl-C/SIGTERM: checkpoint as at the end
            if t.label_workers > 0:   # wait for the workers' next game in slices: the budget and Ctrl-C stay live
                records, held, game = actor.step(timeout=min(1.0, max(0.0, budget - (time.perf_counter() - begin))))
                if game is None:
                    continue
            else:
                records, held, game = actor.step()
            counters["env_steps"] += 1
            if held:
                counters["heldout_positions"] += heldout.add(records)
            else:
                added = replay.add(records)
                counters["positions"] += added
                if replay.size >= max(t.min_replay, 1):
                    owed += added * t.replay_ratio / t.batch_size
            while owed >= 1.0:
                parts = learner.step(replay)
                if not all(math.isfinite(v) for k, v in parts.items() if not k.endswith("_mae")):
                    raise FloatingPointError(f"non-finite loss at train step {learner.steps}: {parts}")
                losses.append(parts)
                owed -= 1.0
            counters["train_steps"] = learner.steps
            if game is not None:
                counters["episodes"] += 1
                games.append(game)
                if game.policy:
                    policy_games.append(game)
            now = time.perf_counter()
            if now - last_log >= t.log_every_s:
                last_log = now
                rec = record(base_elapsed + now - begin, losses, list(games))
                log.write({"event": "progress", **rec})
                losses = []
                bar.update(f"games {counters['episodes']} positions {counters['positions']} "
                           f"train {counters['train_steps']}", done=min(round(now - begin), round(budget)))
            if now - last_ckpt >= t.checkpoint_every_s:
                last_ckpt = now
                checkpoint(base_elapsed + now - begin)
        counters["elapsed_s"] = base_elapsed + time.perf_counter() - begin
        checkpoint(counters["elapsed_s"])
        bar.update("done", done=round(budget))
    summary = record(counters["elapsed_s"], losses, list(games))
    summary["checkpoint"] = str(checkpoint_path(out))
    if init is not None:   # the network's training before this run (--init), for the budget it took in all
        summary["init_elapsed_s"] = float(init["progress"].get("elapsed_s", 0.0))
    if stop:
        summary["interrupted"] = True
    log.write({"event": "end", **summary})
    return summary


def build_parser() -> argparse.ArgumentParser:
    from ..._args import Parser

    p = Parser(prog="mallocgym train muzero",
                                description="Train mallocMuZero by expert iteration under a wall-clock budget.")
    p.add_argument("--suite", help="suite whose --split is played (default: default; not with --scenario)")
    p.add_argument("--split", choices=["train", "test"],
                   help="split of --suite (default: train; as `train sb3 --split`); not with --scenario")
    p.add_argument("--scenario", action="append",
                   help="train on this scenario only (repeatable; disables the synthetic generator, so "
                        "--no-generator changes nothing with it)")
    p.add_argument("--minutes", type=float, required=True, help="wall-clock budget of this run")
    p.add_argument("--out", required=True, help="run folder: checkpoint.pt, config.json, log.jsonl")
    p.add_argument("--seed", type=int, default=0, help=f"0..{MAX_SEED} (default: 0)")
    p.add_argument("--resume", action="store_true",
                   help="continue from --out's checkpoint (without it, an --out that holds a run is refused)")
    p.add_argument("--init", metavar="DIR",
                   help="start the network from DIR's checkpoint (a run folder or checkpoint file; its network "
                        "config must be this run's); a fresh optimiser and counters (not with --resume)")
    p.add_argument("--config", help="a JSON config file (MuZeroConfig.to_dict's shape)")
    p.add_argument("--set", action="append", default=[], metavar="PART.FIELD=VALUE",
                   help="override one config field, e.g. search.num_simulations=8 (repeatable)")
    p.add_argument("--no-generator", action="store_true", help="train on the suite's scenarios only")
    p.add_argument("--quiet", "--no-progress", dest="no_progress", action="store_true", help="no progress bar")
    p.add_argument("--ray", nargs="?", const=True, metavar="ADDRESS", help=argparse.SUPPRESS)   # RAY_REMOVED
    p.add_argument("--ray-actors", type=int, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--env", choices=["v0", "v1"],
                   help="the game (default: v0, or the --config file's env.game); v1 (MallocGame-v1) trains on "
                        "labelled games only (train.label_fraction=1, the default)")
    return p


def main(argv: list[str] | None = None) -> int:
    """``mallocgym train muzero ...``; bad input raises ``ValueError`` (one line from the CLI)."""
    args = build_parser().parse_args(argv)
    if args.ray is not None or args.ray_actors is not None:
        raise ValueError(RAY_REMOVED)
    if not (args.minutes > 0 and math.isfinite(args.minutes)):
        raise ValueError(f"--minutes must be > 0 and finite, got {args.minutes}")
    if not 0 <= args.seed <= MAX_SEED:
        raise ValueError(f"--seed must be in [0, {MAX_SEED}], got {args.seed}")
    if not args.resume:
        refuse_other_run(Path(args.out), [checkpoint_path(args.out), Path(args.out) / "log.jsonl"])
    config = MuZeroConfig()
    if args.config:
        path = Path(args.config)
        try:
            config = MuZeroConfig.from_dict(read_json(path, what="config file"))
        except (TypeError, OverflowError, ValueError) as exc:
            raise ValueError(f"{path}: bad config: {exc}") from None
    if any(a.partition("=")[0].strip() == "env.game" for a in args.set):
        raise ValueError("the game is chosen with --env v0|v1, not --set env.game")
    config = config.with_overrides(args.set + ([f"env.game={args.env}"] if args.env else []))
    if args.resume and args.init:
        raise ValueError(INIT_AND_RESUME)
    if args.resume and (args.config or args.set or args.env):
        raise ValueError("--resume continues with the checkpoint's config (its game included); "
                         "drop --config/--set/--env")
    if args.scenario and (args.suite is not None or args.split is not None):
        raise ValueError("--scenario replaces the suite's split as training data; drop --suite/--split")
    if args.scenario:
        scenarios = [resolve(name) for name in args.scenario]
        use_generator = False
    else:
        scenarios = suite(args.suite if args.suite is not None else "default", args.split or "train")
        use_generator = not args.no_generator
    summary = train(config, scenarios=scenarios, out_dir=args.out, minutes=args.minutes, seed=args.seed,
                    resume=args.resume, use_generator=use_generator, progress=not args.no_progress, init=args.init)
    print(json.dumps(summary, indent=1, sort_keys=True))
    if summary.get("interrupted"):
        print(f"mallocgym: interrupted; checkpoint saved in {args.out} (continue with --resume)", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
