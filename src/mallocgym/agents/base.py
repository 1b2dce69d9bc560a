"""The agent interface and the heuristic agents."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from .. import heuristics
from .._validate import clip, nearest_hint

MAX_SETTING = 2**53
"""Largest integer an agent setting takes (``simulations=10**30`` is an error, not a hang)."""
from ..scenarios import Scenario

__all__ = ["Agent", "Solution", "HeuristicAgent", "heuristic_factory", "parse_config", "plays_v1"]


def plays_v1(agent) -> bool:
    """Whether ``agent`` can play MallocGame-v1 (has ``solve_v1`` and does not say otherwise)."""
    return hasattr(agent, "solve_v1") and getattr(agent, "plays_v1", True)


@dataclass
class Solution:
    """What an agent returns: a mapping, and optionally a proven lower bound on program time.

    Attributes:
      offsets: ``int64[N]``, -1 = slow memory.
      time_lower_bound: seconds no mapping can beat (exact solvers), or None.
      info: anything else worth reporting (iterations, nodes, ...).
      mapping: on MallocGame-v1, the v1 mapping (:func:`mallocgym.evaluate_v1` form).
    """

    offsets: np.ndarray | None
    time_lower_bound: float | None = None
    info: dict = field(default_factory=dict)
    mapping: dict | None = None  # a MallocGame-v1 mapping (agents solving v1; offsets is None then)


class Agent(Protocol):
    """Maps a scenario to a :class:`Solution`; ``seed`` makes stochastic agents repeatable."""

    name: str

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution: ...


@dataclass
class HeuristicAgent:
    """Wraps a heuristic ``(scenario, seed) -> offsets``."""

    name: str
    fn: Callable[[Scenario, int], np.ndarray] | None  # None: a MallocGame-v1 policy only

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        if self.fn is None:
            raise ValueError(f"agent {self.name!r} plays MallocGame-v1 only (use --env v1)")
        return Solution(np.asarray(self.fn(scenario, seed), dtype=np.int64))

    @property
    def plays_v1(self) -> bool:
        from ..heuristics.v1 import V1_POLICIES

        return self.name in V1_POLICIES

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        from ..heuristics.v1 import V1_POLICIES, play_v1

        if self.name not in V1_POLICIES:
            raise ValueError(f"agent {self.name!r} plays MallocGame-v0 only; on v1 use one of "
                             f"{', '.join(V1_POLICIES)}, xla-msa, rollout, beam or mcts")
        return Solution(None, mapping=play_v1(scenario, self.name, seed))


def heuristic_factory(kind: str, arg: str | None) -> HeuristicAgent:
    if arg is not None:
        raise ValueError(f"agent {kind!r} takes no argument, got {kind}:{arg}")
    return HeuristicAgent(kind, heuristics.HEURISTICS.get(kind))


def _convert(text: str, annotation, where: str):
    """``text`` as a value of ``annotation`` (``int``, ``float``, ``bool``, ``str`` or ``X | None``)."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) or \
        typing.get_origin(annotation) is typing.Union else (annotation,)
    if type(None) in options and text.lower() == "none":
        return None
    for kind in (bool, int, float, str):
        if kind not in options:
            continue
        if kind is bool:
            if text.lower() in ("1", "true", "yes"):
                return True
            if text.lower() in ("0", "false", "no"):
                return False
            continue
        try:
            value = kind(text)
        except ValueError:
            continue
        if kind is int and abs(value) > MAX_SETTING:
            raise ValueError(f"{where} must be at most {MAX_SETTING} in magnitude, got {clip(text)}")
        if kind is float and not math.isfinite(value):
            raise ValueError(f"{where} must be a finite number, got {clip(text)}")
        return value
    raise ValueError(f"{where}: cannot read {clip(text)} as {annotation}")


def parse_config(config_cls, arg: str | None, *, positional: str | None = None, where: str = "agent"):
    """Build the frozen-dataclass ``config_cls`` from an agent argument.

    ``arg`` is ``None`` (defaults), a bare value for the ``positional`` field (``mcts:64``), or
    comma-separated ``key=value`` pairs naming config fields (``mcts:simulations=64,c_uct=1``).
    Unknown keys and unreadable values raise ``ValueError``.
    """
    if arg is None or not arg.strip():
        return config_cls()
    hints = typing.get_type_hints(config_cls)
    names = [f.name for f in dataclasses.fields(config_cls)]
    values = {}
    for part in arg.split(","):
        key, eq, text = part.partition("=")
        if not eq:
            if positional is None or values:
                raise ValueError(f"{where}: expected key=value pairs ({', '.join(names)}), got {clip(part)}")
            key, text = positional, part
        key, text = key.strip(), text.strip()
        if key not in names:
            raise ValueError(f"{where}: unknown setting {clip(key)}{nearest_hint(key, names)}; known: {', '.join(names)}")
        if key in values:
            raise ValueError(f"{where}: setting {key!r} is given twice; give each setting once")
        values[key] = _convert(text, hints[key], f"{where}: {key}")
    return config_cls(**values)
