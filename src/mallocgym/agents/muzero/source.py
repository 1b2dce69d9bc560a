"""Where training games come from: a generated program or a scenario of the training split.

Shared by the trainer (:mod:`.train`) and the label workers (:mod:`.workers`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ...scenarios import Scenario

__all__ = ["ScenarioSource", "make_generator", "fallback_generator"]


def fallback_generator(rng: np.random.Generator) -> Scenario:
    """Seeded MLP training steps (seeds >= 1000, apart from the bundled ones), used when
    :mod:`mallocgym.workloads.generator` is not available."""
    from ...scenarios import resolve
    from ...workloads.synthetic import mlp_training_step

    return resolve(mlp_training_step(int(rng.integers(1000, 2**31))))


def make_generator(preset_name: str, families: str = "",
                   buffers: str = "") -> Callable[[np.random.Generator], Scenario]:
    """The synthetic workload generator's preset (drawing from ``families``, comma-separated,
    when given, and ``buffers``, ``"LOW,HIGH"``, when given), or :func:`fallback_generator`."""
    try:
        from ...scenarios import WorkloadGenerator
        from ...workloads.generator import parse_families, preset
    except ImportError:
        return fallback_generator
    from .config import parse_buffers

    config = preset(preset_name)
    if names := parse_families(families):
        config = replace(config, families=names)
    if buffers:
        config = replace(config, buffers=parse_buffers(buffers))
    return WorkloadGenerator(config)


class ScenarioSource:
    """Draws training scenarios: from the generator with probability ``generator_fraction``,
    else uniformly from ``scenarios``."""

    def __init__(self, scenarios: list[Scenario], generator: Callable | None, generator_fraction: float):
        if not scenarios and generator is None:
            raise ValueError("nothing to train on: no scenarios and no generator")
        self.scenarios = list(scenarios)
        self.generator = generator
        self.fraction = generator_fraction if scenarios else 1.0
        if generator is None:
            self.fraction = 0.0

    def sample(self, rng: np.random.Generator) -> tuple[Scenario, str | None]:
        """A scenario and its name (None for a generated, never-repeated instance)."""
        if self.generator is not None and rng.random() < self.fraction:
            return self.generator(rng), None
        s = self.scenarios[int(rng.integers(len(self.scenarios)))]
        return s, s.name
