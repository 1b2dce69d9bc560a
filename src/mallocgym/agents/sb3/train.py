"""``mallocgym train sb3``: train MaskablePPO, PPO or DQN on a suite under a wall-clock budget.

    mallocgym train sb3 --algo maskable_ppo --suite default --minutes 10 --out runs/mppo

Training stops at ``--minutes`` (wall clock of the learning loop) or ``--steps`` (total env
steps, counting earlier runs when resuming), whichever comes first. A checkpoint
(``model.zip`` + ``train.json``, see :mod:`.checkpoint`) is written atomically every
``--checkpoint-minutes`` and at the end (also on Ctrl-C); ``--resume`` continues it, step count
included. ``KIND:OUT`` then loads it (``mallocgym eval --agent maskable_ppo:runs/mppo``).
"""

from __future__ import annotations

import argparse
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import configure
from stable_baselines3.common.utils import LinearSchedule

from ..._progress import Progress
from ...scenarios import resolve, suite
from .checkpoint import build_model, load_checkpoint, read_meta, run_paths, save_checkpoint
from .config import ALGOS, VEC_KINDS, DQNConfig, config_to_dict, default_config, override
from .data import TrainingMix
from .vec_env import make_vec_env

__all__ = ["main", "train", "build_parser"]

UNLIMITED_STEPS = 10**12


class _Budget(BaseCallback):
    """Stops learning at the deadline or the step limit, draws the progress bar, checkpoints."""

    def __init__(self, *, deadline: float, step_limit: int, minutes: float | None, steps: int | None,
                 checkpoint_s: float, save, bar: Progress):
        super().__init__()
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
            self.bar.update(label, done=round(100.0 * self._fraction(now), 1))
        if now - self.last_save >= self.checkpoint_s:
            self.save()
            self.last_save = time.perf_counter()
        return now < self.deadline and self.num_timesteps < self.step_limit


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mallocgym train sb3",
                                description="Train a Stable-Baselines3 agent on MallocGame-v0.")
    p.add_argument("--algo", required=True, choices=sorted(ALGOS), help="the algorithm")
    p.add_argument("--suite", default="default", help="suite to train on (default: %(default)s)")
    p.add_argument("--split", default="train", choices=["train", "test"], help="split (default: %(default)s)")
    p.add_argument("--scenario", action="append", help="train on this scenario instead (repeatable)")
    p.add_argument("--generator", choices=["small", "medium", "large"],
                   help="also train on fresh generated programs of this preset (mallocgym.workloads.generator)")
    p.add_argument("--generator-share", type=float, default=0.5,
                   help="fraction of episodes on generated programs with --generator (default: %(default)s)")
    p.add_argument("--minutes", type=float, help="wall-clock budget of the learning loop")
    p.add_argument("--steps", type=int, help="total env steps to reach (counting resumed runs)")
    p.add_argument("--out", required=True, help="run directory (model.zip, train.json, logs/)")
    p.add_argument("--n-envs", type=int, help="games played in parallel (default: the config's)")
    p.add_argument("--vec", choices=VEC_KINDS, help="vector env: native (numba batch), dummy or subproc")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a hyperparameter, e.g. learning_rate=1e-4 or policy.extractor=flat")
    p.add_argument("--tensorboard", action="store_true", help="also write TensorBoard logs to OUT/logs")
    p.add_argument("--resume", action="store_true", help="continue the checkpoint in --out")
    p.add_argument("--seed", type=int, default=0, help="seed of the model and the envs (default: 0)")
    p.add_argument("--checkpoint-minutes", type=float, default=5.0, help="checkpoint period (default: 5)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _data(args) -> tuple[dict[str, Any], dict[str, Any]]:
    """(env kwargs selecting the training scenarios, their description for train.json)."""
    if args.scenario:
        names = [resolve(name).name for name in args.scenario]  # validates each name now
        data: dict[str, Any] = {"scenarios": names}
    else:
        names = [s.name for s in suite(args.suite, args.split)]
        if not names:
            raise ValueError(f"suite {args.suite!r} has no {args.split!r} scenarios")
        data = {"suite": args.suite, "split": args.split, "scenarios": names}
    if args.generator:
        mix = TrainingMix(tuple(names), args.generator, args.generator_share)
        data.update(generator=args.generator, generator_share=args.generator_share)
        return {"workload": mix}, data
    if args.scenario:
        return {"workload": list(args.scenario)}, data
    return {"suite_name": args.suite, "split": args.split}, data


def _versions() -> dict[str, str]:
    import gymnasium
    import numpy
    import sb3_contrib
    import stable_baselines3

    from ... import __version__

    return {"mallocgym": __version__, "stable_baselines3": stable_baselines3.__version__,
            "sb3_contrib": sb3_contrib.__version__, "torch": th.__version__, "gymnasium": gymnasium.__version__,
            "numpy": numpy.__version__, "python": platform.python_version()}


def _check_budget(args) -> None:
    if args.minutes is None and args.steps is None:
        raise ValueError("give a budget: --minutes M and/or --steps N")
    if args.minutes is not None and args.minutes <= 0:
        raise ValueError(f"--minutes must be > 0, got {args.minutes}")
    if args.steps is not None and args.steps <= 0:
        raise ValueError(f"--steps must be > 0, got {args.steps}")
    if args.checkpoint_minutes <= 0:
        raise ValueError(f"--checkpoint-minutes must be > 0, got {args.checkpoint_minutes}")


def _config(args, out: Path):
    """``(config, previous train.json or {})``: the defaults with ``--set``, or the resumed run's."""
    model_path, meta_path = run_paths(out)
    previous: dict[str, Any] = {}
    if args.resume:
        if not model_path.exists():
            raise ValueError(f"--resume: {model_path} does not exist")
        previous, config = read_meta(out)
        if previous["algo"] != args.algo:
            raise ValueError(f"{meta_path}: this run trained {previous['algo']!r}, not {args.algo!r}")
        if args.set:
            raise ValueError("--resume keeps the run's hyperparameters; --set is only for new runs "
                             "(--n-envs and --vec may change)")
    else:
        if model_path.exists() or meta_path.exists():
            raise ValueError(f"{out} already holds a run; pass --resume to continue it or choose another --out")
        config = default_config(args.algo)
    for assignment in args.set:
        config = override(config, assignment)
    if args.n_envs is not None:
        config = override(config, f"n_envs={args.n_envs}")
    if args.vec is not None:
        config = override(config, f"vec={args.vec}")
    return config, previous


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Run the training that ``args`` (from :func:`build_parser`) describes; return train.json."""
    _check_budget(args)
    th.set_num_threads(1)
    out = Path(args.out)
    model_path, _ = run_paths(out)
    env_data, data = _data(args)
    config, previous = _config(args, out)
    formats = ["csv"]
    if args.tensorboard:
        try:
            import tensorboard  # noqa: F401
        except ImportError:
            raise ValueError("--tensorboard needs the tensorboard package (pip install tensorboard)") from None
        formats.append("tensorboard")

    env_kwargs = dict(config.env.env_kwargs(), **env_data)
    venv = make_vec_env(config.vec, config.n_envs, env_kwargs, seed=args.seed)
    if args.resume:
        model, _, _ = load_checkpoint(out, algo=args.algo, env=venv)
    else:
        model = build_model(args.algo, config, venv, seed=args.seed)
    model.set_logger(configure(str(out / "logs"), formats))

    start_steps = int(model.num_timesteps)
    step_limit = args.steps if args.steps is not None else UNLIMITED_STEPS
    if step_limit <= start_steps:
        raise ValueError(f"{out} already has {start_steps} steps, at or beyond --steps {args.steps}")
    if isinstance(config, DQNConfig):
        model.exploration_schedule = LinearSchedule(config.exploration_initial_eps, config.exploration_final_eps,
                                                    config.exploration_steps / step_limit)
    trained_before = previous.get("trained", {})
    runs = list(previous.get("runs", []))
    command = "mallocgym train sb3 " + " ".join(shlex.quote(a) for a in args.argv)
    begin = time.perf_counter()

    def meta() -> dict[str, Any]:
        wall = time.perf_counter() - begin
        done = int(model.num_timesteps) - start_steps
        run = {"command": command, "steps": done, "minutes": wall / 60.0, "steps_per_second": done / max(wall, 1e-9),
               "n_envs": config.n_envs, "vec": config.vec, "seed": args.seed,
               "budget": {"minutes": args.minutes, "steps": args.steps}}
        return {
            "algo": args.algo, "config": config_to_dict(config), "data": data,
            "trained": {"steps": int(model.num_timesteps),
                        "minutes": float(trained_before.get("minutes", 0.0)) + wall / 60.0,
                        "runs": len(runs) + 1},
            "runs": runs + [run], "versions": _versions(),
        }

    def save() -> None:
        save_checkpoint(model, out, meta())

    deadline = begin + (args.minutes * 60.0 if args.minutes is not None else float("inf"))
    with Progress(100, f"train {args.algo}", enabled=not args.quiet, unit="%") as bar:
        callback = _Budget(deadline=deadline, step_limit=step_limit, minutes=args.minutes, steps=args.steps,
                           checkpoint_s=args.checkpoint_minutes * 60.0, save=save, bar=bar)
        try:
            model.learn(total_timesteps=step_limit - start_steps, callback=callback,
                        reset_num_timesteps=not args.resume, progress_bar=False)
        finally:
            save()
            venv.close()
    result = meta()
    if not args.quiet:
        last = result["runs"][-1]
        print(f"trained {args.algo}: {last['steps']} steps in {last['minutes']:.2f} min "
              f"({last['steps_per_second']:.0f} steps/s), {result['trained']['steps']} in total; "
              f"saved {model_path}", file=sys.stderr)
    return result


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mallocgym train sb3 ...`` (``argv``: the arguments after ``sb3``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
