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

Copy budget (``AsynchronousCopyResource``): kept by every v1 state (:mod:`mallocgym.sim.copy_budget`),
so MSA's choice is a function of the state; the env offers it as an action
(:func:`mallocgym.features.v1.options`), and played through the env it leaves exactly the plan.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from . import copy_budget, v1
from .v1 import FAST, PREFETCH_SEG, SLOW, interval_time

__all__ = ["MsaStatic", "PICKERS", "msa_static", "picker_starts", "nocopy_ok", "best_fit",
           "look_ahead_fit", "decide", "plan"]

PICKERS = ("cost", "count")
COST, COUNT = 0, 1
# MsaStatic.params
PICKER, MIN_RATIO, PREF_RATIO, MAX_RATIO, CNT_MIN, CNT_MAX, MAX_ELAPSED, EPS = range(8)
# ``CostAnalysisPrefetchIntervalPicker::Next``: once the later side is exhausted, the earlier side
# is sampled in steps of 1 / kNumExploredDecreasingIntervals of the longest interval
N_EXPLORED_DECREASING = 100.0

MsaStatic = namedtuple("MsaStatic", [
    "params",     # float64[8]: picker, min / preferred / max ratio, count min / max, max no-copy time, eps
    "reduction",  # float64[S] time the use op saves with this segment's accesses fast (inst_elapsed_reduction)
    "cum_slow",   # float64[T+1] prefix sums of each op's all-slow time (the scenario's; read by ``v1.interval_time``)
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
    params = np.array([COST if picker == "cost" else COUNT, lo_r, pref_r, max_r, count_min, count_max,
                       max_r * capacity / slow_bw, 1e-12 * float(p[v1.TIME_ALL_SLOW])])
    return MsaStatic(params, reduction, st.cum_slow)


# ------------------------------------------------------------------------------ the picker
@njit(cache=True)
def nocopy_ok(st, ms, a, b):
    """``CanAllocateInAlternateMemoryNoCopy`` for the interval from op ``a`` to op ``b``."""
    return _nocopy(ms.params, st.cum_slow, a, b)


@njit(cache=True)
def _nocopy(params, cum_slow, a, b):
    """:func:`nocopy_ok` from the two arrays it reads (what the kernels call: one that takes the
    scenario pays for its every array, see :func:`mallocgym.sim.v1._sync`)."""
    if params[PICKER] == COUNT:
        return b - a <= params[CNT_MAX]
    return params[MAX_ELAPSED] > v1.interval_time_of(cum_slow, a, b)


@njit(cache=True, inline="always")
def _last_true_down(st, lo, hi, u, x):
    """The largest ``p`` in ``[lo, hi]`` with ``interval_time(p, u) >= x`` (``lo - 1``: none).
    ``interval_time(p, u)`` does not grow with ``p`` (prefix sums of times >= 0, rounding is
    monotone), so a binary search finds what a walk down from ``hi`` finds."""
    a, b = lo - 1, hi
    while a < b:
        m = (a + b + 1) // 2
        if interval_time(st, m, u) >= x:
            a = m
        else:
            b = m - 1
    return a


@njit(cache=True, inline="always")
def _picker_begin(st, ms, s, lo):
    """The cost picker's ``(earliest, latest, preferred)`` for segment ``s`` with the slow copy
    available after op ``lo`` (``earliest > latest``: no start), by binary search over the
    monotone interval times; the same starts as walking the window op by op."""
    u = st.seg_use[s]
    copy = st.size[st.seg_buf[s]] / st.params[v1.SLOW_BW]
    need = ms.params[MIN_RATIO] * copy
    red = ms.reduction[s]
    # latest: the last p in [lo, u - 1] with need <= interval + reduction
    a, b = lo - 1, u - 1
    while a < b:
        m = (a + b + 1) // 2
        if not (need > interval_time(st, m, u) + red):
            a = m
        else:
            b = m - 1
    latest = a
    # earliest: the first p in [lo, latest] whose interval is at most the max no-copy time
    mx = ms.params[MAX_ELAPSED]
    a, b = lo, latest
    while a < b:
        m = (a + b) // 2
        if mx < interval_time(st, m, u):
            a = m + 1
        else:
            b = m
    earliest = a if lo <= latest else lo
    if earliest > latest:
        return earliest, latest, earliest
    # preferred: the interval nearest preferred_ratio x copy, the earliest on ties. The distance
    # falls (weakly) up to p1, the last p whose interval reaches the target, and rises after it.
    target = ms.params[PREF_RATIO] * copy
    p1 = _last_true_down(st, earliest, latest, u, target)
    preferred = earliest
    if p1 >= earliest:
        d1 = abs(target - interval_time(st, p1, u))
        # the first p <= p1 at that distance (the distances before p1 are >= d1)
        a, b = earliest, p1
        while a < b:
            m = (a + b) // 2
            if abs(target - interval_time(st, m, u)) <= d1:
                b = m
            else:
                a = m + 1
        preferred = a
        if p1 + 1 <= latest and abs(target - interval_time(st, p1 + 1, u)) < d1:
            preferred = p1 + 1
    return earliest, latest, preferred


@njit(cache=True, inline="always")
def _picker_next(st, u, earliest, latest, inc, dec, use_inc, span):
    """``CostAnalysisPrefetchIntervalPicker::Next``: the next start and the iterator's new
    ``(inc, dec, use_inc)``; call while ``not (inc > latest and dec < earliest)``."""
    if use_inc:
        p = inc
        inc += 1
        if dec >= earliest:
            use_inc = False
    else:
        p = dec
        dec -= 1
        if inc > latest:
            # the earlier side only in steps of ``span``: down to the last op whose interval
            # reaches interval(p) + span (binary search; the interval grows as the start falls)
            dec = _last_true_down(st, earliest, dec, u, interval_time(st, p, u) + span)
        else:
            use_inc = True
    return p, inc, dec, use_inc


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
    :func:`decide` walks the same order lazily, up to the first start it takes.
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
    earliest, latest, preferred = _picker_begin(st, ms, s, lo)
    if earliest > latest:
        return 0
    inc = preferred + 1  # Begin() calls Next() once: the increasing iterator moves past preferred
    dec = preferred
    use_inc = dec < earliest
    span = interval_time(st, earliest, u) / N_EXPLORED_DECREASING
    while not (inc > latest and dec < earliest) and n < out.shape[0]:
        p, inc, dec, use_inc = _picker_next(st, u, earliest, latest, inc, dec, use_inc, span)
        out[n] = p
        n += 1
    return n


# ------------------------------------------------------------------------------ offsets
@njit(cache=True)
def best_fit(st, state, ids, b, lo, hi):
    """MSA's best-fit offset for buffer ``b`` over ops ``[lo, hi]``: the smallest free gap that
    fits, then the lowest offset; the space above the highest live chunk ranks last (checked
    against the capacity). -1 if nothing fits. Chunks are held as MSA holds them (an evicted one
    through its eviction's done op: :func:`mallocgym.sim.v1.held_through`); ``ids`` is scratch.
    A window over three index buckets or more is answered from the middle ones' unions where it
    can be (:func:`_fit_by_unions`)."""
    w = state.counters[v1.IX_WIDTH]
    off = NO_UNIONS
    if hi // w - max(lo, 0) // w >= 2:
        off = _fit_by_unions(st, state, ids, b, lo, hi)
    elif _narrow_pays(state.ix_meta, state.ix_count, st.seg_use.shape[0], w, lo, hi):
        off = _fit_narrow(st, state, ids, b, lo, hi)
    if off != NO_UNIONS:
        return off
    m = v1.live_chunks(st, state, lo, hi, b, ids, True)
    return _best_fit_among(st, state, ids, m, b, hi)


NO_UNIONS = -2  # _fit_by_unions: the window is not answered from the buckets' unions


@njit(cache=True)
def _fit_by_unions(st, state, ids, b, lo, hi):
    """:func:`best_fit` over ``[lo, hi]`` from the index buckets' unions of occupied offsets
    (``state.ix_meta``, :func:`mallocgym.sim.v1._sync_unions`): the chunks live in the window are
    those live in the buckets it spans whole (their unions), plus the chunks of its first bucket
    that end there and of its last that start there (walked). Best fit looks only at the union of
    the occupied offsets, so the answer is :func:`best_fit`'s. ``NO_UNIONS`` where the window
    spans fewer than three buckets, a middle bucket's union is not kept, or ``b`` has a chunk
    counted in one."""
    k0, k1 = v1._unions_window(st, state, ids, b, lo, hi)
    if k0 < 0:
        return NO_UNIONS
    un = state.ix_meta
    n_seg = st.seg_use.shape[0]
    capacity = st.iparams[v1.CAPACITY]
    size, align = st.size[b], st.iparams[v1.ALIGNMENT]
    for k in range(k0 + 1, k1):
        if _no_room_in(un, 2 * n_seg + k * v1.UNION_STRIDE, size, align, capacity):
            return -1  # a middle bucket's chunks alone leave no room: the window's leave none
    top = capacity + 1  # an interval is start * top + end in ``ids``: sorted by start
    n = v1._union_items(st, state, ids, b, lo, hi, k0, k1, top, False)
    return _fit_sorted(ids, n, top, size, align, capacity)


@njit(cache=True, inline="always")
def _no_room_in(un, base, size, align, capacity):
    """Whether nothing of ``size`` fits beside the union kept at ``un[base:]`` (in offset order,
    disjoint): best fit over a window's chunks is -1 when it is over a subset of them (a long
    look-ahead that fits nowhere then costs a few intervals read, not a walk of its first bucket
    and a sort)."""
    best_gap, best_off, cursor = -1, -1, 0
    for i in range(un[base]):
        best_gap, best_off = _tighter_gap(cursor, un[base + 1 + 2 * i], size, align, best_gap, best_off)
        if best_off >= 0:
            return False
        cursor = max(cursor, un[base + 2 + 2 * i])
    return _or_above(cursor, size, align, capacity, best_off) < 0


@njit(cache=True, inline="always")
def _fit_sorted(ids, n, top, size, align, capacity):
    """Best fit among the occupied intervals ``ids[:n]`` (``start * top + end``, any order; sorted
    here): the sweep of :func:`_fit_by_unions` and :func:`_fit_narrow`."""
    ids[:n].sort()
    best_gap = -1
    best_off = -1
    cursor = 0
    for i in range(n):
        best_gap, best_off = _tighter_gap(cursor, ids[i] // top, size, align, best_gap, best_off)
        cursor = max(cursor, ids[i] % top)
    return _or_above(cursor, size, align, capacity, best_off)


NARROW_COST = 2  # _narrow_pays: an item of the narrow index (a registration or an interval) against a wide registration


@njit(cache=True, inline="always")
def _narrow_pays(un, count, n_seg, w, lo, hi):
    """Whether :func:`_fit_narrow` is worth asking over ``[lo, hi]``: a narrow index is kept and its
    buckets there hold fewer than ``1 / NARROW_COST`` of the registrations of the window's wide
    buckets (an item met there costs more than a wide registration walked: its liveness is
    checked in full and it is sorted), counting registrations and whole unions' intervals."""
    n_wide = count.shape[0]
    nb = v1.narrow_at(n_seg, n_wide)
    nw = un[nb + v1.NW]
    if nw == 0:
        return False
    blocks = nb + v1.NB_HEADER + v1.NB_CHUNK * n_seg
    items = 0
    for j in range(max(lo, 0) // nw, min(hi // nw, un[nb + v1.NB_COUNT] - 1) + 1):
        items += un[blocks + j * v1.NARROW_STRIDE + 1] + un[blocks + j * v1.NARROW_STRIDE + 2]
    regs = 0
    for k in range(max(lo, 0) // w, min(hi // w, n_wide - 1) + 1):
        regs += count[k]
    return NARROW_COST * items < regs


@njit(cache=True, inline="always")
def _narrow_window(st, state, b, lo, hi):
    """Where the narrow index answers a query over ``[lo, hi]`` (:func:`_fit_narrow`,
    :func:`_blocked_narrow`): ``(chunks, blocks, j0, j1, n_items)``, the offsets in ``ix_meta`` of
    the chunks' words and of the narrow buckets, the window's first and last narrow bucket, and
    the items (registrations and union intervals) there; ``j0 = -1`` where there is no narrow
    index, ``start * top + end`` could pass ``2**63``, a whole union is not kept, or ``b`` has a
    chunk counted in one."""
    un, seg_chunk, ch_lo = state.ix_meta, state.seg_chunk, state.ch_lo
    n_seg = st.seg_use.shape[0]
    nb = v1.narrow_at(n_seg, state.ix_head.shape[0])
    nw = un[nb + v1.NW]
    if nw == 0 or st.iparams[v1.CAPACITY] > np.int64(3037000498):
        return 0, 0, -1, -1, 0
    chunks = nb + v1.NB_HEADER
    blocks = chunks + v1.NB_CHUNK * n_seg
    j0 = max(lo, 0) // nw
    j1 = min(hi // nw, un[nb + v1.NB_COUNT] - 1)
    n_items = 0
    for j in range(j0, j1 + 1):
        n = un[blocks + j * v1.NARROW_STRIDE + 2]
        if n < 0:
            return 0, 0, -1, -1, 0
        n_items += n + un[blocks + j * v1.NARROW_STRIDE + 1]
    for j in range(st.seg_ptr[b], st.seg_ptr[b + 1]):
        c = seg_chunk[j]
        if c >= 0 and max((ch_lo[c] + nw - 1) // nw, j0) <= min(un[chunks + v1.NB_CHUNK * c + v1.NC_WHOLE], j1):
            return 0, 0, -1, -1, 0
    return chunks, blocks, j0, j1, n_items


@njit(cache=True)
def _fit_narrow(st, state, ids, b, lo, hi):
    """:func:`best_fit` over ``[lo, hi]`` from the narrow index (:func:`mallocgym.sim.v1._narrow_sync`):
    the chunks live in the window are those registered in the narrow buckets it spans (the ones
    that start or end there) and live in it, plus those held over one of those buckets whole
    (their whole unions, a few intervals). Best fit looks only at the union of the occupied
    offsets, so the answer is :func:`best_fit`'s. ``NO_UNIONS`` where there is no narrow index,
    a whole union is not kept, or ``b`` has a chunk counted in one. Asked where it pays
    (:func:`_narrow_pays`): a window a few ops long at 60,000 buffers meets about 45 items there
    against the ~380 registrations of its wide bucket, so its cost stops growing with the
    program. A chunk met is read from its words in the narrow index (one place, not six arrays);
    over one narrow bucket the live ones are sorted and swept together with the bucket's whole
    union, already in offset order."""
    # every array is read before the first call (see mallocgym.sim.v1._sync)
    nxt, cid, un = state.ix_nxt, state.ix_cid, state.ix_meta
    sizes = st.size
    capacity = st.iparams[v1.CAPACITY]
    align = st.iparams[v1.ALIGNMENT]
    chunks, blocks, j0, j1, n_items = _narrow_window(st, state, b, lo, hi)
    if j0 < 0 or n_items > ids.shape[0]:
        return NO_UNIONS
    top = capacity + 1  # an interval is start * top + end: sorted by start
    n = 0
    for j in range(j0, j1 + 1):
        r = un[blocks + j * v1.NARROW_STRIDE]
        while r >= 0:
            rec = chunks + v1.NB_CHUNK * cid[r]
            r = nxt[r]
            span = un[rec + v1.NC_SPAN]
            if (span >> 32) > hi or (span & 0xFFFFFFFF) < lo or un[rec + v1.NC_BUF] == b:
                continue
            iv = un[rec + v1.NC_IV]
            i = n
            if j0 == j1:  # insertion sort: a few live ones (over more buckets, one sort at the end)
                while i > 0 and ids[i - 1] > iv:
                    ids[i] = ids[i - 1]
                    i -= 1
            ids[i] = iv
            n += 1
    size = sizes[b]
    if j0 == j1:  # the live chunks and the bucket's whole union, each in order: merged as swept
        best_gap = -1
        best_off = -1
        cursor = 0
        base = blocks + j0 * v1.NARROW_STRIDE + 2
        n_iv = un[base]
        i, k = 0, 0
        while i < n or k < n_iv:
            if k >= n_iv or (i < n and ids[i] // top < un[base + 1 + 2 * k]):
                a, z = ids[i] // top, ids[i] % top
                i += 1
            else:
                a, z = un[base + 1 + 2 * k], un[base + 2 + 2 * k]
                k += 1
            best_gap, best_off = _tighter_gap(cursor, a, size, align, best_gap, best_off)
            cursor = max(cursor, z)
        return _or_above(cursor, size, align, capacity, best_off)
    for j in range(j0, j1 + 1):
        n = v1.union_into(un, blocks + j * v1.NARROW_STRIDE + 2, ids, n, top)
    return _fit_sorted(ids, n, top, size, align, capacity)


@njit(cache=True)
def _blocked_narrow(st, state, b, off, lo, hi):
    """Whether ``[off, off + size_b)`` meets another buffer's chunk, held as MSA holds it, at some
    op of ``[lo, hi]`` (1 or 0: ``v1.first_blocked(..., True, True) <= hi``), from the narrow
    index as :func:`_fit_narrow` reads it: the chunks registered in the narrow buckets the window
    spans that are live in it, and the buckets' whole unions. MSA's keep check asks it: at 60,000
    buffers a walk of the window's wide bucket meets ~400 registrations. ``NO_UNIONS`` where the
    narrow index does not answer the window (:func:`_narrow_window`, as for :func:`_fit_narrow`)."""
    nxt, cid, un = state.ix_nxt, state.ix_cid, state.ix_meta
    capacity = st.iparams[v1.CAPACITY]
    chunks, blocks, j0, j1, _ = _narrow_window(st, state, b, lo, hi)
    if j0 < 0:
        return NO_UNIONS
    top = capacity + 1
    end = off + st.size[b]
    for j in range(j0, j1 + 1):
        base = blocks + j * v1.NARROW_STRIDE + 2  # the whole union, in offset order
        for i in range(un[base]):
            if un[base + 1 + 2 * i] >= end:
                break
            if off < un[base + 2 + 2 * i]:
                return 1
        r = un[blocks + j * v1.NARROW_STRIDE]
        while r >= 0:
            rec = chunks + v1.NB_CHUNK * cid[r]
            r = nxt[r]
            span = un[rec + v1.NC_SPAN]
            if (span >> 32) > hi or (span & 0xFFFFFFFF) < lo or un[rec + v1.NC_BUF] == b:
                continue
            iv = un[rec + v1.NC_IV]
            if iv // top < end and off < iv % top:
                return 1
    return 0


@njit(cache=True, inline="always")
def _tighter_gap(cursor, ghi, size, align, best_gap, best_off):
    """A best-fit sweep's step: the free gap ``[cursor, ghi)``, if ``size`` fits there (aligned)
    and it is tighter than ``best_gap``, as the new ``(best_gap, best_off)``."""
    if ghi > cursor:
        low = (cursor + align - 1) // align * align
        if low + size <= ghi and (best_gap < 0 or ghi - cursor < best_gap):
            return ghi - cursor, low
    return best_gap, best_off


@njit(cache=True, inline="always")
def _or_above(cursor, size, align, capacity, best_off):
    """A best-fit sweep's answer: ``best_off``, else the space above the last chunk if it fits."""
    if best_off < 0:
        low = (cursor + align - 1) // align * align
        if low + size <= capacity:
            return low
    return best_off


@njit(cache=True)
def _best_fit_among(st, state, ids, m, b, hi):
    """:func:`best_fit` over ``[lo, hi]`` from the chunks ``ids[:m]`` (by offset) live in a window
    ``[lo, hi']`` with ``hi' >= hi``: those live in ``[lo, hi]`` are the ones that start by ``hi``,
    so the windows of a look-ahead, which share their first op, share one walk of the index."""
    size = st.size[b]
    capacity = st.iparams[v1.CAPACITY]
    align = st.iparams[v1.ALIGNMENT]
    ch_off, ch_lo, ch_buf, sizes = state.ch_off, state.ch_lo, state.ch_buf, st.size
    best_gap = -1
    best_off = -1
    cursor = 0
    for i in range(m):
        c = ids[i]
        if ch_lo[c] > hi:
            continue
        best_gap, best_off = _tighter_gap(cursor, ch_off[c], size, align, best_gap, best_off)
        cursor = max(cursor, ch_off[c] + sizes[ch_buf[c]])
    return _or_above(cursor, size, align, capacity, best_off)


@njit(cache=True)
def look_ahead_fit(st, state, ms, ids, s, lo):
    """``FindBestChunkCandidate`` with no preferred offset: the best fit over ``[lo, use]``
    extended to the latest later use reachable without a copy that still fits (binary search
    over those uses). -1 if nothing fits even up to this use. The longest window is asked of the
    buckets' unions or the narrow index where they answer it (-1 there: the shorter windows each
    on their own), else the longer windows are answered from one walk of the index over the
    longest (:func:`_best_fit_among`)."""
    b = st.seg_buf[s]
    # the short window first (most misses end here): best_fit, written out (one kernel less to enter)
    u = st.seg_use[s]
    w = state.counters[v1.IX_WIDTH]
    off = NO_UNIONS
    if u // w - max(lo, 0) // w >= 2:
        off = _fit_by_unions(st, state, ids, b, lo, u)
    elif _narrow_pays(state.ix_meta, state.ix_count, st.seg_use.shape[0], w, lo, u):
        off = _fit_narrow(st, state, ids, b, lo, u)
    if off == NO_UNIONS:
        m = v1.live_chunks(st, state, lo, u, b, ids, True)
        off = _best_fit_among(st, state, ids, m, b, u)
    if off < 0:
        return -1
    last = st.seg_ptr[b + 1]
    params, cum = ms.params, st.cum_slow
    j = s
    while j + 1 < last and _nocopy(params, cum, st.seg_use[j], st.seg_use[j + 1]):
        j += 1
    if j == s:
        return off
    walk, m = True, 0
    o = NO_UNIONS
    if st.seg_use[j] // w - max(lo, 0) // w >= 2:
        o = _fit_by_unions(st, state, ids, b, lo, st.seg_use[j])
    elif _narrow_pays(state.ix_meta, state.ix_count, st.seg_use.shape[0], w, lo, st.seg_use[j]):
        # the longest window over fewer than three wide buckets: a walk of them meets ~400
        # registrations a bucket at 60,000 buffers (docs/speed.md, "Eleventh session")
        o = _fit_narrow(st, state, ids, b, lo, st.seg_use[j])
    if o >= 0:
        return o
    walk = o != -1  # -1: nothing fits up to use j; the shorter windows each on their own below
    if walk:
        m = v1.live_chunks(st, state, lo, st.seg_use[j], b, ids, True)
        o = _best_fit_among(st, state, ids, m, b, st.seg_use[j])
        if o >= 0:
            return o
    a, z = s, j  # fits up to use a, not up to use z
    while z - a > 1:
        mid = (a + z) // 2
        if walk:
            o = _best_fit_among(st, state, ids, m, b, st.seg_use[mid])
        else:
            o = best_fit(st, state, ids, b, lo, st.seg_use[mid])
        if o >= 0:
            a, off = mid, o
        else:
            z = mid
    return off


# ------------------------------------------------------------------------------ decisions
@njit(cache=True)
def decide(st, state, ms, ids, s, starts, out):
    """MSA's allocation for segment ``s`` of the current state and its alternatives, into
    ``out[6]``: ``out[0:3]`` = ``(kind, offset, prefetch start)`` of its choice; ``out[3]`` = the
    offset it would produce the value at (a defined buffer's first segment: the look-ahead best
    fit over ``[d, ...]``, -1 otherwise or where nothing fits); ``out[4:6]`` = the prefetch it
    would issue if it kept nothing, ``(start, offset)`` (``(v1.NO_START, -1)``: none; a start
    of -1 is a copy issued before op 0). The copy budget is the
    state's own (``state.rs_*``). The picker's starts are generated one at a time (in
    :func:`picker_starts`' order) up to the first taken; ``starts`` is unused (kept for the
    callers' signature), ``ids`` is scratch (``S + 1``)."""
    out[0], out[1], out[2] = SLOW, -1, -1
    out[3], out[4], out[5] = -1, v1.NO_START, -1
    b = st.seg_buf[s]
    if st.size[b] > st.iparams[v1.CAPACITY]:
        return
    first = st.seg_ptr[b]
    u = st.seg_use[s]
    d = st.def_op[b]
    n_ops = st.compute_time.shape[0]
    if s == first:
        if d >= 0:
            off = look_ahead_fit(st, state, ms, ids, s, d)
            out[3] = off
            # produce in fast memory (not a program input, nor an output produced by the last
            # op, which MSA pins to default memory)
            if off >= 0 and not (st.is_output[b] == 1 and d == n_ops - 1) and _nocopy(ms.params, st.cum_slow, d, u):
                out[0], out[1] = FAST, off
    else:
        k = state.seg_kind[s - 1]
        # the value may keep its offset (as v1.keep_legal, evicted chunks held through their done
        # op), asked of the narrow index where it pays, else of first_blocked, here rather than
        # through a kernel of its own: one kernel less to enter per decision (docs/speed.md,
        # "Seventh session"; "Eleventh session": a walk of a wide bucket grows with the program)
        if (k == FAST or k == PREFETCH_SEG) and _nocopy(ms.params, st.cum_slow, st.seg_prev[s], u):
            lo_k = st.seg_prev[s] + 1
            blocked = NO_UNIONS
            if _narrow_pays(state.ix_meta, state.ix_count, st.seg_use.shape[0], state.counters[v1.IX_WIDTH], lo_k, u):
                blocked = _blocked_narrow(st, state, b, state.seg_off[s - 1], lo_k, u)
            if blocked == NO_UNIONS:
                blocked = 1 if v1.first_blocked(st, state, b, state.seg_off[s - 1], lo_k, u, True, True) <= u else 0
            if blocked == 0:
                out[0], out[1] = FAST, state.seg_off[s - 1]
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
    copy = st.size[b] / st.params[v1.SLOW_BW]
    eps = ms.params[EPS]
    no_room = lo - 1  # nothing fits over [p + 1, u] for every p <= no_room (a longer window: fewer gaps)
    cum = st.cum_slow
    # the picker's starts in its order, generated one at a time up to the first taken (as
    # picker_starts lists them)
    count = ms.params[PICKER] == COUNT
    if count:
        p_next = max(lo, u - np.int64(ms.params[CNT_MAX]))
        earliest, latest, inc, dec, use_inc, span = 0, -1, 0, -1, False, 0.0
    else:
        p_next = 0
        earliest, latest, preferred = _picker_begin(st, ms, s, lo)
        inc = preferred + 1
        dec = preferred
        use_inc = dec < earliest
        span = interval_time(st, earliest, u) / N_EXPLORED_DECREASING if earliest <= latest else 0.0
    while True:
        if count:
            if not u - p_next > ms.params[CNT_MIN]:
                return
            p = p_next
            p_next += 1
        else:
            if earliest > latest or (inc > latest and dec < earliest):
                return
            p, inc, dec, use_inc = _picker_next(st, u, earliest, latest, inc, dec, use_inc, span)
        if p < lo or p > hi or p <= no_room or not copy_budget.fits(cum, eps, state, p, u, copy):
            continue
        off = look_ahead_fit(st, state, ms, ids, s, p + 1)
        if off >= 0:
            out[4], out[5] = p, off
            if out[0] == SLOW:
                out[0], out[1], out[2] = PREFETCH_SEG, off, p
            return
        no_room = p


@njit(cache=True)
def plan(st, state, ms, ids, starts):
    """Play MSA from the state's position to the end with its exact choices; return the program
    time. ``ids`` is scratch (``S + 1`` entries), ``starts`` too (``T + 2``). With the cost
    picker and the scenario's ratios these are the env's MSA actions (action ``1`` or ``1 + K``
    where MSA keeps or prefetches), so playing those through the env leaves this plan."""
    out = np.empty(6, np.int64)
    n = st.seg_use.shape[0]
    while state.counters[v1.POS] < n:
        pos = state.counters[v1.POS]
        s = st.order[pos]
        decide(st, state, ms, ids, s, starts, out)
        v1.apply_rules(st, state, s, out[0], out[1], out[2])
        state.counters[v1.POS] += 1
        state.counters[v1.CHOSEN] += 1
    return v1.current_time(st, state)
