"""The simulator: numba kernels over plain numpy arrays.

This package's top level is MallocGame-v0's simulator (whole-live-range placement, the shared gap
search and candidate ranking); :mod:`mallocgym.sim.v1` holds v1's rules (segments, prefetches,
evictions), :mod:`mallocgym.sim.msa` XLA MSA's choices on v1, and :mod:`mallocgym.sim.canonical`
v0's canonical decision mode. MSA's runtime cost model, which v1's rules price with, is
:mod:`mallocgym.pricing.runtime`; the observation kernels are :mod:`mallocgym.features`.

Nothing here knows about Gymnasium. A scenario is compiled once into a :class:`Static` tuple of
read-only arrays (workload, cost model, decision order); a game position is a :class:`State`
tuple of arrays that the kernels mutate in place and that copies cheaply (``clone_state``).

Fast memory is searched through a time-bucketed index of the placed buffers: bucket ``k`` holds
every placed buffer live during ops ``[k*W, (k+1)*W)``, kept sorted by offset (a CSR segment per
bucket, sized up front from the workload). A gap query over ``[s, e]`` walks only the buckets it
touches, merging their sorted segments, so it looks at the placed buffers near that window in
time, in address order, without sorting and never at every placed buffer.

Cost model (per op ``t``; see docs/cost_model.md)::

    compute_t = max(flops_t / peak_flops, transcendentals_t / peak_transcendentals)
    mem_t     = slow_bytes_t / slow_bw + fast_bytes_t / fast_bw
    elapsed_t = max(compute_t, mem_t) + op_overhead
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from .._clock import CHECK_EVERY, NO_DEADLINE, past
from .._jit import frozen_record, read_only_record
from ..hardware import Hardware
from ..workloads.core import Workload

__all__ = [
    "Static", "State", "compile_scenario", "new_state", "copy_state", "buffer_order",
    "find_candidates", "place", "marginal_benefit", "run_greedy", "first_fit_offset", "copy_into",
    "first_conflict", "SLOW", "ORDERS",
]

SLOW = -1
ORDERS = ("boundedness", "start", "size", "spatial")

Static = read_only_record(namedtuple("Static", [
    "size",           # int64[N] bytes
    "start",          # int64[N] first live op
    "end",            # int64[N] last live op (inclusive)
    "access_ptr",     # int64[N+1] CSR pointers into access_*
    "access_op",      # int64[A]
    "access_bytes",   # int64[A]
    "compute_time",   # float64[T] max(flops/peak, transcendentals/rate), seconds
    "order",          # int64[N] the decision order (buffer ids)
    "benefit",        # float64[N] time saved by placing each buffer alone, seconds
    "params",         # float64[4]: slow_bw, fast_bw, op_overhead, time_all_slow
    "iparams",        # int64[4]: capacity, alignment, bucket width W, number of buckets
    "bucket_ptr",     # int64[n_buckets+1] CSR segment of each time bucket in the index arrays
]))   # pickled or copied: read-only again (one numba type)

State = namedtuple("State", [
    "offsets",        # int64[N] -1 = slow (or not yet decided), else byte offset
    "slow_bytes",     # int64[T] bytes each op moves from/to slow memory
    "fast_bytes",     # int64[T] bytes each op moves from/to fast memory
    "op_time",        # float64[T] elapsed time of each op, seconds
    "bucket_len",     # int64[n_buckets] placed buffers in each time bucket
    "bucket_off",     # int64[bucket_ptr[-1]] their offsets, sorted within each bucket's segment
    "bucket_buf",     # int64[bucket_ptr[-1]] their buffer ids, aligned with bucket_off
    "counters",       # int64[3]: step (buffers decided), buffers placed, ops compute-bound
    "totals",         # float64[2]: program time (s), bytes placed
])

# counters / totals slots
STEP, PLACED, COMPUTE_BOUND = 0, 1, 2
TIME, PLACED_BYTES = 0, 1
# params / iparams slots
SLOW_BW, FAST_BW, OVERHEAD, TIME_ALL_SLOW = 0, 1, 2, 3
CAPACITY, ALIGNMENT, BUCKET_W, N_BUCKETS = 0, 1, 2, 3


# ---------------------------------------------------------------------------------- cost model
@njit(cache=True, inline="always")
def op_elapsed(compute, slow_b, fast_b, slow_bw, fast_bw, overhead):
    mem = slow_b / slow_bw + fast_b / fast_bw
    return (compute if compute >= mem else mem) + overhead


@njit(cache=True, inline="always")
def is_compute_bound(compute, slow_b, fast_b, slow_bw, fast_bw):
    return compute >= slow_b / slow_bw + fast_b / fast_bw


@njit(cache=True)
def move_bytes(st, state, b, to_fast):
    """Move buffer ``b``'s accesses to fast memory (``to_fast``) or back; return the time delta.

    Updates per-op bytes, per-op times, the program time and the compute-bound count.
    """
    slow_bw, fast_bw, overhead = st.params[SLOW_BW], st.params[FAST_BW], st.params[OVERHEAD]
    delta = 0.0
    for a in range(st.access_ptr[b], st.access_ptr[b + 1]):
        t = st.access_op[a]
        n = st.access_bytes[a]
        c = st.compute_time[t]
        was_bound = is_compute_bound(c, state.slow_bytes[t], state.fast_bytes[t], slow_bw, fast_bw)
        if to_fast:
            state.slow_bytes[t] -= n
            state.fast_bytes[t] += n
        else:
            state.slow_bytes[t] += n
            state.fast_bytes[t] -= n
        new = op_elapsed(c, state.slow_bytes[t], state.fast_bytes[t], slow_bw, fast_bw, overhead)
        delta += new - state.op_time[t]
        state.op_time[t] = new
        now_bound = is_compute_bound(c, state.slow_bytes[t], state.fast_bytes[t], slow_bw, fast_bw)
        state.counters[COMPUTE_BOUND] += np.int64(now_bound) - np.int64(was_bound)
    state.totals[TIME] += delta
    return delta


@njit(cache=True)
def marginal_benefit(st, state, b):
    """Seconds saved by placing buffer ``b`` now (``>= 0``); the state is left unchanged."""
    time = state.totals[TIME]
    delta = move_bytes(st, state, b, True)
    move_bytes(st, state, b, False)
    state.totals[TIME] = time  # exact restore: no rounding drift from the round trip
    return -delta


# ---------------------------------------------------------------------------- the bucket index
@njit(cache=True)
def _register(st, state, b):
    """Insert placed buffer ``b`` into every time bucket it spans, keeping offsets sorted."""
    w = st.iparams[BUCKET_W]
    off = state.offsets[b]
    for k in range(st.start[b] // w, st.end[b] // w + 1):
        base = st.bucket_ptr[k]
        n = state.bucket_len[k]
        i = base + n
        while i > base and state.bucket_off[i - 1] > off:
            state.bucket_off[i] = state.bucket_off[i - 1]
            state.bucket_buf[i] = state.bucket_buf[i - 1]
            i -= 1
        state.bucket_off[i] = off
        state.bucket_buf[i] = b
        state.bucket_len[k] = n + 1


@njit(cache=True)
def overlapping_placed(st, state, s, e, out):
    """Write into ``out`` the placed buffers live at some op of ``[s, e]``; return their count."""
    w = st.iparams[BUCKET_W]
    m = 0
    for k in range(s // w, e // w + 1):
        base = st.bucket_ptr[k]
        for i in range(base, base + state.bucket_len[k]):
            j = state.bucket_buf[i]
            if st.start[j] <= e and st.end[j] >= s:
                # A buffer sits in every bucket it spans: count it in the first shared one only.
                first = st.start[j] if st.start[j] > s else s
                if first // w == k:
                    out[m] = j
                    m += 1
    return m


_MERGE_LIMIT = 16  # a query spanning more buckets collects and sorts instead of merging


@njit(cache=True)
def free_gaps(st, state, s, e, ids, gap_lo, gap_hi):
    """Free address ranges ``[gap_lo, gap_hi)`` of fast memory over ops ``[s, e]``, by address.

    Sweeps the placed buffers live in ``[s, e]`` in offset order: the sorted segments of the
    buckets the window touches are merged (a buffer met twice changes nothing). ``ids`` is
    scratch of length N. Returns the number of gaps.
    """
    capacity = st.iparams[CAPACITY]
    w = st.iparams[BUCKET_W]
    k0 = s // w
    nk = e // w - k0 + 1
    cursor = 0
    n = 0
    if nk <= _MERGE_LIMIT:
        pos = np.empty(nk, dtype=np.int64)
        stop = np.empty(nk, dtype=np.int64)
        for q in range(nk):
            pos[q] = st.bucket_ptr[k0 + q]
            stop[q] = pos[q] + state.bucket_len[k0 + q]
        while True:
            best = -1
            best_off = 0
            for q in range(nk):
                if pos[q] < stop[q] and (best < 0 or state.bucket_off[pos[q]] < best_off):
                    best = q
                    best_off = state.bucket_off[pos[q]]
            if best < 0:
                break
            j = state.bucket_buf[pos[best]]
            pos[best] += 1
            if st.start[j] > e or st.end[j] < s:
                continue
            if best_off > cursor:
                gap_lo[n] = cursor
                gap_hi[n] = best_off
                n += 1
            top = best_off + st.size[j]
            if top > cursor:
                cursor = top
    else:
        m = overlapping_placed(st, state, s, e, ids)
        lo = np.empty(m, dtype=np.int64)
        for i in range(m):
            lo[i] = state.offsets[ids[i]]
        order = np.argsort(lo)
        for i in range(m):  # the same sweep as above, written out: a helper returning
            j = ids[order[i]]  # (cursor, n) measured 3.5x slower in the 10k-buffer benchmark
            a = state.offsets[j]
            if a > cursor:
                gap_lo[n] = cursor
                gap_hi[n] = a
                n += 1
            top = a + st.size[j]
            if top > cursor:
                cursor = top
    if cursor < capacity:
        gap_lo[n] = cursor
        gap_hi[n] = capacity
        n += 1
    return n


@njit(cache=True)
def _insert_candidate(k, n, off, glo, ghi, cand_off, cand_lo, cand_hi):
    """Insert into the best-fit-sorted top-``k`` list (key: gap length, then offset)."""
    length = ghi - glo
    i = n if n < k else k
    while i > 0:
        prev_len = cand_hi[i - 1] - cand_lo[i - 1]
        if prev_len < length or (prev_len == length and cand_off[i - 1] <= off):
            break
        i -= 1
    if i >= k:
        return n
    last = n if n < k else k - 1
    for j in range(last, i, -1):
        cand_off[j] = cand_off[j - 1]
        cand_lo[j] = cand_lo[j - 1]
        cand_hi[j] = cand_hi[j - 1]
    cand_off[i] = off
    cand_lo[i] = glo
    cand_hi[i] = ghi
    return n + 1 if n < k else k


@njit(cache=True)
def find_candidates(st, state, b, k, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi):
    """Candidate offsets for buffer ``b``, best fit first; return ``(count, max_gap, free_bytes)``.

    From every free gap over ``b``'s live range that fits it: the lowest aligned offset and, when
    different, the highest aligned offset (touching the buffer above). Sorted by gap length,
    then offset; the first ``k`` are kept in ``cand_off`` (with their gap in ``cand_lo/hi``).
    ``max_gap`` and ``free_bytes`` describe all gaps over the live range, fitting or not.
    """
    size = st.size[b]
    align = st.iparams[ALIGNMENT]
    n_gaps = free_gaps(st, state, st.start[b], st.end[b], ids, gap_lo, gap_hi)
    n = 0
    max_gap = 0
    free = 0
    for g in range(n_gaps):
        glo, ghi = gap_lo[g], gap_hi[g]
        length = ghi - glo
        free += length
        if length > max_gap:
            max_gap = length
        low = (glo + align - 1) // align * align
        if low + size > ghi:
            continue
        n = _insert_candidate(k, n, low, glo, ghi, cand_off, cand_lo, cand_hi)
        high = (ghi - size) // align * align
        if high != low:
            n = _insert_candidate(k, n, high, glo, ghi, cand_off, cand_lo, cand_hi)
    return n, max_gap, free


@njit(cache=True)
def place(st, state, b, offset):
    """Put buffer ``b`` in fast memory at ``offset`` (the caller checked it is free)."""
    state.offsets[b] = offset
    _register(st, state, b)
    state.counters[PLACED] += 1
    state.totals[PLACED_BYTES] += st.size[b]
    return move_bytes(st, state, b, True)


@njit(cache=True)
def first_fit_offset(st, state, b, ids, gap_lo, gap_hi):
    """The lowest aligned offset where buffer ``b`` fits over its live range, or -1."""
    size = st.size[b]
    align = st.iparams[ALIGNMENT]
    n = free_gaps(st, state, st.start[b], st.end[b], ids, gap_lo, gap_hi)
    for g in range(n):  # gaps come in address order
        low = (gap_lo[g] + align - 1) // align * align
        if low + size <= gap_hi[g]:
            return low
    return -1


@njit(cache=True)
def run_greedy(st, state, skip_no_benefit, first_fit=False, deadline=NO_DEADLINE):
    """Play the rest of the episode greedily; return the final program time (NaN, the state
    part-played, once ``deadline`` has passed: absolute nanoseconds on :mod:`mallocgym._clock`'s
    clock, read every :data:`~mallocgym._clock.CHECK_EVERY` buffers).

    Each buffer, in ``st.order`` from the current step, goes to its best-fit candidate
    (MallocGame's candidate 0) or, with ``first_fit``, to the lowest free aligned offset; it stays
    slow when nothing fits. ``skip_no_benefit`` leaves slow the buffers whose placement would
    save no time now.
    """
    n = st.size.shape[0]
    ids = np.empty(n, dtype=np.int64)
    gap_lo = np.empty(n + 1, dtype=np.int64)
    gap_hi = np.empty(n + 1, dtype=np.int64)
    cand_off = np.empty(1, dtype=np.int64)
    cand_lo = np.empty(1, dtype=np.int64)
    cand_hi = np.empty(1, dtype=np.int64)
    for i in range(state.counters[STEP], n):
        if i % CHECK_EVERY == 0 and past(deadline):
            return np.nan
        b = st.order[i]
        state.counters[STEP] = i + 1
        if skip_no_benefit and marginal_benefit(st, state, b) <= 0.0:
            continue
        if first_fit:
            off = first_fit_offset(st, state, b, ids, gap_lo, gap_hi)
        else:
            count, _, _ = find_candidates(st, state, b, 1, ids, gap_lo, gap_hi, cand_off, cand_lo, cand_hi)
            off = cand_off[0] if count > 0 else -1
        if off >= 0:
            place(st, state, b, off)
    return state.totals[TIME]


# ----------------------------------------------------------------------------- set-up (Python)
@njit(cache=True)
def _static_benefits(st, state):
    n = st.size.shape[0]
    out = np.empty(n, dtype=np.float64)
    for b in range(n):
        out[b] = marginal_benefit(st, state, b)
    return out


def buffer_order(benefit: np.ndarray, size: np.ndarray, start: np.ndarray, end: np.ndarray,
                 order: str = "boundedness") -> np.ndarray:
    """The decision order (buffer ids).

    ``"boundedness"`` is XLA MSA's: benefit / sqrt(size) descending, then size descending,
    duration descending, start, id. ``"start"``: start, then size descending, id.
    ``"size"``: size descending, then start, id. ``"spatial"``: size descending, then
    duration descending, id (the heap simulator's spatial order, which MSA uses when given no
    comparator: ``GlobalDecreasingSizeBestFitHeap::GetSpatialBufferIntervalCompare``).
    """
    ids = np.arange(size.shape[0])
    duration = end - start + 1
    if order == "boundedness":
        keys = (ids, start, -duration, -size, -(benefit / np.sqrt(size)))
    elif order == "start":
        keys = (ids, -size, start)
    elif order == "size":
        keys = (ids, start, -size)
    elif order == "spatial":
        keys = (ids, -duration, -size)
    else:
        raise ValueError(f"unknown order {order!r}; expected one of {', '.join(ORDERS)}")
    return np.lexsort(keys).astype(np.int64)


def _bucket_width(workload: Workload) -> int:
    """Mean live duration, so a typical buffer spans about two buckets."""
    duration = workload.end - workload.start + 1
    return max(1, int(round(float(duration.mean()))))


def compute_times(workload: Workload, hardware: Hardware) -> np.ndarray:
    """Each op's compute time (s): ``max(flops / peak_flops, transcendentals / rate)``."""
    return np.maximum(workload.flops / hardware.peak_flops, workload.transcendentals / hardware.transcendental_rate)


def compile_scenario(workload: Workload, hardware: Hardware, order: str = "boundedness") -> Static:
    """Arrays of the scenario that stay fixed during an episode (``hardware.fast_capacity`` set)."""
    if hardware.fast_capacity is None:
        raise ValueError("hardware.fast_capacity is unset; resolve the scenario's hardware first")
    compute = compute_times(workload, hardware)
    width = _bucket_width(workload)
    n_buckets = (workload.num_ops + width - 1) // width
    params = np.array([hardware.slow_bw, hardware.fast_bw, hardware.op_overhead, 0.0])
    iparams = np.array([hardware.fast_capacity, hardware.alignment, width, n_buckets], dtype=np.int64)
    # Bucket k can hold at most the buffers whose live range touches it.
    spans = np.zeros(n_buckets + 1, dtype=np.int64)
    np.add.at(spans, workload.start // width, 1)
    np.add.at(spans, workload.end // width + 1, -1)
    bucket_ptr = np.zeros(n_buckets + 1, dtype=np.int64)
    bucket_ptr[1:] = np.cumsum(np.cumsum(spans)[:-1])
    st = Static(workload.size, workload.start, workload.end, workload.access_ptr, workload.access_op,
                workload.access_bytes, compute, np.arange(workload.num_buffers, dtype=np.int64),
                np.zeros(workload.num_buffers), params, iparams, bucket_ptr)
    state = new_state(st)
    params[TIME_ALL_SLOW] = state.totals[TIME]
    benefit = _static_benefits(st, state)
    ordering = buffer_order(benefit, workload.size, workload.start, workload.end, order)
    return frozen_record(st._replace(order=ordering, benefit=benefit))   # one type however built


def new_state(st: Static) -> State:
    """The start of an episode: every buffer in slow memory, nothing decided."""
    n, t = st.size.shape[0], st.compute_time.shape[0]
    n_buckets, slots = int(st.iparams[N_BUCKETS]), int(st.bucket_ptr[-1])
    slow = np.zeros(t, dtype=np.int64)
    np.add.at(slow, st.access_op, st.access_bytes)
    fast = np.zeros(t, dtype=np.int64)
    slow_bw, fast_bw, overhead = st.params[SLOW_BW], st.params[FAST_BW], st.params[OVERHEAD]
    mem = slow / slow_bw + fast / fast_bw
    op_time = np.maximum(st.compute_time, mem) + overhead
    bound = int(np.count_nonzero(st.compute_time >= mem))
    return State(
        offsets=np.full(n, SLOW, dtype=np.int64), slow_bytes=slow, fast_bytes=fast, op_time=op_time,
        bucket_len=np.zeros(n_buckets, dtype=np.int64),
        bucket_off=np.zeros(slots, dtype=np.int64), bucket_buf=np.zeros(slots, dtype=np.int64),
        counters=np.array([0, 0, bound], dtype=np.int64),
        totals=np.array([float(op_time.sum()), 0.0]),
    )


def copy_state(state: State) -> State:
    """An independent copy (array copies only)."""
    return State(*(a.copy() for a in state))


@njit(cache=True)
def copy_into(src, dst):
    """Overwrite ``dst`` with ``src`` (states of the same scenario) without allocating."""
    dst.offsets[:] = src.offsets
    dst.slow_bytes[:] = src.slow_bytes
    dst.fast_bytes[:] = src.fast_bytes
    dst.op_time[:] = src.op_time
    dst.bucket_len[:] = src.bucket_len
    dst.bucket_off[:] = src.bucket_off
    dst.bucket_buf[:] = src.bucket_buf
    dst.counters[:] = src.counters
    dst.totals[:] = src.totals


@njit(cache=True)
def first_conflict(st, state, offsets):
    """The first pair ``(i, j)``, ``i < j``, of fast buffers that overlap in time and address.

    Buffers are inserted in id order; the pair reported has the smallest ``j``, then the
    smallest ``i``. Returns ``(-1, -1)`` when there is none. Uses (and fills) ``state``'s index.
    """
    n = st.size.shape[0]
    ids = np.empty(n, dtype=np.int64)
    for j in range(n):
        off = offsets[j]
        if off < 0:
            continue
        m = overlapping_placed(st, state, st.start[j], st.end[j], ids)
        best = -1
        for q in range(m):
            i = ids[q]
            if state.offsets[i] < off + st.size[j] and off < state.offsets[i] + st.size[i]:
                if best < 0 or i < best:
                    best = i
        if best >= 0:
            return best, j
        state.offsets[j] = off
        _register(st, state, j)
    return -1, -1
