"""Building, saving and loading the SB3 models.

A run directory holds ``model.zip`` (SB3's own format) and ``train.json`` (algorithm, config,
data, budget and training totals). Both are written atomically: a temporary file in the same
folder, then a rename, so an interrupted save leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch as th

from ..._files import atomic_write
from ..._validate import read_json
from .config import AlgoConfig, DQNConfig, config_from_dict

__all__ = ["MODEL_FILE", "LATEST_FILE", "WARM_START_FILE", "META_FILE", "algo_class", "build_model", "save_checkpoint",
           "load_checkpoint", "read_meta", "run_paths"]

MODEL_FILE = "model.zip"
LATEST_FILE = "latest.zip"  # the newest weights when model.zip holds the best checkpoint (--select best)
WARM_START_FILE = "warm_start.zip"  # the warm-started weights, before any PPO step (--warm-start)
META_FILE = "train.json"
FORMAT = 1


def algo_class(algo: str):
    """The SB3 algorithm class of ``maskable_ppo``, ``ppo`` or ``dqn``."""
    if algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO
    if algo == "ppo":
        from stable_baselines3 import PPO

        return PPO
    if algo == "dqn":
        from stable_baselines3 import DQN

        return DQN
    raise ValueError(f"unknown algorithm {algo!r}; expected maskable_ppo, ppo or dqn")


def _policy(algo: str, config: AlgoConfig) -> tuple[Any, dict[str, Any]]:
    from .extractor import CandidateDQNPolicy, CandidatePolicy, MaskableCandidatePolicy, CandidateSetExtractor

    p = config.policy
    if p.extractor == "flat":
        return "MultiInputPolicy", {"net_arch": list(p.net_arch)}
    cls = {"maskable_ppo": MaskableCandidatePolicy, "ppo": CandidatePolicy, "dqn": CandidateDQNPolicy}[algo]
    fe_kwargs = {"hidden": p.hidden, "memory_bins": tuple(config.env.memory_bins), "memory_pool": p.memory_pool}
    if config.env.version == "v1":
        fe_kwargs["n_starts"] = config.env.starts
    if config.env.canonical:  # the two v0 modes' observation spaces may look alike: say which
        fe_kwargs["canonical"] = True
    if p.xla_tag:
        fe_kwargs["xla_tag"] = True
    return cls, {"features_extractor_class": CandidateSetExtractor, "features_extractor_kwargs": fe_kwargs}


def build_model(algo: str, config: AlgoConfig, env, *, seed: int = 0, tensorboard_log: str | None = None):
    """A fresh SB3 model of ``algo`` with ``config``'s hyperparameters on ``env`` (CPU)."""
    policy, policy_kwargs = _policy(algo, config)
    kwargs = config.algo_kwargs()
    if isinstance(config, DQNConfig):
        kwargs["exploration_fraction"] = 1.0  # the trainer replaces the schedule (exploration_steps)
    return algo_class(algo)(policy, env, policy_kwargs=policy_kwargs, seed=seed, device="cpu", verbose=0,
                            tensorboard_log=tensorboard_log, **kwargs)


def run_paths(path: str | os.PathLike) -> tuple[Path, Path]:
    """``(model.zip, train.json)`` of a run directory, or of a ``model.zip`` given directly."""
    path = Path(path)
    if path.suffix == ".zip":
        return path, path.with_name(META_FILE)
    return path / MODEL_FILE, path / META_FILE


def save_checkpoint(model, out_dir: str | os.PathLike, meta: dict[str, Any], *, model_file: str = MODEL_FILE) -> Path:
    """Write ``model_file`` (``model.zip``, ``latest.zip`` for the newest weights of a run
    that keeps its best checkpoint in ``model.zip``, or ``warm_start.zip`` for the weights of a
    warm start before PPO) then ``train.json`` atomically into ``out_dir``; return the model path."""
    if model_file not in (MODEL_FILE, LATEST_FILE, WARM_START_FILE):
        raise ValueError(f"model_file must be {MODEL_FILE}, {LATEST_FILE} or {WARM_START_FILE}, got {model_file!r}")
    model_path, meta_path = run_paths(out_dir)
    model_path = model_path.with_name(model_file)
    model_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(model_path, "wb") as handle:
        model.save(handle)
    with atomic_write(meta_path) as handle:
        json.dump(dict(meta, format=FORMAT), handle, indent=1)
        handle.write("\n")
    return model_path


def read_meta(path: str | os.PathLike) -> tuple[dict[str, Any], AlgoConfig]:
    """``(train.json contents, config)`` of a run directory; one ``ValueError`` naming the file
    when it is missing or unreadable."""
    _, meta_path = run_paths(path)
    if not meta_path.is_file():
        raise ValueError(f"{meta_path}: missing (a run directory holds {MODEL_FILE} and {META_FILE})")
    try:
        meta = read_json(meta_path, what="run file")
    except ValueError as exc:
        detail = str(exc).removeprefix(str(meta_path)).lstrip(":0123456789 ")
        raise ValueError(f"{meta_path}: not a valid {META_FILE} ({detail})") from None
    try:
        algo = meta["algo"]
        config = config_from_dict(algo, meta["config"], where=str(meta_path))
    except ValueError as exc:
        if str(meta_path) in str(exc):
            raise
        raise ValueError(f"{meta_path}: not a valid {META_FILE} ({exc})") from None
    except (KeyError, TypeError, OverflowError, RecursionError) as exc:
        raise ValueError(f"{meta_path}: not a valid {META_FILE} (missing or bad field {exc})") from None
    return meta, config


def load_checkpoint(path: str | os.PathLike, *, algo: str | None = None, env=None, version: str | None = None,
                    latest: bool = False):
    """``(model, meta, config)`` from a run directory (or its ``model.zip``).

    ``algo`` and ``version`` (the game, ``"v0"`` or ``"v1"``; runs from before v1 existed
    count as v0), when given, must match the run's. ``latest=True`` loads the newest weights
    (``latest.zip`` where the run keeps its best checkpoint in ``model.zip``; what ``--resume``
    continues). A missing, truncated or corrupt file raises one ``ValueError`` naming it.
    """
    model_path, _ = run_paths(path)
    if latest and model_path.with_name(LATEST_FILE).is_file():
        model_path = model_path.with_name(LATEST_FILE)
    meta, config = read_meta(path)
    if algo is not None and meta["algo"] != algo:
        raise ValueError(f"{run_paths(path)[1]}: this run trained {meta['algo']!r}, not {algo!r}")
    if version is not None and config.env.version != version:
        raise ValueError(f"{run_paths(path)[1]}: this run was trained on MallocGame-{config.env.version}, "
                         f"not MallocGame-{version}")
    if not model_path.is_file():
        raise ValueError(f"{model_path}: missing checkpoint")
    th.set_num_threads(1)
    try:
        model = algo_class(meta["algo"]).load(model_path, env=env, device="cpu")
    except Exception as exc:  # zipfile, pickle, torch and SB3 errors all mean "not a checkpoint"
        raise ValueError(f"{model_path}: not a readable {meta['algo']} checkpoint "
                         f"({type(exc).__name__}: {exc})") from None
    return model, meta, config
