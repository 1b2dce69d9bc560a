"""Training data: bundled scenarios, optionally mixed with freshly generated programs.

A policy trained on the few programs of a suite's train split can learn those programs rather
than the game. :class:`TrainingMix` is a workload generator for ``MallocGameEnv``
(``workload=TrainingMix(...)``): at every reset it draws, with the env's seeded generator, either
a fresh program from :mod:`mallocgym.workloads.generator` (probability ``share``) or one of the
named scenarios. It is a plain picklable object, so ``SubprocVecEnv`` can ship it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...scenarios import Scenario, get
from ...scenarios import WorkloadGenerator
from ...workloads.generator import PRESETS, preset as generator_preset

__all__ = ["TrainingMix"]


@dataclass(frozen=True)
class TrainingMix:
    """``(rng) -> Scenario``: a generated program with probability ``share``, otherwise one of
    ``scenarios`` (bundled names), uniformly.

    Attributes:
      scenarios: bundled scenario names (may be empty when ``share == 1``).
      preset: generator preset (``"small"``, ``"medium"``, ``"large"``).
      share: probability of a generated program, in ``[0, 1]``.
      families: network families the generator draws from instead of the preset's
        (``("transformer", "cnn", "mlp", "unet", "rnn")``); empty: the preset's.
      buffers: ``(low, high)``, the generator's buffer-count range instead of the preset's;
        ``None``: the preset's.
    """

    scenarios: tuple[str, ...]
    preset: str = "small"
    share: float = 0.5
    families: tuple[str, ...] = ()
    buffers: tuple[int, int] | None = None

    def __post_init__(self):
        object.__setattr__(self, "scenarios", tuple(self.scenarios))
        if self.preset not in PRESETS:
            raise ValueError(f"unknown generator preset {self.preset!r}; known: {', '.join(PRESETS)}")
        object.__setattr__(self, "families", tuple(self.families))
        if self.buffers is not None:
            object.__setattr__(self, "buffers", tuple(self.buffers))
        self.generator()  # an unknown family or a bad range fails now, not in a worker process
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"generator share must be in [0, 1], got {self.share}")
        if self.share < 1.0 and not self.scenarios:
            raise ValueError("a generator share below 1 needs scenarios to mix with")
        for name in self.scenarios:
            get(name)  # an unknown name fails now, not in a worker process

    def generator(self) -> WorkloadGenerator:
        """The generator of the fresh programs: the preset with ``families`` and ``buffers``."""
        config = generator_preset(self.preset)
        if self.families:
            config = replace(config, families=self.families)
        if self.buffers is not None:
            config = replace(config, buffers=self.buffers)
        return WorkloadGenerator(config)

    def __call__(self, rng: np.random.Generator) -> Scenario:
        if self.share >= 1.0 or rng.random() < self.share:
            return self.generator()(rng)
        return get(self.scenarios[int(rng.integers(len(self.scenarios)))])
