"""Packing targets of issue 20, checked here (not in the default test run):

    .venv/bin/python -m pytest tests/benchmarks/test_pack_speed.py --benchmark-only

- each of MiniMalloc's A-E at 1 MiB packed whole (100 % of the bytes) by
  :func:`mallocgym.sim.pack.pack` in under 4 s after warm-up, on the traces' own clock (as the
  ``pack`` agent passes it; docs/pack.md).
"""

import time

import numpy as np
import pytest

from mallocgym import evaluate, scenarios
from mallocgym.sim import pack as P
from mallocgym.workloads.minimalloc import minimalloc_rows

TARGET_S = 4.0


@pytest.fixture(scope="module")
def minimalloc():
    suite = {s.workload.name[-1]: s for s in scenarios.suite("minimalloc")}
    b = suite["B"].workload  # warm-up: compile or load the numba kernels outside the timings
    P.pack(b.start, b.end, b.size, int(suite["B"].hardware.fast_capacity), time_limit_s=TARGET_S)
    return suite


@pytest.mark.parametrize("letter", ["A", "B", "C", "D", "E"])
def test_minimalloc_packed_whole_in_4s(benchmark, minimalloc, letter):
    scenario = minimalloc[letter]
    w, cap = scenario.workload, int(scenario.hardware.fast_capacity)
    _, lower, upper = minimalloc_rows(w)
    start, end = np.asarray(lower), np.asarray(upper) - 1
    out = {}

    def run():
        begin = time.perf_counter()
        out["result"] = P.pack(start, end, w.size, cap, time_limit_s=TARGET_S)
        out["wall_s"] = time.perf_counter() - begin

    benchmark.pedantic(run, rounds=1, iterations=1)
    result = out["result"]
    placed = 0.0
    if result.status == "optimal":
        placed = evaluate(w, result.offsets, scenario.hardware).placed_bytes_fraction
    benchmark.extra_info.update(status=result.status, nodes=result.nodes, wall_s=out["wall_s"],
                                placed_bytes_fraction=placed)
    assert result.status == "optimal" and np.all(result.offsets >= 0), \
        f"{letter}: {result.status} after {out['wall_s']:.2f} s"
    assert placed == 1.0
    assert out["wall_s"] < TARGET_S
