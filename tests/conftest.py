from fractions import Fraction
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
MINIMALLOC = DATA / "minimalloc"


def baseline_script(relative: str):
    """A script under ``baselines/`` (e.g. ``"muzero/choose.py"``) imported as a module."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "baselines" / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeClock:
    """A clock that only moves when told to (``clock.now``): the search budgets' tests."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def mlp_scenario(seed: int = 0, fraction: Fraction = Fraction(1, 8)):
    """A seeded synthetic MLP training step (43 buffers) at ``fraction`` of its peak live bytes,
    built here so the tests do not depend on the bundled suite."""
    from mallocgym.hardware import profile
    from mallocgym.scenarios import Scenario, capacity_for
    from mallocgym.workloads.synthetic import mlp_training_step

    workload = mlp_training_step(seed)
    hw = profile("tpu-v4-like")
    return Scenario(f"{workload.name}@{fraction}", workload, hw.with_capacity(capacity_for(workload, fraction, hw.alignment)))


@pytest.fixture
def tiny():
    """Three pairwise-overlapping buffers over four ops; op 1 is compute-bound (0.5 s).

    Hand-worked with ``tiny_hw`` (slow 1000 B/s, fast 10000 B/s, 400 bytes of fast memory):
    all slow 1.3 s; the optimum puts buffers 0 and 1 in fast memory: 0.85 s.
    """
    from mallocgym import Workload

    return Workload.from_buffers("tiny", flops=[0.0, 5e11, 0.0, 0.0], size=[100, 200, 300],
                                 start=[0, 0, 1], end=[1, 2, 3])


@pytest.fixture
def tiny_hw():
    from mallocgym import Hardware

    return Hardware(peak_flops=1e12, slow_bw=1000.0, fast_bw=10000.0, fast_capacity=400)


@pytest.fixture
def trap():
    """A big buffer XLA's order takes first, blocking two small ones worth more together.

    Capacity 200, all ops memory-bound, 0.0009 s saved per byte moved to fast memory:
    all slow 1.4 s, XLA-like 0.86 s (places buffer 0), optimum 0.68 s (buffers 1 and 2).
    """
    from mallocgym import Hardware, Workload

    workload = Workload.from_buffers(
        "trap", flops=[0.0, 0.0], size=[200, 100, 100], start=[0, 0, 0], end=[1, 1, 1],
        accesses=[[(0, 200, True), (1, 200, False), (1, 200, False)],
                  [(0, 100, True), (0, 100, False), (1, 100, False), (1, 100, False)],
                  [(0, 100, True), (0, 100, False), (1, 100, False), (1, 100, False)]],
    )
    return workload, Hardware(peak_flops=1e12, slow_bw=1000.0, fast_bw=10000.0, fast_capacity=200)


@pytest.fixture
def trap_scenario(trap):
    """:func:`trap` as a :class:`~mallocgym.scenarios.Scenario` named ``"trap"``."""
    from mallocgym.scenarios import Scenario

    workload, hardware = trap
    return Scenario("trap", workload, hardware)


def small_random_workload(seed: int, n: int, prefix: str = "r", min_span: int = 0):
    """A random ``n``-buffer workload for the SB3 tests: live ranges of ``min_span`` to
    ``min_span + 4`` ops after a random start, sizes 64-512 bytes, ops with 0, 1e3 or 5e6 flops."""
    import numpy as np

    from mallocgym import Workload

    rng = np.random.default_rng(seed)
    start = rng.integers(0, n, size=n)
    end = np.minimum(start + rng.integers(min_span, min_span + 5, size=n), n - 1)
    size = rng.integers(1, 9, size=n) * 64
    return Workload.from_buffers(f"{prefix}{seed}", rng.choice([0.0, 1e3, 5e6], size=n).tolist(), size.tolist(),
                                 start.tolist(), end.tolist())
