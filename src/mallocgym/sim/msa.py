"""XLA's Memory Space Assignment (MSA) decision rules on MallocGame-v1, as numba kernels.

The ``xla-msa`` baseline (:mod:`mallocgym.agents.xla_msa`) plays these on a
:mod:`mallocgym.sim.v1` state, buffer by buffer in MSA's order, each buffer's uses in time order,
as MSA's ``AllocateSegment`` loop does (openxla/xla ``xla/service/memory_space_assignment/``):

1. **keep** without a copy (``AllocateInAlternateMemoryNoCopy``): a value produced, or already
   in fast memory, stays at its offset up to this use if the chunk is free there and the
   interval passes the picker's no-copy bound (``CanAllocateInAlternateMemoryNoCopy``); for a
   new value the offset comes from the look-ahead best fit (below);
2. **evict** (``Evict``): done by the v1 rules themselves when the value next needs a slow copy
   (:func:`mallocgym.sim.v1.apply`; the eviction end follows ``PreferredEvictionEndTime``);
3. **prefetch** (``Prefetch``): start times in the picker's own search order, each checked
   against the copy resource (``AsynchronousCopyResource``) and then for a free chunk (look-ahead
   best fit); the first that passes is taken;
4. otherwise the use reads **slow** memory.

Pickers: cost analysis (``CostAnalysisPrefetchIntervalPicker``: min / preferred / max overlap
ratios, MSA's test values 0.8 / 1.5 / 10 by default) and instruction count
(``InstructionCountPrefetchIntervalPicker(min, max)``). Offsets: best fit
(``FindBestChunkCandidate`` / ``GlobalDecreasingSizeBestFitHeap::FindChunkCandidate``): the
smallest free gap that fits, then the lowest offset, the space above the highest live chunk
ranked last; the interval looked ahead to the latest later use reachable without a copy
(binary search), the chunk committed only up to this use. An extension tries only the previous
offset.

Copy resource (``AsynchronousCopyResource::ConsumeResource``): each op's budget is its all-slow
elapsed time; prefetches are kept sorted by start (FIFO); a copy consumes ``size / slow_bw``
over the ops strictly inside its window after the earlier copies' leftover (``delay``), and its
own leftover when the next copy starts pushes that copy back, recursively; a copy that cannot
finish inside its window is refused. Evictions do not consume it (MSA's eviction budget is
disabled on its last retry, which with the default single retry is the only one).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from . import v1
from .v1 import FAST, PREFETCH_SEG, SLOW, interval_time
from ..features.v1 import advance_forced, play

__all__ = ["MsaStatic", "Resource", "PICKERS", "msa_static", "new_resource", "resource_from_state",
           "has_resource", "add_copy", "picker_starts", "nocopy_ok", "keep_free", "best_fit",
           "look_ahead_fit", "choose", "plan", "nearest_action", "complete_msa"]

PICKERS = ("cost", "count")
COST, COUNT = 0, 1
# MsaStatic.params
PICKER, MIN_RATIO, PREF_RATIO, MAX_RATIO, CNT_MIN, CNT_MAX, MAX_ELAPSED, EPS = range(8)
# ``CostAnalysisPrefetchIntervalPicker::Next``: once the later side is exhausted, the earlier side
# is sampled in steps of 1 / kNumExploredDecreasingIntervals of the longest interval
N_EXPLORED_DECREASING = 100.0

MsaStatic = namedtuple("MsaStatic", [
    "params",     # float64[8]: picker, min / preferred / max ratio, count min / max, max no-copy time, eps
    "elapsed",    # float64[T] all-slow elapsed time of each op: the copy budget per op
    "reduction",  # float64[S] time the use op saves with this segment's accesses fast (inst_elapsed_reduction)
    "rank",       # int64[S] position of each segment in the decision order (copies of a state re-added in it)
    "cum_slow",   # float64[T+1] prefix sums of ``elapsed`` (the scenario's; read by ``v1.interval_time``)
])

Resource = namedtuple("Resource", [
    "start",   # int64[S] prefetches sorted by start (equal starts in the order added): issued after op start,
    "end",     #   done before op end,
    "amount",  #   float64 copy time (size / slow_bw)
    "count",   # int64[1] how many
    "delay",   # float64[T+1] leftover of earlier copies at the start of each op
])


def msa_static(st: v1.Static1, picker: str = "cost", *, count_min: int = 2, count_max: int = 10,
               ratios: tuple[float, float, float] | None = None) -> MsaStatic:
    """The picker's settings and per-op / per-segment times for a compiled v1 scenario.

    ``ratios`` (cost picker): min / preferred / max overlap ratios; default the scenario's
    (``compile_v1(ratios=...)``, MSA's test values 0.8 / 1.5 / 10).
    """
    if picker not in PICKERS:
        raise ValueError(f"unknown picker {picker!r}; expected one of {', '.join(PICKERS)}")
    if not (isinstance(count_min, int) and isinstance(count_max, int)) or not 0 <= count_min <= count_max:
        raise ValueError(f"instruction-count picker needs integers 0 <= min <= max, got min={count_min!r}, "
                         f"max={count_max!r}")
    p = st.params
    if ratios is None:
        ratios = (float(p[v1.MIN_RATIO]), float(p[v1.PREF_RATIO]), float(p[v1.MAX_RATIO]))
    lo_r, pref_r, max_r = ratios
    if not 0 < lo_r <= pref_r <= max_r:
        raise ValueError(f"picker ratios must satisfy 0 < min <= preferred <= max, got {ratios}")
    slow_bw, fast_bw = float(p[v1.SLOW_BW]), float(p[v1.FAST_BW])
    capacity = int(st.iparams[v1.CAPACITY])
    elapsed = np.diff(st.cum_slow)
    # inst_elapsed_reduction: the use op's all-slow time minus its time with this segment's bytes fast
    n_ops = elapsed.shape[0]
    slow_bytes = np.zeros(n_ops)
    np.add.at(slow_bytes, st.access_op, st.access_bytes)
    seg_bytes = np.zeros(st.seg_use.shape[0])
    priced = st.acc_seg >= 0
    np.add.at(seg_bytes, st.acc_seg[priced], st.access_bytes[priced])
    u = st.seg_use
    fast = np.maximum(st.compute_time[u],
                      (slow_bytes[u] - seg_bytes) / slow_bw + seg_bytes / fast_bw + st.overhead[u])
    reduction = np.maximum(elapsed[u] - fast, 0.0)
    rank = np.empty(st.order.shape[0], np.int64)
    rank[st.order] = np.arange(st.order.shape[0])
    params = np.array([COST if picker == "cost" else COUNT, lo_r, pref_r, max_r, count_min, count_max,
                       max_r * capacity / slow_bw, 1e-12 * float(p[v1.TIME_ALL_SLOW])])
    return MsaStatic(params, elapsed, reduction, rank, st.cum_slow)


def new_resource(st: v1.Static1) -> Resource:
    s, t = st.seg_use.shape[0], st.compute_time.shape[0]
    return Resource(np.zeros(s, np.int64), np.zeros(s, np.int64), np.zeros(s), np.zeros(1, np.int64),
                    np.zeros(t + 1))


# ------------------------------------------------------------------------------ copy resource
@njit(cache=True)
def _upper_bound(res, t):
    """The first copy (in start order) that starts after op ``t``."""
    lo, hi = 0, res.count[0]
    while lo < hi:
        m = (lo + hi) // 2
        if res.start[m] <= t:
            lo = m + 1
        else:
            hi = m
    return lo


@njit(cache=True)
def _consume(ms, res, start, end, amount, update):
    """``ConsumeResource`` for a new copy, op by op as MSA writes it: whether it (and every copy
    it pushes back) still finishes inside its window; with ``update``, record the leftovers in
    ``delay``. :func:`has_resource` answers the same question from prefix sums."""
    eps = ms.params[EPS]
    if amount <= 0.0:
        return True
    left = amount + res.delay[start + 1]
    nxt = _upper_bound(res, start)
    n = res.count[0]
    while True:
        pushed = -1.0
        t = start + 1
        while t < end and left > eps:
            used = min(left, ms.elapsed[t])
            if nxt < n and res.start[nxt] == t - 1:
                pushed = left  # still copying when the next copy is issued: it waits for this
            if update and pushed < 0.0:
                res.delay[t] = left
            left -= used
            t += 1
        if left > eps:
            return False
        if pushed < 0.0:
            return True
        start, end = res.start[nxt], res.end[nxt]
        left = pushed + res.amount[nxt]
        nxt += 1


@njit(cache=True)
def has_resource(ms, res, start, end, amount):
    """``HasEnoughResource``: can a copy of ``amount`` seconds issued after op ``start`` be done
    before op ``end`` without pushing any later copy past its own end?

    :func:`_consume` without its op-by-op loop: a copy fits iff its work (with the earlier
    copies' leftover) is at most the ops' time inside its window, and it pushes the next copy
    by what is left of it when that copy is issued; both are prefix sums of the op times
    (``interval_time``), so a check costs one step per copy it pushes, not one per op."""
    eps = ms.params[EPS]
    if amount <= 0.0:
        return True
    left = amount + res.delay[start + 1]
    nxt = _upper_bound(res, start)
    n = res.count[0]
    while True:
        if left > interval_time(ms, start, end) + eps:
            return False
        if nxt >= n or res.start[nxt] + 1 >= end:
            return True
        pushed = left - interval_time(ms, start, res.start[nxt] + 1)  # still to copy when it is issued
        if pushed <= eps:
            return True
        start, end = res.start[nxt], res.end[nxt]
        left = pushed + res.amount[nxt]
        nxt += 1


@njit(cache=True)
def add_copy(ms, res, start, end, amount):
    """``AddCopy``: consume the resource and insert the copy after those issued at the same op."""
    _consume(ms, res, start, end, amount, True)
    i = _upper_bound(res, start)
    n = res.count[0]
    for j in range(n, i, -1):
        res.start[j] = res.start[j - 1]
        res.end[j] = res.end[j - 1]
        res.amount[j] = res.amount[j - 1]
    res.start[i] = start
    res.end[i] = end
    res.amount[i] = amount
    res.count[0] = n + 1


@njit(cache=True)
def resource_from_state(st, state, ms, res):
    """Rebuild ``res`` from a v1 state's prefetches, added in decision order."""
    res.count[0] = 0
    res.delay[:] = 0.0
    n = state.counters[v1.N_COPIES]
    keys = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        if state.cp_kind[i] == 0:  # a prefetch: key = its segment
            keys[m] = state.cp_key[i]
            m += 1
    ranks = np.empty(m, np.int64)
    for i in range(m):
        ranks[i] = ms.rank[keys[i]]
    order = np.argsort(ranks)
    slow_bw = st.params[v1.SLOW_BW]
    for i in range(m):
        s = keys[order[i]]
        add_copy(ms, res, state.seg_pstart[s], st.seg_use[s], st.size[st.seg_buf[s]] / slow_bw)


# ------------------------------------------------------------------------------ the picker
@njit(cache=True)
def nocopy_ok(st, ms, a, b):
    """``CanAllocateInAlternateMemoryNoCopy`` for the interval from op ``a`` to op ``b``."""
    if ms.params[PICKER] == COUNT:
        return b - a <= ms.params[CNT_MAX]
    return ms.params[MAX_ELAPSED] > interval_time(st, a, b)


@njit(cache=True)
def picker_starts(st, ms, s, lo, out):
    """The prefetch start times MSA tries for segment ``s`` when the slow copy is available
    after op ``lo``, in the picker's order, into ``out``; return how many.

    Instruction count: ``max(lo, u - max)``, then +1, ... while ``u - p > min``. Cost analysis
    (``Begin`` / ``Next``): latest = the last ``p`` whose interval plus the use's own saving covers
    ``min_ratio`` x the copy time; earliest = the first with an interval at most the max no-copy
    time; the preferred start (interval nearest ``preferred_ratio`` x the copy time, the earliest
    on ties) first, then alternately later and earlier (+1, -1, +2, ...); once the later side is
    exhausted, the earlier side only in steps of 1/100 of the earliest start's interval.
    """
    u = st.seg_use[s]
    n = 0
    if ms.params[PICKER] == COUNT:
        p = max(lo, u - np.int64(ms.params[CNT_MAX]))
        while u - p > ms.params[CNT_MIN] and n < out.shape[0]:
            out[n] = p
            n += 1
            p += 1
        return n
    copy = st.size[st.seg_buf[s]] / st.params[v1.SLOW_BW]
    need = ms.params[MIN_RATIO] * copy
    latest = u - 1
    while latest >= lo and need > interval_time(st, latest, u) + ms.reduction[s]:
        latest -= 1
    earliest = lo
    while earliest < latest and ms.params[MAX_ELAPSED] < interval_time(st, earliest, u):
        earliest += 1
    if earliest > latest:
        return 0
    target = ms.params[PREF_RATIO] * copy
    preferred = earliest
    best = abs(target - interval_time(st, earliest, u))
    for p in range(earliest + 1, latest + 1):
        d = abs(target - interval_time(st, p, u))
        if d < best:
            best = d
            preferred = p
    inc = preferred + 1  # Begin() calls Next() once: the increasing iterator moves past preferred
    dec = preferred
    use_inc = dec < earliest
    span = interval_time(st, earliest, u) / N_EXPLORED_DECREASING
    while not (inc > latest and dec < earliest) and n < out.shape[0]:
        if use_inc:
            p = inc
            inc += 1
            if dec >= earliest:
                use_inc = False
        else:
            p = dec
            dec -= 1
            goal = 0.0
            if inc > latest:
                goal = interval_time(st, p, u) + span
            while dec >= earliest and interval_time(st, dec, u) < goal:
                dec -= 1
            if inc <= latest:
                use_inc = True
        out[n] = p
        n += 1
    return n


# ------------------------------------------------------------------------------ offsets
@njit(cache=True)
def keep_free(st, state, s):
    """Whether segment ``s`` can keep the value at its previous offset (as
    :func:`mallocgym.sim.v1.keep_legal`, with evicted chunks held through their done op)."""
    b = st.seg_buf[s]
    prev_kind = state.seg_kind[s - 1]
    if s == st.seg_ptr[b] or (prev_kind != FAST and prev_kind != PREFETCH_SEG):
        return False
    hi = st.seg_use[s]
    return v1.first_blocked(st, state, b, state.seg_off[s - 1], st.seg_prev[s] + 1, hi, True, True) > hi


@njit(cache=True)
def best_fit(st, state, ids, b, lo, hi):
    """MSA's best-fit offset for buffer ``b`` over ops ``[lo, hi]``: the smallest free gap that
    fits, then the lowest offset; the space above the highest live chunk ranks last (checked
    against the capacity). -1 if nothing fits. Chunks are held as MSA holds them (an evicted one
    through its eviction's done op: :func:`mallocgym.sim.v1.held_through`); ``ids`` is scratch."""
    size = st.size[b]
    capacity = st.iparams[v1.CAPACITY]
    align = st.iparams[v1.ALIGNMENT]
    m = v1.live_chunks(st, state, lo, hi, b, ids, True)
    best_gap = -1
    best_off = -1
    cursor = 0
    for i in range(m):
        c = ids[i]
        ghi = state.ch_off[c]
        if ghi > cursor:
            low = (cursor + align - 1) // align * align
            if low + size <= ghi and (best_gap < 0 or ghi - cursor < best_gap):
                best_gap = ghi - cursor
                best_off = low
        top = ghi + st.size[state.ch_buf[c]]
        if top > cursor:
            cursor = top
    if best_off < 0:
        low = (cursor + align - 1) // align * align
        if low + size <= capacity:
            best_off = low
    return best_off


@njit(cache=True)
def look_ahead_fit(st, state, ms, ids, s, lo):
    """``FindBestChunkCandidate`` with no preferred offset: the best fit over ``[lo, use]``
    extended to the latest later use reachable without a copy that still fits (binary search
    over those uses). -1 if nothing fits even up to this use."""
    b = st.seg_buf[s]
    off = best_fit(st, state, ids, b, lo, st.seg_use[s])  # the short window first: most misses end here
    if off < 0:
        return -1
    last = st.seg_ptr[b + 1]
    j = s
    while j + 1 < last and nocopy_ok(st, ms, st.seg_use[j], st.seg_use[j + 1]):
        j += 1
    if j == s:
        return off
    o = best_fit(st, state, ids, b, lo, st.seg_use[j])
    if o >= 0:
        return o
    a, z = s, j  # fits up to use a, not up to use z
    while z - a > 1:
        mid = (a + z) // 2
        o = best_fit(st, state, ids, b, lo, st.seg_use[mid])
        if o >= 0:
            a, off = mid, o
        else:
            z = mid
    return off


# ------------------------------------------------------------------------------ decisions
@njit(cache=True)
def choose(st, state, ms, res, ids, s, starts, out):
    """MSA's allocation for segment ``s`` of the current state into ``out`` = ``(kind, offset,
    prefetch start)``."""
    out[0], out[1], out[2] = SLOW, -1, -1
    b = st.seg_buf[s]
    if st.size[b] > st.iparams[v1.CAPACITY]:
        return
    first = st.seg_ptr[b]
    u = st.seg_use[s]
    d = st.def_op[b]
    n_ops = st.compute_time.shape[0]
    if s == first:
        # produce in fast memory (not a program input, nor an output produced by the last op,
        # which MSA pins to default memory)
        if d >= 0 and not (st.is_output[b] == 1 and d == n_ops - 1) and nocopy_ok(st, ms, d, u):
            off = look_ahead_fit(st, state, ms, ids, s, d)
            if off >= 0:
                out[0], out[1] = FAST, off
                return
    else:
        k = state.seg_kind[s - 1]
        if (k == FAST or k == PREFETCH_SEG) and nocopy_ok(st, ms, st.seg_prev[s], u) and keep_free(st, state, s):
            out[0], out[1] = FAST, state.seg_off[s - 1]
            return
    lo, hi = v1.prefetch_window(st, state, s)
    if d < 0 and st.seg_use[first] > st.start[b] and lo < st.start[b]:
        # a program input whose live range starts at an op of its own (an XLA parameter): MSA's
        # earliest prefetch is that op; v1 allows one op earlier, which the port keeps only for
        # inputs read at their first live op (synthetic programs have no parameter ops)
        lo = st.start[b]
    j = first
    while j < s and state.seg_kind[j] == FAST:
        j += 1
    if s > first and j == s and d >= 0:
        # produced fast and kept up to the previous use: the value is evicted now (Evict), and a
        # prefetch may start once that copy is done
        e = v1.eviction_end(st, state, b, u)
        if e > lo:
            lo = e
    if lo > hi:
        return
    n = picker_starts(st, ms, s, lo, starts)
    copy = st.size[b] / st.params[v1.SLOW_BW]
    no_room = lo - 1  # nothing fits over [p + 1, u] for every p <= no_room (a longer window: fewer gaps)
    for i in range(n):
        p = starts[i]
        if p < lo or p > hi or p <= no_room or not has_resource(ms, res, p, u, copy):
            continue
        off = look_ahead_fit(st, state, ms, ids, s, p + 1)
        if off >= 0:
            out[0], out[1], out[2] = PREFETCH_SEG, off, p
            return
        no_room = p


@njit(cache=True)
def plan(st, state, ms, res, ids, starts):
    """Play MSA from the state's position to the end with its exact choices (any prefetch start
    the picker gives, not only the env's); return the program time. ``res`` is rebuilt from the
    state first; ``ids`` is scratch (``S + 1`` entries)."""
    resource_from_state(st, state, ms, res)
    out = np.empty(3, np.int64)
    n = st.seg_use.shape[0]
    slow_bw = st.params[v1.SLOW_BW]
    while state.counters[v1.POS] < n:
        pos = state.counters[v1.POS]
        s = st.order[pos]
        choose(st, state, ms, res, ids, s, starts, out)
        v1.apply_rules(st, state, s, out[0], out[1], out[2])
        if out[0] == PREFETCH_SEG:
            add_copy(ms, res, out[2], st.seg_use[s], st.size[st.seg_buf[s]] / slow_bw)
        state.counters[v1.POS] += 1
        state.counters[v1.CHOSEN] += 1
    return v1.current_time(st, state)


@njit(cache=True)
def nearest_action(table, kind, off, pstart):
    """The env action nearest to MSA's choice: the same kind (PREFETCH: the nearest start time,
    then the nearest offset; FAST: the nearest offset), else SLOW (action 0)."""
    best = 0
    if kind == SLOW:
        return 0
    best_dp = -1
    best_do = -1
    for a in range(1, table.kind.shape[0]):
        if table.kind[a] != kind:
            continue
        dp = abs(table.pstart[a] - pstart) if kind == PREFETCH_SEG else 0
        do = abs(table.off[a] - off)
        if best_dp < 0 or dp < best_dp or (dp == best_dp and do < best_do):
            best, best_dp, best_do = a, dp, do
    return best


@njit(cache=True)
def complete_msa(st, state, table, ms, res, starts):
    """Play the rest of the game with MSA's choice mapped to the nearest env action at each
    real decision (forced positions as the env plays them); return the final program time.
    ``res`` is rebuilt from the state first."""
    resource_from_state(st, state, ms, res)
    out = np.empty(3, np.int64)
    slow_bw = st.params[v1.SLOW_BW]
    s = advance_forced(st, state, table)
    while s >= 0:
        choose(st, state, ms, res, table.ids, s, starts, out)
        a = nearest_action(table, out[0], out[1], out[2])
        if table.kind[a] == PREFETCH_SEG:
            add_copy(ms, res, table.pstart[a], st.seg_use[s], st.size[st.seg_buf[s]] / slow_bw)
        s = play(st, state, table, s, table.kind[a], table.off[a], table.pstart[a])
    return state.totals[v1.TIME]
