"""MallocGame-v0's canonical decision mode (``order="canonical"``): numba kernels.

A *canonical* packing (see :mod:`mallocgym.sim.pack`, after MiniMalloc, Moffitt, ASPLOS 2023)
is one where every fast buffer sits at its *lowest feasible offset*: the highest top
(``offset + size``, rounded up to the alignment) of the fast buffers below it that share an op
with it, or 0. Dropping any valid packing (buffers in increasing offset, each lowered to that
offset) gives a canonical packing with the same fast buffers, hence the same program time, so
the best mapping is always canonical.

The mode builds packings bottom up. It keeps a *floor* ``f``, the offset of the last buffer
placed (0 at the start), and for every undecided buffer ``L[b]``, the aligned highest top of the
placed buffers that share an op with it (0 if none). The *candidates* are the undecided buffers
with ``L[b] >= f`` and ``L[b] + size[b] <= capacity``, sorted by ``(L[b], decision rank)``
(the rank in the scenario's ``st.order``, XLA's boundedness order by default). A move either
places a candidate at ``L[b]`` (then ``f = L[b]`` and the ``L`` of the undecided buffers that
share an op with it rise to its top) or sends a candidate to slow memory. No placement can
collide: every placed buffer sharing an op with ``b`` ends at or below ``L[b]``, and every later
one starts at or above ``f = L[b]``, above ``b``'s top if it shares an op. The game ends when no
candidate is left; the undecided buffers then stay in slow memory (with no move left nothing
changes any more, so none of them could be placed).

An undecided buffer with ``L[b] < f`` is *waiting*, not dead: a later placement that shares an
op with it lifts ``L[b]`` to at least that buffer's top, above ``f``. (Dropping waiting
buffers would lose canonical packings: ``g`` at 0 under ``e`` at 60, ``c`` at 50 beside them,
``d`` at 100 on ``e``; after ``g`` and ``c``, ``L[d] = 0 < f = 50``, yet ``d`` goes on ``e``.)

Every canonical packing is reachable: play its fast buffers in increasing offset (ties in any
order). At ``b``'s turn, the buffers below ``b`` that share an op with it are placed (they have
lower offsets) and those above are not, so ``L[b]`` is ``b``'s offset, and ``f`` (an earlier,
lower offset) is at most that: ``b`` is a candidate. The slow buffers are sent to slow memory
whenever they are candidates (e.g. at the end). With fewer than all candidates shown (the env's
``K``), only the ``K`` lowest are reachable at each step.

State: the v0 simulator's :class:`~mallocgym.sim.State` (cost model, offsets, the bucket
index) plus a :class:`Canon` tuple of arrays; ``rank`` (:func:`ranks`) is static.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from .._clock import CHECK_EVERY, NO_DEADLINE, past
from . import ALIGNMENT, CAPACITY, TIME, Static, copy_into, marginal_benefit
from . import place as sim_place

__all__ = ["Canon", "new_canon", "copy_canon", "canon_copy_into", "ranks", "candidates", "place",
           "send_slow", "finish", "complete", "run_canonical", "FLOOR", "DECIDED"]

Canon = namedtuple("Canon", [
    "low",        # int64[N] L[b]: aligned highest top of the placed buffers sharing an op with b
    "undecided",  # bool[N] not yet placed or sent to slow memory
    "scal",       # int64[2]: floor (offset of the last buffer placed), buffers decided by a move
])

FLOOR, DECIDED = 0, 1


def new_canon(st: Static) -> Canon:
    """The start of a canonical episode: nothing decided, floor 0, every ``L[b] = 0``."""
    n = st.size.shape[0]
    return Canon(np.zeros(n, np.int64), np.ones(n, np.bool_), np.zeros(2, np.int64))


def copy_canon(cs: Canon) -> Canon:
    """An independent copy (array copies)."""
    return Canon(cs.low.copy(), cs.undecided.copy(), cs.scal.copy())


def ranks(st: Static) -> np.ndarray:
    """Each buffer's position in the decision order ``st.order`` (the candidates' tie-break)."""
    rank = np.empty(st.order.shape[0], np.int64)
    rank[st.order] = np.arange(st.order.shape[0])
    return rank


@njit(cache=True)
def canon_copy_into(src_state, src_cs, dst_state, dst_cs):
    """Overwrite ``(dst_state, dst_cs)`` with ``(src_state, src_cs)`` without allocating."""
    copy_into(src_state, dst_state)
    dst_cs.low[:] = src_cs.low
    dst_cs.undecided[:] = src_cs.undecided
    dst_cs.scal[:] = src_cs.scal


@njit(cache=True)
def candidates(st, cs, rank, k, out):
    """The candidates, lowest ``(L[b], rank[b])`` first: the first ``min(count, k)`` go to
    ``out``; returns ``count``, the number of all candidates (0: the game is over)."""
    n = st.size.shape[0]
    capacity = st.iparams[CAPACITY]
    floor = cs.scal[FLOOR]
    low = cs.low
    count = 0
    for b in range(n):
        lb = low[b]
        if not cs.undecided[b] or lb < floor or lb + st.size[b] > capacity:
            continue
        shown = count if count < k else k
        i = shown
        while i > 0:
            q = out[i - 1]
            if low[q] < lb or (low[q] == lb and rank[q] < rank[b]):
                break
            i -= 1
        if i < k:
            last = shown if shown < k else k - 1
            for j in range(last, i, -1):
                out[j] = out[j - 1]
            out[i] = b
        count += 1
    return count


@njit(cache=True)
def place(st, state, cs, b):
    """Place candidate ``b`` at ``L[b]``: the floor becomes ``L[b]``, the undecided buffers
    sharing an op with ``b`` rise to its aligned top. Returns the program-time delta."""
    off = cs.low[b]
    delta = sim_place(st, state, b, off)
    cs.undecided[b] = False
    cs.scal[FLOOR] = off
    cs.scal[DECIDED] += 1
    align = st.iparams[ALIGNMENT]
    top = (off + st.size[b] + align - 1) // align * align
    s, e = st.start[b], st.end[b]
    for d in range(st.size.shape[0]):
        if cs.undecided[d] and cs.low[d] < top and st.start[d] <= e and st.end[d] >= s:
            cs.low[d] = top
    return delta


@njit(cache=True)
def send_slow(cs, b):
    """Send candidate ``b`` to slow memory (it stays at offset -1)."""
    cs.undecided[b] = False
    cs.scal[DECIDED] += 1


@njit(cache=True)
def finish(cs):
    """End the game: every undecided buffer stays in slow memory."""
    cs.undecided[:] = False


@njit(cache=True)
def run_canonical(st, state, cs, rank, deadline=NO_DEADLINE):
    """Play to the end with the mode's greedy policy: candidate 0 (the lowest offset, then the
    decision order) is placed when that saves time now, else sent to slow memory. Returns the
    final program time (NaN, the state part-played, once ``deadline`` has passed: absolute
    nanoseconds on :mod:`mallocgym._clock`'s clock)."""
    out = np.empty(1, np.int64)
    i = 0
    while True:
        if i % CHECK_EVERY == 0 and past(deadline):
            return np.nan
        i += 1
        count = candidates(st, cs, rank, 1, out)
        if count == 0:
            break
        b = out[0]
        if marginal_benefit(st, state, b) > 0.0:
            place(st, state, cs, b)
        else:
            send_slow(cs, b)
    finish(cs)
    return state.totals[TIME]


@njit(cache=True)
def complete(st, src_state, src_cs, rank, work_state, work_cs):
    """Copy ``(src_state, src_cs)`` into the work arrays and finish there with
    :func:`run_canonical`; return the final program time (the source is untouched)."""
    canon_copy_into(src_state, src_cs, work_state, work_cs)
    return run_canonical(st, work_state, work_cs, rank)

