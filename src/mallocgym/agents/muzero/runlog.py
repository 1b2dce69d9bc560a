"""What a training run logs (:mod:`.train`): the JSON-lines log and how many positions its
error lines score."""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["HELDOUT_POSITIONS", "EVAL_POSITIONS", "JsonLog"]

HELDOUT_POSITIONS = 16_384   # version 2: the latest held-out positions kept for the error log
EVAL_POSITIONS = 2_048       # ... of which (and of the replay's) this many are scored per log line


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
