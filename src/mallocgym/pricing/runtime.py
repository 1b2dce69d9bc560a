"""MallocGame-v1's runtime cost model: XLA MSA's ``RuntimeSimulator``, as numba kernels.

Module-level ``@njit(cache=True)`` functions over plain numpy arrays (no Python objects, no
jitclass). The inputs are a program of ``T`` ops already priced under a mapping, and ``C`` async
copies; the lead's rules build them (which accesses are fast or slow, which copies exist).
References below are to openxla/xla ``xla/service/memory_space_assignment/``: ``simulator.cc``
(``RuntimeSimulator``), ``cost_analysis.cc`` (``CostAnalysis``) and ``memory_space_assignment.cc``
(``MemorySpaceAssignment``).

Per op ``t`` (``CostAnalysis::GetInstructionElapsedInAlternateMemory``)::

    elapsed_t = max(compute_t, slow_t + fast_t + overhead_t)
    idle_t    = max(0, elapsed_t - slow_t)

``slow_t`` / ``fast_t`` are the op's own access times to slow / fast memory (bytes / bandwidth).
The overhead sits *inside* the max, on the memory side, as MSA's
``GetDefaultMemoryAccessOverhead`` does (a compute-bound op hides it). ``idle_t`` is the time the
slow memory is not used by the op itself (``CostAnalysis::GetDefaultMemoryBandwidthIdleTime``:
``elapsed - default_bytes / default_bw``), so the overhead counts as idle slow-memory time.

Copies (``RuntimeSimulator``): two FIFO queues, prefetches (kind 0, slow -> fast, MSA's
``outstanding_read_default_queue_``) and evictions (kind 1, fast -> slow,
``outstanding_write_default_queue_``). Copy ``c`` is pushed after op ``copy_start[c]`` (``-1``:
before op 0) and must be complete before op ``copy_done[c]`` runs (``copy_done == T``: after the
last op). Copies pushed after the same op are ordered by ``(copy_done, copy_start)``, ties in
input order (``MemorySpaceAssignment::ScheduleAsynchronousCopies``: a stable sort, then
``schedule_after_[start].push_back``). The queues drain at ``slow_bw`` bytes/s, only the front of
each queue moves, and while both queues are non-empty each gets ``slow_bw / 2``:

- during op ``t``, for ``idle_t`` seconds (``SimulateComputeInstruction`` ->
  ``ProcessAsyncCopyLikesInIdleTime``); the op itself is not slowed;
- before op ``t``, if a copy with ``copy_done == t`` is not complete, the program stalls: the
  queues drain until every such copy is complete (its own queue up to and including it, the other
  queue alongside while it has work) and the stall time is added (``SimulateAsyncCopyLikeDone``,
  called by ``SimulateElapsedTime`` for each copy-done instruction). A complete copy costs 0.

Event order around op ``t`` (``MemorySpaceAssignment::FixSchedule``: ``schedule_before_[t]``,
instruction ``t``, ``schedule_after_[t]``): the copy-dones op ``t`` waits for, then op ``t``, then
the copy-starts issued after op ``t``. So a copy with ``done == start + 1`` gets no idle time (its
whole copy time stalls, less what it drained during earlier stalls), and a copy issued after op
``t - 1`` is already queued, and shares the bandwidth, when op ``t`` stalls.

End of program: FixSchedule lets copy-dones be scheduled past the root ("We allow scheduling copy
dones past the root instruction ... So the loop exit condition is actually here"), i.e. at
``schedule_before_[T]``, and ``SimulateElapsedTime`` walks them like any copy-done. So the copies
with ``copy_done == T`` are waited for after the last op; that stall goes to ``stall_out[T]``
(``stall_out`` has ``T + 1`` entries) and into the total. Every copy has a done, so no copy is
left outstanding at the end (as in MSA, where every copy-start feeds a copy-done)::

    total = sum_t elapsed_t + sum_{t=0..T} stall_t

added in blocks of ``BLOCK`` iterations (:func:`sum_blocks`: each block in op order, then the
blocks in order), so that an incremental update, which re-adds only the blocks it changed, gives
the same float as a full run, bit for bit.

Deliberate differences from MSA (docs/game-v1.md has the full list):

- bandwidth sharing: ``ProcessAsyncCopyLikesInIdleTime`` declares ``available_bandwidth`` outside
  its loop and does ``available_bandwidth *= 0.5`` in every iteration where both queues are
  busy, so within one op's idle time the rate halves cumulatively and never comes back when one
  queue empties. Here each queue gets ``slow_bw / 2`` exactly while both are busy and the single
  busy queue gets ``slow_bw`` (as ``SimulateAsyncCopyLikeDone`` already does for stalls);
- float64 throughout (MSA computes in float32);
- the overhead is an input (a constant via :func:`simulate`, per op via
  :func:`simulate_per_op`). MSA's is the software-pipelining overhead
  ``min(window, default_bytes) / total_bytes * compute`` with ``window =
  pipeline_overhead_window_size_mib`` (0 by default, so no overhead); pass that per op to
  :func:`simulate_per_op` to reproduce it;
- no while loops or trip counts (``CalculateNestTripCount``): a loop is its ops flattened.

Complexity: ``O(T + C log C)`` (a stable sort of the copies and a heap of them by done op; every
other step either ends an op or completes a copy).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["PREFETCH", "EVICTION", "BLOCK", "runtime_elapsed", "issue_order", "simulate", "simulate_per_op",
           "simulate_trusted", "simulate_window", "simulate_linked", "n_blocks", "sum_blocks", "sum_in_order"]

PREFETCH, EVICTION = 0, 1
BLOCK = 64  # iterations per summation block (see sum_blocks)


@njit(cache=True, inline="always")
def runtime_elapsed(compute, slow, fast, overhead):
    """An op's elapsed time: ``max(compute, slow + fast + overhead)`` (all in seconds)."""
    mem = slow + fast + overhead
    return compute if compute >= mem else mem


@njit(cache=True)
def issue_order(copy_start, copy_done, n_ops):
    """The copies in queue order: by ``copy_start``, then ``copy_done``, then input index."""
    n = copy_start.shape[0]
    key = np.empty(n, dtype=np.int64)
    for c in range(n):
        key[c] = (np.int64(copy_start[c]) + 1) * (n_ops + 2) + np.int64(copy_done[c])
    return np.argsort(key, kind="mergesort")


@njit(cache=True)
def _check(compute_time, slow_time, fast_time, overhead, slow_bw, copy_start, copy_done, copy_bytes,
           copy_kind, elapsed_out, stall_out):
    n_ops = compute_time.shape[0]
    n = copy_start.shape[0]
    if slow_time.shape[0] != n_ops or fast_time.shape[0] != n_ops or overhead.shape[0] != n_ops:
        raise ValueError("compute_time, slow_time, fast_time and overhead must have one entry per op")
    if elapsed_out.shape[0] != n_ops or stall_out.shape[0] != n_ops + 1:
        raise ValueError("elapsed_out needs T entries and stall_out T + 1 (the last: the end of the program)")
    if copy_done.shape[0] != n or copy_bytes.shape[0] != n or copy_kind.shape[0] != n:
        raise ValueError("copy_start, copy_done, copy_bytes and copy_kind must have one entry per copy")
    if not (slow_bw > 0.0) or slow_bw == np.inf:
        raise ValueError("slow_bw must be positive and finite")
    for t in range(n_ops):
        if not (compute_time[t] >= 0.0 and slow_time[t] >= 0.0 and fast_time[t] >= 0.0 and overhead[t] >= 0.0):
            raise ValueError("op times and overheads must be non-negative numbers")
    for c in range(n):
        if not (-1 <= copy_start[c] and copy_start[c] < copy_done[c] and copy_done[c] <= n_ops):
            raise ValueError("each copy needs -1 <= copy_start < copy_done <= T")
        if copy_kind[c] != PREFETCH and copy_kind[c] != EVICTION:
            raise ValueError("copy_kind must be 0 (prefetch) or 1 (eviction)")
        if not (copy_bytes[c] >= 0.0) or copy_bytes[c] == np.inf:
            raise ValueError("copy_bytes must be non-negative and finite")


@njit(cache=True, inline="always")
def _step(fifo, head, tail, rem, bw, max_dt):
    """Drain the queues for at most ``max_dt`` seconds, up to the next copy completion.

    Only the front copy of each queue moves; both fronts at ``bw / 2`` when both queues are busy,
    else the busy one at ``bw``. Returns the seconds used (0 when a front has 0 bytes left).
    """
    busy0 = head[0] < tail[0]
    busy1 = head[1] < tail[1]
    if busy0 and busy1:
        rate = 0.5 * bw
        r0 = rem[fifo[0, head[0]]]
        r1 = rem[fifo[1, head[1]]]
        b = r0 if r0 <= r1 else r1
    elif busy0:
        rate = bw
        b = rem[fifo[0, head[0]]]
    elif busy1:
        rate = bw
        b = rem[fifo[1, head[1]]]
    else:
        return 0.0
    dt = b / rate
    if dt > max_dt:  # the time runs out first: each busy front moves rate * max_dt bytes
        dt = max_dt
        b = rate * max_dt
    for k in range(2):
        if head[k] < tail[k]:
            c = fifo[k, head[k]]
            left = rem[c] - b
            if left <= 0.0:
                rem[c] = 0.0
                head[k] += 1
            else:
                rem[c] = left
    return dt


@njit(cache=True, inline="always")
def _drain_for(fifo, head, tail, rem, bw, seconds):
    """Drain the queues during ``seconds`` of idle slow-memory time."""
    left = seconds
    while left > 0.0 and (head[0] < tail[0] or head[1] < tail[1]):
        left -= _step(fifo, head, tail, rem, bw, left)


@njit(cache=True, inline="always")
def _drain_until(fifo, head, tail, rem, bw, target0, target1):
    """Drain until queue ``k``'s copy at FIFO position ``target_k`` is complete (-1: none); return
    the seconds it took (the stall)."""
    spent = 0.0
    # A copy is always issued before it is due (start < done), so its queue is busy until it
    # completes; the emptiness test only guards against looping forever on a broken invariant.
    while (head[0] <= target0 or head[1] <= target1) and (head[0] < tail[0] or head[1] < tail[1]):
        spent += _step(fifo, head, tail, rem, bw, np.inf)
    return spent


@njit(cache=True)
def simulate_per_op(compute_time, slow_time, fast_time, overhead, slow_bw, copy_start, copy_done,
                    copy_bytes, copy_kind, elapsed_out, stall_out):
    """Program time (s) under MSA's runtime model, with a per-op ``overhead[T]`` (s).

    As :func:`simulate`; use this one for MSA's pipeline overhead, which depends on each op's
    slow-memory bytes.
    """
    _check(compute_time, slow_time, fast_time, overhead, slow_bw, copy_start, copy_done, copy_bytes,
           copy_kind, elapsed_out, stall_out)
    return simulate_trusted(compute_time, slow_time, fast_time, overhead, slow_bw, copy_start, copy_done,
                            copy_bytes, copy_kind, elapsed_out, stall_out)


@njit(cache=True)
def simulate_trusted(compute_time, slow_time, fast_time, overhead, slow_bw, copy_start, copy_done,
                     copy_bytes, copy_kind, elapsed_out, stall_out):
    """:func:`simulate_per_op` without the input checks, for callers whose inputs are valid by
    construction."""
    n_ops = compute_time.shape[0]
    empty = np.zeros(n_ops + 1, dtype=np.bool_)
    simulate_window(0, n_ops, compute_time, slow_time, fast_time, overhead, slow_bw, copy_start, copy_done,
                    copy_bytes, copy_kind, elapsed_out, stall_out, empty, False, False)
    blocks = np.zeros(n_blocks(n_ops))
    stalls = np.zeros(n_blocks(n_ops))
    sum_blocks(elapsed_out, stall_out, 0, n_ops + 1, blocks, stalls)
    return sum_in_order(blocks)


@njit(cache=True, inline="always")
def n_blocks(n_ops):
    """How many summation blocks the ``T + 1`` iterations of a program of ``n_ops`` ops make."""
    return (n_ops + BLOCK) // BLOCK


@njit(cache=True)
def sum_blocks(elapsed, stall, lo, hi, blocks_out, stalls_out):
    """Recompute the block sums of every block that meets iterations ``[lo, hi)``:
    ``blocks_out[j]`` = the time of iterations ``[j * BLOCK, (j + 1) * BLOCK)`` (each iteration's
    stall, then its op's elapsed time, added in order from 0.0), ``stalls_out[j]`` their stall."""
    n_ops = elapsed.shape[0]
    if hi <= lo:
        return
    for j in range(lo // BLOCK, (hi - 1) // BLOCK + 1):
        total = 0.0
        stalled = 0.0
        for t in range(j * BLOCK, min((j + 1) * BLOCK, n_ops + 1)):
            total += stall[t]
            stalled += stall[t]
            if t < n_ops:
                total += elapsed[t]
        blocks_out[j] = total
        stalls_out[j] = stalled


@njit(cache=True)
def sum_in_order(values):
    """``values[0] + values[1] + ...``, added in order from 0.0."""
    total = 0.0
    for v in values:
        total += v
    return total


@njit(cache=True, inline="always")
def _heap_push(h_done, h_pos, h_kind, size, done, pos, kind):
    """Push ``(done, pos, kind)`` on the min-heap of the first ``size`` entries (by ``done``)."""
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if h_done[parent] <= done:
            break
        h_done[i], h_pos[i], h_kind[i] = h_done[parent], h_pos[parent], h_kind[parent]
        i = parent
    h_done[i], h_pos[i], h_kind[i] = done, pos, kind
    return size + 1


@njit(cache=True, inline="always")
def _heap_pop(h_done, h_pos, h_kind, size):
    """Remove the top of the heap (its entry is read before); return the new size."""
    size -= 1
    done, pos, kind = h_done[size], h_pos[size], h_kind[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and h_done[child + 1] < h_done[child]:
            child += 1
        if done <= h_done[child]:
            break
        h_done[i], h_pos[i], h_kind[i] = h_done[child], h_pos[child], h_kind[child]
        i = child
    h_done[i], h_pos[i], h_kind[i] = done, pos, kind
    return size


@njit(cache=True)
def simulate_window(t0, dirty_hi, compute_time, slow_time, fast_time, overhead, slow_bw, copy_start, copy_done,
                    copy_bytes, copy_kind, elapsed_out, stall_out, empty_out, may_stop, ordered):
    """Simulate iterations ``t0, t0 + 1, ...`` (no input checks); return the first iteration not
    simulated (``T + 1`` when it ran to the end).

    Iteration ``t`` is: the copy-starts issued after op ``t - 1``, the copy-dones op ``t`` waits
    for, op ``t``. Writes ``elapsed_out[t]``, ``stall_out[t]`` and ``empty_out[t]`` (both queues
    empty at the start of iteration ``t``). The run starts with empty queues and needs only the
    copies issued at or after op ``t0 - 1`` (pass only those, in the same relative order; with
    ``ordered`` they are already in queue order, :func:`issue_order`, and are not sorted again).
    The copies are linked per issue op and passed to :func:`simulate_linked`, which says how the
    run may stop early (``may_stop``).
    """
    n_ops = compute_time.shape[0]
    n = copy_start.shape[0]
    order = np.empty(0, np.int64) if ordered else issue_order(copy_start, copy_done, n_ops)
    first = np.full(n_ops + 1, -1, np.int64)
    nxt = np.full(n, -1, np.int64)
    last = -1
    for i in range(n):
        c = i if ordered else order[i]
        p = copy_start[c] + 1
        if first[p] < 0:
            first[p] = c
        else:
            nxt[last] = c
        last = c
    return simulate_linked(t0, dirty_hi, compute_time, slow_time, fast_time, overhead, slow_bw, first, nxt,
                           copy_start, copy_done, copy_bytes, copy_kind, n, elapsed_out, stall_out, empty_out,
                           may_stop)


@njit(cache=True)
def simulate_linked(t0, dirty_hi, compute_time, slow_time, fast_time, overhead, slow_bw, first, nxt, copy_start,
                    copy_done, copy_bytes, copy_kind, n_copies, elapsed_out, stall_out, empty_out, may_stop):
    """:func:`simulate_window` with the copies given as lists per issue op: ``first[p + 1]`` is
    the first copy issued after op ``p`` (-1: none), ``nxt[c]`` the one after copy ``c`` issued
    after the same op (-1: none), each list in queue order; ``copy_*[c]`` describe copy ``c``
    (entries no list reaches are not read) and ``n_copies`` bounds how many the run meets. A
    caller that keeps the lists up to date adds or removes a copy without moving the others.

    A copy enters its queue when it is issued and a min-heap by done op, from which the copies
    op ``t`` waits for are taken: a run costs what it simulates, not the number of copies.

    For an incremental update of an earlier simulation whose results are in the ``*_out`` arrays:
    if the queues were empty at the start of iteration ``t0`` then (``empty_out[t0]``), nothing
    before ``t0`` changed and nothing after iteration ``dirty_hi`` changed (an access's op, a
    copy's issue op + 1), then with ``may_stop`` the run stops at the first iteration ``t >
    dirty_hi`` at which the queues are empty now and were empty then: from there on the old
    results are the new ones (nothing the rest depends on differs). The arrays then hold what a
    full run gives, bit for bit; the program time is their sum in blocks (:func:`sum_blocks`).
    """
    n_ops = compute_time.shape[0]
    n = n_copies
    bw = np.float64(slow_bw)
    # The two FIFOs: fifo[k, head[k]:tail[k]] is queue k, filled as copies are issued (the i-th
    # copy issued in this run as i, its bytes left rem[i]); completing the front one is moving head[k].
    fifo = np.empty((2, n), dtype=np.int64)
    rem = np.empty(n, dtype=np.float64)
    issued = 0
    h_done = np.empty(n, dtype=np.int64)
    h_pos = np.empty(n, dtype=np.int64)
    h_kind = np.empty(n, dtype=np.int64)
    size = 0
    head = np.zeros(2, dtype=np.int64)
    tail = np.zeros(2, dtype=np.int64)
    for t in range(t0, n_ops + 1):
        empty = head[0] == tail[0] and head[1] == tail[1]
        if may_stop and empty and t > dirty_hi and t > t0 and empty_out[t]:
            return t
        empty_out[t] = empty
        c = first[t]
        while c >= 0:  # copy-starts after op t - 1
            k = copy_kind[c]
            fifo[k, tail[k]] = issued
            rem[issued] = copy_bytes[c]
            issued += 1
            size = _heap_push(h_done, h_pos, h_kind, size, copy_done[c], tail[k], k)
            tail[k] += 1
            c = nxt[c]
        # the last FIFO position in each queue of a copy op t waits for (-1: none); every copy
        # due at t was issued before t, so it is in the heap now
        wait0 = -1
        wait1 = -1
        while size > 0 and h_done[0] <= t:
            if h_kind[0] == 0:
                wait0 = max(wait0, h_pos[0])
            else:
                wait1 = max(wait1, h_pos[0])
            size = _heap_pop(h_done, h_pos, h_kind, size)
        stall = 0.0
        if wait0 >= head[0] or wait1 >= head[1]:  # a copy op t waits for is not done yet
            stall = _drain_until(fifo, head, tail, rem, bw, wait0, wait1)  # copy-dones
        stall_out[t] = stall
        if t < n_ops:  # op t, draining the queues in its idle slow-memory time
            e = runtime_elapsed(compute_time[t], slow_time[t], fast_time[t], overhead[t])
            elapsed_out[t] = e
            idle = e - slow_time[t]
            if idle > 0.0 and (head[0] < tail[0] or head[1] < tail[1]):
                _drain_for(fifo, head, tail, rem, bw, idle)
    return n_ops + 1


@njit(cache=True)
def simulate(compute_time, slow_time, fast_time, overhead, slow_bw, copy_start, copy_done, copy_bytes,
             copy_kind, elapsed_out, stall_out):
    """Program time (s) under MSA's runtime model; see the module docstring.

    ``compute_time``, ``slow_time``, ``fast_time``: float[T] seconds; ``overhead``: seconds per op
    (a scalar); ``slow_bw``: bytes/s the copies drain at; ``copy_start``, ``copy_done``: int[C],
    ``-1 <= start < done <= T``; ``copy_bytes``: [C] bytes; ``copy_kind``: int[C], 0 prefetch,
    1 eviction. Writes each op's elapsed time to ``elapsed_out[T]`` and the stall before each op
    to ``stall_out[T + 1]`` (``stall_out[T]``: waiting for the copies done at the end).
    Returns ``sum(elapsed_out) + sum(stall_out)``. Raises ``ValueError`` on malformed input.
    """
    per_op = np.full(compute_time.shape[0], np.float64(overhead))
    return simulate_per_op(compute_time, slow_time, fast_time, per_op, slow_bw, copy_start, copy_done,
                           copy_bytes, copy_kind, elapsed_out, stall_out)
