"""``mallocgym train sb3``: train MaskablePPO, PPO or DQN on a suite under a wall-clock budget.

    mallocgym train sb3 --algo maskable_ppo --suite default --minutes 10 --out runs/mppo
    mallocgym train sb3 --algo maskable_ppo --env v1 --suite default --minutes 10 --out runs/mppo-v1
    mallocgym train sb3 --algo maskable_ppo --set env.order=canonical --minutes 10 --out runs/mppo-canon

``--env`` picks the game (MallocGame-v0, the default, or -v1); the run records it and its agent
plays only that one; ``--set env.order=canonical`` trains in MallocGame-v0's canonical decision
mode (in SB3's ``DummyVecEnv`` unless ``--vec`` says otherwise), which the run's agent then
plays. Training stops at ``--minutes`` (wall clock of the learning loop,
evaluations included) or ``--steps`` (total env steps, counting earlier runs when resuming),
whichever comes first. The newest weights are written atomically every
``--checkpoint-minutes`` and at the end (also on Ctrl-C), with ``train.json`` (see
:mod:`.checkpoint`); ``--resume`` continues them, step count included. ``KIND:OUT`` then loads
``model.zip`` (``mallocgym eval --agent maskable_ppo:runs/mppo``).

Evaluation (:class:`_Evaluate`, on unless ``--eval-programs 0``): every ``--eval-minutes`` (1
on v0, 5 on v1) and at the end, the policy plays held-out programs of the training split
(``--eval-holdout``, 2 by default, taken out of training), held-out generated programs
(``--eval-programs``, 8) and the training scenarios, and with ``--eval-test`` the suite's test
split (logged only); ``logs/eval.csv`` gets a row per evaluation. With ``--select best`` (the
default) ``model.zip`` is the checkpoint with the best held-out score (:func:`score_groups`)
and ``latest.zip`` the newest weights; with ``--select last`` ``model.zip`` is the newest.

``--warm-start xla-msa`` (MallocGame-v1, MaskablePPO, new runs): before the first PPO step the
policy imitates XLA's moves on ``--warm-start-games`` games drawn like training's
(:mod:`.warm_start`); ``logs/warm_start.csv`` gets the imitation accuracy per epoch,
``train.json`` a ``warm_start`` section, and ``warm_start.zip`` the weights before PPO. Its time
is not part of ``--minutes``. ``--generator-families`` and ``--generator-buffers`` replace the
generator preset's families and buffer-count range.

``--steps N`` stops at ``N`` env steps; when ``N`` falls on the end of a rollout
(``n_steps * n_envs`` steps for PPO and MaskablePPO) that last rollout is trained on, otherwise
the partial rollout is dropped (as one cut by ``--minutes`` is).

``OUT/logs/progress.csv`` (SB3's CSV format) gets one row per PPO/MaskablePPO iteration, written
and flushed right after that iteration's update (so the row carries its ``train/`` losses), and,
when the run stops in the middle of a rollout, one last row with an empty ``time/iterations``
that records where it stopped. DQN writes a row every 4 episodes (SB3's default) and one at the
end. ``--resume`` appends to the run's file (``time/iterations`` counts from 1 again; the
``time/total_timesteps`` column goes on). The file is closed when training ends, also on an error.
"""

from __future__ import annotations

import argparse
import csv
import math
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.logger import CSVOutputFormat, Logger, make_output_format
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.utils import LinearSchedule

from ..._interrupt import refuse_other_run, terminate_as_interrupt
from ..._progress import Progress
from ...scenarios import resolve, suite
from .checkpoint import (LATEST_FILE, MODEL_FILE, WARM_START_FILE, build_model, load_checkpoint, read_meta, run_paths,
                         save_checkpoint)
from .config import ALGOS, CANONICAL, VEC_KINDS, VERSIONS, DQNConfig, config_to_dict, default_config, override
from .data import TrainingMix
from .evaluation import MAX_VALIDATION_PROGRAMS, VALIDATION_PRESET, Evaluator, geomean, validation_scenarios
from .vec_env import make_vec_env
from .warm_start import DEFAULT_EPOCHS as WARM_START_EPOCHS, DEFAULT_GAMES as WARM_START_GAMES, TEACHERS

__all__ = ["main", "train", "build_parser"]

UNLIMITED_STEPS = 10**12
MAX_SEED = 2**32 - 1  # SB3 seeds numpy's legacy generator, which takes seeds below 2**32
MAX_ENVS = 4096
DEFAULT_EVAL_MINUTES = {"v0": 1.0, "v1": 5.0}  # an evaluation takes ~1-2 s on v0, ~10-30 s on v1
DEFAULT_EVAL_PROGRAMS = 8
DEFAULT_EVAL_HOLDOUT = 2  # programs of a suite's split held out of training to select checkpoints by
SELECT_RULES = ("best", "last")
EVAL_FILE = "eval.csv"
WARM_START_LOG = "warm_start.csv"  # one row per epoch of the warm start (--warm-start)
WARM_START_COLUMNS = ("epoch", "loss", "policy_loss", "value_loss", "train_accuracy", "heldout_accuracy", "seconds")
MAX_WARM_START_GAMES = 100_000
EVAL_SCENARIOS_FILE = "eval_scenarios.csv"  # one row per scenario and evaluation
EVAL_SCENARIO_COLUMNS = ("steps", "group", "scenario", "speedup")
EVAL_COLUMNS = ("steps", "wall_s", "train_s", "eval_s", "score", "valid_speedup", "holdout_speedup", "train_speedup",
                "test_speedup", "selected")


class _AppendingCSV(CSVOutputFormat):
    """SB3's CSV writer (one flushed row per ``dump``) that continues an existing file instead of
    truncating it, so ``--resume`` keeps the earlier runs' rows."""

    def __init__(self, filename: str):  # noqa: D107 (does not call super: it would truncate the file)
        path = Path(filename)
        self.separator, self.quotechar = ",", '"'
        self.keys: list[str] = []
        if path.is_file() and path.stat().st_size > 0:
            self.file = open(path, "r+")
            header = self.file.readline().rstrip("\n")
            self.keys = header.split(self.separator) if header else []
            self.file.seek(0, 2)  # append after the last row
        else:
            self.file = open(path, "w+")


class _RunLogger(Logger):
    """A logger that remembers the step of its last ``dump`` (to write a last row only when the
    run went on after it)."""

    def __init__(self, folder: str, output_formats):
        super().__init__(folder, output_formats)
        self.last_dump_step: int | None = None

    def dump(self, step: int = 0) -> None:
        super().dump(step)
        self.last_dump_step = step


def _make_logger(folder: Path, tensorboard: bool) -> _RunLogger:
    folder.mkdir(parents=True, exist_ok=True)
    formats = [_AppendingCSV(str(folder / "progress.csv"))]
    if tensorboard:
        formats.append(make_output_format("tensorboard", str(folder)))
    return _RunLogger(str(folder), formats)


class _LogRows(BaseCallback):
    """Writes ``progress.csv``'s rows (see the module docstring): for PPO and MaskablePPO one per
    iteration, after its update; a last one at the end if the run stepped past the last row."""

    def __init__(self):
        super().__init__()
        self.iterations = 0
        self.pending = False  # a rollout ended and was trained on, and has no row yet
        self.finished = False

    def _on_policy(self) -> bool:
        return isinstance(self.model, OnPolicyAlgorithm)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:  # right after the previous iteration's update
        self._dump_pending()

    def _on_rollout_end(self) -> None:  # the update of this rollout comes next
        if self._on_policy():
            self.iterations += 1
            self.pending = True

    def _on_training_end(self) -> None:
        self.finish()

    def _dump_pending(self) -> None:
        if self.pending:
            self.pending = False
            self.model.dump_logs(self.iterations)

    def finish(self) -> None:
        """The pending iteration's row, then a last row if the run went on after it. Idempotent."""
        if self.finished or self.model is None:
            return
        self.finished = True
        self._dump_pending()
        logger = self.model.logger
        if getattr(logger, "last_dump_step", None) != self.model.num_timesteps:
            if self._on_policy():
                self.model.dump_logs(0)  # no time/iterations: the last rollout was cut
            else:
                self.model.dump_logs()


class _Budget(BaseCallback):
    """Stops learning at the deadline or the step limit, draws the progress bar, checkpoints."""

    def __init__(self, *, deadline: float, step_limit: int, minutes: float | None, steps: int | None,
                 checkpoint_s: float, save, bar: Progress, evaluate: "_Evaluate | None" = None):
        super().__init__()
        self.evaluate = evaluate
        self.deadline, self.step_limit = deadline, step_limit
        self.minutes, self.steps = minutes, steps
        self.checkpoint_s, self.save, self.bar = checkpoint_s, save, bar
        self.begin = time.perf_counter()
        self.first_step: int | None = None
        self.last_draw = self.last_save = self.begin
        self.draw_every = 0.5 if bar.tty else 15.0  # a log file gets a line every 15 s

    def _fraction(self, now: float) -> float:
        parts = []
        if self.minutes is not None:
            parts.append((now - self.begin) / (self.minutes * 60.0))
        if self.steps is not None:
            parts.append(self.num_timesteps / self.steps)
        return min(max(parts), 1.0)

    def _rollout_ends_here(self) -> bool:
        """Whether this step completes a PPO/MaskablePPO rollout (then SB3 trains on it and its
        ``learn`` loop stops at ``total_timesteps`` by itself)."""
        done, size = self.locals.get("n_steps"), self.locals.get("n_rollout_steps")
        return done is not None and size is not None and done + 1 >= size

    def _on_step(self) -> bool:
        now = time.perf_counter()
        if self.first_step is None:
            self.first_step = self.num_timesteps - self.training_env.num_envs
        if now - self.last_draw >= self.draw_every:
            self.last_draw = now
            done = self.num_timesteps - self.first_step
            sps = done / max(now - self.begin, 1e-9)
            returns = [ep["r"] for ep in self.model.ep_info_buffer]
            label = f"{self.num_timesteps} steps {sps:.0f}/s"
            if returns:
                label += f" mean return {sum(returns) / len(returns):.4f}"
            if self.evaluate is not None and self.evaluate.last is not None:
                label += f" held-out {self.evaluate.last['score']:.4f}"
            self.bar.update(label, done=round(100.0 * self._fraction(now), 1))
        if now - self.last_save >= self.checkpoint_s:
            self.save()
            self.last_save = time.perf_counter()
        if now >= self.deadline:
            return False
        return self.num_timesteps < self.step_limit or self._rollout_ends_here()


class _Evaluate(BaseCallback):
    """Plays the evaluation sets every ``period_s`` seconds of wall clock and keeps the best
    checkpoint by the ``score``: the geomean speedup over the scenarios of ``score_groups``
    (``holdout``: programs of the training split held out of training; ``valid``: held-out
    generated programs; see :func:`score_groups`).

    PPO and MaskablePPO are evaluated at the start of a rollout (right after an update, and
    once before the first one), DQN at the first step after the period; :meth:`finish`
    evaluates the last weights at the end. Each evaluation is one row of ``logs/eval.csv``
    (``EVAL_COLUMNS``): env steps, wall seconds since the run's first start (``wall_s``, the
    evaluations included), seconds of training alone (``train_s = wall_s`` minus the time spent
    evaluating), this evaluation's seconds, the geomean speedups, and ``selected`` (1 when this
    checkpoint became ``model.zip``); ``logs/eval_scenarios.csv`` gets each scenario's speedup
    (``steps, group, scenario, speedup``; groups ``valid``, ``holdout``, ``train``, ``test``).
    With ``select_best``, ``on_best(record)`` is called when the score beats every earlier one
    (a tie does not; ``best``: the resumed run's best so far).
    The ``test`` set, when present, is logged only: it never chooses anything.
    """

    def __init__(self, evaluator: Evaluator | None, *, period_s: float, select_best: bool, best: float | None,
                 log_path: Path, begin: float, wall_before: float = 0.0, eval_before: float = 0.0,
                 score_groups: tuple[str, ...] = ("valid",)):
        super().__init__()
        self.evaluator, self.period_s, self.select_best = evaluator, period_s, select_best
        self.score_groups = score_groups
        self.best = best
        self.log_path, self.begin = log_path, begin
        self.wall_before, self.eval_before = wall_before, eval_before
        self.on_best = None
        self.eval_s = 0.0
        self.count = 0
        self.last: dict[str, Any] | None = None  # the newest record
        self.selected: dict[str, Any] | None = None  # the record of model.zip's checkpoint (this run)
        self.next_due = -math.inf
        self.evaluated_updates: int | None = None
        self.handle = self.scenario_handle = None

    def _due(self) -> bool:
        return self.evaluator is not None and time.perf_counter() >= self.next_due

    def _on_step(self) -> bool:
        if not isinstance(self.model, OnPolicyAlgorithm) and self._due():
            self.run(self.model)
        return True

    def _on_rollout_start(self) -> None:
        if isinstance(self.model, OnPolicyAlgorithm) and self._due():
            self.run(self.model)

    def finish(self, model) -> None:
        """Evaluate the last weights, unless they were the last evaluated."""
        if self.evaluator is not None and self.evaluated_updates != int(getattr(model, "_n_updates", -1)):
            self.run(model)

    def run(self, model) -> dict[str, Any]:
        """One evaluation of ``model``: the record written to ``eval.csv``."""
        t0 = time.perf_counter()
        results = self.evaluator.run(model)
        scores = {name: result.geomean for name, result in results.items()}
        scores["score"] = geomean([x for name in self.score_groups for x in results[name].speedups])
        now = time.perf_counter()
        self.eval_s += now - t0
        self.count += 1
        self.evaluated_updates = int(getattr(model, "_n_updates", -1))
        wall = self.wall_before + now - self.begin
        record = {"steps": int(model.num_timesteps), "wall_s": wall,
                  "train_s": wall - self.eval_before - self.eval_s, "eval_s": now - t0, "score": scores["score"],
                  "valid_speedup": scores["valid"], "holdout_speedup": scores.get("holdout"),
                  "train_speedup": scores["train"], "test_speedup": scores.get("test"), "selected": 0}
        if self.select_best and (self.best is None or record["score"] > self.best):
            self.best = record["score"]
            record["selected"] = 1
            self.selected = {"rule": "best held-out geomean speedup", **{k: record[k] for k in (
                "steps", "wall_s", "train_s", "score", "valid_speedup", "holdout_speedup", "train_speedup")}}
            if self.on_best is not None:
                self.on_best(record)
        self.last = record
        self._write(record, results)
        self.next_due = time.perf_counter() + self.period_s
        return record

    def _open(self, path: Path, header: tuple[str, ...]):
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not path.is_file() or path.stat().st_size == 0
        handle = open(path, "a", newline="")
        if fresh:
            handle.write(",".join(header) + "\n")
        return handle

    def _write(self, record: dict[str, Any], results: dict) -> None:
        if self.handle is None:
            self.handle = self._open(self.log_path, EVAL_COLUMNS)
            self.scenario_handle = self._open(self.log_path.with_name(EVAL_SCENARIOS_FILE), EVAL_SCENARIO_COLUMNS)
        cells = []
        for key in EVAL_COLUMNS:
            value = record[key]
            cells.append("" if value is None else (f"{value:.8f}" if isinstance(value, float) else str(value)))
        self.handle.write(",".join(cells) + "\n")
        for group, result in results.items():
            for name, speedup in zip(result.names, result.speedups):
                self.scenario_handle.write(f"{record['steps']},{group},{name},{speedup:.8f}\n")
        self.handle.flush()
        self.scenario_handle.flush()

    def close(self) -> None:
        """Close ``eval.csv`` and ``eval_scenarios.csv`` (idempotent)."""
        if self.handle is not None:
            self.handle.close()
            self.scenario_handle.close()
            self.handle = self.scenario_handle = None


def build_parser() -> argparse.ArgumentParser:
    from ..._args import Parser

    p = Parser(prog="mallocgym train sb3",
               description="Train a Stable-Baselines3 agent on MallocGame-v0 or MallocGame-v1 (--env v1).")
    p.add_argument("--algo", required=True, choices=sorted(ALGOS), help="the algorithm")
    p.add_argument("--suite", help="suite to train on (default: default)")
    p.add_argument("--split", choices=["train", "test"], help="split of --suite (default: train)")
    p.add_argument("--scenario", action="append",
                   help="train on this scenario instead of a suite's split (repeatable; a scenario given twice "
                        "is played twice as often; not with --suite or --split)")
    p.add_argument("--generator", choices=["small", "medium", "large"],
                   help="also train on fresh generated programs of this preset (mallocgym.workloads.generator)")
    p.add_argument("--generator-share", type=float,
                   help="fraction of episodes on generated programs, in [0, 1]; only with --generator "
                        "(default: 0.5)")
    p.add_argument("--generator-families",
                   help="comma-separated network families the generator draws from instead of the preset's "
                        "(e.g. transformer,cnn,mlp,unet,rnn); only with --generator")
    p.add_argument("--generator-buffers", metavar="LOW,HIGH",
                   help="the generator's buffer-count range instead of the preset's (e.g. 100,1100); "
                        "only with --generator")
    p.add_argument("--warm-start", choices=TEACHERS,
                   help="before PPO, train the policy to imitate this player's moves (behaviour cloning; "
                        "xla-msa: XLA's Memory Space Assignment, MallocGame-v1 and --algo maskable_ppo only; "
                        "not with --resume)")
    p.add_argument("--warm-start-games", type=int,
                   help=f"games the warm start imitates, drawn as training draws its programs "
                        f"(default: {WARM_START_GAMES}); only with --warm-start")
    p.add_argument("--warm-start-epochs", type=int,
                   help=f"passes of the warm start over its positions (default: {WARM_START_EPOCHS}); "
                        f"only with --warm-start")
    p.add_argument("--minutes", type=float, help="wall-clock budget of the learning loop (> 0)")
    p.add_argument("--steps", type=int, help=f"total env steps to reach, counting resumed runs (1..{UNLIMITED_STEPS}); "
                                             "the last rollout is trained on when it ends exactly there")
    p.add_argument("--out", required=True, help="run directory (model.zip, train.json, logs/)")
    p.add_argument("--n-envs", type=int, help="games played in parallel (default: the config's)")
    p.add_argument("--vec", choices=VEC_KINDS,
                   help="vector env: native (numba batch; v0's default mode only), dummy or subproc")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a hyperparameter, e.g. learning_rate=1e-4, policy.extractor=flat or "
                        "env.order=canonical (MallocGame-v0's canonical decision mode; then --vec defaults to dummy)")
    p.add_argument("--tensorboard", action="store_true", help="also write TensorBoard logs to OUT/logs")
    p.add_argument("--resume", action="store_true", help="continue the checkpoint in --out")
    p.add_argument("--seed", type=int, default=0, help=f"seed of the model and the envs, 0..{MAX_SEED} (default: 0)")
    p.add_argument("--checkpoint-minutes", type=float, default=5.0, help="checkpoint period (default: 5)")
    p.add_argument("--env", choices=VERSIONS,
                   help="game: v0 (MallocGame-v0) or v1 (MallocGame-v1, per-use decisions with prefetch) "
                        "(default: v0; with --resume, the run's)")
    p.add_argument("--eval-minutes", type=float,
                   help=f"evaluate every M minutes of wall clock and at the end (default: "
                        f"{DEFAULT_EVAL_MINUTES['v0']:g} on v0, {DEFAULT_EVAL_MINUTES['v1']:g} on v1)")
    p.add_argument("--eval-programs", type=int,
                   help=f"held-out generated programs to evaluate on (each at 2 capacities; 0: no evaluation, "
                        f"keep the last checkpoint; default: {DEFAULT_EVAL_PROGRAMS}; with --resume, the run's)")
    p.add_argument("--select", choices=SELECT_RULES,
                   help="which checkpoint model.zip holds: best (highest held-out geomean speedup, needs "
                        "--eval-programs > 0) or last (default: best; with --resume, the run's)")
    p.add_argument("--eval-holdout", type=int,
                   help="hold this many programs of the training split out of training and select checkpoints by "
                        f"them (default: {DEFAULT_EVAL_HOLDOUT} where the split has at least "
                        f"{2 * DEFAULT_EVAL_HOLDOUT} programs and evaluation is on, else 0; with --resume, the run's)")
    p.add_argument("--eval-test", action="store_true",
                   help="also play the suite's test split at each evaluation and log it to logs/eval.csv, "
                        "for learning curves only: it never chooses a checkpoint")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def holdout_programs(scenarios: list, n: int) -> list[str]:
    """The ``n`` programs (workload names) of ``scenarios`` held out of training by
    ``--eval-holdout``: a fixed shuffle (seed 0) of the programs in suite order, first ``n``, so
    the choice depends on neither the run's seed nor any result."""
    programs = list(dict.fromkeys(s.workload.name for s in scenarios))
    if not 0 <= n < len(programs):
        raise ValueError(f"--eval-holdout must be in [0, {len(programs) - 1}] (the training data has "
                         f"{len(programs)} programs), got {n}")
    order = np.random.default_rng(0).permutation(len(programs))
    return [programs[i] for i in order[:n]]


def _data(args, holdout: int | None = 0) -> tuple[dict[str, Any], dict[str, Any], list, list]:
    """(env kwargs selecting the training scenarios, their description for train.json, the named
    training scenarios once each: what the train-split evaluation plays, the scenarios of the
    ``holdout`` programs held out of training; ``None``: the default number)."""
    suite_name = args.suite if args.suite is not None else "default"
    split = args.split if args.split is not None else "train"
    held: list = []
    if args.scenario:
        if holdout:
            raise ValueError("--eval-holdout holds programs of the suite's split out of training; "
                             "with --scenario, leave out the ones to hold out yourself")
        named = [resolve(name) for name in dict.fromkeys(args.scenario)]  # validates each name now
        names = [resolve(name).name for name in args.scenario]
        data: dict[str, Any] = {"scenarios": names}
    else:
        named = list(suite(suite_name, split))
        if not named:
            raise ValueError(f"suite {suite_name!r} has no {split!r} scenarios")
        if holdout is None:  # the default: 2 programs where the split has at least 4, else none
            count = len({s.workload.name for s in named})
            holdout = DEFAULT_EVAL_HOLDOUT if count >= 2 * DEFAULT_EVAL_HOLDOUT else 0
        if holdout:
            programs = set(holdout_programs(named, holdout))
            held = [s for s in named if s.workload.name in programs]
            named = [s for s in named if s.workload.name not in programs]
        names = [s.name for s in named]
        data = {"suite": suite_name, "split": split, "scenarios": names}
        if held:
            data["held_out"] = [s.name for s in held]
    if args.generator:
        share = args.generator_share if args.generator_share is not None else 0.5
        families, buffers = _generator_options(args)
        mix = TrainingMix(tuple(names), args.generator, share, families=families, buffers=buffers)
        data.update(generator=args.generator, generator_share=share)
        if families:
            data["generator_families"] = list(families)
        if buffers is not None:
            data["generator_buffers"] = list(buffers)
        return {"workload": mix}, data, named, held
    if args.scenario or held:
        return {"workload": list(args.scenario or names)}, data, named, held
    return {"suite_name": suite_name, "split": split}, data, named, held


def _generator_options(args) -> tuple[tuple[str, ...], tuple[int, int] | None]:
    """``(families, buffers)`` of ``--generator-families`` and ``--generator-buffers`` (``()`` and
    ``None``: the preset's); one ``ValueError`` naming the flag otherwise."""
    from ...workloads.generator import GeneratorConfig, parse_families

    families: tuple[str, ...] = ()
    buffers = None
    if args.generator_families is not None:
        try:
            families = parse_families(args.generator_families)
        except ValueError as exc:
            raise ValueError(f"--generator-families {args.generator_families!r}: {exc}") from None
        if not families:
            raise ValueError("--generator-families: give at least one family (e.g. transformer,cnn,mlp,unet,rnn)")
    if args.generator_buffers is not None:
        parts = args.generator_buffers.split(",")
        try:
            low, high = (int(part) for part in parts)
            GeneratorConfig(buffers=(low, high))
        except ValueError:
            raise ValueError(f"--generator-buffers must be LOW,HIGH with 1 <= LOW <= HIGH, "
                             f"got {args.generator_buffers!r}") from None
        buffers = (low, high)
    return families, buffers


def _versions() -> dict[str, str]:
    import gymnasium
    import numpy
    import sb3_contrib
    import stable_baselines3

    from ..._version import __version__

    return {"mallocgym": __version__, "stable_baselines3": stable_baselines3.__version__,
            "sb3_contrib": sb3_contrib.__version__, "torch": th.__version__, "gymnasium": gymnasium.__version__,
            "numpy": numpy.__version__, "python": platform.python_version()}


def _check_budget(args) -> None:
    """Every number of ``args`` in range, or one ``ValueError`` naming the flag."""
    if args.minutes is None and args.steps is None:
        raise ValueError("give a budget: --minutes M and/or --steps N")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ValueError(f"--out {args.out}: exists and is not a folder")
    if args.minutes is not None and not (math.isfinite(args.minutes) and args.minutes > 0):
        raise ValueError(f"--minutes must be > 0 and finite, got {args.minutes}")
    if args.steps is not None and not 0 < args.steps <= UNLIMITED_STEPS:
        raise ValueError(f"--steps must be in [1, {UNLIMITED_STEPS}], got {args.steps}")
    if not (math.isfinite(args.checkpoint_minutes) and args.checkpoint_minutes > 0):
        raise ValueError(f"--checkpoint-minutes must be > 0 and finite, got {args.checkpoint_minutes}")
    if not 0 <= args.seed <= MAX_SEED:
        raise ValueError(f"--seed must be in [0, {MAX_SEED}], got {args.seed}")
    if args.n_envs is not None and not 1 <= args.n_envs <= MAX_ENVS:
        raise ValueError(f"--n-envs must be in [1, {MAX_ENVS}], got {args.n_envs}")
    if args.generator_share is not None:
        if not args.generator:
            raise ValueError("--generator-share needs --generator PRESET")
        if not 0.0 <= args.generator_share <= 1.0:  # NaN fails too
            raise ValueError(f"--generator-share must be in [0, 1], got {args.generator_share}")
    for flag, value in (("--generator-families", args.generator_families),
                        ("--generator-buffers", args.generator_buffers)):
        if value is not None and not args.generator:
            raise ValueError(f"{flag} needs --generator PRESET")
    _generator_options(args)
    _check_warm_start(args)
    if args.scenario and (args.suite is not None or args.split is not None):
        raise ValueError("--scenario replaces the suite's split as training data; drop --suite/--split")
    if args.eval_minutes is not None and not (math.isfinite(args.eval_minutes) and args.eval_minutes > 0):
        raise ValueError(f"--eval-minutes must be > 0 and finite, got {args.eval_minutes}")
    if args.eval_programs is not None and not 0 <= args.eval_programs <= MAX_VALIDATION_PROGRAMS:
        raise ValueError(f"--eval-programs must be in [0, {MAX_VALIDATION_PROGRAMS}], got {args.eval_programs}")
    if args.eval_holdout is not None and args.eval_holdout < 0:
        raise ValueError(f"--eval-holdout must be >= 0, got {args.eval_holdout}")
    if args.eval_programs == 0 and (args.select == "best" or args.eval_minutes is not None or args.eval_test
                                    or args.eval_holdout):
        given = [flag for flag, on in (("--select best", args.select == "best"),
                                       ("--eval-minutes", args.eval_minutes is not None),
                                       ("--eval-test", args.eval_test),
                                       ("--eval-holdout", bool(args.eval_holdout))) if on]
        raise ValueError(f"--eval-programs 0 turns evaluation off; {', '.join(given)} needs it on")


def _check_warm_start(args) -> None:
    """The warm-start flags, or one ``ValueError`` (the game is checked once the config is known)."""
    if args.warm_start is None:
        given = [flag for flag, value in (("--warm-start-games", args.warm_start_games),
                                          ("--warm-start-epochs", args.warm_start_epochs)) if value is not None]
        if given:
            raise ValueError(f"{' and '.join(given)} only go with --warm-start xla-msa")
        return
    if args.algo != "maskable_ppo":
        raise ValueError(f"--warm-start trains a policy over the legal actions (--algo maskable_ppo); "
                         f"--algo {args.algo} has none")
    if args.resume:
        raise ValueError("--warm-start starts a new run's policy; a resumed run keeps its weights")
    if args.warm_start_games is not None and not 1 <= args.warm_start_games <= MAX_WARM_START_GAMES:
        raise ValueError(f"--warm-start-games must be in [1, {MAX_WARM_START_GAMES}], got {args.warm_start_games}")
    if args.warm_start_epochs is not None and not 1 <= args.warm_start_epochs <= 10_000:
        raise ValueError(f"--warm-start-epochs must be in [1, 10000], got {args.warm_start_epochs}")


def _config(args, out: Path):
    """``(config, previous train.json or {})``: the defaults with ``--set``, or the resumed run's."""
    model_path, meta_path = run_paths(out)
    previous: dict[str, Any] = {}
    if args.resume:
        if not model_path.exists() and not (out / LATEST_FILE).exists():
            raise ValueError(f"--resume: {model_path} does not exist")
        previous, config = read_meta(out)
        if previous["algo"] != args.algo:
            raise ValueError(f"{meta_path}: this run trained {previous['algo']!r}, not {args.algo!r}")
        if args.env is not None and args.env != config.env.version:
            raise ValueError(f"{meta_path}: this run trains on MallocGame-{config.env.version}; --resume cannot "
                             f"switch it to --env {args.env}")
        if args.set:
            raise ValueError("--resume keeps the run's hyperparameters; --set is only for new runs "
                             "(--n-envs and --vec may change)")
    else:
        refuse_other_run(out, [model_path, meta_path, out / LATEST_FILE, out / WARM_START_FILE, out / "logs"])
        config = default_config(args.algo, args.env or "v0", canonical=_asks_canonical(args.set))
    for assignment in args.set:
        config = override(config, assignment)
    if (not args.resume and config.env.version == "v1" and config.policy.extractor == "set"
            and not any(a.partition("=")[0].strip() == "policy.xla_tag" for a in args.set)):
        config = override(config, "policy.xla_tag=true")  # new v1 runs: XLA's offset rows tagged
    if args.env is not None and config.env.version != args.env:
        raise ValueError(f"--env {args.env} contradicts --set env.version={config.env.version}")
    if args.warm_start is not None and config.env.version != "v1":
        raise ValueError(f"--warm-start {args.warm_start} imitates XLA's moves on MallocGame-v1 (--env v1); "
                         f"this run trains on MallocGame-{config.env.version}")
    if args.n_envs is not None:
        config = override(config, f"n_envs={args.n_envs}")
    if args.vec is not None:
        config = override(config, f"vec={args.vec}")
    return config, previous


def _asks_canonical(assignments: list[str]) -> bool:
    """Whether ``--set`` assignments end with ``env.order=canonical`` (v0's canonical decision
    mode): the run then starts from that mode's defaults (``vec=dummy``, as the native batch
    does not run it), so that ``--set env.order=canonical`` alone is a complete request."""
    order = None
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if sep and key.strip() == "env.order":
            order = value.strip()
    return order == CANONICAL


def _evaluation(args, previous: dict[str, Any], version: str = "v0") -> dict[str, Any]:
    """The run's evaluation settings: ``programs`` (held-out generated programs; 0 = none),
    ``select`` (``best`` or ``last``), ``minutes`` (period). A resumed run keeps its programs and
    rule (a run from before evaluation existed: none, ``last``); asking for others is an error."""
    if args.resume:
        before = dict({"programs": 0, "select": "last", "holdout": 0}, **(previous.get("evaluation") or {}))
        for flag, key, given in (("--eval-programs", "programs", args.eval_programs),
                                 ("--select", "select", args.select), ("--eval-holdout", "holdout", args.eval_holdout)):
            if given is not None and given != before[key]:
                raise ValueError(f"--resume keeps the run's evaluation ({flag} {before[key]}); got {flag} {given}")
        programs, select, holdout = int(before["programs"]), before["select"], int(before["holdout"])
        if args.eval_test and programs == 0:
            raise ValueError("--eval-test: this run has no evaluation (it was started with --eval-programs 0)")
    else:
        programs = DEFAULT_EVAL_PROGRAMS if args.eval_programs is None else args.eval_programs
        select = args.select or ("best" if programs > 0 else "last")
        holdout = args.eval_holdout  # None: the default, settled by _data (it depends on the split)
        if args.eval_holdout is None and (programs == 0 or args.scenario):
            holdout = 0
    minutes = args.eval_minutes if args.eval_minutes is not None else DEFAULT_EVAL_MINUTES[version]
    return {"programs": programs, "preset": VALIDATION_PRESET, "select": select, "holdout": holdout,
            "minutes": minutes if programs > 0 else None}


def _evaluator(args, evaluation: dict[str, Any], named: list, held: list, config, algo: str) -> Evaluator | None:
    """What each evaluation plays (None without evaluation), in groups: ``valid`` (held-out
    generated programs), ``holdout`` (the split's programs held out of training, if any),
    ``train`` (the named training scenarios) and, with ``--eval-test``, ``test`` (the suite's
    test split, logged only)."""
    if evaluation["programs"] == 0:
        return None
    groups = {"valid": validation_scenarios(evaluation["programs"])}
    if held:
        groups["holdout"] = held
    groups["train"] = named
    if args.eval_test:
        suite_name = args.suite if args.suite is not None else "default"
        test = list(suite(suite_name, "test"))
        if not test:
            raise ValueError(f"--eval-test: suite {suite_name!r} has no test split")
        overlap = sorted({s.name for s in test} & {s.name for s in named})
        if overlap:
            raise ValueError(f"--eval-test: the training data holds test scenarios ({', '.join(overlap)}); "
                             f"a test curve needs a held-out test split")
        groups["test"] = test
    return Evaluator(groups, config.env, masked=algo == "maskable_ppo")


def score_groups(held_out: bool, generator: bool) -> tuple[str, ...]:
    """The evaluation groups whose scenarios the selection score is the geomean over: held-out
    programs from the training data's own distribution. Held-out programs of the split
    (``holdout``) when there are any, plus the held-out generated programs (``valid``) when
    training mixes in generated programs; with neither held-out split programs nor ``--generator``,
    the generated ones (the only held-out data there is). Measured in docs/sb3.md: a policy
    trained on the bundled programs alone plays the generated ones like XLA-like throughout, so
    their geomean did not track its score on other bundled programs."""
    groups = ("valid",) if generator or not held_out else ()
    return groups + (("holdout",) if held_out else ())


def _previous_best(previous: dict[str, Any]) -> float | None:
    """The selection score of a resumed run's ``model.zip`` (None: it has none)."""
    selection = previous.get("selection") or {}
    return selection.get("score", selection.get("valid_speedup"))


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Run the training that ``args`` (from :func:`build_parser`) describes; return train.json."""
    _check_budget(args)
    th.set_num_threads(1)
    out = Path(args.out)
    model_path, _ = run_paths(out)
    config, previous = _config(args, out)
    evaluation = _evaluation(args, previous, config.env.version)
    env_data, data, named, held = _data(args, evaluation["holdout"])
    evaluation["holdout"] = len({s.workload.name for s in held})
    select_best = evaluation["select"] == "best"
    if args.tensorboard:
        try:
            import tensorboard  # noqa: F401
        except ImportError:
            raise ValueError("--tensorboard needs the tensorboard package (pip install tensorboard)") from None
    evaluator = _evaluator(args, evaluation, named, held, config, args.algo)

    env_kwargs = dict(config.env.env_kwargs(), **env_data)
    venv = make_vec_env(config.vec, config.n_envs, env_kwargs, seed=args.seed, version=config.env.version)
    try:
        if args.resume:
            try:
                model, _, _ = load_checkpoint(out, algo=args.algo, env=venv, latest=True)
            except ValueError as exc:  # torch's and SB3's messages may span lines; the CLI prints one
                raise ValueError(" ".join(str(exc).split())) from None
        else:
            model = build_model(args.algo, config, venv, seed=args.seed)
    except BaseException:
        venv.close()
        raise

    start_steps = int(model.num_timesteps)
    step_limit = args.steps if args.steps is not None else UNLIMITED_STEPS
    if step_limit <= start_steps:
        venv.close()
        raise ValueError(f"{out} already has {start_steps} steps, at or beyond --steps {args.steps}")
    if args.resume:  # rows logged after the checkpoint (a killed run) go: the steps never go backwards
        truncate_logs(out / "logs", start_steps)
    # Nothing is written into OUT before this point: a refused request leaves no folder behind.
    logger = _make_logger(out / "logs", args.tensorboard)
    model.set_logger(logger)
    warm = None
    if args.warm_start is not None:
        try:
            warm = _warm_start(args, config, model, env_kwargs, out / "logs")
        except BaseException:
            logger.close()
            venv.close()
            raise
    if isinstance(config, DQNConfig):
        model.exploration_schedule = LinearSchedule(config.exploration_initial_eps, config.exploration_final_eps,
                                                    config.exploration_steps / step_limit)
    trained_before = previous.get("trained", {})
    runs = list(previous.get("runs", []))
    command = "mallocgym train sb3 " + " ".join(shlex.quote(a) for a in args.argv)
    begin = time.perf_counter()
    wall_before = 60.0 * float(trained_before.get("minutes", 0.0))
    eval_before = 60.0 * float(trained_before.get("eval_minutes", 0.0))
    evaluate = _Evaluate(evaluator, period_s=60.0 * (evaluation["minutes"] or 1.0), select_best=select_best,
                         best=_previous_best(previous) if args.resume else None,
                         log_path=out / "logs" / EVAL_FILE, begin=begin, wall_before=wall_before,
                         eval_before=eval_before, score_groups=score_groups(bool(held), bool(args.generator)))

    def meta() -> dict[str, Any]:
        wall = time.perf_counter() - begin
        done = int(model.num_timesteps) - start_steps
        run = {"command": command, "steps": done, "minutes": wall / 60.0, "steps_per_second": done / max(wall, 1e-9),
               "n_envs": config.n_envs, "vec": config.vec, "seed": args.seed,
               "budget": {"minutes": args.minutes, "steps": args.steps},
               "eval_minutes": evaluate.eval_s / 60.0, "evaluations": evaluate.count}
        result = {
            "algo": args.algo, "config": config_to_dict(config), "data": data,
            "trained": {"steps": int(model.num_timesteps),
                        "minutes": float(trained_before.get("minutes", 0.0)) + wall / 60.0,
                        "eval_minutes": (eval_before + evaluate.eval_s) / 60.0,
                        "runs": len(runs) + 1},
            "runs": runs + [run], "versions": _versions(),
            "evaluation": dict(evaluation, score_groups=list(evaluate.score_groups), valid_scenarios=(
                [evaluator.names[i] for i in evaluator.groups["valid"]] if evaluator is not None else [])),
        }
        selection = evaluate.selected if select_best else None
        if select_best and selection is None:
            selection = previous.get("selection")
        result["selection"] = selection if select_best else {"rule": "last", "steps": int(model.num_timesteps)}
        if warm is not None:
            result["warm_start"] = warm
        elif previous.get("warm_start") is not None:  # a resumed run's
            result["warm_start"] = previous["warm_start"]
        return result

    def save() -> None:
        """The newest weights: model.zip (``--select last``) or latest.zip (``best``)."""
        save_checkpoint(model, out, meta(), model_file=LATEST_FILE if select_best else MODEL_FILE)

    def save_best(record: dict[str, Any]) -> None:
        save_checkpoint(model, out, meta(), model_file=MODEL_FILE)

    evaluate.on_best = save_best
    if warm is not None:  # the curve's start: the warm-started weights before any PPO step
        save_checkpoint(model, out, meta(), model_file=WARM_START_FILE)
    deadline = begin + (args.minutes * 60.0 if args.minutes is not None else float("inf"))
    rows = _LogRows()
    # PPO and MaskablePPO: rows come from _LogRows (log_interval=None turns off SB3's own rows,
    # written before each update); DQN keeps SB3's row every 4 episodes.
    log_interval = {"log_interval": None} if isinstance(model, OnPolicyAlgorithm) else {}
    with Progress(100, f"train {args.algo}", enabled=not args.quiet, unit="%") as bar:
        callback = _Budget(deadline=deadline, step_limit=step_limit, minutes=args.minutes, steps=args.steps,
                           checkpoint_s=args.checkpoint_minutes * 60.0, save=save, bar=bar, evaluate=evaluate)
        learned = False
        try:
            model.learn(total_timesteps=step_limit - start_steps,
                        callback=CallbackList([callback, rows, evaluate]),
                        reset_num_timesteps=not args.resume, progress_bar=False, **log_interval)
            learned = True
            evaluate.finish(model)  # the last weights, unless evaluated already
        finally:
            try:
                rows.finish()  # normally done already, at the end of learn()
            except Exception:
                if learned:  # else keep the error that stopped learn()
                    raise
            finally:
                logger.close()
                evaluate.close()
                save()
                venv.close()
    result = meta()
    if not args.quiet:
        last = result["runs"][-1]
        line = (f"trained {args.algo}: {last['steps']} steps in {last['minutes']:.2f} min "
                f"({last['steps_per_second']:.0f} steps/s), {result['trained']['steps']} in total; ")
        if select_best and result["selection"]:
            sel = result["selection"]
            line += (f"saved {model_path} (best held-out geomean {sel['score']:.4f} at step {sel['steps']}) "
                     f"and the newest weights in {out / LATEST_FILE}")
        else:
            line += f"saved {model_path}"
        print(line, file=sys.stderr)
    return result


def _warm_start(args, config, model, env_kwargs: dict[str, Any], logs: Path) -> dict[str, Any]:
    """Behaviour cloning of ``--warm-start``'s moves before PPO (:mod:`.warm_start`): its games
    drawn by the training env's ``workload``, one row per epoch in ``logs/warm_start.csv``;
    returns the summary kept in ``train.json`` under ``warm_start``."""
    from .warm_start import clone, collect_xla_msa

    games = args.warm_start_games if args.warm_start_games is not None else WARM_START_GAMES
    epochs = args.warm_start_epochs if args.warm_start_epochs is not None else WARM_START_EPOCHS
    seed = int(np.random.SeedSequence([args.seed, 1]).generate_state(1)[0])  # not the training envs' seeds
    t0 = time.perf_counter()
    demos = collect_xla_msa(env_kwargs, games, seed=seed, gamma=config.gamma)
    collect_s = time.perf_counter() - t0
    with open(logs / WARM_START_LOG, "w", newline="") as handle:
        handle.write(",".join(WARM_START_COLUMNS) + "\n")

        def log(record: dict[str, Any]) -> None:
            cells = ["" if record[key] is None else (f"{record[key]:.6f}" if isinstance(record[key], float)
                                                      else str(record[key])) for key in WARM_START_COLUMNS]
            handle.write(",".join(cells) + "\n")
            handle.flush()

        summary = clone(model, demos, epochs=epochs, value_weight=config.vf_coef,
                        max_grad_norm=config.max_grad_norm, seed=args.seed, log=log)
    summary.update(teacher=args.warm_start, seed=seed, collect_seconds=collect_s,
                   minutes=(time.perf_counter() - t0) / 60.0)
    if not args.quiet:
        held = summary["heldout_accuracy"]
        print(f"warm start: {summary['positions']} positions of {games} {args.warm_start} games, {epochs} epochs in "
              f"{summary['minutes']:.2f} min; imitation accuracy "
              f"{'n/a' if held is None else f'{held:.4f}'} on held-out games, "
              f"{summary['train_accuracy']:.4f} on trained positions", file=sys.stderr)
    return summary


def truncate_logs(folder: Path, steps: int) -> None:
    """Drop the rows of ``progress.csv``, ``eval.csv`` and ``eval_scenarios.csv`` logged after
    step ``steps`` (the checkpoint a resumed run continues), each file rewritten atomically."""
    from ..._files import atomic_write

    for name, column in (("progress.csv", "time/total_timesteps"), (EVAL_FILE, "steps"),
                         (EVAL_SCENARIOS_FILE, "steps")):
        path = folder / name
        if not path.is_file():
            continue
        with open(path, newline="") as handle:
            rows = list(csv.reader(handle))
        if not rows or column not in rows[0]:
            continue
        col = rows[0].index(column)

        def kept(row) -> bool:
            try:
                return float(row[col]) <= steps
            except (IndexError, ValueError):
                return False

        body = [row for row in rows[1:] if kept(row)]
        if len(body) == len(rows) - 1:
            continue
        with atomic_write(path, "w") as handle:
            csv.writer(handle, lineterminator="\n").writerows([rows[0]] + body)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mallocgym train sb3 ...`` (``argv``: the arguments after ``sb3``).
    SIGTERM stops it as Ctrl-C does: with a checkpoint."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    with terminate_as_interrupt():
        train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
