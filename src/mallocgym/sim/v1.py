"""MallocGame-v1's rules as numba kernels: per-use segments, prefetches and evictions.

A buffer's **definition** is its first write access (op ``d``); a buffer with no write is a
**program input**, in slow memory from its live-range start ``s``. Its **use points** are the
distinct ops of its other accesses after ``d`` (for an input: all its accesses), in op order; a
**segment** runs from the definition (or the previous use point, or ``s - 1`` for an input's
first) to a use point, and is priced by one decision. A defined buffer with no later access has
one segment ending at ``d`` itself. An **output** is one of ``workload.outputs`` (by default every
buffer live at the last op).

Decisions, one per segment (kinds): ``SLOW`` (the use reads slow memory), ``FAST`` (first
segment of a defined buffer: produced in fast memory at an offset and kept to the use; later
segment: kept at the previous segment's offset up to this use), ``PREFETCH`` (an async copy from
slow memory issued after op ``p`` and done before the use, the chunk at offset ``o`` held over
``[p + 1, use]``; ``p`` >= the op after which a slow copy exists and >= the start of the run of
``SLOW`` segments just before this one, so a prefetch may be issued before earlier uses that read
slow memory).

**Evictions are added by the rules**: a value produced fast has no slow copy; the first time after
its initial run of ``FAST`` segments that a slow copy is needed (a ``SLOW`` use at ``u``: done by
``u``; a ``PREFETCH`` after op ``p``: done by ``p``; an output at the end: by ``T``) an eviction
copy is issued after the definition op and done before op ``e`` (MSA's ``Evict``):
``e = min(max(preferred, l + 1), needed)`` where ``l`` is the last fast use and ``preferred`` the
first op whose all-slow interval from ``d`` covers ``preferred_ratio`` x the copy time; then
moved earlier, down to ``l + 1``, until the chunk can be held at its offset up to ``e - 1``. An
undecided segment is priced as ``SLOW`` (with the eviction that implies), so the step rewards sum
to the return. A value is evicted at most once: afterwards a slow copy exists.

Time is MSA's runtime model (:mod:`mallocgym.pricing.runtime`), recomputed after every decision.

Fast memory is a list of **chunks** ``(first op, last op, offset, buffer)``, at most one per
segment (a kept segment extends its predecessor's chunk). Free gaps over an op window sweep the
chunks live in it in offset order.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from .._jit import frozen_record, read_only_record
from ..hardware import Hardware
from ..workloads.core import Workload
from ..pricing.runtime import EVICTION, PREFETCH, n_blocks, simulate, simulate_linked, sum_blocks, sum_in_order
from . import ORDERS, _insert_candidate, buffer_order, compute_times, copy_budget

__all__ = ["Static1", "State1", "compile_v1", "new_state", "copy_state", "copy_into", "UNDECIDED", "SLOW",
           "FAST", "PREFETCH_SEG", "DEF_GROUP", "segment_options", "apply", "apply_rules", "window_candidates",
           "prefetch_starts", "current_time", "flight_bytes"]

UNDECIDED, SLOW, FAST, PREFETCH_SEG = 0, 1, 2, 3
DEF_GROUP = -2  # acc_seg of an access priced by the buffer's production (the definition op's accesses)
NO_ACCESS = -1

Static1 = read_only_record(namedtuple("Static1", [
    "size",          # int64[N] bytes
    "start",         # int64[N] first live op
    "end",           # int64[N] last live op
    "access_ptr",    # int64[N+1] CSR into access_*
    "access_op",     # int64[A]
    "access_bytes",  # int64[A]
    "acc_seg",       # int64[A] global segment pricing the access, DEF_GROUP, or NO_ACCESS (never)
    "def_op",        # int64[N] definition op, -1 for a program input
    "is_output",     # int64[N] 1 for a program output (workload.output_mask)
    "seg_ptr",       # int64[N+1] CSR: buffer b's segments are seg_ptr[b]:seg_ptr[b+1], in time order
    "seg_use",       # int64[S] the use op ending each segment
    "seg_prev",      # int64[S] the op it starts after (definition, previous use, or start - 1)
    "seg_buf",       # int64[S] owning buffer
    "order",         # int64[S] decision order: buffers in MSA's order, each buffer's segments in time order
    "compute_time",  # float64[T]
    "overhead",      # float64[T] per-op overhead (the hardware's, on every op)
    "cum_slow",      # float64[T+1] prefix sums of each op's all-slow elapsed time
    "params",        # float64[8]: slow_bw, fast_bw, overhead, time_all_slow, min, preferred, max ratios
    "iparams",       # int64[4]: capacity, alignment, J (prefetch start times), K (offsets per window)
]))   # pickled or copied: read-only again (one numba type)

State1 = namedtuple("State1", [
    "seg_kind",      # int64[S] UNDECIDED / SLOW / FAST / PREFETCH_SEG
    "seg_off",       # int64[S] fast offset (FAST, PREFETCH), else -1
    "seg_pstart",    # int64[S] prefetch issued after this op (PREFETCH only)
    "seg_chunk",     # int64[S] the chunk holding the segment, -1
    "ev_done",       # int64[N] eviction done before this op, -1 = none
    "ev_base",       # int64[N] the evicted chunk's last op before the eviction extended it
    "ev_chunk",      # int64[N] the chunk the eviction holds, -1
    "ev_final",      # int64[N] 1 once the eviction can no longer change
    "ch_lo", "ch_hi", "ch_off", "ch_buf",  # int64[S] chunks (ids = the segment that opened them)
    "active",        # int64[S] ids of the chunks opened so far: the first counters[ACT_SORTED] sorted by
                     #   offset (then id), the later ones in the order opened (merged in when a scan
                     #   of all chunks needs them in order, or too many for live_chunks)
    "ch_rank",       # int64[S] each chunk's place in ``active`` once merged in (-1: opened since the last merge)
    "rank_bits",     # int64[S // 64 + 1 + S // 4096 + 1] scratch of live_chunks: a bit per rank, then a bit per
                     #   word of those that is not zero (from index S // 64 + 1); all zero between calls
    "cp_start",      # int64[S + N] the copies, by key: prefetches (key = segment id) and evictions (key =
    "cp_done",       #   S + buffer id), issued after op cp_start, done before op cp_done, cp_bytes bytes,
    "cp_bytes",      #   cp_kind 0 prefetch / 1 eviction, -1 not listed; counters[N_COPIES] are listed.
    "cp_kind",       #   The runtime model reads them in its queue order, (start, done, key): the order
    "cp_first",      #   it gives the copies evaluate_v1 builds (by key), so float sums are equal to the
    "cp_next",       #   last bit. cp_first[T + 1]: the first copy issued after op p at p + 1 (-1 none),
                     #   cp_next[S + N] the next one issued after the same op (-1 none), in (done, key)
                     #   order: a copy is added or removed without moving the others (copy_list)
    "cp_flight",     # int64[T+3] Fenwick tree of the copies' bytes, + at issue op + 1, - at done op + 1: the
                     #   prefix sum through op p + 1 is the bytes in flight over op p (flight_bytes)
    "slow_bytes",    # int64[T]
    "fast_bytes",    # int64[T]
    "slow_time",     # float64[T] slow_bytes / slow_bw
    "fast_time",     # float64[T] fast_bytes / fast_bw
    "elapsed",       # float64[T] last simulated per-op elapsed time
    "stall",         # float64[T+1] last simulated stall before each op (and at the end)
    "sim_empty",     # bool[T+1] both copy queues empty at the start of iteration t (last simulation)
    "blk_time",      # float64[T // BLOCK + 1] program time of each block of simulation iterations
    "blk_stall",     # float64[T // BLOCK + 1] stall time of each block (runtime.sum_blocks)
    "ix_head",       # int32[B] chunk index: the first registration in each time bucket of IX_WIDTH ops (-1 none)
    "ix_tail",       # int32[B] the last registration in each bucket (-1 none)
    "ix_nxt",        # int32[R] the registration after it in the same bucket (-1 none): a bucket lists its
                     #   chunks' first registrations (newest first), then the later ones (in the order made),
                     #   so a walk that needs a chunk once stops at the first later one past its first bucket
    "ix_cid",        # int32[R] the chunk registered: c in its first bucket, ~c (< 0) in the later ones
    "ix_meta",       # int64[2S + B * (1 + 2 * UNION_CAP)] the index's other data, in one array (each array of
                     #   the state costs every kernel that takes the state: one for all of these):
                     #   [c] the op chunk c is registered through (-1: not yet; see _register);
                     #   [S + c] the last bucket whose union counts chunk c (-1: none yet);
                     #   from 2S + k * (1 + 2 * UNION_CAP), bucket k's union of occupied offsets, of
                     #   the chunks MSA holds at some op of the bucket: how many disjoint intervals
                     #   (-1: more than UNION_CAP, not kept), then each one's first and one-past-last
                     #   offset, in offset order, touching ones merged. Kept after each decision
                     #   (_sync_unions), a function of the chunks: a long window's middle buckets
                     #   are read as a few intervals (mallocgym.sim.msa._fit_by_unions); then, from
                     #   NB = 2S + B * (1 + 2 * UNION_CAP), the narrow index (see _narrow_sync): [NB] its
                     #   bucket width (0: none, or no longer kept), [NB + 1] its buckets B', [NB + 2] its
                     #   registrations made, [NB + 3] their room; from NB + 5 + NB_CHUNK * c, chunk c's:
                     #   the narrow bucket it was last registered in as its hold's end (-1: none yet), the
                     #   last narrow bucket whose whole union counts it, first op << 32 | MSA's last op,
                     #   offset * (capacity + 1) + end, buffer (a walk reads them together); from NB + 5
                     #   + NB_CHUNK * S + k * NARROW_STRIDE, narrow bucket k's first registration (-1 none),
                     #   its registrations, and its whole union (as above) of the chunks MSA holds at every
                     #   op of the bucket
    "ix_count",      # int32[B] registrations in each bucket
    "image",         # float64[A, B] fast-memory occupancy over (address, time) bins, kept up to date as
                     #   chunks change (A = B = 0: not kept); see _paint_image
    "rs_start",      # int64[S] MSA's copy budget (mallocgym.sim.copy_budget): the prefetches in the order
    "rs_end",        #   added, issued after op rs_start, done before op rs_end, rs_amount seconds of copying;
    "rs_amount",     #   rs_count[0] of them; rs_delay[T+1] the earlier copies' leftover at each op; their
    "rs_count",      #   start order a linked list (rs_next[S], rs_first / rs_last[T+1] per start op + 1,
    "rs_delay",      #   rs_tree: an OR tree over the start ops). Every prefetch is added as it is decided,
    "rs_next",       #   so MSA's choice (the env's MSA action) is a function of the state.
    "rs_first",
    "rs_last",
    "rs_tree",
    "touched",       # int64[1 + DIRTY_LIST]: the simulation iterations changed since the last simulation,
                     #   touched[0] of them in touched[1:] (-1: more than fit; then only the range
                     #   counters[DIRTY]..counters[DIRTY_HI] is known): current_time re-simulates around each
    "counters",      # int64[10]: decisions made (position in order), chunks opened, forced, chosen, copies,
                     #   the first and the last simulation iteration a change since the last simulation
                     #   touches, the chunk index's bucket width and registrations used, how many of
                     #   ``active`` are in offset order (the rest were appended since)
    "totals",        # float64[3]: program time, copy bytes, stall time
])

POS, N_CHUNKS, FORCED, CHOSEN, N_COPIES, DIRTY, DIRTY_HI, IX_WIDTH, IX_USED, ACT_SORTED = range(10)
DIRTY_LIST = 32  # changed iterations listed one by one between two simulations (a step makes a few)
RANK_SORT_MIN = 128  # live_chunks orders a window's chunks by their place in ``active`` from this many registrations
RANK_TAIL_MIN, RANK_TAIL_SHIFT = 256, 5  # ... merging ``active`` first once more than max(MIN, chunks >> SHIFT) are unmerged
INDEX_DENSITY = 16  # the chunk index's bucket width keeps registrations near this many per buffer and segment
UNION_CAP = 24  # occupied offset intervals kept per index bucket (more: the bucket's union is not kept)
UNION_STRIDE = 1 + 2 * UNION_CAP  # a bucket's words of its union in ``ix_meta``
NARROW_STARTS = 32  # the narrow buckets' width: about this many segments' uses per narrow bucket
NARROW_MIN = 4  # ... kept where a wide bucket spans at least this many narrow ones (large programs)
NARROW_STRIDE = 2 + UNION_STRIDE  # a narrow bucket's words in ``ix_meta``: head, count, whole union
NW, NB_COUNT, NB_USED, NB_ROOM, NB_HEADER = range(5)  # the narrow index's header words in ``ix_meta``
# a chunk's words in the narrow index (NB_CHUNK of them, together: one or two cache lines a chunk met)
NC_REG, NC_WHOLE, NC_SPAN, NC_IV, NC_BUF, NB_CHUNK = range(6)
TIME, COPY_BYTES, STALL = 0, 1, 2
SLOW_BW, FAST_BW, OVERHEAD, TIME_ALL_SLOW, MIN_RATIO, PREF_RATIO, MAX_RATIO = 0, 1, 2, 3, 4, 5, 6
CAPACITY, ALIGNMENT, N_STARTS, N_CAND = 0, 1, 2, 3
NO_START = -2  # no prefetch start (-1 is one: issued before op 0)
BUDGET_EPS = 1e-12  # the copy budget's tolerance, relative to the all-slow program time


# ------------------------------------------------------------------------------ set-up (Python)
def segments_of(workload: Workload):
    """Definition op, output flag, segments and the segment pricing each access.

    Returns ``def_op[N]``, ``is_output[N]``, ``seg_ptr[N+1]``, ``seg_use[S]``, ``seg_prev[S]``,
    ``acc_seg[A]`` (see :class:`Static1`).
    """
    is_output = workload.output_mask.astype(np.int64)
    def_op, seg_ptr, seg_use, seg_prev, acc_seg = _segments(
        np.asarray(workload.access_ptr, np.int64), np.asarray(workload.access_op, np.int64),
        np.asarray(workload.access_write, np.bool_), np.asarray(workload.start, np.int64))
    return def_op, is_output, seg_ptr, seg_use, seg_prev, acc_seg


@njit(cache=True)
def _segments(ptr, ops, write, start):
    """:func:`segments_of`'s arrays in one pass over the accesses (a buffer's use points: the
    distinct ops of its accesses after the definition, or all of them for a program input; a
    defined buffer with none has one segment ending at the definition)."""
    n = start.shape[0]
    def_op = np.full(n, -1, np.int64)
    seg_ptr = np.zeros(n + 1, np.int64)
    acc_seg = np.full(ops.shape[0], NO_ACCESS, np.int64)
    seg_use = np.empty(ops.shape[0] + n, np.int64)
    seg_prev = np.empty(ops.shape[0] + n, np.int64)
    m = 0
    for b in range(n):
        lo, hi = ptr[b], ptr[b + 1]
        d = -1
        for a in range(lo, hi):
            if write[a] and (d < 0 or ops[a] < d):
                d = ops[a]
        uses = np.sort(ops[lo:hi])
        first = m
        prev = d if d >= 0 else start[b] - 1
        for i in range(uses.shape[0]):
            u = uses[i]
            if (d >= 0 and u <= d) or (m > first and seg_use[m - 1] == u):
                continue
            seg_use[m] = u
            seg_prev[m] = prev
            prev = u
            m += 1
        if d >= 0 and m == first:  # defined, never used later: one segment, the production itself
            seg_use[m] = d
            seg_prev[m] = d
            m += 1
        seg_ptr[b + 1] = m
        def_op[b] = d
        for a in range(lo, hi):
            t = ops[a]
            if d >= 0 and t == d:
                acc_seg[a] = DEF_GROUP
                continue
            # the segment of use point t (binary search among the buffer's uses)
            x, y = first, m
            while x < y:
                mid = (x + y) // 2
                if seg_use[mid] < t:
                    x = mid + 1
                else:
                    y = mid
            if x < m and seg_use[x] == t:
                acc_seg[a] = x
    return def_op, seg_ptr, seg_use[:m].copy(), seg_prev[:m].copy(), acc_seg


def compile_v1(workload: Workload, hardware: Hardware, order: str = "boundedness", *, n_starts: int = 4,
               n_candidates: int = 16, ratios: tuple[float, float, float] = (0.8, 1.5, 10.0)) -> Static1:
    """The fixed arrays of a v1 scenario (``hardware.fast_capacity`` set).

    ``ratios``: the prefetch picker's min / preferred / max overlap-to-copy ratios (MSA's test
    values by default). ``order`` orders the buffers as v0 does (``"boundedness"``: MSA's).
    """
    if hardware.fast_capacity is None:
        raise ValueError("hardware.fast_capacity is unset; resolve the scenario's hardware first")
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; expected one of {', '.join(ORDERS)}")
    compute = compute_times(workload, hardware)
    def_op, is_output, seg_ptr, seg_use, seg_prev, acc_seg = segments_of(workload)
    seg_buf = np.repeat(np.arange(workload.num_buffers, dtype=np.int64), np.diff(seg_ptr))
    if order == "boundedness":
        buffers = v1_order(workload, hardware, compute)
    else:  # v0's "start" and "size" orders do not read the benefits
        buffers = buffer_order(np.zeros(workload.num_buffers), workload.size, workload.start, workload.end, order)
    lens = np.diff(seg_ptr)[buffers]  # each buffer's segments in time order, the buffers in order
    seg_order = (np.repeat(seg_ptr[buffers] - np.cumsum(lens) + lens, lens)
                 + np.arange(int(lens.sum()), dtype=np.int64)).astype(np.int64)
    slow_bytes = np.zeros(workload.num_ops, np.int64)
    np.add.at(slow_bytes, workload.access_op, workload.access_bytes)
    slow_time = slow_bytes / hardware.slow_bw  # as current_time prices it
    # the all-slow run of the runtime model: its total (so all-slow's speedup is exactly 1.0) and
    # each op's elapsed time, whose prefix sums time the picker's intervals
    none = np.zeros(0, np.int64)
    all_slow = np.zeros(workload.num_ops)
    slow_total = simulate(compute, slow_time, np.zeros(workload.num_ops), hardware.op_overhead,
                          hardware.slow_bw, none, none, np.zeros(0), none, all_slow, np.zeros(workload.num_ops + 1))
    cum = np.zeros(workload.num_ops + 1)
    cum[1:] = np.cumsum(all_slow)
    params = np.array([hardware.slow_bw, hardware.fast_bw, hardware.op_overhead, slow_total,
                       ratios[0], ratios[1], ratios[2], 0.0])
    iparams = np.array([hardware.fast_capacity, hardware.alignment, n_starts, n_candidates], dtype=np.int64)
    st = Static1(workload.size, workload.start, workload.end, workload.access_ptr, workload.access_op,
                 workload.access_bytes, acc_seg, def_op, is_output, seg_ptr, seg_use, seg_prev, seg_buf,
                 seg_order, compute, np.full(workload.num_ops, float(hardware.op_overhead)), cum, params,
                 iparams)
    return frozen_record(st)   # the workload's arrays too (writable when it was unpickled): one type


def v1_order(workload: Workload, hardware: Hardware, compute: np.ndarray) -> np.ndarray:
    """MSA's order (``MemoryBoundednessBufferIntervalComparator::GetTuple``): memory boundedness
    descending, then size descending, duration descending, latest use ascending, start, id.

    Boundedness folds each access's benefit (the time its op saves with that access fast, which
    is ``memory - compute`` < 0 for a compute-bound op): added when both are positive, else the
    max; a program input starts the fold at 0; divided by sqrt(size).
    """
    slow_bw, fast_bw = hardware.slow_bw, hardware.fast_bw
    slow = np.zeros(workload.num_ops)
    np.add.at(slow, workload.access_op, workload.access_bytes / slow_bw)
    mem = slow + hardware.op_overhead
    n = workload.num_buffers
    bounded, latest = _boundedness(np.asarray(workload.access_ptr, np.int64), np.asarray(workload.access_op, np.int64),
                                   np.asarray(workload.access_bytes, np.int64),
                                   np.asarray(workload.access_write, np.bool_), np.asarray(workload.size, np.int64),
                                   np.asarray(workload.end, np.int64), mem, np.asarray(compute, np.float64),
                                   1.0 / slow_bw - 1.0 / fast_bw)
    ids = np.arange(n)
    duration = workload.end - workload.start
    return np.lexsort((ids, workload.start, latest, -duration, -workload.size, -bounded)).astype(np.int64)


@njit(cache=True)
def _boundedness(ptr, ops, nbytes, write, size, end, mem, compute, per_byte):
    """:func:`v1_order`'s fold of the accesses' benefits per buffer, divided by sqrt(size), and
    each buffer's latest access op (its end if it has none)."""
    n = size.shape[0]
    bounded = np.zeros(n)
    latest = np.zeros(n, np.int64)
    for b in range(n):
        lo, hi = ptr[b], ptr[b + 1]
        has_value = True  # a program input (no write) starts the fold at 0
        for a in range(lo, hi):
            if write[a]:
                has_value = False
        value = 0.0
        for a in range(lo, hi):
            t = ops[a]
            saved = nbytes[a] * per_byte
            benefit = saved if mem[t] > compute[t] else mem[t] - compute[t]
            if not has_value:
                value = benefit
                has_value = True
            elif value > 0 and benefit > 0:
                value += benefit
            else:
                value = max(value, benefit)
        if value == 0.0:
            value = 0.0  # as Python's ``value or 0.0``: no negative zero
        bounded[b] = value / np.sqrt(size[b])
        if hi > lo:
            m = ops[lo]
            for a in range(lo + 1, hi):
                if ops[a] > m:
                    m = ops[a]
            latest[b] = m
        else:
            latest[b] = end[b]
    return bounded, latest


def new_state(st: Static1, memory_bins: tuple[int, int] = (0, 0)) -> State1:
    """Every segment undecided (priced slow), no copies, no chunks. ``memory_bins`` ``(A, B)``:
    the occupancy image the state keeps (the env's observation; ``(0, 0)``: none)."""
    s, n, t = st.seg_use.shape[0], st.size.shape[0], st.compute_time.shape[0]
    slow = np.zeros(t, dtype=np.int64)
    np.add.at(slow, st.access_op, st.access_bytes)
    width = _index_width(st)
    state = State1(
        seg_kind=np.zeros(s, np.int64), seg_off=np.full(s, -1, np.int64), seg_pstart=np.full(s, -1, np.int64),
        seg_chunk=np.full(s, -1, np.int64), ev_done=np.full(n, -1, np.int64), ev_base=np.full(n, -1, np.int64),
        ev_chunk=np.full(n, -1, np.int64), ev_final=np.zeros(n, np.int64),
        ch_lo=np.zeros(s, np.int64), ch_hi=np.full(s, -1, np.int64), ch_off=np.zeros(s, np.int64),
        ch_buf=np.full(s, -1, np.int64), active=np.zeros(s, np.int64), ch_rank=np.full(s, -1, np.int64),
        rank_bits=np.zeros(s // 64 + 1 + s // 4096 + 1, np.int64),
        cp_start=np.zeros(s + n, np.int64), cp_done=np.zeros(s + n, np.int64), cp_bytes=np.zeros(s + n),
        cp_kind=np.full(s + n, -1, np.int64), cp_first=np.full(t + 1, -1, np.int64),
        cp_next=np.full(s + n, -1, np.int64), cp_flight=np.zeros(t + 3, np.int64),
        slow_bytes=slow, fast_bytes=np.zeros(t, np.int64), slow_time=slow / st.params[SLOW_BW], fast_time=np.zeros(t),
        elapsed=np.zeros(t), stall=np.zeros(t + 1), sim_empty=np.zeros(t + 1, np.bool_), blk_time=np.zeros(n_blocks(t)),
        blk_stall=np.zeros(n_blocks(t)), **_new_index(st, width), image=np.zeros(tuple(int(x) for x in memory_bins)),
        rs_start=np.zeros(s, np.int64), rs_end=np.zeros(s, np.int64), rs_amount=np.zeros(s), rs_count=np.zeros(1, np.int64),
        rs_delay=np.zeros(t + 1), rs_next=np.full(s, -1, np.int64), rs_first=np.full(t + 1, -1, np.int64),
        rs_last=np.full(t + 1, -1, np.int64), rs_tree=np.zeros(copy_budget.tree_size(t), np.int8),
        touched=np.zeros(1 + DIRTY_LIST, np.int64), counters=np.zeros(10, np.int64), totals=np.zeros(3),
    )
    state.counters[IX_WIDTH] = width
    state.totals[TIME] = current_time(st, state)
    return state


def _index_width(st: Static1) -> int:
    """Ops per index bucket: registrations stay near ``INDEX_DENSITY`` per buffer and segment."""
    n, n_seg = st.size.shape[0], st.seg_use.shape[0]
    return max(1, -(-_index_span(st) // (INDEX_DENSITY * (n + n_seg) + 1)))


def _index_span(st: Static1) -> int:
    """The buffers' live ranges, each widened by 3 ops, summed: what the registrations cover."""
    return int((st.end - st.start + 3).sum())


def _new_index(st: Static1, width: int) -> dict:
    """An empty time-bucket index of the fast-memory chunks, so that a query over an op window
    meets only the chunks of the buckets it spans, not every chunk opened so far (which made a
    step grow with the program). A chunk is registered in each bucket it spans, through one op
    past its last (:func:`_register`). A buffer's chunks are disjoint in time and inside its live
    range widened by one op on each side, except its first, whose registration may reach past a
    later chunk's start after a dropped eviction; so at most ``2 * sum(live + 3) / width + 2 *
    segments + 2 * buffers`` registrations are ever made (``R`` below has room for more)."""
    n, n_seg, n_ops = st.size.shape[0], st.seg_use.shape[0], st.compute_time.shape[0]
    cap = 2 * (_index_span(st) // width) + 2 * n_seg + 4 * n + 64
    narrow = _narrow_width(st, width)
    header = np.zeros(NB_HEADER, np.int64)
    if narrow == 0:
        narrow_part = header
    else:
        n_narrow = n_ops // narrow + 2
        room = 4 * n_seg + 64  # a chunk is registered where it starts and where its hold ends (_narrow_sync)
        header[NW], header[NB_COUNT], header[NB_ROOM] = narrow, n_narrow, room
        blocks = np.zeros((n_narrow, NARROW_STRIDE), np.int64)
        blocks[:, 0] = -1
        chunks = np.zeros((n_seg, NB_CHUNK), np.int64)
        chunks[:, NC_REG] = -1
        chunks[:, NC_WHOLE] = -2
        narrow_part = np.concatenate([header, chunks.ravel(), blocks.ravel()])
        cap += room
    return dict(ix_head=np.full(n_ops // width + 2, -1, np.int32), ix_tail=np.full(n_ops // width + 2, -1, np.int32),
                ix_nxt=np.zeros(cap, np.int32),
                ix_cid=np.zeros(cap, np.int32),
                ix_meta=np.concatenate([np.full(2 * n_seg, -1, np.int64),
                                        np.zeros((n_ops // width + 2) * UNION_STRIDE, np.int64), narrow_part]),
                ix_count=np.zeros(n_ops // width + 2, np.int32))


@njit(cache=True, inline="always")
def narrow_at(n_seg, n_wide):
    """Where the narrow index's header starts in ``ix_meta`` (``NB`` in ``State1``'s comment), for
    ``n_seg`` segments and ``n_wide`` wide buckets."""
    return 2 * n_seg + n_wide * UNION_STRIDE


def _narrow_width(st: Static1, width: int) -> int:
    """Ops per narrow index bucket: about ``NARROW_STARTS`` segments' uses each (17 ops at 10,004
    and 59,998 buffers); 0 (none) where a wide bucket spans fewer than ``NARROW_MIN`` of them
    (1,002 buffers: 6 ops a wide bucket; 10,004: 57, where keeping the narrow index cost the plan
    more than its short windows gained; 59,998: 339)."""
    n_ops, n_seg = st.compute_time.shape[0], st.seg_use.shape[0]
    narrow = max(1, -(-n_ops * NARROW_STARTS // max(n_seg, 1)))
    return narrow if NARROW_MIN * narrow <= width else 0


def copy_state(state: State1) -> State1:
    """A copy of ``state`` (the chunk index's unused room is allocated, not copied)."""
    used = int(state.counters[IX_USED])
    out = []
    for name, a in zip(State1._fields, state):
        if name == "ix_nxt" or name == "ix_cid":
            b = np.empty_like(a)
            b[:used] = a[:used]
            out.append(b)
        else:
            out.append(a.copy())
    return State1(*out)


@njit(cache=True)
def copy_into(src, dst):
    """Overwrite ``dst`` with ``src`` (same scenario) without allocating."""
    dst.seg_kind[:] = src.seg_kind
    dst.seg_off[:] = src.seg_off
    dst.seg_pstart[:] = src.seg_pstart
    dst.seg_chunk[:] = src.seg_chunk
    dst.ev_done[:] = src.ev_done
    dst.ev_base[:] = src.ev_base
    dst.ev_chunk[:] = src.ev_chunk
    dst.ev_final[:] = src.ev_final
    dst.ch_lo[:] = src.ch_lo
    dst.ch_hi[:] = src.ch_hi
    dst.ch_off[:] = src.ch_off
    dst.ch_buf[:] = src.ch_buf
    dst.active[:] = src.active
    dst.ch_rank[:] = src.ch_rank
    dst.cp_start[:] = src.cp_start
    dst.cp_done[:] = src.cp_done
    dst.cp_bytes[:] = src.cp_bytes
    dst.cp_kind[:] = src.cp_kind
    dst.cp_first[:] = src.cp_first
    dst.cp_next[:] = src.cp_next
    dst.cp_flight[:] = src.cp_flight
    dst.slow_bytes[:] = src.slow_bytes
    dst.fast_bytes[:] = src.fast_bytes
    dst.slow_time[:] = src.slow_time
    dst.fast_time[:] = src.fast_time
    dst.elapsed[:] = src.elapsed
    dst.stall[:] = src.stall
    dst.sim_empty[:] = src.sim_empty
    dst.blk_time[:] = src.blk_time
    dst.blk_stall[:] = src.blk_stall
    dst.ix_head[:] = src.ix_head
    dst.ix_tail[:] = src.ix_tail
    n = src.counters[IX_USED]
    dst.ix_nxt[:n] = src.ix_nxt[:n]
    dst.ix_cid[:n] = src.ix_cid[:n]
    dst.ix_meta[:] = src.ix_meta
    dst.ix_count[:] = src.ix_count
    dst.image[:, :] = src.image
    n = src.rs_count[0]
    dst.rs_start[:n] = src.rs_start[:n]
    dst.rs_end[:n] = src.rs_end[:n]
    dst.rs_amount[:n] = src.rs_amount[:n]
    dst.rs_count[0] = n
    dst.rs_delay[:] = src.rs_delay
    dst.rs_next[:n] = src.rs_next[:n]
    dst.rs_first[:] = src.rs_first
    dst.rs_last[:] = src.rs_last
    dst.rs_tree[:] = src.rs_tree
    dst.touched[:] = src.touched
    dst.counters[:] = src.counters
    dst.totals[:] = src.totals


# ------------------------------------------------------------------------------ cost
@njit(cache=True, inline="always")
def _touch(state, t):
    """Note that simulation iteration ``t`` changed (the simulation from it on may change)."""
    if t < state.counters[DIRTY]:
        state.counters[DIRTY] = t
    if t > state.counters[DIRTY_HI]:
        state.counters[DIRTY_HI] = t
    k = state.touched[0]
    if k >= 0:
        if k + 1 < state.touched.shape[0]:
            state.touched[k + 1] = t
            state.touched[0] = k + 1
        else:
            state.touched[0] = -1  # too many: the range only


@njit(cache=True)
def _flight_add(tree, i, v):
    """Add ``v`` at position ``i`` (0-based) of the Fenwick tree ``tree``."""
    i += 1
    while i < tree.shape[0]:
        tree[i] += v
        i += i & -i


@njit(cache=True)
def flight_bytes(tree, p):
    """Bytes of the copies (prefetches and evictions) issued at or before op ``p`` and done after
    it (``-1 <= p < T``), from the state's ``cp_flight``: a prefix sum, O(log T) where a sum over
    the copies was O(copies). Whole bytes in int64, so it equals that float sum exactly."""
    i = p + 2  # positions 0..p + 1, 1-based
    total = 0
    while i > 0:
        total += tree[i]
        i -= i & -i
    return total


@njit(cache=True)
def _link_copy(state, key, start, done):
    """Put copy ``key`` into the list of the copies issued after op ``start``, in ``(done, key)``
    order (the copies issued after one op are few: a walk)."""
    first, nxt, cp_done = state.cp_first, state.cp_next, state.cp_done
    prev = -1
    c = first[start + 1]
    while c >= 0 and (cp_done[c] < done or (cp_done[c] == done and c < key)):
        prev = c
        c = nxt[c]
    nxt[key] = c
    if prev < 0:
        first[start + 1] = key
    else:
        nxt[prev] = key


@njit(cache=True)
def _unlink_copy(state, key, start):
    """Take copy ``key`` out of the list of the copies issued after op ``start``."""
    first, nxt = state.cp_first, state.cp_next
    prev = -1
    c = first[start + 1]
    while c >= 0 and c != key:
        prev = c
        c = nxt[c]
    if c < 0:
        raise ValueError("MallocGame-v1: unlinking a copy that is not listed (a bug)")
    if prev < 0:
        first[start + 1] = nxt[key]
    else:
        nxt[prev] = nxt[key]
    nxt[key] = -1


@njit(cache=True)
def _add_copy(st, state, key, start, done, nbytes, kind):
    """List copy ``key`` (not listed), issued after op ``start``, done before op ``done``."""
    state.cp_start[key] = start
    state.cp_done[key] = done
    state.cp_bytes[key] = nbytes
    state.cp_kind[key] = kind
    _link_copy(state, key, start, done)
    state.counters[N_COPIES] += 1
    state.totals[COPY_BYTES] += nbytes  # whole bytes: exact in float64
    _flight_add(state.cp_flight, start + 1, np.int64(nbytes))
    _flight_add(state.cp_flight, done + 1, -np.int64(nbytes))
    _touch(state, start + 1)


@njit(cache=True)
def _remove_copy(st, state, key):
    """Remove copy ``key``, if listed."""
    if state.cp_kind[key] < 0:
        return
    start, done, nbytes = state.cp_start[key], state.cp_done[key], state.cp_bytes[key]
    _touch(state, start + 1)
    state.totals[COPY_BYTES] -= nbytes
    _flight_add(state.cp_flight, start + 1, -np.int64(nbytes))
    _flight_add(state.cp_flight, done + 1, np.int64(nbytes))
    _unlink_copy(state, key, start)
    state.cp_kind[key] = -1
    state.counters[N_COPIES] -= 1


@njit(cache=True)
def _move_copy(state, key, new_done):
    """Make the listed copy ``key`` done before op ``new_done`` (issued after the same op)."""
    if state.cp_kind[key] < 0:
        raise ValueError("MallocGame-v1: moving a copy that is not listed (a bug)")
    start, done, nbytes = state.cp_start[key], state.cp_done[key], state.cp_bytes[key]
    _touch(state, start + 1)
    _flight_add(state.cp_flight, done + 1, np.int64(nbytes))
    _flight_add(state.cp_flight, new_done + 1, -np.int64(nbytes))
    _unlink_copy(state, key, start)
    state.cp_done[key] = new_done
    _link_copy(state, key, start, new_done)


@njit(cache=True)
def copy_list(state):
    """The keys of the listed copies in the runtime model's queue order ``(start, done, key)``."""
    out = np.empty(state.counters[N_COPIES], np.int64)
    i = 0
    for p in range(state.cp_first.shape[0]):
        c = state.cp_first[p]
        while c >= 0:
            out[i] = c
            i += 1
            c = state.cp_next[c]
    return out


@njit(cache=True)
def _simulate_from(st, state, dirty, dirty_hi):
    """Re-simulate from the last iteration at or before ``dirty`` at which both copy queues were
    empty until, past ``dirty_hi``, they are empty in both the new and the last run; re-add the
    blocks it touched. Returns the first iteration not simulated."""
    t0 = dirty
    while t0 > 0 and not state.sim_empty[t0]:
        t0 -= 1
    stop = simulate_linked(t0, dirty_hi, st.compute_time, state.slow_time, state.fast_time, st.overhead,
                           st.params[SLOW_BW], state.cp_first, state.cp_next, state.cp_start, state.cp_done,
                           state.cp_bytes, state.cp_kind, state.counters[N_COPIES], state.elapsed, state.stall,
                           state.sim_empty, True)
    sum_blocks(state.elapsed, state.stall, t0, stop, state.blk_time, state.blk_stall)
    return stop


@njit(cache=True)
def current_time(st, state):
    """Simulate the program under the current allocations (undecided segments slow); store the
    per-op results and totals in ``state`` and return the program time.

    Incremental: the decisions since the last simulation changed iterations ``counters[DIRTY]``
    to ``counters[DIRTY_HI]`` only (an access's op, a copy's issue op + 1), listed one by one in
    ``touched`` when they are few (a step). A run restarts from the last iteration at or before
    a changed one at which both copy queues were empty, reading the copies issued from there on
    from their lists per issue op, and stops past that changed iteration as soon as the queues
    are empty in both the new and the old simulation
    (:func:`~mallocgym.pricing.runtime.simulate_linked`): from there the old results hold up to the
    next changed iteration, from which the next run starts (with the range only, one run covers
    it all). The block sums a run touched are re-added
    (:func:`~mallocgym.pricing.runtime.sum_blocks`). The figures equal a full run's bit for bit.
    A produced value's accesses are a segment apart, which on a training step is a fraction of
    the program: one run over the whole range re-simulated that span at every step."""
    n_ops = st.compute_time.shape[0]
    dirty = state.counters[DIRTY]
    if dirty > n_ops:
        return state.totals[TIME]
    k = state.touched[0]
    if k <= 0:  # the range
        _simulate_from(st, state, dirty, state.counters[DIRTY_HI])
    else:  # around each changed iteration, in order, skipping those a run went past
        tl = state.touched
        for i in range(2, k + 1):  # insertion sort: a few
            x = tl[i]
            j = i - 1
            while j >= 1 and tl[j] > x:
                tl[j + 1] = tl[j]
                j -= 1
            tl[j + 1] = x
        done = 0
        for i in range(1, k + 1):
            if tl[i] >= done:
                done = _simulate_from(st, state, tl[i], tl[i])
    state.touched[0] = 0
    state.counters[DIRTY] = n_ops + 1
    state.counters[DIRTY_HI] = -1
    total = sum_in_order(state.blk_time)
    state.totals[TIME] = total
    state.totals[STALL] = sum_in_order(state.blk_stall)
    return total


@njit(cache=True, inline="always")
def interval_time(st, a, b):
    """All-slow time of the ops strictly between ``a`` and ``b`` (``a < b``; ``a`` may be -1)."""
    return interval_time_of(st.cum_slow, a, b)


@njit(cache=True, inline="always")
def interval_time_of(cum_slow, a, b):
    """:func:`interval_time` from the scenario's prefix sums ``cum_slow`` alone (for kernels that
    do not take the scenario)."""
    lo = a + 1
    if lo >= b:
        return 0.0
    return cum_slow[b] - cum_slow[lo]


@njit(cache=True, inline="always")
def _covers(st, x, y):
    """``x >= y`` for two times, exact ties included: ``interval_time`` differences of prefix
    sums and ratios like 0.8 carry rounding of about 1e-16 of the program time, so the
    comparison forgives 1e-12 of (``y`` + the all-slow program time)."""
    return x >= y - 1e-12 * (abs(y) + st.params[TIME_ALL_SLOW])


# ------------------------------------------------------------------------------ fast memory
@njit(cache=True)
def _paint_image(img, n_ops, cap, off, size, lo, hi, sign):
    """Add (``sign`` 1) or remove (-1) the rectangle of ``size`` bytes at ``off`` over ops
    ``[lo, hi]`` in ``img`` (``state.image``, of a program of ``n_ops`` ops and a fast memory of
    ``cap`` bytes). Bin ``(a, t)`` covers addresses ``[a, a + 1) * capacity / A`` and ops
    ``[t, t + 1) * T / B``; it holds the covered area in units of ``1 / (A * B)`` byte-ops (so
    ``T * capacity`` is a full bin): whole numbers, exact in float64 (below 2**53), so removing
    a rectangle undoes adding it and the image equals a redraw from the chunks."""
    a_bins, t_bins = img.shape[0], img.shape[1]
    if a_bins == 0 or t_bins == 0 or hi < lo:
        return
    t_lo, t_hi = lo * t_bins, (hi + 1) * t_bins
    a_lo = off * a_bins
    a_hi = (off + size) * a_bins
    for tb in range(t_lo // n_ops, min(t_bins, (t_hi - 1) // n_ops + 1)):
        ot = min(t_hi, (tb + 1) * n_ops) - max(t_lo, tb * n_ops)
        for ab in range(a_lo // cap, min(a_bins, (a_hi - 1) // cap + 1)):
            oa = min(a_hi, (ab + 1) * cap) - max(a_lo, ab * cap)
            img[ab, tb] += sign * (float(ot) * float(oa))


@njit(cache=True)
def _set_hi(st, state, c, hi):
    """Hold chunk ``c`` through op ``hi`` (longer or shorter), keeping the image up to date.
    Every array is read before the first call (as in :func:`_activate`): a kernel whose state
    stays live across a call pays for each of its arrays on entry and exit (see :func:`_sync`)."""
    img, ch_lo, ch_hi, ch_off, meta, counters = state.image, state.ch_lo, state.ch_hi, state.ch_off, state.ix_meta, state.counters
    head, tail, nxt, cid, count = state.ix_head, state.ix_tail, state.ix_nxt, state.ix_cid, state.ix_count
    n_ops, cap, size = st.compute_time.shape[0], st.iparams[CAPACITY], st.size[state.ch_buf[c]]
    old = ch_hi[c]
    if hi > old:
        _paint_image(img, n_ops, cap, ch_off[c], size, old + 1, hi, 1.0)
    elif hi < old:
        _paint_image(img, n_ops, cap, ch_off[c], size, hi + 1, old, -1.0)
    ch_hi[c] = hi
    _register_in(ch_lo, ch_hi, meta, counters, head, tail, nxt, cid, count, c)


@njit(cache=True)
def _register(st, state, c):
    """Register chunk ``c`` in the index buckets up to one op past its last (an evicted chunk
    is held one op longer in MSA's view; see ``mallocgym.sim.msa``), each bucket once: a chunk
    that grows is registered in its new buckets, one that shrinks stays registered (queries check
    the chunk itself)."""
    _register_in(state.ch_lo, state.ch_hi, state.ix_meta, state.counters, state.ix_head, state.ix_tail,
                 state.ix_nxt, state.ix_cid, state.ix_count, c)


@njit(cache=True)
def _register_in(ch_lo, ch_hi, meta, counters, head, tail, nxt, cid, count, c):
    """:func:`_register` over the arrays it reads."""
    hi = ch_hi[c] + 1
    old = meta[c]
    if old >= hi:
        return
    w = counters[IX_WIDTH]
    first = ch_lo[c] // w if old < 0 else old // w + 1
    last = min(hi // w, head.shape[0] - 1)
    for k in range(first, last + 1):
        n = counters[IX_USED]
        if n >= cid.shape[0]:
            raise ValueError("MallocGame-v1: the chunk index is full (a bug: its bound was exceeded)")
        if old < 0 and k == first:  # a first registration: at the head
            cid[n] = c
            nxt[n] = head[k]
            head[k] = n
            if tail[k] < 0:
                tail[k] = n
        else:  # a later one: at the tail
            cid[n] = ~c
            nxt[n] = -1
            if tail[k] >= 0:
                nxt[tail[k]] = n
            else:
                head[k] = n
            tail[k] = n
        count[k] += 1
        counters[IX_USED] = n + 1
    meta[c] = hi


@njit(cache=True)
def _activate(st, state, c):
    """Add chunk ``c`` to ``active``, which stays sorted by offset (then id): gap sweeps then
    need no sort; paint it in the image."""
    img, ch_lo, ch_hi, ch_off, meta, counters = state.image, state.ch_lo, state.ch_hi, state.ch_off, state.ix_meta, state.counters
    head, tail, nxt, cid, count = state.ix_head, state.ix_tail, state.ix_nxt, state.ix_cid, state.ix_count
    active, rank = state.active, state.ch_rank
    _paint_image(img, st.compute_time.shape[0], st.iparams[CAPACITY], ch_off[c], st.size[state.ch_buf[c]], ch_lo[c],
                 ch_hi[c], 1.0)
    _register_in(ch_lo, ch_hi, meta, counters, head, tail, nxt, cid, count, c)
    n = counters[N_CHUNKS]
    active[n] = c  # appended: merged into the sorted prefix when a full scan needs the order
    rank[c] = -1
    counters[N_CHUNKS] = n + 1


@njit(cache=True)
def _merge_active(state, tmp):
    """Bring ``active`` into offset order (then id): sort the chunks appended since the last
    merge and merge them with the sorted prefix (``tmp``: scratch of ``S + 1``); note each
    chunk's place (``ch_rank``)."""
    _merge(state.active, state.ch_off, state.ch_rank, state.counters, tmp)


@njit(cache=True)
def _merge(active, off, rank, counters, tmp):
    """:func:`_merge_active` over the arrays it reads."""
    n = counters[N_CHUNKS]
    k = counters[ACT_SORTED]
    if k >= n:
        return
    tail = active[k:n].copy()
    top = active.shape[0] + 1
    code = np.empty(n - k, np.int64)
    for i in range(n - k):
        code[i] = off[tail[i]] * top + tail[i]
    tail = tail[np.argsort(code)]
    i, j, m = 0, 0, 0
    while i < k or j < n - k:
        if j >= n - k or (i < k and (off[active[i]] < off[tail[j]] or (
                off[active[i]] == off[tail[j]] and active[i] < tail[j]))):
            tmp[m] = active[i]
            i += 1
        else:
            tmp[m] = tail[j]
            j += 1
        m += 1
    active[:n] = tmp[:n]
    for i in range(n):
        rank[active[i]] = i
    counters[ACT_SORTED] = n


@njit(cache=True)
def _union_add(un, base, a, z):
    """Add offsets ``[a, z)`` to the union at ``un[base:]`` (see ``State1.ix_meta``), merged with the
    intervals it meets or touches; False (nothing changed) if the union is not kept or would
    outgrow ``UNION_CAP``."""
    n = un[base]
    if n < 0:
        return False
    i = 0
    while i < n and un[base + 2 + 2 * i] < a:
        i += 1
    j = i
    while j < n and un[base + 1 + 2 * j] <= z:
        j += 1
    if j > i:  # intervals i..j-1 meet or touch [a, z)
        if un[base + 1 + 2 * i] < a:
            a = un[base + 1 + 2 * i]
        if un[base + 2 * j] > z:
            z = un[base + 2 * j]
    new_n = n - (j - i) + 1
    if new_n > UNION_CAP:
        return False
    if j == i:  # a new interval at i
        for x in range(base + 2 * n, base + 2 * i, -1):
            un[x + 2] = un[x]
    elif j > i + 1:  # j - i intervals become one
        for x in range(base + 1 + 2 * j, base + 1 + 2 * n):
            un[x - 2 * (j - i - 1)] = un[x]
    un[base + 1 + 2 * i] = a
    un[base + 2 + 2 * i] = z
    un[base] = new_n
    return True


_union_add_here = njit(cache=True, inline="always")(_union_add.py_func)  # the same, written into the caller


@njit(cache=True)
def _rebuild(ch_buf, ch_lo, ch_hi, ch_off, ev_chunk, ev_done, head, nxt, cid, count, un, sizes, n_seg, w, k):
    """Bucket ``k``'s union from its chunks: those registered in it that MSA holds at one of its
    ops (every chunk live there is registered there: :func:`_register`). Over the arrays it reads,
    not the state (see :func:`_sync`)."""
    base = 2 * n_seg + k * UNION_STRIDE
    t0, t1 = k * w, k * w + w - 1
    offs = np.empty(count[k], np.int64)
    tops = np.empty(count[k], np.int64)
    m = 0
    j = head[k]
    while j >= 0:
        c = cid[j]
        if c < 0:
            c = ~c
        j = nxt[j]
        if ch_lo[c] > t1 or _held(ch_hi[c], ev_chunk[ch_buf[c]], ev_done[ch_buf[c]], c, True) < t0:
            continue
        offs[m] = ch_off[c]
        tops[m] = ch_off[c] + sizes[ch_buf[c]]
        m += 1
    order = np.argsort(offs[:m])
    n = 0
    for i in range(m):
        a, z = offs[order[i]], tops[order[i]]
        if n > 0 and a <= un[base + 2 * n]:
            if z > un[base + 2 * n]:
                un[base + 2 * n] = z
            continue
        if n == UNION_CAP:
            un[base] = -1
            return
        un[base + 1 + 2 * n] = a
        un[base + 2 + 2 * n] = z
        n += 1
    un[base] = n


@njit(cache=True)
def _sync_unions(st, state, b):
    """Bring the buckets' unions up to date with ``b``'s chunks (a decision on one of ``b``'s
    segments changes only ``b``'s chunks and their holds): a chunk now held into later buckets
    is added to them; buckets it left are rebuilt from their chunks."""
    _sync(state.seg_chunk, state.ch_buf, state.ch_lo, state.ch_hi, state.ch_off, state.ev_chunk, state.ev_done,
          state.ix_head, state.ix_nxt, state.ix_cid, state.ix_count, state.ix_meta, st.size, st.seg_ptr,
          st.seg_use.shape[0], state.counters[IX_WIDTH], b)
    if state.ix_meta[narrow_at(st.seg_use.shape[0], state.ix_head.shape[0]) + NW] > 0:
        _sync_narrow(state.seg_chunk, state.ch_buf, state.ch_lo, state.ch_hi, state.ch_off, state.ev_chunk,
                     state.ev_done, state.ix_head, state.ix_nxt, state.ix_cid, state.ix_meta, st.size, st.seg_ptr,
                     st.seg_use.shape[0], state.counters, st.iparams[CAPACITY] + 1, b)


@njit(cache=True)
def _sync(seg_chunk, ch_buf, ch_lo, ch_hi, ch_off, ev_chunk, ev_done, head, nxt, cid, count, un, sizes, seg_ptr,
          n_seg, w, b):
    """:func:`_sync_unions` over the arrays it reads. A kernel that takes the state (about 50
    arrays) pays each array's reference count on entry and exit wherever numba cannot prove
    them unneeded (a call inside the kernel is enough), about 1 us a call: :func:`apply_rules`
    calls this one, once per decision, with the dozen arrays it needs."""
    last_k = head.shape[0] - 1
    prev = -1
    for j in range(seg_ptr[b], seg_ptr[b + 1]):
        c = seg_chunk[j]
        if c < 0 or c == prev:
            continue
        prev = c
        new_k = min(_held(ch_hi[c], ev_chunk[b], ev_done[b], c, True) // w, last_k)
        old_k = un[n_seg + c]
        first = ch_lo[c] // w if old_k < 0 else old_k + 1
        un[n_seg + c] = new_k
        a = ch_off[c]
        z = a + sizes[b]
        for k in range(first, new_k + 1):
            if not _union_add(un, 2 * n_seg + k * UNION_STRIDE, a, z):
                _rebuild(ch_buf, ch_lo, ch_hi, ch_off, ev_chunk, ev_done, head, nxt, cid, count, un, sizes, n_seg,
                         w, k)
        for k in range(new_k + 1, old_k + 1):
            _rebuild(ch_buf, ch_lo, ch_hi, ch_off, ev_chunk, ev_done, head, nxt, cid, count, un, sizes, n_seg, w, k)


@njit(cache=True)
def _sync_narrow(seg_chunk, ch_buf, ch_lo, ch_hi, ch_off, ev_chunk, ev_done, head, nxt, cid, un, sizes, seg_ptr,
                 n_seg, counters, top, b):
    """Bring the narrow index up to date with ``b``'s chunks (as :func:`_sync`, where there is one:
    a kernel of its own, so that :func:`_sync` pays no more reference counts without it)."""
    nb = narrow_at(n_seg, head.shape[0])  # the narrow index's header in ``un``
    prev = -1
    for j in range(seg_ptr[b], seg_ptr[b + 1]):
        c = seg_chunk[j]
        if c < 0 or c == prev:
            continue
        prev = c
        if un[nb + NW] > 0:
            _narrow_sync(ch_buf, ch_lo, ch_hi, ch_off, ev_chunk, ev_done, head, nxt, cid, un, sizes, n_seg, counters,
                         nb, top, c, _held(ch_hi[c], ev_chunk[b], ev_done[b], c, True))


@njit(cache=True, inline="always")
def _narrow_sync(ch_buf, ch_lo, ch_hi, ch_off, ev_chunk, ev_done, head, nxt, cid, un, sizes, n_seg, counters, nb,
                 top, c, held):
    """Bring the narrow index up to date with chunk ``c``, held by MSA through op ``held``. A
    narrow bucket (``un[nb + NW]`` ops, a few segments' uses, so a handful of chunks start or end
    in it at any program size) lists the chunks that start in it and those whose hold ends in it
    (registered there when the hold's end moves into it; an old registration stays, and queries
    check the chunk itself), and keeps the whole union: the offsets of the chunks MSA holds at
    every one of its ops. A chunk live at an op of narrow buckets ``j0..j1`` either starts or
    ends in one of them (listed there) or is held over one of them whole (in its union): so a
    short window reads most of its live chunks as a few intervals (``mallocgym.sim.msa.
    _fit_narrow``), where a wide bucket lists every chunk live at any of its ops. A whole union
    that would outgrow ``UNION_CAP``, or that a chunk's hold cut short leaves (legal play seldom
    does it), is marked not kept (-1) for good: no call to another kernel here (each would make the
    arrays' reference counts paid on every entry, see :func:`_sync`); past its room for
    registrations (``NB_ROOM``) the narrow index is given up (``NW`` 0)."""
    nw = un[nb + NW]
    n_narrow = un[nb + NB_COUNT]
    blocks = nb + NB_HEADER + NB_CHUNK * n_seg
    rec = nb + NB_HEADER + NB_CHUNK * c  # c's words
    span = (ch_lo[c] << 32) | held
    if un[rec + NC_REG] >= 0 and un[rec + NC_SPAN] == span:
        return  # (most of b's chunks: a decision changes one or two)
    un[rec + NC_SPAN] = span
    un[rec + NC_IV] = ch_off[c] * top + ch_off[c] + sizes[ch_buf[c]]
    un[rec + NC_BUF] = ch_buf[c]
    # the whole union: the narrow buckets [first, last] that c covers at every op
    first = (ch_lo[c] + nw - 1) // nw
    last = min((held + 1) // nw - 1, n_narrow - 1)
    old = un[rec + NC_WHOLE]
    un[rec + NC_WHOLE] = last
    a = ch_off[c]
    z = a + sizes[ch_buf[c]]
    for k in range(max(first, old + 1), last + 1):
        base = blocks + k * NARROW_STRIDE + 2
        if un[base] >= 0 and not _union_add_here(un, base, a, z):
            un[base] = -1
    for k in range(max(first, last + 1), old + 1):  # a hold cut short (rare): the buckets it left are not kept
        un[blocks + k * NARROW_STRIDE + 2] = -1
    # the registrations: where c starts, and where its hold ends now
    start = ch_lo[c] // nw
    end = min(held // nw, n_narrow - 1)
    reg = un[rec + NC_REG]
    if reg == end:
        return
    if reg < 0:
        _narrow_link(un, nb, counters, nxt, cid, blocks + start * NARROW_STRIDE, c)
    if end != start:
        _narrow_link(un, nb, counters, nxt, cid, blocks + end * NARROW_STRIDE, c)
    un[rec + NC_REG] = end


@njit(cache=True, inline="always")
def _narrow_link(un, nb, counters, nxt, cid, block, c):
    """Register chunk ``c`` in the narrow bucket at ``un[block:]`` (at its head), in the index's
    pool of registrations; past the narrow index's room, give it up."""
    if un[nb + NW] == 0:
        return
    if un[nb + NB_USED] >= un[nb + NB_ROOM]:
        un[nb + NW] = 0
        return
    n = counters[IX_USED]
    if n >= cid.shape[0]:
        raise ValueError("MallocGame-v1: the chunk index is full (a bug: its bound was exceeded)")
    cid[n] = c
    nxt[n] = un[block]
    un[block] = n
    un[block + 1] += 1
    counters[IX_USED] = n + 1
    un[nb + NB_USED] += 1


@njit(cache=True, inline="always")
def held_through(state, c, msa_hold):
    """The last op chunk ``c`` occupies: ``ch_hi``, or with ``msa_hold`` MSA's view, in which an
    evicted chunk is held through its eviction's done op (``prev_allocation->Extend(
    eviction_end_time)``), one op longer than the v1 rules hold it."""
    b = state.ch_buf[c]
    return _held(state.ch_hi[c], state.ev_chunk[b], state.ev_done[b], c, msa_hold)


@njit(cache=True, inline="always")
def _held(hi, ev_chunk, ev_done, c, msa_hold):
    """:func:`held_through` from the chunk's last op and its buffer's eviction (chunk, done op).
    The chunk walks call this one, with numbers only: a call that takes the state, or arrays,
    inside a hot loop updates the arrays' reference counts at every call, which made a walk over
    50,000 chunks take 0.2 s instead of 0.2 ms."""
    if msa_hold and ev_chunk == c and ev_done > hi:
        return ev_done
    return hi


@njit(cache=True)
def live_chunks(st, state, lo, hi, skip_buf, ids, msa_hold):
    """Chunks live at some op of ``[lo, hi]`` (not ``skip_buf``'s) into ``ids``, sorted by offset
    (ties in any order: the gap sweeps take the highest end so far); return how many. Meets only
    the chunks registered in the index buckets the window spans (a chunk registered in several
    is taken in the first of them that the window spans: its first bucket or the window's), then
    sorts them; when those are more than half of the chunks, a scan of all of them in offset order
    (``active``) is cheaper. A long window's chunks are put in order by their place in ``active``
    (:func:`_live_by_rank`), not by a sort."""
    # every array is read before the first call (see _sync)
    ch_buf, ch_lo, ch_hi, ev_chunk, ev_done = state.ch_buf, state.ch_lo, state.ch_hi, state.ev_chunk, state.ev_done
    head, nxt, cid, active, ch_off = state.ix_head, state.ix_nxt, state.ix_cid, state.active, state.ch_off
    count, counters, rank, bits = state.ix_count, state.counters, state.ch_rank, state.rank_bits
    capacity = st.iparams[CAPACITY]
    w = counters[IX_WIDTH]
    k0 = max(lo, 0) // w
    k1 = min(hi // w, head.shape[0] - 1)
    m = 0
    regs = 0
    for k in range(k0, k1 + 1):
        regs += count[k]
    n_chunks = counters[N_CHUNKS]
    if 2 * regs > n_chunks:
        _merge(active, ch_off, rank, counters, ids)
        for i in range(n_chunks):
            c = active[i]
            if ch_buf[c] == skip_buf or ch_lo[c] > hi or _held(ch_hi[c], ev_chunk[ch_buf[c]], ev_done[ch_buf[c]], c, msa_hold) < lo:
                continue
            ids[m] = c
            m += 1
        return m
    if regs >= RANK_SORT_MIN:
        if n_chunks - counters[ACT_SORTED] > max(RANK_TAIL_MIN, n_chunks >> RANK_TAIL_SHIFT):
            _merge(active, ch_off, rank, counters, ids)
        return _by_rank(ch_buf, ch_lo, ch_hi, ev_chunk, ev_done, head, nxt, cid, active, ch_off, rank, bits, capacity,
                        lo, hi, skip_buf, ids, msa_hold, k0, k1)
    for k in range(k0, k1 + 1):
        j = head[k]
        while j >= 0:
            c = cid[j]
            j = nxt[j]
            if c < 0:  # not the chunk's first bucket: met in an earlier bucket of this window
                if k > k0:
                    break  # and so are the rest of this bucket
                c = ~c
            if ch_buf[c] == skip_buf or ch_lo[c] > hi or _held(ch_hi[c], ev_chunk[ch_buf[c]], ev_done[ch_buf[c]], c, msa_hold) < lo:
                continue
            ids[m] = c
            m += 1
    top = np.int64(ids.shape[0])
    if m > 16 and capacity < (np.int64(1) << 62) // top:
        # sort (offset, id) packed in one integer, in place: no argsort, gather or allocation
        for i in range(m):
            ids[i] = ch_off[ids[i]] * top + ids[i]
        ids[:m].sort()
        for i in range(m):
            ids[i] = ids[i] % top
        return m
    if m > 16:
        offs = np.empty(m, np.int64)
        for i in range(m):
            offs[i] = ch_off[ids[i]]
        ids[:m] = ids[:m][np.argsort(offs)]
        return m
    for i in range(1, m):  # insertion sort for a few
        c = ids[i]
        off = ch_off[c]
        j = i - 1
        while j >= 0 and ch_off[ids[j]] > off:
            ids[j + 1] = ids[j]
            j -= 1
        ids[j + 1] = c
    return m


@njit(cache=True)
def _live_by_rank(st, state, lo, hi, skip_buf, ids, msa_hold, k0, k1):
    """:func:`live_chunks` over index buckets ``k0..k1`` without sorting the chunks merged into
    ``active``: each sets the bit of its place there (``ch_rank``, in offset then id order) in
    ``rank_bits``, and the bit of that word in a summary after them, and reading the set bits in
    order (the summary's, then their words') lists them by offset, in time linear in the chunks
    met plus the places spanned / 4096. Those opened since the last merge (``ch_rank`` -1) are
    sorted by (offset, id), kept at the end of ``ids``, and merged in."""
    return _by_rank(state.ch_buf, state.ch_lo, state.ch_hi, state.ev_chunk, state.ev_done, state.ix_head, state.ix_nxt,
                    state.ix_cid, state.active, state.ch_off, state.ch_rank, state.rank_bits, st.iparams[CAPACITY], lo,
                    hi, skip_buf, ids, msa_hold, k0, k1)


@njit(cache=True)
def _by_rank(ch_buf, ch_lo, ch_hi, ev_chunk, ev_done, head, nxt, cid, active, ch_off, rank, bits, capacity, lo, hi,
             skip_buf, ids, msa_hold, k0, k1):
    """:func:`_live_by_rank` over the arrays it reads."""
    size = np.int64(ids.shape[0])
    top = rank.shape[0] // 64 + 1  # the summary's first word (after S // 64 + 1 words of ranks)
    n_tail = 0
    r_lo = size
    r_hi = np.int64(-1)
    for k in range(k0, k1 + 1):
        j = head[k]
        while j >= 0:
            c = cid[j]
            j = nxt[j]
            if c < 0:
                if k > k0:
                    break
                c = ~c
            if ch_buf[c] == skip_buf or ch_lo[c] > hi or _held(ch_hi[c], ev_chunk[ch_buf[c]], ev_done[ch_buf[c]], c, msa_hold) < lo:
                continue
            r = rank[c]
            if r >= 0:
                bits[r >> 6] |= np.int64(1) << (r & 63)
                bits[top + (r >> 12)] |= np.int64(1) << ((r >> 6) & 63)
                if r < r_lo:
                    r_lo = r
                if r > r_hi:
                    r_hi = r
            else:
                n_tail += 1
                ids[size - n_tail] = c
    t = size - n_tail  # the tail ids[t:size], by (offset, id)
    if n_tail > 16 and capacity < (np.int64(1) << 62) // size:
        for i in range(t, size):
            ids[i] = ch_off[ids[i]] * size + ids[i]
        ids[t:size].sort()
        for i in range(t, size):
            ids[i] = ids[i] % size
    for i in range(t + 1, size):  # (an insertion sort; a pass that moves nothing once sorted)
        c = ids[i]
        off = ch_off[c]
        j = i - 1
        while j >= t and (ch_off[ids[j]] > off or (ch_off[ids[j]] == off and ids[j] > c)):
            ids[j + 1] = ids[j]
            j -= 1
        ids[j + 1] = c
    m = 0
    if r_hi >= 0:
        for sw in range(top + (r_lo >> 12), top + (r_hi >> 12) + 1):
            y = bits[sw]
            bits[sw] = 0
            while y != 0:
                wd = ((sw - top) << 6) + trailing_zeros(y)
                y &= y - 1
                x = bits[wd]
                bits[wd] = 0
                while x != 0:
                    c = active[(wd << 6) + trailing_zeros(x)]
                    x &= x - 1
                    oc = ch_off[c]
                    while t < size and (ch_off[ids[t]] < oc or (ch_off[ids[t]] == oc and ids[t] < c)):
                        ids[m] = ids[t]
                        m += 1
                        t += 1
                    ids[m] = c
                    m += 1
    while t < size:
        ids[m] = ids[t]
        m += 1
        t += 1
    return m


@njit(cache=True)
def window_candidates(st, state, b, lo, hi, k, ids, cand_off):
    """Candidate offsets for buffer ``b`` over ops ``[lo, hi]``, best fit first (as v0: from each
    fitting free gap its lowest aligned offset and, if different, its highest); return the count."""
    if st.size[b] > st.iparams[CAPACITY]:
        return 0
    m = live_chunks(st, state, lo, hi, b, ids, False)
    return _candidates_among(st, state, b, lo, k, ids, m, cand_off)


@njit(cache=True, inline="always")
def _gap_candidates(k, n, glo, ghi, size, align, cand_off, cand_lo, cand_hi):
    """A candidates' sweep's step: the free gap ``[glo, ghi)`` offers its lowest and highest
    aligned offsets where ``size`` fits there (:func:`_insert_candidate`); the new count."""
    if ghi > glo:
        low = (glo + align - 1) // align * align
        if low + size <= ghi:
            n = _insert_candidate(k, n, low, glo, ghi, cand_off, cand_lo, cand_hi)
            high = (ghi - size) // align * align
            if high != low:
                n = _insert_candidate(k, n, high, glo, ghi, cand_off, cand_lo, cand_hi)
    return n


@njit(cache=True)
def _candidates_among(st, state, b, lo, k, ids, m, cand_off):
    """:func:`window_candidates` for a window ``[lo, hi]`` whose live chunks are among
    ``ids[:m]`` (by offset: the chunks live in a window ``[lo', hi]`` with ``lo' <= lo``, so
    several windows ending at the same op share one scan of the chunks)."""
    size = st.size[b]
    capacity = st.iparams[CAPACITY]
    align = st.iparams[ALIGNMENT]
    cand_lo = np.empty(k, np.int64)
    cand_hi = np.empty(k, np.int64)
    n = 0
    cursor = 0
    for i in range(m + 1):
        if i < m:
            c = ids[i]
            if state.ch_hi[c] < lo:  # live only before this window
                continue
            glo, ghi = cursor, state.ch_off[c]
            top = state.ch_off[c] + st.size[state.ch_buf[c]]
        else:
            glo, ghi = cursor, capacity
            top = cursor
        n = _gap_candidates(k, n, glo, ghi, size, align, cand_off, cand_lo, cand_hi)
        if top > cursor:
            cursor = top
    return n


NO_FIT = -1  # _candidates_by_unions: the window is not answered from the buckets' unions


@njit(cache=True, inline="always")
def _unions_window(st, state, ids, b, lo, hi):
    """The first and last index buckets ``(k0, k1)`` of ``[lo, hi]`` where the buckets' unions
    (:func:`_sync_unions`) answer a query over it (:func:`_candidates_by_unions`,
    ``mallocgym.sim.msa._fit_by_unions``), else ``(-1, -1)``: the window spans fewer than three
    buckets, a middle bucket's union is not kept, ``b`` has a chunk counted in one, its items
    would outgrow ``ids``, or ``start * top + end`` could pass ``2**63``."""
    w = state.counters[IX_WIDTH]
    k0 = max(lo, 0) // w
    k1 = min(hi // w, state.ix_head.shape[0] - 1)
    if k1 - k0 < 2:
        return -1, -1
    un = state.ix_meta
    n_seg = st.seg_use.shape[0]
    n_iv = state.ix_count[k0] + state.ix_count[k1]
    for k in range(k0 + 1, k1):
        n = un[2 * n_seg + k * UNION_STRIDE]
        if n < 0:
            return -1, -1
        n_iv += n
    for j in range(st.seg_ptr[b], st.seg_ptr[b + 1]):
        c = state.seg_chunk[j]
        if c >= 0 and un[n_seg + c] > k0 and state.ch_lo[c] // w < k1:
            return -1, -1
    if n_iv > ids.shape[0] or st.iparams[CAPACITY] > np.int64(3037000498):
        return -1, -1
    return k0, k1


@njit(cache=True, inline="always")
def union_into(un, base, ids, n, top):
    """Append the union kept at ``un[base:]`` (its count, then each interval's first and
    one-past-last offset) to ``ids[n:]`` as ``start * top + end``; the new count."""
    for i in range(un[base]):
        ids[n] = un[base + 1 + 2 * i] * top + un[base + 2 + 2 * i]
        n += 1
    return n


@njit(cache=True, inline="always")
def _union_items(st, state, ids, b, lo, hi, k0, k1, top, rules_view):
    """The occupied intervals over ``[lo, hi]`` (buckets ``k0..k1``, :func:`_unions_window`) into
    ``ids`` as ``start * top + end``, unsorted; their count: the chunks of the first bucket live
    in the window that MSA holds no further than it (live in the rules' view with
    ``rules_view``, else as MSA holds them), those that start in the last bucket by ``hi`` (its
    first registrations), and the middle buckets' unions."""
    # every array is read before the first call (see _sync)
    ch_buf, ch_lo, ch_hi, ev_chunk, ev_done = state.ch_buf, state.ch_lo, state.ch_hi, state.ev_chunk, state.ev_done
    head, nxt, cid, ch_off, un, sizes = state.ix_head, state.ix_nxt, state.ix_cid, state.ch_off, state.ix_meta, st.size
    w = state.counters[IX_WIDTH]
    n = 0
    j = head[k0]
    while j >= 0:
        c = cid[j]
        if c < 0:
            c = ~c
        j = nxt[j]
        if ch_buf[c] == b or ch_lo[c] > hi:
            continue
        held = _held(ch_hi[c], ev_chunk[ch_buf[c]], ev_done[ch_buf[c]], c, True)
        if (ch_hi[c] if rules_view else held) < lo or held // w > k0:
            continue  # live only before the window, or in the next bucket's union
        ids[n] = ch_off[c] * top + ch_off[c] + sizes[ch_buf[c]]
        n += 1
    j = head[k1]
    while j >= 0:
        c = cid[j]
        if c < 0:
            break  # registered in an earlier bucket: live in a middle one
        j = nxt[j]
        if ch_buf[c] == b or ch_lo[c] > hi:
            continue
        ids[n] = ch_off[c] * top + ch_off[c] + sizes[ch_buf[c]]
        n += 1
    n_seg = st.seg_use.shape[0]
    for k in range(k0 + 1, k1):
        n = union_into(un, 2 * n_seg + k * UNION_STRIDE, ids, n, top)
    return n


@njit(cache=True)
def _candidates_by_unions(st, state, b, lo, hi, k, ids, cand_off):
    """:func:`window_candidates` over ``[lo, hi]`` from the index buckets' unions of occupied
    offsets (kept with MSA's hold, :func:`_sync_unions`), as ``mallocgym.sim.msa._fit_by_unions``
    answers a best fit: the candidates are a function of the free gaps alone, so of the union of
    the chunks live in the window, which is the unions of the buckets it spans whole plus the
    chunks of its first bucket that end there and of its last that start there (walked). A chunk
    MSA holds at an op ``t`` of a middle bucket is live (in the rules' view, one op shorter for an
    evicted chunk) at ``t`` or ``t - 1``, both inside the window; so the middle unions hold
    exactly the live chunks there. ``NO_FIT`` where the window spans fewer than three buckets, a
    middle bucket's union is not kept, or ``b`` has a chunk counted in one. A prefetch window is
    long (back to the picker's earliest start): on a 60,000-buffer program the walk of every chunk
    live in it met about 1,100 of them, and grew with the program."""
    k0, k1 = _unions_window(st, state, ids, b, lo, hi)
    if k0 < 0:
        return NO_FIT
    capacity = st.iparams[CAPACITY]
    top = capacity + 1  # an interval is start * top + end in ``ids``: sorted by start
    n = _union_items(st, state, ids, b, lo, hi, k0, k1, top, True)
    ids[:n].sort()
    size = st.size[b]
    align = st.iparams[ALIGNMENT]
    cand_lo = np.empty(k, np.int64)
    cand_hi = np.empty(k, np.int64)
    m = 0
    cursor = 0
    for i in range(n + 1):  # the free gaps in offset order, as _candidates_among sweeps them
        if i < n:
            glo, ghi = cursor, ids[i] // top
            end = ids[i] % top
        else:
            glo, ghi = cursor, capacity
            end = cursor
        m = _gap_candidates(k, m, glo, ghi, size, align, cand_off, cand_lo, cand_hi)
        if end > cursor:
            cursor = end
    return m


@njit(cache=True)
def _registrations(state, k0, k1):
    """Index registrations in buckets ``k0..k1``: what a bucket walk of that window visits."""
    regs = 0
    for k in range(k0, k1 + 1):
        regs += state.ix_count[k]
    return regs


@njit(cache=True)
def first_blocked(st, state, b, off, lo, hi, msa_hold, any_op):
    """The first op of ``[lo, hi]`` at which ``[off, off + size_b)`` meets another buffer's chunk
    (``hi + 1`` if none); with ``any_op``, some op of ``[lo, hi]`` at which it does (a yes/no
    question, answered at the first chunk found); ``msa_hold`` as :func:`held_through`. Walks the
    index buckets of the window, each chunk once (no sort is needed here, so the walk beats a scan
    of every chunk even on long windows)."""
    ch_buf, ch_lo, ch_hi, ev_chunk, ev_done = state.ch_buf, state.ch_lo, state.ch_hi, state.ev_chunk, state.ev_done
    head, nxt, cid, ch_off, sizes = state.ix_head, state.ix_nxt, state.ix_cid, state.ch_off, st.size
    size = sizes[b]
    first = hi + 1
    w = state.counters[IX_WIDTH]
    k0 = max(lo, 0) // w
    for k in range(k0, min(hi // w, head.shape[0] - 1) + 1):
        j = head[k]
        while j >= 0:
            c = cid[j]
            j = nxt[j]
            if c < 0:
                if k > k0:
                    break  # registered in an earlier bucket of the window too: met there
                c = ~c
            if ch_buf[c] == b or _held(ch_hi[c], ev_chunk[ch_buf[c]], ev_done[ch_buf[c]], c, msa_hold) < lo or ch_lo[c] > hi:
                continue
            if ch_off[c] < off + size and off < ch_off[c] + sizes[ch_buf[c]]:
                t = ch_lo[c] if ch_lo[c] > lo else lo
                if any_op:
                    return t
                if t < first:
                    first = t
    return first


# ------------------------------------------------------------------------------ the rules
@njit(cache=True)
def _slow_copy_from(st, state, s):
    """The first op after which a prefetch for segment ``s`` may be issued (a slow copy exists
    by then), assuming the decisions before ``s`` in its buffer."""
    b = st.seg_buf[s]
    first = st.seg_ptr[b]
    if st.def_op[b] < 0:
        return st.start[b] - 1
    if state.seg_kind[first] != FAST:
        return st.def_op[b]
    # produced fast: is the initial run of FAST segments still going on up to s - 1?
    j = first
    while j < s and state.seg_kind[j] == FAST:
        j += 1
    if j == s:
        return st.seg_use[s - 1] + 1  # earliest possible eviction end: right after the last fast use
    return state.ev_done[b]


@njit(cache=True)
def prefetch_window(st, state, s):
    """``(lo, hi)``: the prefetch issue ops allowed for segment ``s`` (empty when lo > hi).

    The copy may be issued before earlier uses that read slow memory (as MSA's earliest prefetch
    time is when the slow copy exists, not the previous use): back through the run of ``SLOW``
    segments just before ``s``, to the start of the first of them, and no earlier than the slow
    copy."""
    b = st.seg_buf[s]
    j = s
    while j > st.seg_ptr[b] and state.seg_kind[j - 1] == SLOW:
        j -= 1
    lo = st.seg_prev[j]
    avail = _slow_copy_from(st, state, s)
    if avail > lo:
        lo = avail
    return lo, st.seg_use[s] - 1


@njit(cache=True)
def _last_covering(st, lo, hi, u, need):
    """The largest ``p`` in ``[lo, hi]`` whose interval to ``u`` covers ``need`` seconds, or
    ``lo - 1``. ``I(p)`` shrinks as ``p`` grows (prefix sums of times >= 0): a binary search."""
    a, b = lo - 1, hi  # invariant: p <= a covers (or a = lo - 1); p > b does not
    while a < b:
        m = (a + b + 1) // 2
        if _covers(st, interval_time(st, m, u), need):
            a = m
        else:
            b = m - 1
    return a


@njit(cache=True)
def _first_within(st, lo, hi, u, bound):
    """The smallest ``p`` in ``[lo, hi]`` whose interval to ``u`` is at most ``bound`` seconds,
    or ``hi + 1`` (binary search, as :func:`_last_covering`)."""
    a, b = lo, hi + 1  # invariant: p >= b is within; p < a is not
    while a < b:
        m = (a + b) // 2
        if _covers(st, bound, interval_time(st, m, u)):
            b = m
        else:
            a = m + 1
    return a


@njit(cache=True)
def prefetch_starts(st, state, s, out, first):
    """The prefetch issue ops for segment ``s`` into ``out[J]``, distinct, in the order ``first``
    (MSA's own start for this segment, :func:`mallocgym.sim.msa.decide`; ``NO_START``: none), then the
    picker's preferred, latest, earliest and midpoint; return how many (0 if no prefetch is
    possible).

    For use ``u`` and copy time ``c = size / slow_bw``, with ``I(p)`` the all-slow time of the ops
    strictly between ``p`` and ``u``: latest = the largest ``p`` with ``I(p) >= min_ratio * c``;
    preferred = the largest with ``I(p) >= preferred_ratio * c``; earliest = the smallest with
    ``I(p) <= max_ratio * capacity / slow_bw``; each clamped to the allowed window.
    """
    lo, hi = prefetch_window(st, state, s)
    if lo > hi:
        return 0
    u = st.seg_use[s]
    b = st.seg_buf[s]
    copy = st.size[b] / st.params[SLOW_BW]
    cap_time = st.iparams[CAPACITY] / st.params[SLOW_BW]
    latest = max(_last_covering(st, lo, hi, u, st.params[MIN_RATIO] * copy), lo)
    preferred = max(_last_covering(st, lo, hi, u, st.params[PREF_RATIO] * copy), lo)
    earliest = min(_first_within(st, lo, hi, u, st.params[MAX_RATIO] * cap_time), hi)
    mid = (earliest + latest) // 2
    picks = (first, preferred, latest, earliest, mid)
    n = 0
    j_max = st.iparams[N_STARTS]
    for i in range(5):
        if n >= j_max:
            break
        p = picks[i]
        if p == NO_START:
            continue
        dup = False
        for q in range(n):
            if out[q] == p:
                dup = True
        if not dup:
            out[n] = p
            n += 1
    return n


@njit(cache=True)
def keep_legal(st, state, s):
    """Whether segment ``s`` (not a buffer's first) can keep the value at its previous offset."""
    b = st.seg_buf[s]
    if s == st.seg_ptr[b]:
        return False
    prev_kind = state.seg_kind[s - 1]
    if prev_kind != FAST and prev_kind != PREFETCH_SEG:
        return False
    lo = st.seg_prev[s] + 1
    hi = st.seg_use[s]
    return first_blocked(st, state, b, state.seg_off[s - 1], lo, hi, False, True) > hi


@njit(cache=True)
def segment_options(st, state, s, fast_off, starts, pf_count, pf_off, ids, msa_fast, msa_p, msa_poff):
    """Everything legal for segment ``s``, with XLA's own choices first.

    Writes the FAST offsets into ``fast_off[K]`` (first segment of a defined buffer: ``msa_fast``,
    MSA's look-ahead best-fit offset, then the candidates over ``[d, use]``; a later one: the one
    offset that keeps the value, if it can), the prefetch issue ops into ``starts[J]`` (``msa_p``,
    the start MSA would issue a prefetch at, then the picker's; :func:`prefetch_starts`) and, for
    each, its candidate offsets over ``[p + 1, use]`` into ``pf_off[J, K]`` (counts in
    ``pf_count[J]``; at ``msa_p``, MSA's offset ``msa_poff`` first). ``-1`` (``msa_p``:
    ``NO_START``): MSA has no such choice. Returns ``(n_fast, n_starts)``. SLOW is always legal.
    MSA's choices are legal moves (:mod:`mallocgym.sim.msa`: its chunks are free over windows
    that contain these). A long window's candidates are read from the index buckets' unions
    (:func:`_candidates_by_unions`): the same as a walk of its chunks finds.
    """
    b = st.seg_buf[s]
    k = st.iparams[N_CAND]
    u = st.seg_use[s]
    fits = st.size[b] <= st.iparams[CAPACITY]
    produce = s == st.seg_ptr[b] and st.def_op[b] >= 0 and fits  # FAST over [d, use]
    n_fast = 0
    if s != st.seg_ptr[b] and keep_legal(st, state, s):
        fast_off[0] = state.seg_off[s - 1]
        n_fast = 1
    n_starts = prefetch_starts(st, state, s, starts, msa_p) if fits else 0
    if produce or n_starts > 0:
        # a window over three index buckets or more from their unions (its bucket count checked
        # before the call: entering a kernel that takes the state costs about 1 us, see _sync, and
        # most prefetch windows are short); the others share one scan of the chunks from the
        # earliest of their starts (every window ends at the use)
        w = state.counters[IX_WIDTH]
        k_max = min(u // w, state.ix_head.shape[0] - 1) - 2  # the latest first bucket the unions answer
        lo = u + 1
        if produce:
            n_fast = NO_FIT
            if st.def_op[b] // w <= k_max:
                n_fast = _candidates_by_unions(st, state, b, st.def_op[b], u, k, ids, fast_off)
            if n_fast == NO_FIT:
                lo = st.def_op[b]
        for j in range(n_starts):
            pf_count[j] = NO_FIT
            if max(starts[j] + 1, 0) // w <= k_max:
                pf_count[j] = _candidates_by_unions(st, state, b, starts[j] + 1, u, k, ids, pf_off[j])
            if pf_count[j] == NO_FIT and starts[j] + 1 < lo:
                lo = starts[j] + 1
        if lo <= u:
            m = live_chunks(st, state, lo, u, b, ids, False)
            if produce and n_fast == NO_FIT:
                n_fast = _candidates_among(st, state, b, st.def_op[b], k, ids, m, fast_off)
            for j in range(n_starts):
                if pf_count[j] == NO_FIT:
                    pf_count[j] = _candidates_among(st, state, b, starts[j] + 1, k, ids, m, pf_off[j])
        if produce:
            n_fast = _put_first(fast_off, n_fast, k, msa_fast)
        for j in range(n_starts):
            if starts[j] == msa_p:  # never NO_START: prefetch_starts skips it
                pf_count[j] = _put_first(pf_off[j], pf_count[j], k, msa_poff)
    return n_fast, n_starts


@njit(cache=True)
def _put_first(offs, n, k, off):
    """Move ``off`` to the front of ``offs[:n]`` (inserting it, and dropping the last of ``k`` if
    full, when absent); return the new count. ``off < 0``: unchanged."""
    if off < 0:
        return n
    i = 0
    while i < n and offs[i] != off:
        i += 1
    if i == n:
        n = n + 1 if n < k else k
        i = n - 1
    for j in range(i, 0, -1):
        offs[j] = offs[j - 1]
    offs[0] = off
    return n


@njit(cache=True)
def _price(st, state, b, seg, to_fast):
    """Move the accesses priced by ``seg`` (a segment id, or DEF_GROUP) of buffer ``b``."""
    _price_accesses(st.access_ptr, st.acc_seg, st.access_op, st.access_bytes, st.params, state.slow_bytes,
                    state.fast_bytes, state.slow_time, state.fast_time, state.touched, state.counters, b, seg,
                    to_fast)


@njit(cache=True)
def _price_accesses(access_ptr, acc_seg, access_op, access_bytes, params, slow_bytes, fast_bytes, slow_time,
                    fast_time, touched, counters, b, seg, to_fast):
    """:func:`_price` over the arrays it reads (a kernel that takes the state pays for its every
    array: see :func:`_sync`)."""
    for a in range(access_ptr[b], access_ptr[b + 1]):
        if acc_seg[a] != seg:
            continue
        t = access_op[a]
        n = access_bytes[a]
        if to_fast:
            slow_bytes[t] -= n
            fast_bytes[t] += n
        else:
            slow_bytes[t] += n
            fast_bytes[t] -= n
        slow_time[t] = slow_bytes[t] / params[SLOW_BW]
        fast_time[t] = fast_bytes[t] / params[FAST_BW]
        if t < counters[DIRTY]:  # _touch
            counters[DIRTY] = t
        if t > counters[DIRTY_HI]:
            counters[DIRTY_HI] = t
        k = touched[0]
        if k >= 0:
            if k + 1 < touched.shape[0]:
                touched[k + 1] = t
                touched[0] = k + 1
            else:
                touched[0] = -1


@njit(cache=True, inline="always")
def _unhold_eviction(st, state, b):
    """Forget ``b``'s eviction and its hold on the chunk; return its done op (-1: none). Its copy
    stays listed: the caller moves it (:func:`_place_eviction`) or removes it (:func:`_drop_copy`)."""
    done = state.ev_done[b]
    if done >= 0:
        _set_hi(st, state, state.ev_chunk[b], state.ev_base[b])
        state.ev_done[b] = -1
        state.ev_chunk[b] = -1
    return done


@njit(cache=True, inline="always")
def _drop_copy(st, state, b, done):
    """Remove the copy of ``b``'s eviction, done before op ``done`` (-1: none listed)."""
    if done >= 0:
        _remove_copy(st, state, st.seg_use.shape[0] + b)


@njit(cache=True)
def eviction_end(st, state, b, needed):
    """The op before which the eviction of ``b`` (produced fast, its initial run of fast uses in
    chunk ``c``) is done when its slow copy is needed by op ``needed``: ``min(max(preferred, last
    fast use + 1), needed)``, moved earlier until the chunk can be held at its offset up to the
    op before (``PreferredEvictionEndTime``, then ``Evict``'s search)."""
    c = state.seg_chunk[st.seg_ptr[b]]
    last_use = state.ev_base[b] if state.ev_chunk[b] == c else state.ch_hi[c]  # before an eviction's hold
    d = st.def_op[b]
    copy = st.size[b] / st.params[SLOW_BW]
    # PreferredEvictionEndTime: the first t in (d, needed] whose interval from d covers the
    # preferred ratio x the copy time, else needed (the interval grows with t: binary search)
    want = st.params[PREF_RATIO] * copy
    a, z = d + 1, needed + 1
    while a < z:
        m = (a + z) // 2
        if _covers(st, interval_time(st, d, m), want):
            z = m
        else:
            a = m + 1
    e = a if a <= needed else needed
    if e < last_use + 1:
        e = last_use + 1
    if e > needed:
        e = needed
    if e - 1 > last_use:  # hold the chunk up to e - 1: move e earlier until that is free
        blocked = first_blocked(st, state, b, state.ch_off[c], last_use + 1, e - 1, False, False)
        if blocked < e:
            e = blocked
    return e


@njit(cache=True)
def _place_eviction(st, state, b, needed, old):
    """Evict buffer ``b`` (produced fast, initial run ending at chunk ``c``) so that its slow copy
    exists before op ``needed``; ``old``: the done op of the copy of its previous eviction, still
    listed (moved, not removed and added again: a move shifts only the copies issued at the same
    op), -1 none."""
    c = state.seg_chunk[st.seg_ptr[b]]
    last_use = state.ch_hi[c]
    d = st.def_op[b]
    e = eviction_end(st, state, b, needed)
    state.ev_done[b] = e
    state.ev_base[b] = last_use
    state.ev_chunk[b] = c
    if old >= 0:
        _move_copy(state, st.seg_use.shape[0] + b, e)
    else:
        _add_copy(st, state, st.seg_use.shape[0] + b, d, e, float(st.size[b]), EVICTION)
    if e - 1 > last_use:
        _set_hi(st, state, c, e - 1)


@njit(cache=True)
def _update_eviction(st, state, b, old):
    """(Re)place ``b``'s eviction after a decision on one of its segments; ``old``: the done op
    of an eviction already unheld (:func:`_unhold_eviction`) whose copy is still listed, -1 none."""
    if state.ev_final[b] == 1 or st.def_op[b] < 0:
        _drop_copy(st, state, b, old)
        return
    first = st.seg_ptr[b]
    last = st.seg_ptr[b + 1]
    if state.seg_kind[first] != FAST:
        _drop_copy(st, state, b, old)
        return
    done = _unhold_eviction(st, state, b)
    if done >= 0:
        old = done
    j = first
    while j < last and state.seg_kind[j] == FAST:
        j += 1
    if j < last:
        if state.seg_kind[j] == SLOW or state.seg_kind[j] == UNDECIDED:
            needed = st.seg_use[j]
        else:  # PREFETCH: the slow copy must exist when it is issued
            needed = state.seg_pstart[j]
        _place_eviction(st, state, b, needed, old)
        if state.seg_kind[j] != UNDECIDED:
            state.ev_final[b] = 1
    elif st.is_output[b] == 1:
        _place_eviction(st, state, b, st.compute_time.shape[0], old)
        if state.seg_kind[last - 1] != UNDECIDED:
            state.ev_final[b] = 1
    else:
        _drop_copy(st, state, b, old)


@njit(cache=True)
def apply(st, state, s, kind, off, pstart):
    """Allocate segment ``s`` (a legal move: one of :func:`segment_options`') and return the change
    of program time (seconds; negative = faster). Does not move the decision position."""
    before = state.totals[TIME]
    apply_rules(st, state, s, kind, off, pstart)
    return current_time(st, state) - before


@njit(cache=True)
def apply_rules(st, state, s, kind, off, pstart):
    """:func:`apply` without re-simulating: the allocation, its copies and the eviction it
    implies. ``state.totals`` is stale until :func:`current_time` runs (which then re-simulates
    from the earliest op any of the decisions since the last run touched)."""
    b = st.seg_buf[s]
    state.seg_kind[s] = kind
    old = -1  # the done op of an eviction unheld here, its copy still listed
    if kind == FAST and s != st.seg_ptr[b]:
        c = state.seg_chunk[s - 1]
        state.seg_chunk[s] = c
        state.seg_off[s] = state.seg_off[s - 1]
        if state.ev_chunk[b] == c:  # the tentative eviction extended it: drop that first
            old = _unhold_eviction(st, state, b)
        _set_hi(st, state, c, st.seg_use[s])
    elif kind == FAST or kind == PREFETCH_SEG:
        c = s
        state.seg_chunk[s] = c
        state.seg_off[s] = off
        state.ch_lo[c] = st.def_op[b] if kind == FAST else pstart + 1
        state.ch_hi[c] = st.seg_use[s]
        state.ch_off[c] = off
        state.ch_buf[c] = b
        _activate(st, state, c)
        if kind == PREFETCH_SEG:
            state.seg_pstart[s] = pstart
            _add_copy(st, state, s, pstart, st.seg_use[s], float(st.size[b]), PREFETCH)
            copy_budget.add(st.cum_slow, BUDGET_EPS * st.params[TIME_ALL_SLOW], state, pstart, st.seg_use[s],
                            st.size[b] / st.params[SLOW_BW])
    if kind == FAST or kind == PREFETCH_SEG:
        _price_accesses(st.access_ptr, st.acc_seg, st.access_op, st.access_bytes, st.params, state.slow_bytes,
                        state.fast_bytes, state.slow_time, state.fast_time, state.touched, state.counters, b, s,
                        True)
        if kind == FAST and s == st.seg_ptr[b]:
            _price_accesses(st.access_ptr, st.acc_seg, st.access_op, st.access_bytes, st.params, state.slow_bytes,
                            state.fast_bytes, state.slow_time, state.fast_time, state.touched, state.counters, b,
                            DEF_GROUP, True)
    _update_eviction(st, state, b, old)
    _sync(state.seg_chunk, state.ch_buf, state.ch_lo, state.ch_hi, state.ch_off, state.ev_chunk, state.ev_done,
          state.ix_head, state.ix_nxt, state.ix_cid, state.ix_count, state.ix_meta, st.size, st.seg_ptr,
          st.seg_use.shape[0], state.counters[IX_WIDTH], b)
    if state.ix_meta[narrow_at(st.seg_use.shape[0], state.ix_head.shape[0]) + NW] > 0:
        _sync_narrow(state.seg_chunk, state.ch_buf, state.ch_lo, state.ch_hi, state.ch_off, state.ev_chunk,
                     state.ev_done, state.ix_head, state.ix_nxt, state.ix_cid, state.ix_meta, st.size, st.seg_ptr,
                     st.seg_use.shape[0], state.counters, st.iparams[CAPACITY] + 1, b)
