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
prefetches in the order added, issued after op start, done before op end), ``rs_amount`` (float64[S]
copy seconds), ``rs_count`` (int64[1]), ``rs_delay`` (float64[T+1]: the earlier copies' leftover at
the start of each op) and the start order as a linked list: ``rs_next`` (int64[S]: the copy after
each in start order, -1 for the last), ``rs_first`` / ``rs_last`` (int64[T+1]: the first and last
copy issued after op ``t - 1``, at index ``t``; -1 none) and ``rs_tree`` (int8[2P], ``P`` the power
of two >= T + 1: an OR tree over the start ops that have a copy, so the first copy after an op is
found in O(log T)), as :class:`mallocgym.sim.v1.State1` and :class:`Budget` have, plus the
scenario's prefix sums of all-slow op times ``cum`` (float64[T+1]) and a tolerance ``eps``.
An insert costs O(log T) (the list was an array kept in start order, whose inserts shifted it:
O(copies) each, 0.9 s of a 60,000-buffer plan); :func:`in_order` lists the copies in start order.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

__all__ = ["Budget", "new_budget", "fits", "add", "in_order", "tree_size", "next_start", "prev_start"]

# a budget by itself (the v1 state carries the same fields)
Budget = namedtuple("Budget", ["rs_start", "rs_end", "rs_amount", "rs_count", "rs_delay", "rs_next", "rs_first",
                               "rs_last", "rs_tree"])


def tree_size(n_ops: int) -> int:
    """Length of ``rs_tree`` for ``n_ops`` ops: ``2P``, ``P`` the power of two >= ``n_ops + 1``."""
    p = 1
    while p < n_ops + 1:
        p *= 2
    return 2 * p


def new_budget(n_copies: int, n_ops: int) -> Budget:
    """An empty budget with room for ``n_copies`` prefetches over ``n_ops`` ops."""
    return Budget(np.zeros(n_copies, np.int64), np.zeros(n_copies, np.int64), np.zeros(n_copies),
                  np.zeros(1, np.int64), np.zeros(n_ops + 1), np.full(n_copies, -1, np.int64),
                  np.full(n_ops + 1, -1, np.int64), np.full(n_ops + 1, -1, np.int64),
                  np.zeros(tree_size(n_ops), np.int8))


def in_order(bud) -> np.ndarray:
    """The copies' indices (into ``rs_start``, ``rs_end``, ``rs_amount``) in start order, equal
    starts in the order added."""
    out = []
    t = next_start(bud.rs_tree, -2)
    i = int(bud.rs_first[t + 1]) if t >= -1 else -1
    while i >= 0:
        out.append(i)
        i = int(bud.rs_next[i])
    return np.array(out, np.int64)


@njit(cache=True, inline="always")
def _between(cum, a, b):
    """All-slow time of the ops strictly between ``a`` and ``b``."""
    lo = a + 1
    if lo >= b:
        return 0.0
    return cum[b] - cum[lo]


@njit(cache=True)
def next_start(tree, t):
    """The first op after ``t`` (``t >= -2``) after which a copy is issued, or -2 if none. Leaf
    ``t + 1`` of the OR tree ``tree`` (``2P`` entries, the leaves at ``P ..``) is 1 when a copy is
    issued after op ``t``: up from it to the first right sibling that holds a 1, then down to that
    one's leftmost 1."""
    half = tree.shape[0] // 2
    if t < -1:
        if tree[1] == 0:
            return -2
        x = 1
    else:
        x = half + t + 1
        while True:
            if x == 1:
                return -2
            if x % 2 == 0 and tree[x + 1] != 0:
                x += 1
                break
            x //= 2
    while x < half:
        x = 2 * x if tree[2 * x] != 0 else 2 * x + 1
    return x - half - 1


@njit(cache=True)
def prev_start(tree, t):
    """The last op before ``t`` after which a copy is issued, or -2 if none (as :func:`next_start`,
    mirrored)."""
    half = tree.shape[0] // 2
    x = half + t + 1
    while True:
        if x == 1:
            return -2
        if x % 2 == 1 and tree[x - 1] != 0:
            x -= 1
            break
        x //= 2
    while x < half:
        x = 2 * x + 1 if tree[2 * x + 1] != 0 else 2 * x
    return x - half - 1


@njit(cache=True, inline="always")
def _first_after(tree, first, t):
    """The first copy (in start order) issued after an op later than ``t``, -1 if none. Takes
    the arrays, not the budget: a helper given the state (about 50 arrays) costs ~2 us a call in
    reference counts, 20x the lookup."""
    p = next_start(tree, t)
    return first[p + 1] if p >= -1 else -1


@njit(cache=True)
def _consume(cum, eps, bud, start, end, amount):
    """``ConsumeResource`` for a new copy, op by op as MSA writes it, recording the leftovers in
    ``rs_delay``; whether it (and every copy it pushes back) still finishes inside its window."""
    if amount <= 0.0:
        return True
    left = amount + bud.rs_delay[start + 1]
    nxt = _first_after(bud.rs_tree, bud.rs_first, start)
    while True:
        pushed = -1.0
        t = start + 1
        while t < end and left > eps:
            used = min(left, cum[t + 1] - cum[t])
            if nxt >= 0 and bud.rs_start[nxt] == t - 1:
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
        nxt = bud.rs_next[nxt]


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
    nxt = _first_after(bud.rs_tree, bud.rs_first, start)
    while True:
        if left > _between(cum, start, end) + eps:
            return False
        if nxt < 0 or bud.rs_start[nxt] + 1 >= end:
            return True
        pushed = left - _between(cum, start, bud.rs_start[nxt] + 1)  # still to copy when it is issued
        if pushed <= eps:
            return True
        start, end = bud.rs_start[nxt], bud.rs_end[nxt]
        left = pushed + bud.rs_amount[nxt]
        nxt = bud.rs_next[nxt]


@njit(cache=True)
def add(cum, eps, bud, start, end, amount):
    """``AddCopy``: consume the budget and link the copy in after those issued at the same op
    (O(log T): the OR tree finds its neighbours in start order)."""
    _consume(cum, eps, bud, start, end, amount)
    i = bud.rs_count[0]
    bud.rs_start[i] = start
    bud.rs_end[i] = end
    bud.rs_amount[i] = amount
    bud.rs_count[0] = i + 1
    last = bud.rs_last[start + 1]
    if last >= 0:  # after the last copy issued at the same op
        bud.rs_next[i] = bud.rs_next[last]
        bud.rs_next[last] = i
        bud.rs_last[start + 1] = i
        return
    tree = bud.rs_tree
    bud.rs_next[i] = _first_after(bud.rs_tree, bud.rs_first, start)
    q = prev_start(tree, start)
    if q >= -1:
        bud.rs_next[bud.rs_last[q + 1]] = i
    bud.rs_first[start + 1] = i
    bud.rs_last[start + 1] = i
    x = tree.shape[0] // 2 + start + 1
    while x >= 1 and tree[x] == 0:
        tree[x] = 1
        x //= 2
