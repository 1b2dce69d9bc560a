"""A slow, plain-Python reference of ``mallocgym.pricing.runtime.simulate`` (MSA's RuntimeSimulator).

Written from the model, not from the kernel: the program is first laid out as MSA's flattened
instruction sequence (copy-dones before op t, op t, copy-starts after op t, as FixSchedule does),
then walked one instruction at a time like ``RuntimeSimulator::SimulateElapsedTime``. The queues
are Python lists of ``[remaining_bytes, copy id]``. Time advances from event to event: the next
front-of-queue completion, or the end of the op's idle time. Each copy-done is handled on its own,
in schedule order (the kernel instead waits for all of an op's copies at once).
"""

from __future__ import annotations

import math


def _advance(queues, bw, seconds, finished):
    """Let the queues run for ``seconds``.

    Every busy queue moves its front copy at ``bw / number_of_busy_queues``; a copy with 0 bytes
    left at the front finishes at once. Returns the seconds actually spent (less than
    ``seconds`` only when the queues ran dry).
    """
    spent = 0.0
    while True:
        busy = [q for q in queues if q]
        if not busy:
            return spent
        rate = bw / len(busy)
        # The next event: some front copy finishes, or the time is up.
        finish = min(q[0][0] / rate for q in busy)
        left = seconds - spent
        if left <= 0 and finish > 0:
            return spent
        dt = min(finish, left)
        for q in busy:
            if q[0][0] / rate <= dt:  # this front finishes within dt
                finished.add(q[0][1])
                q.pop(0)
            else:
                q[0][0] -= rate * dt
        spent += dt


def _wait_for(queues, bw, copy, finished):
    """A copy-done: run the queues until ``copy`` is finished; return the seconds (the stall)."""
    spent = 0.0
    while copy not in finished:
        busy = [q for q in queues if q]
        assert busy, "waiting for a copy that was never issued"
        rate = bw / len(busy)
        dt = min(q[0][0] / rate for q in busy)
        spent += _advance(queues, bw, dt, finished)
        # _advance stops when dt is used up; a front due exactly at dt is popped inside it.
    return spent


def simulate(compute_time, slow_time, fast_time, overhead, slow_bw, copy_start, copy_done, copy_bytes,
             copy_kind, elapsed_out, stall_out):
    """Same contract as the kernel: fills ``elapsed_out[T]``, ``stall_out[T + 1]``, returns the total."""
    n_ops = len(compute_time)
    n = len(copy_start)
    # The flattened schedule: ("done", c), ("op", t), ("start", c).
    starts_after = {t: [] for t in range(-1, n_ops)}
    dones_before = {t: [] for t in range(0, n_ops + 1)}
    for c in sorted(range(n), key=lambda c: (copy_done[c], copy_start[c])):  # stable: ties by id
        starts_after[int(copy_start[c])].append(c)
        dones_before[int(copy_done[c])].append(c)
    schedule = []
    for t in range(-1, n_ops + 1):
        if t >= 0:
            schedule += [("done", c, t) for c in dones_before[t]]
        if 0 <= t < n_ops:
            schedule.append(("op", t, t))
        if t < n_ops:
            schedule += [("start", c, t) for c in starts_after[t]]

    prefetches, evictions = [], []
    queues = [prefetches, evictions]
    finished = set()
    stalls = [0.0] * (n_ops + 1)
    elapsed = [0.0] * n_ops
    for what, x, t in schedule:
        if what == "start":
            queues[int(copy_kind[x])].append([float(copy_bytes[x]), x])
        elif what == "done":
            stalls[t] += _wait_for(queues, slow_bw, x, finished)
        else:
            ov = overhead[t] if hasattr(overhead, "__len__") else overhead
            memory = slow_time[t] + fast_time[t] + ov
            elapsed[t] = max(compute_time[t], memory)
            idle = elapsed[t] - slow_time[t]
            if idle > 0:
                _advance(queues, slow_bw, idle, finished)
    for t in range(n_ops):
        elapsed_out[t] = elapsed[t]
    for t in range(n_ops + 1):
        stall_out[t] = stalls[t]
    return math.fsum(elapsed) + math.fsum(stalls)
