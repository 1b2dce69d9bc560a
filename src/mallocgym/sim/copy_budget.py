"""XLA's copy budget while planning (``AsynchronousCopyResource``), kept by every v1 state.

MSA checks each prefetch it plans against a budget of copy bandwidth
(openxla/xla ``xla/service/memory_space_assignment/``, ``AsynchronousCopyResource``): each op's
budget is its all-slow elapsed time; prefetches are kept sorted by start (FIFO; equal starts in
the order added); a copy consumes ``size / slow_bw`` over the ops strictly inside its window after
the earlier copies' leftover (``delay``), and its own leftover when the next copy starts pushes
that copy back, recursively; a copy that cannot finish inside its window is refused. Evictions do
not consume it (MSA's eviction budget is disabled on its last retry, which with the default
single retry is the only one).

The v1 rules add every prefetch to the state's budget as it is decided
(:func:`mallocgym.sim.v1.apply_rules`), so MSA's choice at any state, which the env offers as an
action (:mod:`mallocgym.sim.msa`), is a function of that state alone. The budget is MSA's
planning model, not a rule: the rules never refuse a prefetch for it.

Kernels take the budget as any record with fields ``rs_start`` / ``rs_end`` (int64[S]: the
prefetches in start order, issued after op start, done before op end), ``rs_amount`` (float64[S]
copy seconds), ``rs_count`` (int64[1]) and ``rs_delay`` (float64[T+1]: the earlier copies'
leftover at the start of each op), as :class:`mallocgym.sim.v1.State1` and :class:`Budget` have, plus the
scenario's prefix sums of all-slow op times ``cum`` (float64[T+1]) and a tolerance ``eps``.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

__all__ = ["Budget", "new_budget", "fits", "add"]

# a budget by itself (the v1 state carries the same fields)
Budget = namedtuple("Budget", ["rs_start", "rs_end", "rs_amount", "rs_count", "rs_delay"])


def new_budget(n_copies: int, n_ops: int) -> Budget:
    """An empty budget with room for ``n_copies`` prefetches over ``n_ops`` ops."""
    return Budget(np.zeros(n_copies, np.int64), np.zeros(n_copies, np.int64), np.zeros(n_copies),
                  np.zeros(1, np.int64), np.zeros(n_ops + 1))


@njit(cache=True, inline="always")
def _between(cum, a, b):
    """All-slow time of the ops strictly between ``a`` and ``b``."""
    lo = a + 1
    if lo >= b:
        return 0.0
    return cum[b] - cum[lo]


@njit(cache=True)
def _upper_bound(bud, t):
    """The first copy (in start order) that starts after op ``t``."""
    lo, hi = 0, bud.rs_count[0]
    while lo < hi:
        m = (lo + hi) // 2
        if bud.rs_start[m] <= t:
            lo = m + 1
        else:
            hi = m
    return lo


@njit(cache=True)
def _consume(cum, eps, bud, start, end, amount):
    """``ConsumeResource`` for a new copy, op by op as MSA writes it, recording the leftovers in
    ``rs_delay``; whether it (and every copy it pushes back) still finishes inside its window."""
    if amount <= 0.0:
        return True
    left = amount + bud.rs_delay[start + 1]
    nxt = _upper_bound(bud, start)
    n = bud.rs_count[0]
    while True:
        pushed = -1.0
        t = start + 1
        while t < end and left > eps:
            used = min(left, cum[t + 1] - cum[t])
            if nxt < n and bud.rs_start[nxt] == t - 1:
                pushed = left  # still copying when the next copy is issued: it waits for this
            if pushed < 0.0:
                bud.rs_delay[t] = left
            left -= used
            t += 1
        if left > eps:
            return False
        if pushed < 0.0:
            return True
        start, end = bud.rs_start[nxt], bud.rs_end[nxt]
        left = pushed + bud.rs_amount[nxt]
        nxt += 1


@njit(cache=True)
def fits(cum, eps, bud, start, end, amount):
    """``HasEnoughResource``: can a copy of ``amount`` seconds issued after op ``start`` be done
    before op ``end`` without pushing any later copy past its own end?

    :func:`_consume`'s question without its op-by-op loop: a copy fits iff its work (with the
    earlier copies' leftover) is at most the ops' time inside its window, and it pushes the next
    copy by what is left of it when that copy is issued; both are prefix sums of the op times, so
    a check costs one step per copy it pushes, not one per op."""
    if amount <= 0.0:
        return True
    left = amount + bud.rs_delay[start + 1]
    nxt = _upper_bound(bud, start)
    n = bud.rs_count[0]
    while True:
        if left > _between(cum, start, end) + eps:
            return False
        if nxt >= n or bud.rs_start[nxt] + 1 >= end:
            return True
        pushed = left - _between(cum, start, bud.rs_start[nxt] + 1)  # still to copy when it is issued
        if pushed <= eps:
            return True
        start, end = bud.rs_start[nxt], bud.rs_end[nxt]
        left = pushed + bud.rs_amount[nxt]
        nxt += 1


@njit(cache=True)
def add(cum, eps, bud, start, end, amount):
    """``AddCopy``: consume the budget and insert the copy after those issued at the same op."""
    _consume(cum, eps, bud, start, end, amount)
    i = _upper_bound(bud, start)
    n = bud.rs_count[0]
    for j in range(n, i, -1):
        bud.rs_start[j] = bud.rs_start[j - 1]
        bud.rs_end[j] = bud.rs_end[j - 1]
        bud.rs_amount[j] = bud.rs_amount[j - 1]
    bud.rs_start[i] = start
    bud.rs_end[i] = end
    bud.rs_amount[i] = amount
    bud.rs_count[0] = n + 1
