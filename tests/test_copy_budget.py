"""The copy budget's start order (``mallocgym.sim.copy_budget``): a linked list found through an OR
tree over the start ops, against plain Python references (a sorted list, a scan of the ops).
MSA's arithmetic on it is tested against the op-by-op ``ConsumeResource`` in tests/test_xla_msa.py."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st_

from mallocgym.sim import copy_budget


def _tree(n_ops, marked):
    tree = np.zeros(copy_budget.tree_size(n_ops), np.int8)
    half = tree.shape[0] // 2
    for t in marked:
        x = half + t + 1
        while x >= 1:
            tree[x] = 1
            x //= 2
    return tree


@settings(max_examples=200, deadline=None)
@given(st_.integers(0, 70).flatmap(lambda n: st_.tuples(
    st_.just(n), st_.sets(st_.integers(-1, n - 1) if n > 0 else st_.just(-1)), st_.integers(-2, n - 1))))
def test_next_and_previous_start_equal_a_scan(case):
    """``next_start`` / ``prev_start``: the nearest marked op after / before ``t < T`` (-2: none), as a
    scan of the ops finds it, for tree sizes around powers of two."""
    n_ops, marked, t = case
    tree = _tree(n_ops, marked)
    after = [m for m in marked if m > t]
    assert copy_budget.next_start(tree, t) == (min(after) if after else -2)
    if t >= -1:
        before = [m for m in marked if m < t]
        assert copy_budget.prev_start(tree, t) == (max(before) if before else -2)


@settings(max_examples=200, deadline=None)
@given(st_.integers(1, 40).flatmap(lambda n: st_.tuples(st_.just(n), st_.lists(
    st_.tuples(st_.integers(-1, n - 1), st_.integers(1, 6)), max_size=60))))
def test_added_copies_are_linked_in_start_order_first_come_first(case):
    """After any sequence of ``add``: the list walks the copies sorted by start, equal starts in
    the order added (a stable sort of what was added); the per-op first / last and the tree
    agree with it. Zero amounts, so nothing is refused and only the order is tested."""
    n_ops, copies = case
    cum = np.arange(n_ops + 1, dtype=float)
    bud = copy_budget.new_budget(max(len(copies), 1), n_ops)
    added = []
    for start, length in copies:
        end = min(start + 1 + length, n_ops)
        copy_budget.add(cum, 1e-12, bud, start, end, 0.0)
        added.append((start, end))
        order = copy_budget.in_order(bud)
        want = sorted(range(len(added)), key=lambda i: added[i][0])  # stable: equal starts as added
        assert order.tolist() == want
        assert bud.rs_count[0] == len(added)
        for t in range(-1, n_ops):
            at = [i for i in want if added[i][0] == t]
            assert bud.rs_first[t + 1] == (at[0] if at else -1)
            assert bud.rs_last[t + 1] == (at[-1] if at else -1)
        assert np.array_equal(bud.rs_tree, _tree(n_ops, {s for s, _ in added}))


def test_first_after_skips_to_the_next_op_with_a_copy():
    cum = np.arange(11, dtype=float)
    bud = copy_budget.new_budget(4, 10)
    for start in (5, 2, 5, -1):
        copy_budget.add(cum, 1e-12, bud, start, 9, 0.0)
    assert bud.rs_start[copy_budget.in_order(bud)].tolist() == [-1, 2, 5, 5]
    assert copy_budget.in_order(bud).tolist() == [3, 1, 0, 2]
    assert copy_budget.next_start(bud.rs_tree, -1) == 2 and copy_budget.next_start(bud.rs_tree, 5) == -2
    assert copy_budget.prev_start(bud.rs_tree, 5) == 2 and copy_budget.prev_start(bud.rs_tree, -1) == -2
