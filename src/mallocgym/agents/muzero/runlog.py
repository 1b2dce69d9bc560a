"""What a training run logs, shared by the local trainer (:mod:`.train`) and the Ray one
(:mod:`.distributed`): the JSON-lines log and the log line's game statistics."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

__all__ = ["HELDOUT_POSITIONS", "EVAL_POSITIONS", "DYNAMICS_EVAL_POSITIONS", "JsonLog", "game_stats"]

HELDOUT_POSITIONS = 16_384   # version 2: the latest held-out positions kept for the error log
EVAL_POSITIONS = 2_048       # ... of which (and of the replay's) this many are scored per log line
DYNAMICS_EVAL_POSITIONS = 256   # train.dynamics_weight > 0: trajectory positions unrolled per log line, each set


class JsonLog:
    """Appends JSON lines to ``DIR/log.jsonl``: each line is written whole, flushed and synced
    before ``write`` returns, so a killed run keeps every line it logged."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, record: dict) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"  # serialise first: no half line on error
        with open(self.path, "a") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


def game_stats(played, taught) -> dict:
    """The log line's game statistics: mean returns of the ``played`` games (the search's own)
    and how often they and the ``taught`` ones (the teacher's) beat XLA-like."""
    out: dict = {}
    if played:
        out["return_mean"] = float(np.mean([e.ret for e in played]))
        out["xla_return_mean"] = float(np.mean([e.xla_return for e in played]))
        out["beats_xla_fraction"] = float(np.mean([e.ret > e.xla_return + 1e-12 for e in played]))
    if taught:
        out["teacher_games"] = len(taught)
        out["teacher_beats_xla_fraction"] = float(np.mean([e.ret > e.xla_return + 1e-12 for e in taught]))
    return out
