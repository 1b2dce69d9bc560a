"""Slow, obvious pure-Python references for the simulator's numeric pieces."""

from __future__ import annotations


def program_time(workload, offsets, hardware) -> float:
    """Roofline time of a mapping, one op at a time, with plain Python loops."""
    slow = [0] * workload.num_ops
    fast = [0] * workload.num_ops
    for b in range(workload.num_buffers):
        for op, nbytes, _ in workload.accesses(b):
            if offsets[b] >= 0:
                fast[op] += nbytes
            else:
                slow[op] += nbytes
    total = 0.0
    for t in range(workload.num_ops):
        compute = max(float(workload.flops[t]) / hardware.peak_flops,
                      float(workload.transcendentals[t]) / hardware.transcendental_rate)
        memory = slow[t] / hardware.slow_bw + fast[t] / hardware.fast_bw
        total += max(compute, memory) + hardware.op_overhead
    return total


def free_gaps(workload, offsets, capacity, s, e):
    """Free address ranges over ops [s, e], by scanning every placed buffer."""
    busy = sorted(
        (int(offsets[b]), int(offsets[b] + workload.size[b]))
        for b in range(workload.num_buffers)
        if offsets[b] >= 0 and workload.start[b] <= e and workload.end[b] >= s
    )
    gaps, cursor = [], 0
    for lo, hi in busy:
        if lo > cursor:
            gaps.append((cursor, lo))
        cursor = max(cursor, hi)
    if cursor < capacity:
        gaps.append((cursor, capacity))
    return gaps


def candidates(workload, offsets, capacity, alignment, b, k):
    """MallocGame's candidate offsets for buffer b, best fit first (gap length, offset)."""
    size = int(workload.size[b])
    found = []
    for lo, hi in free_gaps(workload, offsets, capacity, int(workload.start[b]), int(workload.end[b])):
        low = -(-lo // alignment) * alignment
        if low + size > hi:
            continue
        found.append((hi - lo, low))
        high = (hi - size) // alignment * alignment
        if high != low:
            found.append((hi - lo, high))
    found.sort()
    return [off for _, off in found[:k]]


def overlaps(workload, offsets):
    """All conflicting pairs (i < j) of fast buffers."""
    pairs = []
    for j in range(workload.num_buffers):
        for i in range(j):
            if offsets[i] < 0 or offsets[j] < 0:
                continue
            if workload.start[i] <= workload.end[j] and workload.start[j] <= workload.end[i]:
                if offsets[i] < offsets[j] + workload.size[j] and offsets[j] < offsets[i] + workload.size[i]:
                    pairs.append((i, j))
    return pairs
