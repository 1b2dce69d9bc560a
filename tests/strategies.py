"""Hypothesis strategies: small random workloads and hardware."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as hs

from mallocgym import Hardware, Workload


@hs.composite
def scenarios(draw, max_ops: int = 12, max_buffers: int = 12):
    n_ops = draw(hs.integers(1, max_ops))
    n = draw(hs.integers(1, max_buffers))
    alignment = draw(hs.sampled_from([1, 1, 2, 4, 8]))
    capacity = draw(hs.integers(1, 12)) * alignment
    flops = [draw(hs.sampled_from([0.0, 0.0, 1e3, 5e5, 2e6])) for _ in range(n_ops)]
    size, start, end, accesses = [], [], [], []
    for _ in range(n):
        s = draw(hs.integers(0, n_ops - 1))
        e = draw(hs.integers(s, n_ops - 1))
        # now and then a buffer larger than the fast memory: legal, it stays slow
        sz = draw(hs.integers(1, capacity + 2 * alignment))
        extra = draw(hs.lists(hs.tuples(hs.integers(s, e), hs.integers(0, sz), hs.booleans()), max_size=3))
        size.append(sz)
        start.append(s)
        end.append(e)
        accesses.append([(s, sz, True), (e, sz, False)] + extra)
    workload = Workload.from_buffers("h", flops, size, start, end, accesses)
    hardware = Hardware(peak_flops=1e9, slow_bw=draw(hs.sampled_from([1e6, 2e6])),
                        fast_bw=draw(hs.sampled_from([4e6, 1e7, 1e8])), fast_capacity=capacity,
                        alignment=alignment, op_overhead=draw(hs.sampled_from([0.0, 1e-6])))
    return workload, hardware
