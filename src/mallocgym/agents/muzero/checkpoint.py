"""Checkpoints: one ``checkpoint.pt`` per run folder, written atomically (temp file + rename).

A checkpoint holds the config, the observation spec, the network and optimiser state, the
training counters and the random-generator states. The replay buffer is not saved: a resumed run refills it.
Loading checks everything and raises one ``ValueError`` naming the file on any problem.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ..._files import atomic_write
from .config import MuZeroConfig
from .networks import MuZeroNet, ObsSpec

__all__ = ["CHECKPOINT_NAME", "FORMAT", "checkpoint_path", "save_checkpoint", "load_checkpoint", "load_network"]

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT = "mallocgym-muzero/1"


def checkpoint_path(path: str | os.PathLike) -> Path:
    """The checkpoint file of a run folder (or the file itself)."""
    path = Path(path)
    return path / CHECKPOINT_NAME if path.is_dir() or path.suffix != ".pt" else path


def save_checkpoint(out_dir: str | os.PathLike, *, net: MuZeroNet, config: MuZeroConfig,
                    optimizer: torch.optim.Optimizer | None = None, progress: dict | None = None,
                    rng: dict | None = None, extra: dict | None = None) -> Path:
    """Write ``out_dir/checkpoint.pt`` atomically; returns its path."""
    payload: dict[str, Any] = {
        "format": FORMAT,
        "config": config.to_dict(),
        "spec": net.spec.to_dict(),
        "model": net.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "progress": dict(progress or {}),
        "rng": dict(rng or {}),
        "extra": dict(extra or {}),
    }
    path = Path(out_dir) / CHECKPOINT_NAME
    with atomic_write(path, "wb") as handle:
        torch.save(payload, handle)
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """The checked payload of a checkpoint (a run folder or the ``.pt`` file)."""
    file = checkpoint_path(path)
    if not file.is_file():
        raise ValueError(f"{file}: no mallocMuZero checkpoint here (expected a file written by "
                         f"`mallocgym train muzero --out DIR`)")
    try:
        payload = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged file
        raise ValueError(f"{file}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{file}: not a mallocMuZero checkpoint (format {FORMAT!r} expected)")
    for key in ("config", "spec", "model"):
        if key not in payload:
            raise ValueError(f"{file}: checkpoint has no {key!r} entry")
    try:
        # the config as saved stays in the payload: fields issue 31 removed that only record how
        # the network was trained are accepted (config.TRAINING_RECORD) and kept there
        payload["saved_config"] = payload["config"]
        payload["config"] = MuZeroConfig.from_dict(payload["config"], saved=True)
        payload["spec"] = ObsSpec(**payload["spec"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{file}: bad checkpoint config: {exc}") from None
    payload["path"] = file
    return payload


def load_network(path: str | os.PathLike) -> tuple[MuZeroNet, MuZeroConfig, dict[str, Any]]:
    """``(network in eval mode, config, payload)`` from a checkpoint."""
    payload = load_checkpoint(path)
    net = MuZeroNet(payload["spec"], payload["config"].network)
    try:
        net.load_state_dict(payload["model"])
    except (RuntimeError, TypeError, KeyError) as exc:
        raise ValueError(f"{payload['path']}: network weights do not match the config: {exc}") from None
    net.eval()
    return net, payload["config"], payload
