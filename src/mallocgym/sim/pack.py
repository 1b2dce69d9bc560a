"""Packing fixed-interval rectangles by a search over canonical solutions.

A rectangle (a buffer) ``b`` is live over the inclusive time interval ``[start[b], end[b]]`` and
occupies ``size[b]`` address units; it may take any integer offset in ``[0, max_offset[b]]``
(``capacity - size[b]`` by default). Two rectangles live at a common time must not share an
address. :func:`pack` decides whether *all* rectangles fit and returns offsets;
:func:`pack_max` chooses a subset of the highest total value that fits (the rest stay out,
``-1``). Both work on plain integer arrays, so any caller (MallocGame-v0's agent
:mod:`mallocgym.agents.pack`, or per-segment chunks of v1) can use them.

The search follows the ideas published with MiniMalloc (M. D. Moffitt, "MiniMalloc: A
Lightweight Memory Allocator for Hardware-Accelerated Machine Learning", ASPLOS 2023); the code
is our own:

* **Canonical solutions.** Any packing can be "dropped": taken in increasing offset order, each
  rectangle falls to the highest top (``offset + size``) of the earlier ones it shares a time
  with, or to 0. No rectangle rises, so the dropped packing is valid too. The search therefore
  only builds packings rectangle by rectangle in nondecreasing offset, each placed at its
  *lowest feasible offset* ``L[b]`` (the highest top of the placed rectangles that overlap it in
  time), which is updated after every placement. Ties in offset are taken in a fixed preorder,
  so each canonical packing is built along one path only.
* **Sections and inference.** Time is cut into sections at every start and end; a section's
  *floor* is the highest top placed in it. All rectangles still to be placed in a section go
  above ``max(current offset, floor)``, one on top of another, so ``max(offset, floor) + the
  sizes still to place there <= capacity`` must hold in every section, checked by a sweep after
  every placement (decision mode). A section whose unplaced rectangles exactly fill the room
  above that level is *tight*: its level must be covered by a rectangle starting there, so
  when it is the lowest offset left, no rectangle able to cover it means a dead node and
  exactly one means a forced move (``FORCE_MAX``; branching on tight sections with more
  candidates too solved more planted instances but slowed MiniMalloc's B and D by 100x).
* **Level covers** (:func:`_level_cover_ok`). Rectangles at one offset are disjoint in time,
  so each run of consecutive sections tight at one level must be covered exactly by disjoint
  section ranges of rectangles that can sit at that level (and leave gaps below them, in
  tight sections at lower levels, that some of the rectangles able to go there fill exactly:
  subset sums, :func:`_gaps_fillable`): a 1-D exact-cover test that couples neighbouring
  sections.
  No cover kills the node; a candidate in no cover at its lowest offset is not tried.
* **Dominance.** Placing ``c`` at ``L[c] >= L[d] + size[d]`` for some unplaced ``d`` (that still
  fits) is never needed: ``d`` would fit below ``c`` at ``L[d]`` and the packing with ``d``
  there is built on another path. **Hatless placements**: when the placed rectangle lifts no
  unplaced one (in decision mode: every unplaced one it overlaps already has its lowest offset
  at or above its top; in optimisation mode: it overlaps none), it is in nobody's way, so if
  its subtree fails, no later sibling can succeed (a packing through one would have it higher,
  and it could be lowered to where it was tried).
* **Twins** (:func:`_bar_twins`). Rectangles over the same sections with the same highest top
  can swap places when one lies directly on the other; the round robin's runs let one lie on
  its twin only if it is no larger (larger below, equal sizes by index), which loses no
  packing.
* **Partitions.** Rectangles whose live intervals form separate connected components of the
  interval graph are packed apart (:func:`components`).
* **Branching order and restarts.** Candidates are tried by lowest feasible offset, then by a
  static preorder. :func:`pack` restarts under two schedules sharing the nodes (:func:`_decide`):
  short runs of varied preorders under Luby's node limits, and a round robin of the plain
  preorders (keeping twins in order) under a doubling limit (as MiniMalloc's solver does);
  every run skips the states earlier runs on the part proved dead (one hashed table, keyed
  without the preorder); pieces of a dynamic decomposition are memoised across runs. Where
  every section is full, a share of the nodes restarts the search with each *bottom layer*
  (the rectangles at offset 0) that a run stopped under held at offset 0.

Optimisation mode (:func:`pack_max`): the same tree, where every node is a valid packing of the
placed rectangles; its value is kept incrementally, and a node is cut when its value plus an
upper bound on what the rest can add is no better than the best found. The bound is a sum of
fractional knapsacks: each still-placeable rectangle is given to one section it spans (the one
with the least room above ``max(offset, floor)``), and each section's rectangles are packed
fractionally by value density into that room. Values may be *capped per op* (the cost model's
``min(saving, memory - compute)``): a rectangle's value is ``lin[b] + sum_j min(...)`` over its
op gains, and the bound uses the uncapped gains, which never underestimate. Restarts (other
child orders and preorders, a doubling node limit, a shared incumbent) run as limited
discrepancy searches, round ``k`` allowing ``k`` departures from the first child on a path.

The kernels are resumable: all search state lives in arrays, and :func:`_search` returns after a
node budget, so the Python side can check a wall-clock limit between calls.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit

__all__ = ["PackResult", "pack", "pack_max", "components", "PREORDERS", "FOUND", "EXHAUSTED", "BUDGET"]

FOUND, EXHAUSTED, BUDGET, SPLIT = 0, 1, 2, 3  # kernel statuses: all placed / tree searched / budget
# spent / the unplaced rectangles fell apart in time (decision mode; the caller solves the parts)
BIG = np.int64(1) << np.int64(60)
SUBSET_STEPS = 256  # steps of a gap's subset-sum search before it gives up (and lets the gap pass)
SORT_DISTINCT = 32  # the stacking's releases are bucket-sorted up to this many distinct values
_SUBSET_CACHE = np.zeros((1 << 14, 3), dtype=np.uint64)  # the gap test's subset-sum answers (_gaps_fillable)
FORCE_MAX = 1  # branch on a tight section only when at most this many rectangles can cover it

# Static preorders: tie-breakers among candidates of equal lowest offset (keys, descending).
# W = width (end - start + 1, in the caller's time unit), A = area (size x width), Z = size,
# T = the largest total size of its sections, S = sections spanned, R = size x sections, X =
# random. The S/R ones differ from W/A when the times are not consecutive (MiniMalloc's traces
# keep their original clock): which family wins depends on the instance, so the restarts have
# both. PREORDERS (the decision search's restarts) were chosen on planted instances, not on
# MiniMalloc's traces (docs/pack.md, "How the restarts were chosen"); OPT_PREORDERS, the
# branch and bound's restarts, are the earlier round robin's four (picked on MiniMalloc's A-E).
PREORDERS = ("TWA", "TAW", "WAT", "RST", "ZWA", "ATW")
OPT_PREORDERS = ("TWA", "RST", "ZWA", "WAT")
TT_SIZE = 1 << 19  # slots of a part's failed-state table (two uint64 each, 8 MiB); half are filled at most
# (one table serves all the runs on a part: 262,144 states, against 6 x 65,536 in the per-preorder tables before)
LUBY_SHARE = 0.5  # the Luby runs' share of the decision search's nodes (the round robin has the rest)
RESTART_UNIT = 2  # restart node limits are multiples of this many nodes per rectangle
MIN_RUN = 16  # and of at least this many nodes
LAYER_SHARE = 0.25  # the bottom-layer restarts' share of the nodes (_decide; zero-slack parts only)
LAYER_TT = 1 << 15  # slots of each bottom layer's failed-state table (512 KiB)
MAX_LAYERS = 256  # bottom layers held at once per part at most (their tables: 128 MiB)
TWINS = "r"  # the runs keeping stacked twins in order (/s): Luby's /t (t), its plain ones (p), the round robin (r)
FIT_SHARE = 0.9  # the agent's share for placing everything when every section holds all its rectangles


# ----------------------------------------------------------------------------- static data
@njit(cache=True)
def _overlaps(start, end):
    """CSR of the rectangles sharing a time with each rectangle (itself excluded); the caller
    sorts each list by size."""
    n = start.size
    count = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        for j in range(n):
            if i != j and start[j] <= end[i] and end[j] >= start[i]:
                count[i + 1] += 1
    ptr = np.cumsum(count)
    idx = np.empty(ptr[n], dtype=np.int64)
    k = 0
    for i in range(n):
        for j in range(n):
            if i != j and start[j] <= end[i] and end[j] >= start[i]:
                idx[k] = j
                k += 1
    return ptr, idx


def _sections(start, end):
    """Section range ``[s0, s1)`` of each rectangle and the number of sections: the time axis cut
    at every start and every end + 1."""
    points = np.unique(np.concatenate([start, end + 1]))
    s0 = np.searchsorted(points, start).astype(np.int64)
    s1 = np.searchsorted(points, end + 1).astype(np.int64)
    return s0, s1, max(len(points) - 1, 0)


def _twin_rank(s0, s1, size, maxoff) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each rectangle's rank among its *twins* (the rectangles spanning the same sections with the
    same highest top ``max_offset + size``, so that two stacked twins can swap places), by
    size, largest first, then index (-1 for a rectangle without twins), and the CSR
    ``(ptr, idx)`` of the twins before each one in that order."""
    n = size.size
    rank = np.full(n, -1, dtype=np.int64)
    ceil = maxoff + size
    order = np.lexsort((np.arange(n), -size, ceil, s1, s0))
    i = 0
    while i < n:
        j = i
        while j + 1 < n and s0[order[j + 1]] == s0[order[i]] and s1[order[j + 1]] == s1[order[i]] \
                and ceil[order[j + 1]] == ceil[order[i]]:
            j += 1
        if j > i:
            rank[order[i:j + 1]] = np.arange(j - i + 1)
        i = j + 1
    count = np.maximum(rank, 0)  # a twin's predecessors are the ``count`` before it in ``order``
    ptr = np.concatenate([[0], np.cumsum(count)]).astype(np.int64)
    idx = np.empty(ptr[-1], dtype=np.int64)
    for k, b in enumerate(order):
        idx[ptr[b]:ptr[b + 1]] = order[k - count[b]:k]
    return rank, ptr, idx


def components(start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
    """The connected components of the interval graph (rectangles whose live intervals chain
    together), each as sorted indices; components are disjoint in time."""
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    if start.size == 0:
        return []
    order = np.argsort(start, kind="stable")
    reach = np.maximum.accumulate(end[order])
    cut = np.flatnonzero(start[order][1:] > reach[:-1]) + 1
    return [np.sort(part) for part in np.split(order, cut)]


def _preorder(name: str, start, end, size, s0, s1, nsec) -> np.ndarray:
    """Rank (0 = first) of each rectangle under preorder ``name`` (keys descending, then id)."""
    width = end - start + 1
    total = np.zeros(nsec + 1, dtype=np.int64)
    np.add.at(total, s0, size)
    np.add.at(total, s1, -size)
    total = np.cumsum(total)[:nsec]
    section_max = np.array([total[a:b].max() if b > a else 0 for a, b in zip(s0, s1)], dtype=np.int64)
    spans = s1 - s0
    keys = {"W": width, "A": size * width, "Z": size, "T": section_max, "S": spans, "R": size * spans}
    name, _, seed = name.partition("@")
    keys["X"] = np.random.default_rng(int(seed or 0) + 7919).random(size.size)  # a random order
    if seed:  # a perturbed preorder for restarts: every key scaled by a random factor in [0.7, 1.3]
        rng = np.random.default_rng(int(seed))
        keys = {c: v * rng.uniform(0.7, 1.3, size.size) for c, v in keys.items()}
    columns = [np.arange(size.size)] + [-keys[c] for c in reversed(name)]
    order = np.lexsort(columns)
    rank = np.empty(size.size, dtype=np.int64)
    rank[order] = np.arange(size.size)
    return rank


# ------------------------------------------------------------------------------- the search
@njit(cache=True)
def _new_state(n, nsec, nops, size, s0, s1):
    """Fresh search state arrays (nothing placed)."""
    off = np.full(n, -1, dtype=np.int64)
    low = np.zeros(n, dtype=np.int64)
    floor = np.zeros(nsec, dtype=np.int64)
    total = np.zeros(nsec, dtype=np.int64)
    for b in range(n):
        for s in range(s0[b], s1[b]):
            total[s] += size[b]
    acc = np.zeros(max(nops, 1), dtype=np.int64)
    return off, low, floor, total, acc


@njit(cache=True)
def _gain(b, acc, opcap, lin, g_ptr, g_op, g_val, apply):
    """Value added by placing ``b`` given the per-op accumulated gains ``acc``; ``apply`` 1 also
    adds ``b``'s gains to ``acc``, -1 only removes them (and returns ``lin[b]``)."""
    out = lin[b]
    for j in range(g_ptr[b], g_ptr[b + 1]):
        t, v = g_op[j], g_val[j]
        a = acc[t]
        if apply >= 0:
            before = a if a < opcap[t] else opcap[t]
            after = a + v if a + v < opcap[t] else opcap[t]
            out += after - before
            if apply == 1:
                acc[t] = a + v
        else:
            acc[t] = a - v
    return out


@njit(cache=True)
def _mix(x):
    """splitmix64's finaliser: a well-spread 64-bit hash of ``x`` (uint64)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _tt_find(tt, h1, h2, insert):
    """Look up (``insert`` 0) or add (1) the 128-bit key ``(h1, h2)`` in the open-addressing
    table ``tt`` (``uint64[size, 2]``, size a power of two, 0 = empty; ``tt[0, 0]``'s row is
    not used for keys: ``tt[0, 1]`` counts the entries). True when the key is (now) there;
    inserts stop once the table is half full."""
    size = np.uint64(tt.shape[0])
    mask = size - np.uint64(1)
    if h1 == np.uint64(0):
        h1 = np.uint64(1)
    i = h1 & mask
    for _ in range(16):
        if i == np.uint64(0):
            i = np.uint64(1)
        k = tt[i, 0]
        if k == h1 and tt[i, 1] == h2:
            return True
        if k == np.uint64(0):
            if insert == 1 and tt[0, 1] * np.uint64(2) < size:
                tt[i, 0] = h1
                tt[i, 1] = h2
                tt[0, 1] += np.uint64(1)
                return True
            return False
        i = (i + np.uint64(1)) & mask
    return False


@njit(cache=True)
def _subset_sum(z, k, suf, g, stk, limit):
    """Whether some of the sizes ``z[:k]`` (largest first, ``suf`` their suffix sums) sum to
    exactly ``g``: a depth-first search over the sizes no larger than what is missing, that
    skips equal sizes after leaving one out and stops where the sizes left sum to less than
    what is missing, or it is below the least. True as well when ``limit`` steps are spent
    (no proof either way)."""
    if k == 0 or g < z[k - 1]:
        return g == 0
    least = z[k - 1]
    stk[0, 0], stk[0, 1] = 0, g
    top = 1
    steps = 0
    while top > 0:
        steps += 1
        if steps > limit:
            return True
        top -= 1
        i, r = stk[top, 0], stk[top, 1]
        if r < least or i >= k:
            continue
        while z[i] > r:  # the sizes too large for what is missing (z[k - 1] <= r stops it)
            i += 1
        if suf[i] < r:
            continue
        if suf[i] == r:
            return True
        x = z[i]
        j = i + 1  # leave out x and every equal size after it
        while j < k and z[j] == x:
            j += 1
        if j < k:
            stk[top, 0], stk[top, 1] = j, r
            top += 1
        if x == r:
            return True
        stk[top, 0], stk[top, 1] = i + 1, r - x
        top += 1
    return False


@njit(cache=True)
def _subset_sum_kept(z, k, suf, g, stk, ssc):
    """:func:`_subset_sum` of the sizes ``z[:k]`` (largest first) and the gap ``g`` with
    ``SUBSET_STEPS`` steps, its answers kept in ``ssc`` (``uint64[2**j, 3]``, direct-mapped: a
    slot keeps the last) by a 128-bit hash of the sizes (as a multiset) and ``g``, across nodes
    and runs: the answer depends on nothing else."""
    hz = np.uint64(0)
    for i in range(k):
        hz += _mix(np.uint64(z[i]))
    h1 = _mix(hz ^ np.uint64(g))
    h2 = _mix(h1 + hz + np.uint64(0x2545F4914F6CDD1D))
    slot = h1 & np.uint64(ssc.shape[0] - 1)
    if ssc[slot, 0] == h1 and ssc[slot, 1] == h2:
        return ssc[slot, 2] == np.uint64(1)
    acc = np.int64(0)
    suf[k] = 0
    for i in range(k - 1, -1, -1):
        acc += z[i]
        suf[i] = acc
    ok = _subset_sum(z, k, suf, g, stk, SUBSET_STEPS)
    ssc[slot, 0], ssc[slot, 1], ssc[slot, 2] = h1, h2, np.uint64(1 if ok else 0)
    return ok


@njit(cache=True)
def _gaps_fillable(b, v, tlev, s0, s1, z, suf, stk, memo, stamp, off, low, size, cv_ptr, cv_idx, ssc):
    """Whether ``b`` at offset ``v`` leaves, in each tight section it spans with a lower level
    ``t``, a gap that the other unplaced rectangles there can fill exactly: the section has no
    room to spare, so the ones below ``b`` fill ``[t, v)``; ``v - t`` must be the sum of the
    sizes of some of those that fit under ``v`` (``low + size <= v``; :func:`_subset_sum`).
    ``memo[s]`` keeps section ``s``'s answers at the node ``stamp``: for one ``v`` and every
    ``b`` not among those (most are not), and for one ``v`` and ``b``'s size otherwise (the
    sizes left for the gap are then the same). ``ssc``: the subset sums' answers, kept across
    nodes (:func:`_subset_sum_kept`; the same nodes are searched with or without them)."""
    for s in range(s0[b], s1[b]):
        t = tlev[s]
        if t >= 0 and t < v:
            g = v - t
            alone = size[b] > g or low[b] + size[b] > v  # b is not among the fillers
            w = 0 if alone else 3  # memo[s, w:w + 4]: stamp, v, b's size (or 0), answer
            zb = 0 if alone else size[b]
            if memo[s, w] == stamp and memo[s, w + 1] == v and memo[s, w + 2] == zb:
                if memo[s, w + 3] == 0:
                    return False
                continue
            lo, hi = cv_ptr[s], cv_ptr[s + 1]
            while lo < hi:  # the first of size <= g (the section's rectangles are largest first)
                mid = (lo + hi) >> 1
                if size[cv_idx[mid]] > g:
                    lo = mid + 1
                else:
                    hi = mid
            k = 0
            r = g  # what the largest first, each taken while it fits, leave of the gap
            for q in range(lo, cv_ptr[s + 1]):
                c = cv_idx[q]
                if c != b and off[c] < 0 and low[c] + size[c] <= v:
                    if size[c] <= r:
                        r -= size[c]
                        if r == 0:
                            break
                    z[k] = size[c]
                    k += 1
            if r == 0:  # filled that way: no need for the search
                ok = True
            else:
                ok = _subset_sum_kept(z, k, suf, g, stk, ssc)
            memo[s, w], memo[s, w + 1], memo[s, w + 2], memo[s, w + 3] = stamp, v, zb, 1 if ok else 0
            if not ok:
                return False
    return True


@njit(cache=True)
def _level_cover_ok(tlev, off, low, size, maxoff, s0, s1, cv_ptr, cv_idx, sb, sptr, fw, bw, bad, z, suf, stk,
                    memo, stamp, vmax, ssc):
    """Whether every tight section's level can be the offset of a rectangle covering it.

    A tight section ``s`` (``tlev[s] >= 0``, its level: its unplaced rectangles exactly fill
    ``[tlev[s], capacity)``) has its level covered by an unplaced rectangle placed exactly
    there. Rectangles placed at one offset ``v`` are disjoint in time, and one can go to ``v``
    only if ``low <= v <= max_offset`` and the gaps it leaves below it, in tight sections with
    lower levels, can be filled exactly (:func:`_gaps_fillable`). So each *run* of consecutive
    sections tight at one level ``v`` must be covered by pairwise disjoint section ranges of
    such rectangles: a 1-D exact-cover test, left to right over the run (``fw[p]``: the run's
    sections before ``p`` can be covered by ranges ending at or before ``p``; runs at the same
    level apart from each other are tested apart, a relaxation). ``cv_ptr``/``cv_idx``: the
    rectangles spanning each section; ``fw``/``bw`` (``nsec + 2``), ``z``/``suf``
    (``n + 1``), ``stk`` (``n + 2`` x 2), ``memo`` (``nsec`` x 7, ``stamp`` unique to the
    node): scratch. False proves that the node has no completion.
    Otherwise ``bad[b]`` is 1 for an unplaced ``b`` spanning a run at its lowest offset ``v``
    but in no cover of it (the run's sections outside its range not covered by disjoint ranges
    before and after it, ``fw``/``bw``): ``b`` cannot be placed now."""
    nsec = tlev.size
    lo = 0
    while lo < nsec:
        v = tlev[lo]
        if v < 0:
            lo += 1
            continue
        hi = lo
        while hi + 1 < nsec and tlev[hi + 1] == v:
            hi += 1
        # the rectangles at their lowest offset v that span the run are checked below (only
        # below ``vmax``, the lowest top of an unplaced rectangle: no candidate is higher), and
        # only then is the forward pass needed beyond the run's end
        marked = False
        if v < vmax:
            for p in range(lo, hi + 1):
                lst, qa, qb = (cv_idx, cv_ptr[p], cv_ptr[p + 1]) if p == lo else (sb, sptr[p], sptr[p + 1])
                for q in range(qa, qb):
                    b = lst[q]
                    if off[b] < 0 and low[b] == v:
                        marked = True
                        break
                if marked:
                    break
        # the run [lo, hi] at level v; the ranges starting at p: those spanning lo for p = lo
        # (cv), those whose first section is p after it (sb)
        for p in range(lo, hi + 2):
            fw[p] = 0
        fw[lo] = 1
        for p in range(lo, hi + 1):
            if fw[p] == 0:
                continue
            if fw[hi + 1] == 1 and not marked:
                break
            lst, qa, qb = (cv_idx, cv_ptr[p], cv_ptr[p + 1]) if p == lo else (sb, sptr[p], sptr[p + 1])
            for q in range(qa, qb):
                b = lst[q]
                e = s1[b] if s1[b] < hi + 1 else hi + 1
                if fw[e] == 0 and off[b] < 0 and low[b] <= v and v <= maxoff[b] \
                        and _gaps_fillable(b, v, tlev, s0, s1, z, suf, stk, memo, stamp, off, low, size, cv_ptr,
                                           cv_idx, ssc):
                    fw[e] = 1
                    if e == hi + 1 and not marked:
                        break
        if fw[hi + 1] == 0:
            return False
        # the rectangles at their lowest offset v that span the run: in a cover, or not now
        if marked:
            bw[hi + 1] = 1
            for p in range(hi, lo - 1, -1):
                bw[p] = 0
                lst, qa, qb = (cv_idx, cv_ptr[p], cv_ptr[p + 1]) if p == lo else (sb, sptr[p], sptr[p + 1])
                for q in range(qa, qb):
                    b = lst[q]
                    if off[b] < 0 and low[b] <= v and v <= maxoff[b] \
                            and bw[s1[b] if s1[b] < hi + 1 else hi + 1] == 1 \
                            and _gaps_fillable(b, v, tlev, s0, s1, z, suf, stk, memo, stamp, off, low, size,
                                               cv_ptr, cv_idx, ssc):
                        bw[p] = 1
                        break
            for p in range(lo, hi + 1):
                lst, qa, qb = (cv_idx, cv_ptr[p], cv_ptr[p + 1]) if p == lo else (sb, sptr[p], sptr[p + 1])
                for q in range(qa, qb):
                    b = lst[q]
                    if off[b] < 0 and low[b] == v and v <= maxoff[b]:
                        x = s0[b] if s0[b] > lo else lo
                        e = s1[b] if s1[b] < hi + 1 else hi + 1
                        if fw[x] == 0 or bw[e] == 0:
                            bad[b] = 1
        lo = hi + 1
    return True


@njit(cache=True)
def _sort_releases(keys, cand, m, dv, bcnt, tmp):
    """Sort ``keys[:m]`` (releases) and ``cand[:m]`` with them, ascending, ties in any order.
    The distinct keys are few (the offsets of placed tops): each entry finds its key's bucket
    in a small hash table, the buckets are sorted by key, and the entries placed bucket by
    bucket (more than ``SORT_DISTINCT`` distinct keys: ``numpy.argsort``). ``dv`` (``m + 1``
    and at least ``3 * SORT_DISTINCT + 1``), ``bcnt`` (``m + 2``), ``tmp`` (``m + 1``):
    scratch."""
    slots = 2 * SORT_DISTINCT  # a power of two, at least twice the buckets
    tab = dv[SORT_DISTINCT + 1:SORT_DISTINCT + 1 + slots]  # bucket + 1 of each slot, 0: empty
    for j in range(slots):
        tab[j] = 0
    nd = 0
    for i in range(m):
        x = keys[i]
        h = np.int64((np.uint64(x) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(58)) & (slots - 1)
        while tab[h] != 0 and dv[tab[h] - 1] != x:
            h = (h + 1) & (slots - 1)
        if tab[h] == 0:
            if nd == SORT_DISTINCT:
                order = np.argsort(keys[:m])
                for j in range(m):
                    tmp[j] = cand[order[j]]
                for j in range(m):
                    cand[j] = tmp[j]
                    tmp[j] = keys[order[j]]
                for j in range(m):
                    keys[j] = tmp[j]
                return
            dv[nd] = x
            bcnt[nd] = 0
            nd += 1
            tab[h] = nd
        tmp[i] = tab[h] - 1
        bcnt[tab[h] - 1] += 1
    # the buckets by key (insertion sort of at most SORT_DISTINCT), as ranks: the key of rank j
    # is dv[rank_b[j]]; bcnt[b] becomes bucket b's first place
    rank_b = tab  # the hash table is no longer needed
    for j in range(nd):
        b = j
        k = j - 1
        while k >= 0 and dv[rank_b[k]] > dv[b]:
            rank_b[k + 1] = rank_b[k]
            k -= 1
        rank_b[k + 1] = b
    place = 0
    for j in range(nd):
        b = rank_b[j]
        c = bcnt[b]
        bcnt[b] = place
        place += c
    for i in range(m):  # tmp[i] becomes entry i's place
        b = tmp[i]
        tmp[i] = bcnt[b]
        bcnt[b] += 1
    for i in range(m):
        keys[i] = cand[i]
    for i in range(m):
        cand[tmp[i]] = keys[i]
    k = 0
    for j in range(nd):
        x = dv[rank_b[j]]
        while k < bcnt[rank_b[j]]:
            keys[k] = x
            k += 1


@njit(cache=True)
def _bar_twins(bad, kr, tw_ptr, tw_idx, topi, off, low, size, s0):
    """Set ``bad[b]`` for each unplaced ``b`` that would lie directly on a twin ``t`` (same
    sections and highest top; ``t`` the last placed in them, ``b``'s lowest offset ``t``'s top)
    that comes after it in the twins' order ``kr`` (by size, largest first, then index; the
    twins before ``t``: ``tw_idx[tw_ptr[t]:tw_ptr[t + 1]]``).

    Never needed: two stacked twins can swap places (the same sections, the same union of
    addresses under the same highest top, nothing else moves). Take the packing with the least
    ``sum(size[b]**2 * offset[b])`` and then the fewest pairs of stacked equal-sized twins out of
    index order: it is canonical (a rectangle that could drop would lower the sum), the
    dominance rule never cuts its path (moving the dominating rectangle down lowers it too),
    and its stacked twins are in order, as swapping a smaller ``a`` below a larger ``b`` changes
    the sum by ``size[a] * size[b] * (size[a] - size[b]) < 0``. So no state on its path is ever
    recorded as failed, by a run keeping the order or not, and runs of both kinds can share one
    table (whose key names a twin on top that bars an unplaced one, in every run)."""
    for s in range(topi.size):
        t = topi[s]
        if t < 0 or kr[t] <= 0 or s != s0[t]:
            continue
        top = off[t] + size[t]
        for q in range(tw_ptr[t], tw_ptr[t + 1]):
            f = tw_idx[q]
            if off[f] < 0 and low[f] == top:
                bad[f] = 1


@njit(cache=True)
def _search(mode, corder, maxdisc, fmax, twins, budget, cap, size, maxoff, s0, s1, ov_ptr, ov_idx, pre,
            lin, g_ptr, g_op, g_val, opcap, vbound, dord,
            off, low, floor, total, acc, meta, pb, hl, ti, cnt, cptr, brk, lptr, fptr,
            llog_b, llog_v, flog_s, flog_v, cstore, best_off, cuts, disc, tp, fz, tt, nh,
            cv_ptr, cv_idx, sb, sptr, kr, tw_ptr, tw_idx, topi, flog_t, ssc):
    """Resumable depth-first search over canonical packings.

    ``mode`` 0: decision (place every rectangle); 1: maximise value. Children are tried by
    (lowest offset, preorder) when ``corder`` is 0, by preorder alone when 1 (any order keeps
    the search complete; it only changes which packings come first). ``maxdisc >= 0`` limits
    the path to that many discrepancies (children other than the first: limited discrepancy
    search); ``meta[7]`` becomes 1 when that cut anything, so an exhausted tree is a proof only
    while it is 0. ``meta`` holds ``[depth, nodes, expand, value, best, lcount, fcount, cut,
    table hits]`` (the nodes answered by the table of failed states ``tt``).
    Returns ``(status, cstore)`` (``cstore``, the per-depth candidate lists, may have grown).

    Decision mode also branches on *tight sections*: a section whose unplaced rectangles exactly
    fill the room above its level ``max(floor, current offset)`` must have that level covered
    by a rectangle starting there. When the level is also the lowest offset any unplaced
    rectangle can take, the node's children are only the rectangles that can cover it (of the
    tight section with the fewest such; none: the node is dead), whatever their preorder.
    ``tp[depth]`` is then the preorder of the last rectangle placed by the ordinary rule at
    the current offset (-1: none), ``fz[depth]`` 1 at such a forced node.

    *Twins* (decision mode, ``twins`` 1): rectangles spanning the same sections with the same
    highest top (``kr[b] >= 0``: ``b``'s rank among them by size, largest first, then index; -1
    for a rectangle with no twin) may lie directly on each other only in that order, upwards
    (:func:`_bar_twins`; ``topi[s]``: the last rectangle placed in section ``s``, -1 for
    none, logged in ``flog_t``).
    """
    n = size.size
    nsec = floor.size
    depth, nodes, expand, value, best = meta[0], meta[1], meta[2], meta[3], meta[4]
    lcount, fcount = meta[5], meta[6]
    keys = np.empty(n, dtype=np.int64)
    cand = np.empty(n, dtype=np.int64)
    used = np.zeros(nsec, dtype=np.int64)
    tlev = np.full(nsec, -1, dtype=np.int64)
    tcnt = np.zeros(nsec, dtype=np.int64)
    tsum = np.zeros(nsec + 1, dtype=np.int64)
    fw = np.zeros(nsec + 2, dtype=np.int64)
    bw = np.zeros(nsec + 2, dtype=np.int64)
    bad = np.zeros(n, dtype=np.int64)
    zs = np.empty(n + 1, dtype=np.int64)
    suf = np.empty(n + 1, dtype=np.int64)
    stk = np.empty((n + 2, 2), dtype=np.int64)
    gmemo = np.full((nsec, 7), -1, dtype=np.int64)
    rel = np.empty(n + 1, dtype=np.int64)  # scratch of _sort_releases
    dv = np.empty(max(n + 1, 3 * SORT_DISTINCT + 1), dtype=np.int64)
    bcnt = np.empty(n + 2, dtype=np.int64)
    spent = 0
    status = BUDGET
    while True:
        if expand == 1:
            if spent >= budget:
                status = BUDGET
                break
            spent += 1
            nodes += 1
            expand = 0
            last_off, last_pre = np.int64(-1), tp[depth]
            if depth > 0:
                last_off = off[pb[depth - 1]]
            fz[depth] = 0
            ntight = 0
            for b in range(n):
                bad[b] = 0
            if twins == 1 and mode == 0:
                _bar_twins(bad, kr, tw_ptr, tw_idx, topi, off, low, size, s0)
            lvl0 = last_off if last_off > 0 else np.int64(0)
            if mode == 0 and depth < n:
                # tight sections: level + what is left to place there == capacity
                for s in range(nsec):
                    tlev[s] = -1
                    tsum[s + 1] = tsum[s]
                    if total[s] > 0:
                        lv = floor[s] if floor[s] > lvl0 else lvl0
                        if lv + total[s] == cap:
                            tlev[s] = lv
                            ntight += 1
                            if lv == last_off:  # prefix counts of the tight sections at last_off
                                tsum[s + 1] += 1
            if mode == 0:
                if depth == n:
                    for b in range(n):
                        best_off[b] = off[b]
                    status = FOUND
                    break
            else:
                if value > best:
                    best = value
                    for b in range(n):
                        best_off[b] = off[b]
            if mode == 0 and depth > 0 and depth < n:
                o = last_off
            if mode == 0 and depth > 0 and depth < n and tt.shape[0] > 2:
                # the node's state, hashed: what its subtree depends on (the unplaced
                # rectangles and their lowest offsets, the live sections' levels, the offset,
                # and which unplaced rectangles at that offset come before the last placement
                # in the preorder: those cannot go there); a state whose subtree failed fails.
                # No preorder in it: the subtree of a state has a completion under any
                # strategy or under none, so one table serves every run on the part
                h1 = _mix(np.uint64(o) ^ np.uint64(0x3C6EF372FE94F82B))
                h2 = _mix(h1 ^ np.uint64(0x5851F42D4C957F2D))
                for e in range(n):
                    if off[e] < 0:
                        x = _mix(np.uint64(e) + np.uint64(0x632BE59BD9B4E019)) ^ np.uint64(low[e])
                        if low[e] == o and pre[e] < tp[depth]:
                            x ^= np.uint64(1) << np.uint64(62)
                        h1 ^= _mix(x)
                        h2 ^= _mix(x + np.uint64(0x2545F4914F6CDD1D))
                for s in range(nsec):
                    if total[s] > 0:
                        lv = floor[s] if floor[s] > o else o
                        x = _mix(np.uint64(s) + np.uint64(0x1B873593)) ^ np.uint64(lv)
                        t = topi[s]
                        if t >= 0 and kr[t] >= 0 and s == s0[t]:
                            # a twin on top that bars an unplaced twin lying on it (_bar_twins):
                            # the first unplaced one before it in the order (all have one lowest offset)
                            for q in range(tw_ptr[t], tw_ptr[t + 1]):
                                f = tw_idx[q]
                                if off[f] < 0:
                                    if low[f] == off[t] + size[t]:
                                        x ^= _mix(np.uint64(t) + np.uint64(0x7F4A7C15))
                                    break
                        h1 ^= _mix(x + np.uint64(0x85EBCA6B))
                        h2 ^= _mix(x + np.uint64(0xC2B2AE35))
                nh[depth, 0] = h1
                nh[depth, 1] = h2
                if _tt_find(tt, h1, h2, 0):
                    meta[8] += 1
                    cnt[depth] = 0
                    ti[depth] = 0
                    brk[depth] = 0
                    continue
            if mode == 0 and depth > 0 and depth < n:
                ok = True
                # every section's unplaced rectangles, stacked from max(offset, floor) in order of
                # lowest offset (optimal for a one-machine makespan with release times), fit
                # A rectangle behind the canonical order (lowest offset below the last one's, or
                # equal with an earlier preorder) can only be placed once an overlapping one is
                # placed under it, at >= o: its release is o + the smallest such size. The ones
                # released at o come first in that order, so they are only summed per section
                # (``total`` less the rest); only those released above o are sorted and swept.
                m = 0
                for s in range(nsec):
                    used[s] = 0  # first the sizes released above o, per section
                for e in range(n):
                    if off[e] < 0:
                        r = low[e] if low[e] > o else o
                        behind = low[e] < o
                        if not behind and low[e] == o and pre[e] < last_pre:
                            behind = True  # unless a tight section at o lets it be forced there
                            if ntight > 0 and tsum[s1[e]] > tsum[s0[e]]:
                                behind = False
                        if behind:
                            smallest = BIG
                            for j in range(ov_ptr[e], ov_ptr[e + 1]):  # sorted by size
                                f = ov_idx[j]
                                if off[f] < 0:
                                    smallest = size[f]
                                    break
                            if smallest == BIG or o + smallest > maxoff[e]:
                                ok = False
                                break
                            r = o + smallest if o + smallest > low[e] else low[e]
                        if r > o:  # released above o: stacked in order below
                            keys[m] = r
                            cand[m] = e
                            m += 1
                            for s in range(s0[e], s1[e]):
                                used[s] += size[e]
                # the ones released at o come first in that order, at the sections' levels
                for s in range(nsec):
                    base = floor[s] if floor[s] > o else o
                    used[s] = base + total[s] - used[s]
                    if used[s] > cap:
                        ok = False
                # by release; ties in any order: two released at r stack to max(level, r) + both
                # sizes either way, and a section overflows iff its last stack does
                if ok:
                    _sort_releases(keys, cand, m, dv, bcnt, rel)
                for i in range(m):
                    if not ok:
                        break
                    e = cand[i]
                    r = keys[i]
                    for s in range(s0[e], s1[e]):
                        t = used[s] if used[s] > r else r
                        t += size[e]
                        if t > cap:
                            ok = False
                            break
                        used[s] = t
                    if not ok:
                        break
                if ok and ntight > 0:
                    vmax = BIG
                    for e in range(n):
                        if off[e] < 0 and low[e] + size[e] < vmax:
                            vmax = low[e] + size[e]
                    ok = _level_cover_ok(tlev, off, low, size, maxoff, s0, s1, cv_ptr, cv_idx, sb, sptr, fw, bw, bad, zs,
                                         suf, stk, gmemo, nodes, vmax, ssc)
                if not ok:
                    cnt[depth] = 0
                    ti[depth] = 0
                    brk[depth] = 0
                    continue
                # dynamic decomposition: a boundary no unplaced rectangle crosses, with unplaced
                # rectangles on both sides, splits the rest into independent problems
                lo_end, hi_start = BIG, np.int64(-1)
                for e in range(n):
                    if off[e] < 0:
                        if s1[e] < lo_end:
                            lo_end = s1[e]
                        if s0[e] > hi_start:
                            hi_start = s0[e]
                for k in range(lo_end - 1, hi_start):
                    if k >= 0 and k < cuts.size and cuts[k] == 0:
                        status = SPLIT
                        break
                if status == SPLIT:
                    break
            # forced branching on the tight section with the fewest rectangles able to cover it
            forced_s = np.int64(-1)
            if ntight > 0:
                lvl0 = last_off if last_off > 0 else np.int64(0)
                m_min = BIG
                for b in range(n):
                    if off[b] < 0 and low[b] <= maxoff[b]:
                        r = low[b] if low[b] > lvl0 else lvl0
                        if r < m_min:
                            m_min = r
                for s in range(nsec):
                    tcnt[s] = 0
                for b in range(n):
                    if off[b] < 0 and low[b] == m_min and low[b] <= maxoff[b] and bad[b] == 0:
                        for s in range(s0[b], s1[b]):
                            if tlev[s] == m_min:
                                tcnt[s] += 1
                fewest = BIG
                for s in range(nsec):
                    if tlev[s] == m_min and tcnt[s] < fewest:
                        fewest = tcnt[s]
                        forced_s = s
                if fewest > fmax:
                    forced_s = -1
            # candidates: unplaced, still fitting, canonical order, not dominated
            min_height = BIG
            k = 0
            for b in range(n):
                if off[b] >= 0:
                    continue
                lb = low[b] if low[b] > last_off else last_off
                if lb > maxoff[b]:
                    continue
                h = low[b] + size[b]
                if low[b] <= maxoff[b] and h < min_height:
                    min_height = h
                if low[b] < last_off or (low[b] == last_off and pre[b] < last_pre):
                    continue
                cand[k] = b
                k += 1
            m = 0
            if forced_s >= 0:
                fz[depth] = 1
                lv = tlev[forced_s]
                for b in range(n):
                    if off[b] < 0 and low[b] == lv and lv <= maxoff[b] and s0[b] <= forced_s and forced_s < s1[b] \
                            and bad[b] == 0:
                        keys[m] = pre[b]
                        cand[m] = b
                        m += 1
            else:
                for i in range(k):
                    b = cand[i]
                    if low[b] < min_height and bad[b] == 0:
                        keys[m] = low[b] * (n + 1) + pre[b] if corder == 0 else pre[b]
                        cand[m] = b
                        m += 1
            if mode == 1 and m > 0:
                # bound: value + fractional knapsacks of the placeable rest, one section each
                for s in range(nsec):
                    base = floor[s] if floor[s] > last_off else last_off
                    used[s] = base
                extra = 0.0
                for i in range(n):
                    b = dord[i]
                    if off[b] >= 0 or vbound[b] <= 0:
                        continue
                    lb = low[b] if low[b] > last_off else last_off
                    if lb > maxoff[b]:
                        continue
                    sbest, room = -1, BIG
                    for s in range(s0[b], s1[b]):
                        r = cap - used[s]
                        if r < room:
                            room = r
                            sbest = s
                    if room <= 0 or sbest < 0:
                        continue
                    if size[b] <= room:
                        used[sbest] += size[b]
                        extra += vbound[b]
                    else:
                        used[sbest] = cap
                        extra += vbound[b] * room / size[b]
                if value + extra < best + 1.0 - 1e-9 * (1.0 + abs(value + extra)):
                    m = 0  # cannot beat the best: no children
            # sort the candidates by (lowest offset, preorder)
            if m > 1:
                order = np.argsort(keys[:m])
                tmp = cand[:m].copy()
                for i in range(m):
                    cand[i] = tmp[order[i]]
            base = cptr[depth]
            if base + m > cstore.size:
                grown = np.empty(max(2 * cstore.size, base + m + n), dtype=np.int64)
                grown[:base] = cstore[:base]
                cstore = grown
            for i in range(m):
                cstore[base + i] = cand[i]
            cnt[depth] = m
            ti[depth] = 0
            brk[depth] = 0
        # next child of the node at `depth`
        if ti[depth] >= cnt[depth] or brk[depth] == 1:
            if depth == 0:
                status = EXHAUSTED
                break
            if mode == 0 and depth < n and tt.shape[0] > 2:  # its subtree failed: keep its state
                _tt_find(tt, nh[depth, 0], nh[depth, 1], 1)
            depth -= 1
            c = pb[depth]
            # undo the placement of c
            for j in range(lcount - 1, lptr[depth] - 1, -1):
                low[llog_b[j]] = llog_v[j]
            lcount = lptr[depth]
            for j in range(fcount - 1, fptr[depth] - 1, -1):
                floor[flog_s[j]] = flog_v[j]
                topi[flog_s[j]] = flog_t[j]
            fcount = fptr[depth]
            for s in range(s0[c], s1[c]):
                total[s] += size[c]
            for k in range(s0[c], s1[c] - 1):
                cuts[k] += 1
            if mode == 1:
                _gain(c, acc, opcap, lin, g_ptr, g_op, g_val, -1)
                value -= _gain(c, acc, opcap, lin, g_ptr, g_op, g_val, 0)
            off[c] = -1
            if hl[depth] == 1:  # c overlapped no unplaced rectangle: no sibling can do better
                brk[depth] = 1
            continue
        if maxdisc >= 0 and ti[depth] > 0 and disc[depth] >= maxdisc:
            meta[7] = 1  # the discrepancy limit cuts the rest of this node's children
            brk[depth] = 1
            continue
        c = cstore[cptr[depth] + ti[depth]]
        disc[depth + 1] = disc[depth] + (1 if ti[depth] > 0 else 0)
        ti[depth] += 1
        o = low[c]
        off[c] = o
        top = o + size[c]
        hat = False
        ok = True
        start_l = lcount
        for j in range(ov_ptr[c], ov_ptr[c + 1]):
            e = ov_idx[j]
            if off[e] >= 0:
                continue
            hat = True
            if low[e] < top:
                if lcount >= llog_b.size:
                    ok = False  # cannot happen: the log holds n * n entries
                    break
                llog_b[lcount] = e
                llog_v[lcount] = low[e]
                lcount += 1
                low[e] = top
                if mode == 0 and top > maxoff[e]:
                    ok = False
        start_f = fcount
        for s in range(s0[c], s1[c]):
            flog_s[fcount] = s
            flog_v[fcount] = floor[s]
            flog_t[fcount] = topi[s]
            topi[s] = c
            fcount += 1
            floor[s] = top
            total[s] -= size[c]
        if ok and mode == 0:
            for s in range(nsec):
                f = floor[s] if floor[s] > o else o
                if f + total[s] > cap:
                    ok = False
                    break
        # no unplaced rectangle lifted (its lowest offset below c's top): c is in nobody's way
        free = not hat or (mode == 0 and lcount == start_l)
        if not ok:
            for j in range(lcount - 1, start_l - 1, -1):
                low[llog_b[j]] = llog_v[j]
            lcount = start_l
            for j in range(fcount - 1, start_f - 1, -1):
                floor[flog_s[j]] = flog_v[j]
                topi[flog_s[j]] = flog_t[j]
            fcount = start_f
            for s in range(s0[c], s1[c]):
                total[s] += size[c]
            off[c] = -1
            if free:
                brk[depth] = 1
            continue
        if mode == 1:
            value += _gain(c, acc, opcap, lin, g_ptr, g_op, g_val, 1)
        for k in range(s0[c], s1[c] - 1):
            cuts[k] -= 1
        pb[depth] = c
        if fz[depth] == 0:
            tp[depth + 1] = pre[c]
        else:  # forced: the ordinary rule's reference stays while the offset does
            prev = off[pb[depth - 1]] if depth > 0 else np.int64(-1)
            tp[depth + 1] = tp[depth] if prev == o else np.int64(-1)
        hl[depth] = 1 if free else 0
        lptr[depth] = start_l
        fptr[depth] = start_f
        depth += 1
        cptr[depth] = cptr[depth - 1] + cnt[depth - 1]
        expand = 1
    meta[0], meta[1], meta[2], meta[3], meta[4] = depth, nodes, expand, value, best
    meta[5], meta[6] = lcount, fcount
    return status, cstore


# ---------------------------------------------------------------------------- the Python side
@dataclass(frozen=True)
class PackResult:
    """What :func:`pack` and :func:`pack_max` return.

    Attributes:
      offsets: ``int64[n]`` offset of each rectangle, ``-1`` where it is left out (:func:`pack`
        leaves all at -1 unless it placed every rectangle).
      status: ``"optimal"`` (:func:`pack`: every rectangle placed; :func:`pack_max`: the value is
        proven the best), ``"feasible"`` (:func:`pack_max`: the best found before the time limit,
        not proven), ``"infeasible"`` (:func:`pack`: proven that not all fit) or ``"unknown"``
        (:func:`pack`: the time limit came first).
      value: total value of the placed rectangles (:func:`pack`: their total size).
      upper_bound: a proven upper bound on the value (:func:`pack_max`; equals ``value`` when
        optimal), or None.
      nodes: search nodes visited.
      wall_s: seconds spent.
    """

    offsets: np.ndarray
    status: str
    value: int
    upper_bound: int | None
    nodes: int
    wall_s: float


@dataclass
class _Part:
    """One component's arrays, reindexed to ``0..n-1`` (``ids`` maps back)."""

    ids: np.ndarray
    start: np.ndarray
    end: np.ndarray
    size: np.ndarray
    maxoff: np.ndarray
    s0: np.ndarray
    s1: np.ndarray
    nsec: int
    ov_ptr: np.ndarray
    ov_idx: np.ndarray
    cap: int
    cv_ptr: np.ndarray  # the rectangles spanning each section (CSR), each section's largest first
    cv_idx: np.ndarray
    sb: np.ndarray  # the rectangles by first section (``sptr[p]:sptr[p+1]`` start at section p)
    sptr: np.ndarray
    twin_rank: np.ndarray  # rank among the rectangles spanning the same sections (largest first, then index); -1: none
    tw_ptr: np.ndarray  # each rectangle's twins before it in that order (CSR, in order)
    tw_idx: np.ndarray
    preorders: dict = field(default_factory=dict)

    @classmethod
    def make(cls, ids, start, end, size, maxoff, cap):
        st, en = start[ids] - start[ids].min(), end[ids] - start[ids].min()
        s0, s1, nsec = _sections(st, en)
        ov_ptr, ov_idx = _overlaps(st, en)
        sz = size[ids]
        for i in range(len(ids)):  # each list by size, smallest first (the kernel stops early)
            seg = ov_idx[ov_ptr[i]:ov_ptr[i + 1]]
            ov_idx[ov_ptr[i]:ov_ptr[i + 1]] = seg[np.argsort(sz[seg], kind="stable")]
        spans = s1 - s0
        cv_idx = np.repeat(np.arange(len(ids), dtype=np.int64), spans)
        secs = (np.arange(int(spans.sum())) - np.repeat(np.cumsum(spans) - spans, spans) + np.repeat(s0, spans))
        by = np.lexsort((cv_idx, -size[ids][cv_idx], secs))  # by section, each largest first
        cv_idx = cv_idx[by].astype(np.int64)
        cv_ptr = np.searchsorted(secs[by], np.arange(nsec + 1)).astype(np.int64)
        sb = np.argsort(s0, kind="stable").astype(np.int64)
        sptr = np.searchsorted(s0[sb], np.arange(nsec + 1)).astype(np.int64)
        return cls(ids, st, en, size[ids].copy(), maxoff[ids].copy(), s0, s1, nsec, ov_ptr, ov_idx, int(cap),
                   cv_ptr, cv_idx, sb, sptr, *_twin_rank(s0, s1, sz, maxoff[ids]))

    def preorder(self, name: str) -> np.ndarray:
        if name not in self.preorders:
            self.preorders[name] = _preorder(name, self.start, self.end, self.size, self.s0, self.s1, self.nsec)
        return self.preorders[name]

    def section_totals(self) -> np.ndarray:
        total = np.zeros(self.nsec + 1, dtype=np.int64)
        np.add.at(total, self.s0, self.size)
        np.add.at(total, self.s1, -self.size)
        return np.cumsum(total)[: self.nsec]


_EMPTY = np.zeros(0, dtype=np.int64)


class _Run:
    """A resumable search over one part (state arrays + the kernel call)."""

    def __init__(self, part: _Part, mode: int, pre: np.ndarray, lin=None, gains=None, best: int = -1,
                 low0=None, corder: int = 0, maxdisc: int = -1, fmax: int = 1, twins: int = 0, tt=None):
        n = part.size.size
        self.fmax, self.twins = np.int64(fmax), np.int64(twins)
        # failed states (decision mode), kept when the caller passes a table to share between
        # the runs on the same part; none (a 2-row stub) otherwise
        self.tt = np.zeros((2, 2), dtype=np.uint64) if tt is None else tt
        self.nh = np.zeros((n + 2, 2), dtype=np.uint64)
        self.part, self.mode, self.pre = part, mode, np.ascontiguousarray(pre, dtype=np.int64)
        self.corder, self.maxdisc = corder, maxdisc
        self.disc = np.zeros(n + 2, dtype=np.int64)
        if lin is None:
            lin = np.zeros(n, dtype=np.int64)
        if gains is None:
            gains = (np.zeros(n + 1, dtype=np.int64), _EMPTY, _EMPTY, np.zeros(1, dtype=np.int64))
        self.lin = np.ascontiguousarray(lin, dtype=np.int64)
        self.g_ptr, self.g_op, self.g_val, self.opcap = (np.ascontiguousarray(a, dtype=np.int64) for a in gains)
        self.vbound = (self.lin + np.add.reduceat(np.append(self.g_val, 0), self.g_ptr[:-1])
                       * (np.diff(self.g_ptr) > 0)).astype(np.float64)
        density = self.vbound / np.maximum(part.size, 1)
        self.dord = np.lexsort((np.arange(n), -density)).astype(np.int64)
        nops = self.opcap.size
        self.state = _new_state(n, part.nsec, nops, part.size, part.s0, part.s1)
        if low0 is not None:
            self.state[1][:] = low0
        diff = np.zeros(part.nsec + 1, dtype=np.int64)
        np.add.at(diff, part.s0, 1)
        np.add.at(diff, np.maximum(part.s1 - 1, part.s0), -1)
        self.cuts = np.cumsum(diff)[: max(part.nsec - 1, 0)].astype(np.int64)
        self.meta = np.array([0, 0, 1, 0, best, 0, 0, 0, 0], dtype=np.int64)
        self.pb = np.zeros(n + 1, dtype=np.int64)
        self.hl = np.zeros(n + 1, dtype=np.int64)
        self.ti = np.zeros(n + 1, dtype=np.int64)
        self.cnt = np.zeros(n + 1, dtype=np.int64)
        self.cptr = np.zeros(n + 2, dtype=np.int64)
        self.brk = np.zeros(n + 1, dtype=np.int64)
        self.tp = np.full(n + 2, -1, dtype=np.int64)
        self.fz = np.zeros(n + 1, dtype=np.int64)
        self.lptr = np.zeros(n + 1, dtype=np.int64)
        self.fptr = np.zeros(n + 1, dtype=np.int64)
        self.llog_b = np.zeros(int(part.ov_ptr[-1]) + 1, dtype=np.int64)
        self.llog_v = np.zeros_like(self.llog_b)
        spans = int((part.s1 - part.s0).sum()) + 1
        self.flog_s = np.zeros(spans, dtype=np.int64)
        self.flog_v = np.zeros(spans, dtype=np.int64)
        self.flog_t = np.zeros(spans, dtype=np.int64)
        self.topi = np.full(part.nsec, -1, dtype=np.int64)
        self.kr = part.twin_rank if mode == 0 else np.full(n, -1, dtype=np.int64)
        self.cstore = np.zeros(max(8 * n, 16), dtype=np.int64)
        self.best_off = np.full(n, -1, dtype=np.int64)
        self.status = BUDGET

    @property
    def nodes(self) -> int:
        return int(self.meta[1])

    @property
    def work(self) -> int:
        """Nodes less those answered by the table of failed states (what the limits count)."""
        return int(self.meta[1] - self.meta[8])

    @property
    def best(self) -> int:
        return int(self.meta[4])

    def step(self, budget: int) -> int:
        p = self.part
        off, low, floor, total, acc = self.state
        self.status, self.cstore = _search(
            self.mode, self.corder, self.maxdisc, self.fmax, self.twins, budget, p.cap, p.size, p.maxoff, p.s0, p.s1,
            p.ov_ptr, p.ov_idx, self.pre,
            self.lin, self.g_ptr, self.g_op, self.g_val, self.opcap, self.vbound, self.dord,
            off, low, floor, total, acc, self.meta, self.pb, self.hl, self.ti, self.cnt, self.cptr,
            self.brk, self.lptr, self.fptr, self.llog_b, self.llog_v, self.flog_s, self.flog_v,
            self.cstore, self.best_off, self.cuts, self.disc, self.tp, self.fz, self.tt, self.nh,
            p.cv_ptr, p.cv_idx, p.sb, p.sptr, self.kr, p.tw_ptr, p.tw_idx, self.topi, self.flog_t, _SUBSET_CACHE)
        return self.status


def _ints(a, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be a 1-D array of integers, got shape {arr.shape} dtype {arr.dtype}")
    return arr.astype(np.int64)


def _check(start, end, size, capacity, max_offset, time_limit_s):
    start, end, size = _ints(start, "start"), _ints(end, "end"), _ints(size, "size")
    if not (start.size == end.size == size.size):
        raise ValueError(f"start, end and size must have one entry per rectangle, got {start.size}, "
                         f"{end.size}, {size.size}")
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 0:
        raise ValueError(f"capacity must be an integer >= 0, got {capacity!r}")
    if np.any(end < start):
        b = int(np.flatnonzero(end < start)[0])
        raise ValueError(f"rectangle {b}: end {end[b]} is before start {start[b]}")
    if np.any(size < 1):
        b = int(np.flatnonzero(size < 1)[0])
        raise ValueError(f"rectangle {b}: size {size[b]} must be >= 1")
    if not (isinstance(time_limit_s, (int, float)) and not isinstance(time_limit_s, bool)
            and math.isfinite(time_limit_s) and time_limit_s > 0):
        raise ValueError(f"time_limit_s must be a finite number > 0, got {time_limit_s!r}")
    maxoff = int(capacity) - size if max_offset is None else _ints(max_offset, "max_offset")
    if maxoff.size != size.size:
        raise ValueError(f"max_offset must have one entry per rectangle, got {maxoff.size}")
    maxoff = np.minimum(maxoff, int(capacity) - size)
    return start, end, size, int(capacity), maxoff


CHUNK = 4_000  # nodes per kernel call between clock checks


class _Limit(Exception):
    """The node limit or the deadline of a decision search was reached."""


def _solve_part(part: _Part, name: str, low0, budget: list, deadline: float, memo: dict | None = None,
                layers: list | None = None):
    """Place every rectangle of ``part`` (offsets >= ``low0``) under preorder ``name``: local
    offsets, or None when proven impossible. When the unplaced rectangles fall apart in time
    (``SPLIT``), each piece is solved on its own, recursively; ``budget[0]`` counts down the
    nodes left, and :class:`_Limit` is raised when it or the deadline runs out.

    ``memo`` (a dict, kept by the caller across restarts) remembers the pieces' answers: a
    piece is a whole problem of its own (its rectangles, their highest offsets and lowest
    offsets ``low0``), whose answer (offsets, or None when its tree was searched) holds under
    any preorder, so a piece met again, on another path or in a later restart, is not searched
    again.

    ``layers`` (a list; top-level runs only): when the run stops at a limit with every section
    covered at offset 0 on its path, that path's *bottom layer* (the rectangles at offset 0,
    increasing) is appended to it."""
    key = None
    if memo is not None and low0 is not None:
        key = np.concatenate([part.start, part.end, part.size, part.maxoff, low0]).tobytes()
        if key in memo:
            found = memo[key]
            return None if found is None else found.copy()
    pname, _, flag = name.partition("/")
    tt = None
    if memo is not None and low0 is None:
        # a top-level run: the part's table of failed states is kept for every run on it, so
        # a rerun, or a run of another strategy, skips what earlier runs proved dead
        if "tt" not in memo:
            memo["tt"] = np.zeros((TT_SIZE, 2), dtype=np.uint64)
        tt = memo["tt"]
    run = _Run(part, 0, part.preorder(pname), low0=low0, fmax=BIG if "t" in flag else 1, twins=int("s" in flag),
               tt=tt)
    try:
        while True:
            before = run.work
            status = run.step(max(min(CHUNK, budget[0]), 1))
            budget[0] -= run.work - before
            if status == FOUND:
                if key is not None:
                    memo[key] = run.best_off.copy()
                return run.best_off.copy()
            if status == EXHAUSTED:
                if key is not None:
                    memo[key] = None
                return None
            if status == SPLIT:
                off, low = run.state[0], run.state[1]
                rest = np.flatnonzero(off < 0)
                result = off.copy()
                ok = True
                for piece in components(part.start[rest], part.end[rest]):
                    ids = rest[piece]
                    sub = _Part.make(ids, part.start, part.end, part.size, part.maxoff, part.cap)
                    local = _solve_part(sub, name, low[ids], budget, deadline, memo)
                    if local is None:
                        ok = False
                        break
                    result[ids] = local
                if ok:
                    return result
                depth = run.meta[0]  # the split node has no solution: backtrack from it
                run.cnt[depth], run.ti[depth], run.brk[depth] = 0, 0, 0
            if budget[0] <= 0 or time.perf_counter() >= deadline:
                raise _Limit
    except _Limit:
        if layers is not None:
            bottom = np.flatnonzero(run.state[0] == 0)
            if np.sum(part.s1[bottom] - part.s0[bottom]) == part.nsec:  # disjoint at offset 0: a cover
                layers.append(bottom)
        raise


def _luby(i: int) -> int:
    """The ``i``-th term (1-based) of Luby's restart sequence 1, 1, 2, 1, 1, 2, 4, 1, ..."""
    k = 1
    while (1 << k) - 1 < i:
        k += 1
    while i != (1 << k) - 1:
        i -= (1 << (k - 1)) - 1
        k = 1
        while (1 << k) - 1 < i:
            k += 1
    return 1 << (k - 1)


def strategy(i: int, preorders=PREORDERS) -> str:
    """The ``i``-th decision strategy of the restarts: each of ``preorders`` with branching on
    every tight section (``/t``), then each plain, then both again with perturbed keys
    (``@k``), a new perturbation every round; ``s`` among the flags (``TWINS``): stacked twins
    kept in order (:func:`_bar_twins`)."""
    m = len(preorders)
    base, k = preorders[i % m], i // m
    flags = ("" if k % 2 else "t") + ("s" if ("p" if k % 2 else "t") in TWINS else "")
    return f"{base}{'' if k < 2 else '@' + str(k // 2)}{'/' + flags if flags else ''}"


class _Restarts:
    """The two restart schedules of :func:`_decide` on one part, resumable one run at a time:
    *Luby* runs, run ``i`` with :func:`strategy` ``(i)`` under a node limit of ``unit x``
    Luby's ``1, 1, 2, 1, 1, 2, 4, ...`` (many short tries of varied orders, for the
    heavy-tailed instances that one lucky order solves at once), and a *round robin* of the
    plain ``preorders`` under a doubling limit (for the instances that need a long search under
    one order), keeping stacked twins in order (``/s``, with ``TWINS`` "r"); they share the
    nodes by ``LUBY_SHARE`` (the next run comes from the one behind its share), one table of
    failed states and one memo of pieces. ``layers`` (a list, or None): where each run that
    stops at a limit appends its path's bottom layer (:func:`_solve_part`)."""

    def __init__(self, part: _Part, preorders, layers: list | None = None, tt_size: int = TT_SIZE,
                 layer: tuple = ()):
        self.part, self.preorders, self.layers, self.layer = part, preorders, layers, layer
        self.unit = max(RESTART_UNIT * part.size.size, MIN_RUN)
        self.spent = [0, 0]  # nodes of the Luby runs, of the round robin
        self.memo: dict = {"tt": np.zeros((tt_size, 2), dtype=np.uint64)}  # the pieces' answers, the table
        self.i, self.k, self.limit_rr = 0, 0, self.unit

    @property
    def nodes(self) -> int:
        return self.spent[0] + self.spent[1]

    def run(self, deadline: float, max_nodes: int) -> tuple[str, np.ndarray | None]:
        """The next run, of at most ``max_nodes`` nodes: ``("optimal", offsets)``,
        ``("infeasible", None)`` (it searched its whole tree) or ``("unknown", None)``."""
        if self.spent[0] * (1.0 - LUBY_SHARE) <= self.spent[1] * LUBY_SHARE:
            which, name, limit = 0, strategy(self.i, self.preorders), self.unit * _luby(self.i + 1)
            self.i += 1
        else:
            which, name, limit = 1, self.preorders[self.k % len(self.preorders)] + ("/s" if "r" in TWINS else ""), \
                self.limit_rr
            self.k += 1
            if self.k % len(self.preorders) == 0:
                self.limit_rr *= 2
        limit = min(limit, max_nodes)
        budget = [limit]
        try:
            local = _solve_part(self.part, name, None, budget, deadline, self.memo, self.layers)
        except _Limit:
            self.spent[which] += limit - budget[0]
            return "unknown", None
        self.spent[which] += limit - budget[0]
        return ("infeasible", None) if local is None else ("optimal", local)


def _decide(part: _Part, deadline: float, preorders, max_nodes: int = BIG) -> tuple[str, np.ndarray | None, int]:
    """Restarts (:class:`_Restarts`) until a run packs the part or searches its whole tree.
    Returns ``("optimal", offsets, nodes)``, ``("infeasible", None, nodes)`` or ``("unknown",
    None, nodes)`` at the deadline or after ``max_nodes`` nodes (those the failed-state table
    does not answer).

    *Bottom layers* (when every section is full, ``LAYER_SHARE`` > 0): the rectangles at offset
    0 then cover every section, one each, and a run spends its whole limit under the one bottom
    layer its first placements chose, so the restarts try few of them (256/262 of the hard set:
    six in 24 runs). Every bottom layer a run stops under is kept, and a ``LAYER_SHARE`` of the
    nodes goes to restarts of the part with that layer held at offset 0 (its rectangles' highest
    offset 0: a problem of its own, with its own table), the layer with the fewest nodes
    first; one whose restarts search their whole tree is dropped (no packing has that bottom
    layer). At most ``MAX_LAYERS`` are held at once (a layer met beyond them is not). Only
    runs on the whole part prove it infeasible."""
    totals = part.section_totals()
    if np.any(part.maxoff < 0) or np.any(totals > part.cap):
        return "infeasible", None, 0
    layered = LAYER_SHARE > 0 and bool(np.all(totals == part.cap))
    free = _Restarts(part, preorders, [] if layered else None)
    layers: dict = {}  # bottom layer (sorted rectangles) -> its restarts, None once proven dead
    spent_layers = 0
    while True:
        used = free.nodes + spent_layers
        if time.perf_counter() >= deadline or used >= max_nodes:
            return "unknown", None, used
        live = [r for r in layers.values() if r is not None]
        if live and spent_layers * (1.0 - LAYER_SHARE) <= free.nodes * LAYER_SHARE:
            run = min(live, key=lambda r: r.nodes)
            before = run.nodes
            status, local = run.run(deadline, max_nodes - used)
            spent_layers += run.nodes - before
            if status == "optimal":
                return "optimal", local, free.nodes + spent_layers
            if status == "infeasible":
                layers[run.layer] = None
            continue
        status, local = free.run(deadline, max_nodes - used)
        if status != "unknown":
            return status, local, free.nodes + spent_layers
        if layered:
            for bottom in free.layers:
                key = tuple(int(b) for b in bottom)
                if key not in layers and sum(r is not None for r in layers.values()) < MAX_LAYERS:
                    maxoff = part.maxoff.copy()
                    maxoff[bottom] = 0
                    held = _Part.make(np.arange(part.size.size), part.start, part.end, part.size, maxoff, part.cap)
                    layers[key] = _Restarts(held, preorders, tt_size=LAYER_TT, layer=key)
            free.layers.clear()


def pack(start, end, size, capacity: int, *, max_offset=None, time_limit_s: float = 10.0,
         preorders=PREORDERS, max_nodes: int | None = None) -> PackResult:
    """Place *every* rectangle ``b`` (live over ``[start[b], end[b]]``, ``size[b]`` units) in
    ``[0, capacity)`` with no two co-live rectangles sharing a unit, or prove it impossible.

    ``max_offset`` optionally lowers each rectangle's highest offset (default ``capacity -
    size``). Components of the interval graph are solved apart, each by a round robin of the
    ``preorders`` with a doubling node limit; ``time_limit_s`` (> 0) bounds the whole call, and
    ``max_nodes`` (optional) its nodes (those the failed-state table does not answer), for runs
    that do not depend on the machine's speed. Returns :class:`PackResult` with status
    ``optimal`` (offsets set), ``infeasible`` or ``unknown`` (a limit came first); sizes must
    be >= 1.
    """
    begin = time.perf_counter()
    start, end, size, cap, maxoff = _check(start, end, size, capacity, max_offset, time_limit_s)
    deadline = begin + time_limit_s
    offsets = np.full(size.size, -1, dtype=np.int64)
    nodes = 0
    for ids in components(start, end):
        part = _Part.make(ids, start, end, size, maxoff, cap)
        status, local, used = _decide(part, deadline, preorders, BIG if max_nodes is None else max_nodes - nodes)
        nodes += used
        if status != "optimal":
            return PackResult(np.full(size.size, -1, dtype=np.int64), status, 0, None, nodes,
                              time.perf_counter() - begin)
        offsets[ids] = local
    return PackResult(offsets, "optimal", int(size.sum()), int(size.sum()), nodes, time.perf_counter() - begin)


def _fits_bound(part: _Part, vbound: np.ndarray) -> float:
    """Root bound of the optimisation: per-section fractional knapsacks (as in the kernel)."""
    used = np.zeros(part.nsec, dtype=np.int64)
    extra = 0.0
    density = vbound / np.maximum(part.size, 1)
    for b in np.lexsort((np.arange(part.size.size), -density)):
        if vbound[b] <= 0 or part.maxoff[b] < 0:
            continue
        span = np.arange(part.s0[b], part.s1[b])
        room = part.cap - used[span]
        s = span[int(np.argmin(room))]
        r = part.cap - used[s]
        if r <= 0:
            continue
        if part.size[b] <= r:
            used[s] += part.size[b]
            extra += vbound[b]
        else:
            used[s] = part.cap
            extra += vbound[b] * r / part.size[b]
    return extra


def maximise_parts(start, end, size, cap, maxoff, lin, gains, *, time_limit_s: float,
                   initial=None, preorder: str = "density", decide_share: float = 0.6,
                   fit_share: float | None = None):
    """Pick and place a subset of the highest value, component by component (the kernel of
    :func:`pack_max`, also used by :mod:`mallocgym.agents.pack`).

    ``lin[b]`` is rectangle ``b``'s own value; ``gains = (g_ptr, g_op, g_val, opcap)`` (or None)
    adds per-op gains ``g_val[j]`` at op ``g_op[j]`` for ``j`` in ``g_ptr[b]:g_ptr[b+1]``, the
    sum at op ``t`` being capped at ``opcap[t]``; ops must not be shared between components (ops
    inside the live intervals are not). ``initial`` (offsets, or None) is a known packing: the
    search looks only for better ones and keeps it otherwise. Each component first tries to
    place everything for ``decide_share`` of its time (``fit_share``, when given, if every
    section holds all its rectangles: then only the geometry can stop it). Returns ``(offsets, value, upper_bound, proven, nodes)``.
    """
    begin = time.perf_counter()
    deadline = begin + time_limit_s
    n = size.size
    offsets = np.full(n, -1, dtype=np.int64)
    if gains is None:
        gains = (np.zeros(n + 1, dtype=np.int64), _EMPTY, _EMPTY, np.zeros(1, dtype=np.int64))
    g_ptr, g_op, g_val, opcap = gains
    parts = components(start, end)
    weights = np.array([len(p) for p in parts], dtype=float)
    total_value, total_bound, proven, nodes = 0, 0, True, 0
    for k, ids in enumerate(parts):
        part = _Part.make(ids, start, end, size, maxoff, cap)
        # this part's value arrays, ops renumbered
        lo, hi = g_ptr[ids], g_ptr[ids + 1]
        p_ptr = np.concatenate([[0], np.cumsum(hi - lo)]).astype(np.int64)
        sel = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)]).astype(np.int64) if len(ids) else _EMPTY
        ops = g_op[sel]
        uniq, p_op = np.unique(ops, return_inverse=True)
        p_gains = (p_ptr, p_op.astype(np.int64), g_val[sel].astype(np.int64),
                   opcap[uniq].astype(np.int64) if uniq.size else np.zeros(1, dtype=np.int64))
        p_lin = lin[ids].astype(np.int64)
        now = time.perf_counter()
        share = max(deadline - now, 0.0) * weights[k] / weights[k:].sum()
        part_deadline = now + share
        vb = (p_lin + np.add.reduceat(np.append(p_gains[2], 0), p_ptr[:-1]) * (np.diff(p_ptr) > 0)).astype(float)

        def value_of(local):
            placed = local >= 0
            acc = np.zeros(max(p_gains[3].size, 1), dtype=np.int64)
            owner = np.repeat(np.arange(len(ids)), np.diff(p_ptr))
            np.add.at(acc, p_gains[1][placed[owner]], p_gains[2][placed[owner]])
            return int(p_lin[placed].sum() + np.minimum(acc[: p_gains[3].size], p_gains[3]).sum())

        start_local = None if initial is None else initial[ids]
        best_value = value_of(start_local) if start_local is not None else 0
        all_value = value_of(np.zeros(len(ids), dtype=np.int64))
        bound = all_value
        # 1. does everything fit? (then it is optimal: values never decrease with more placed)
        # (when every section holds all its rectangles, nothing but the geometry stands in
        # the way of placing everything, which is then the optimum: most of the time goes there)
        fits = fit_share is not None and (part.nsec == 0 or int(part.section_totals().max()) <= part.cap)
        status, local, used = _decide(part, now + share * (fit_share if fits else decide_share), PREORDERS)
        nodes += used
        if status == "optimal":
            offsets[ids] = local
            total_value += all_value
            total_bound += all_value
            continue
        bound = min(bound, int(math.floor(_fits_bound(part, vb) * (1 + 1e-9) + 1e-6)))
        # 2. branch and bound, looking only for packings better than the best known; restarts
        # with other preorders and a doubling node limit share that incumbent, and any run that
        # searches its whole tree proves the incumbent optimal
        names = [(preorder, 1), (preorder, 0)] + [(p, 0) for p in OPT_PREORDERS if p != preorder]
        if start_local is not None:  # first, the neighbourhood of the initial packing
            names.insert(0, ("initial", 0))
        if start_local is not None:
            chosen, value, floor_value = start_local, best_value, best_value - 1
        else:
            chosen, value, floor_value = np.full(len(ids), -1, dtype=np.int64), 0, -1
        limit, exhausted, rnd = max(len(ids), 16) * 8, False, 0
        while not exhausted and time.perf_counter() < part_deadline:
            for name, corder in names:
                if name == "initial":  # its placed rectangles by offset, then by density
                    key = np.where(start_local >= 0, start_local, np.iinfo(np.int64).max)
                    order = np.lexsort((np.arange(len(ids)), -(vb / part.size), key))
                    pre = np.empty(len(ids), dtype=np.int64)
                    pre[order] = np.arange(len(ids))
                else:
                    pre = _opt_preorder(part, vb) if name == "density" else part.preorder(name)
                # limited discrepancy first (round k allows k), so that early decisions change too
                run = _Run(part, 1, pre, p_lin, p_gains, best=floor_value, corder=corder, maxdisc=rnd)
                while run.nodes < limit:
                    status = run.step(min(CHUNK, limit - run.nodes))
                    if status == EXHAUSTED or time.perf_counter() >= part_deadline:
                        break
                nodes += run.nodes
                if run.best > floor_value:
                    chosen, value = run.best_off.copy(), run.best
                floor_value = value
                if status == EXHAUSTED and run.meta[7] == 0:
                    exhausted = True
                if exhausted or time.perf_counter() >= part_deadline:
                    break
            limit *= 2
            rnd += 1
        status = EXHAUSTED if exhausted else BUDGET
        offsets[ids] = chosen
        total_value += value
        if status == EXHAUSTED:
            total_bound += value
        else:
            proven = False
            total_bound += max(bound, value)
    return offsets, total_value, total_bound, proven, nodes


def _opt_preorder(part: _Part, vb: np.ndarray) -> np.ndarray:
    """Ties in lowest offset go to the best value density first, then the widest."""
    width = part.end - part.start + 1
    order = np.lexsort((np.arange(part.size.size), -width, -(vb / part.size)))
    rank = np.empty(part.size.size, dtype=np.int64)
    rank[order] = np.arange(part.size.size)
    return rank


def pack_max(start, end, size, capacity: int, value, *, max_offset=None, time_limit_s: float = 10.0) -> PackResult:
    """Choose the rectangles to place so that their total ``value`` (``int64[n]``, >= 0) is the
    largest, and place them; the others get ``-1``.

    Each component first tries to place everything (:func:`pack`, 60 % of its time); if
    that fails, branch and bound over canonical packings (module docstring) until the tree is
    searched (status ``optimal``) or the time share runs out (``feasible``, with a proven
    ``upper_bound``). ``time_limit_s`` (> 0) bounds the whole call.
    """
    begin = time.perf_counter()
    start, end, size, cap, maxoff = _check(start, end, size, capacity, max_offset, time_limit_s)
    value = _ints(value, "value")
    if value.size != size.size or np.any(value < 0):
        raise ValueError("value must hold one integer >= 0 per rectangle")
    offsets, total, bound, proven, nodes = maximise_parts(start, end, size, cap, maxoff, value, None,
                                                          time_limit_s=time_limit_s)
    return PackResult(offsets, "optimal" if proven else "feasible", int(total), int(max(bound, total)), nodes,
                      time.perf_counter() - begin)
