"""The canonical packing search (mallocgym.sim.pack) and the `pack` agent: brute force on tiny
instances, the canonical rules by hand, planted optima, the cost model, bad input."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from mallocgym import Hardware, Workload, evaluate
from mallocgym.agents import make_agent
from mallocgym.agents.pack import PackConfig, solve_pack
from mallocgym.scenarios import Scenario, planted
from mallocgym.sim import pack as P

from conftest import mlp_scenario


@pytest.fixture(autouse=True, scope="module")
def _compiled():
    """Compile the kernels before any test that gives them a time limit (a cold numba cache
    compiles inside the first call, and its time counts against that call's limit)."""
    P.pack_max(np.array([0, 0]), np.array([1, 1]), np.array([1, 1]), 2, np.array([1, 1]), time_limit_s=600)
    P.pack(np.array([0, 0]), np.array([1, 1]), np.array([1, 1]), 2, time_limit_s=600)


# ------------------------------------------------------------------------------ brute force
def overlaps(start, end, i, j) -> bool:
    return start[i] <= end[j] and start[j] <= end[i]


def valid(start, end, size, cap, offsets) -> bool:
    """Every placed rectangle inside [0, cap), no two co-live ones sharing a unit."""
    n = len(size)
    for i in range(n):
        if offsets[i] >= 0 and offsets[i] + size[i] > cap:
            return False
    for i, j in itertools.combinations(range(n), 2):
        if offsets[i] >= 0 and offsets[j] >= 0 and overlaps(start, end, i, j) \
                and offsets[i] < offsets[j] + size[j] and offsets[j] < offsets[i] + size[i]:
            return False
    return True


def brute_best(start, end, size, cap, value, require_all=False) -> int | None:
    """The best total value over every assignment (each rectangle out, or at any offset):
    the plain definition, no canonical form. None if ``require_all`` and nothing fits."""
    n = len(size)
    best = None
    choices = [([] if require_all else [-1]) + list(range(cap - size[b] + 1)) for b in range(n)]
    for offsets in itertools.product(*choices):
        if valid(start, end, size, cap, offsets):
            v = sum(value[b] for b in range(n) if offsets[b] >= 0)
            best = v if best is None else max(best, v)
    return best


def tiny_instance(rng):
    n = int(rng.integers(1, 6))
    cap = int(rng.integers(1, 7))
    start = rng.integers(0, 5, n)
    end = start + rng.integers(0, 4, n)
    size = rng.integers(1, cap + 1, n)
    return start, end, size, cap


@pytest.mark.parametrize("seed", range(12))
def test_pack_decides_like_brute_force(seed):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        start, end, size, cap = tiny_instance(rng)
        truth = brute_best(start, end, size, cap, [1] * len(size), require_all=True)
        got = P.pack(start, end, size, cap, time_limit_s=5)
        assert got.status == ("infeasible" if truth is None else "optimal")
        if got.status == "optimal":
            assert np.all(got.offsets >= 0) and valid(start, end, size, cap, got.offsets)


@pytest.mark.parametrize("seed", range(12))
def test_pack_max_is_optimal_like_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(20):
        start, end, size, cap = tiny_instance(rng)
        value = rng.integers(0, 10, len(size))
        truth = brute_best(start, end, size, cap, value)
        got = P.pack_max(start, end, size, cap, value, time_limit_s=5)
        assert got.status == "optimal"
        assert got.value == truth == got.upper_bound
        assert valid(start, end, size, cap, got.offsets)
        assert got.value == int(value[got.offsets >= 0].sum())


# ------------------------------------------------------------------------ the rules by hand
@pytest.mark.parametrize("seed", range(40))
def test_pack_decides_tight_instances_like_brute_force(seed):
    """Capacity at (or one below) the peak of co-live sizes: sections with no room to spare,
    where the search branches only on the rectangles that can fill a tight section's level."""
    rng = np.random.default_rng(7000 + seed)
    _, start, end, size, cap = tight_instance(rng, (2, 7), 3, below=True)
    want = brute_best(start, end, size, cap, size, require_all=True)
    got = P.pack(start, end, size, cap, time_limit_s=5)
    assert got.status == ("optimal" if want is not None else "infeasible")
    if want is not None:
        assert valid(start, end, size, cap, got.offsets)


def test_canonical_offsets_are_zero_or_a_top_below():
    # A [0,1] 2 units, B [1,2] 1 unit, C [2,3] 2 units, capacity 3: B must sit on A (at 2), and
    # C, which shares op 2 with B only, goes under B at 0.
    got = P.pack([0, 1, 2], [1, 2, 3], [2, 1, 2], 3, time_limit_s=5)
    assert got.status == "optimal" and got.offsets.tolist() == [0, 2, 0]
    # on any packed instance every offset is 0 or the top of a co-live rectangle below it
    rng = np.random.default_rng(5)
    for _ in range(200):
        start, end, size, cap = tiny_instance(rng)
        got = P.pack(start, end, size, cap, time_limit_s=5)
        if got.status != "optimal":
            continue
        for b, o in enumerate(got.offsets):
            tops = {got.offsets[j] + size[j] for j in range(len(size)) if j != b and overlaps(start, end, b, j)}
            assert o == 0 or o in tops


def test_section_capacity_proves_infeasible_without_search():
    # three rectangles live at op 1, 2 + 2 + 2 units > capacity 5: no node is searched
    got = P.pack([0, 1, 1], [1, 1, 2], [2, 2, 2], 5, time_limit_s=5)
    assert got.status == "infeasible" and got.nodes == 0
    assert np.all(got.offsets == -1)


def test_components_split_where_no_interval_crosses():
    parts = P.components([0, 5, 2, 6, 9], [2, 6, 3, 8, 9])
    assert [p.tolist() for p in parts] == [[0, 2], [1, 3], [4]]
    assert P.components([], []) == []


def test_max_offset_lowers_where_a_rectangle_may_go():
    # two co-live rectangles of 1 unit in 2: the first may only be at 0
    got = P.pack([0, 0], [0, 0], [1, 1], 2, max_offset=[0, 1], time_limit_s=5)
    assert got.offsets.tolist() == [0, 1]
    assert P.pack([0, 0], [0, 0], [1, 1], 2, max_offset=[0, 0], time_limit_s=5).status == "infeasible"


def test_node_budget_stops_the_search_where_the_clock_would_not():
    """``max_nodes`` bounds the nodes the failed-state table does not answer, whatever the
    machine's speed: planted 128/2 needs thousands, so 100 leave it unknown, twice alike."""
    scenario, _ = planted(2, n_buffers=128)
    w = scenario.workload
    args = (w.start, w.end, w.size, int(scenario.hardware.fast_capacity))
    first, again = (P.pack(*args, time_limit_s=60, max_nodes=100) for _ in range(2))
    assert first.status == again.status == "unknown"
    assert first.nodes == again.nodes == 100


def test_luby_sequence_and_restart_strategies():
    assert [P._luby(i) for i in range(1, 16)] == [1, 1, 2, 1, 1, 2, 4, 1, 1, 2, 1, 1, 2, 4, 8]
    names = [P.strategy(i, ("TWA", "RST")) for i in range(8)]
    assert names == ["TWA/t", "RST/t", "TWA", "RST", "TWA@1/t", "RST@1/t", "TWA@1", "RST@1"]
    assert P.TWINS == "r"  # only the round robin keeps stacked twins in order (``/s``)


@pytest.mark.parametrize("seed", range(12))
def test_restarts_and_kept_failures_decide_like_one_plain_search(seed, monkeypatch):
    """Restarts from one node on (Luby runs and the round robin, whose reruns skip the states
    the last run proved dead, and the pieces' answers kept across runs) against one search of
    the whole tree under one preorder: the same answer on planted instances disturbed (two
    sizes swapped, one interval shortened) so that most no longer fit."""
    monkeypatch.setattr(P, "RESTART_UNIT", 0)
    monkeypatch.setattr(P, "MIN_RUN", 1)
    rng = np.random.default_rng(seed)
    scenario, _ = planted(seed, n_buffers=20, n_ops=10)
    w, align = scenario.workload, scenario.hardware.alignment
    cap = int(scenario.hardware.fast_capacity) // align
    start, end, size = w.start.astype(np.int64), w.end.astype(np.int64), (w.size // align).astype(np.int64)
    answers = []
    for _ in range(5):
        i, j = rng.choice(size.size, 2, replace=False)
        sz = size.copy()
        sz[i], sz[j] = size[j], size[i]
        en = end.copy()
        en[i] = max(start[i], end[i] - 1)
        got = P.pack(start, en, sz, cap, time_limit_s=20)
        part = P._Part.make(np.arange(sz.size), start, en, sz, cap - sz, cap)
        plain = P._solve_part(part, "TWA", None, [10**9], float("inf"))
        assert got.status == ("optimal" if plain is not None else "infeasible")
        if got.status == "optimal":
            assert valid(start, en, sz, cap, got.offsets)
        answers.append(got.status)
    assert set(answers) <= {"optimal", "infeasible"}


# ---------------------------------------------------------------- level covers (inference)
def cover_state(start, end, size, cap, offsets, cache=None):
    """The kernel's state after placing ``offsets`` (-1: unplaced) in canonical order, the last
    one at the highest offset: run :func:`P._level_cover_ok` on it (``cache``: the subset-sum
    answers kept across calls, fresh by default); ``(ok, bad, low)``."""
    start, end, size = (np.asarray(a, dtype=np.int64) for a in (start, end, size))
    n = size.size
    part = P._Part.make(np.arange(n), start, end, size, cap - size, cap)
    off = np.asarray(offsets, dtype=np.int64)
    low = np.zeros(n, dtype=np.int64)
    floor = np.zeros(part.nsec, dtype=np.int64)
    total = np.zeros(part.nsec, dtype=np.int64)
    for b in range(n):
        for s in range(part.s0[b], part.s1[b]):
            if off[b] >= 0:
                floor[s] = max(floor[s], off[b] + size[b])
            else:
                total[s] += size[b]
        for c in range(n):
            if off[b] < 0 <= off[c] and overlaps(start, end, b, c):
                low[b] = max(low[b], off[c] + size[c])
    level = np.maximum(floor, max(int(off.max()), 0))
    tlev = np.where((total > 0) & (level + total == cap), level, -1).astype(np.int64)
    z = lambda k: np.zeros(k, dtype=np.int64)  # noqa: E731
    bad = z(n)
    ns = part.nsec
    ok = P._level_cover_ok(tlev, off, low, size, part.maxoff, part.s0, part.s1, part.cv_ptr, part.cv_idx,
                           part.sb, part.sptr, z(ns + 2), z(ns + 2), bad, z(n + 1), z(n + 1), np.zeros((n + 2, 2), dtype=np.int64),
                           np.full((ns, 7), -1, dtype=np.int64), 0, P.BIG,
                           np.zeros((16, 3), dtype=np.uint64) if cache is None else cache)
    return ok, bad, low


def test_level_cover_proves_a_dead_state_that_stacking_misses():
    """Capacity 2, ops 0-4: L [0,0], U [0,1], X [1,2], Y [2,3], V [3,4], R [4,4], one unit
    each. With L and R placed at 0, ops 1-3 are tight at level 0 and only X (ops 1-2) and Y
    (2-3) can start there (U and V sit on L and R): each op's stack fits (U and V released at
    1), but no two disjoint ones cover ops 1-3, so the state is dead; the whole instance packs
    (L 1, U 0, X 1, Y 0, V 1, R 0)."""
    start, end, size = [0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 4], [1] * 6
    ok, _, low = cover_state(start, end, size, 2, [0, -1, -1, -1, -1, 0])
    assert not ok and low.tolist() == [0, 1, 0, 0, 1, 0]
    assert brute_best(start, end, size, 2, size, require_all=True) == 6
    pinned = P.pack(start, end, size, 2, max_offset=[0, 1, 1, 1, 1, 0], time_limit_s=5)
    assert pinned.status == "infeasible"
    assert P.pack(start, end, size, 2, time_limit_s=5).status == "optimal"


def canonical_prefixes(start, end, size, offsets, rank):
    """A packing dropped to its canonical form, then its placements in (offset, rank) order:
    ``(dropped offsets, order)``."""
    n = len(size)
    dropped = np.full(n, -1, dtype=np.int64)
    for b in sorted(range(n), key=lambda b: (offsets[b], rank[b])):
        tops = [dropped[c] + size[c] for c in range(n) if dropped[c] >= 0 and overlaps(start, end, b, c)]
        dropped[b] = max(tops, default=0)
    return dropped, sorted(range(n), key=lambda b: (dropped[b], rank[b]))


@settings(max_examples=60, deadline=None)
@given(hs.integers(0, 2**32 - 1))
def test_level_cover_never_cuts_a_state_with_a_completion(seed):
    """Tight tiny instances against brute force: every prefix of every (canonical) packing is a
    state with a completion, so the level covers must pass it, and a rectangle that the
    completion puts at its current lowest offset must not be ruled out there."""
    rng = np.random.default_rng(seed)
    n, start, end, size, cap = tight_instance(rng, (2, 6), 2)
    choices = [range(cap - size[b] + 1) for b in range(n)]
    packings = [p for p in itertools.product(*choices) if valid(start, end, size, cap, p)]
    for offsets in packings[:40]:
        assert_prefixes_pass(start, end, size, cap, offsets, rng.permutation(n))


def tight_instance(rng, n_range, max_size, starts=4, spans=3, below=False):
    """A random tiny instance (starts below ``starts``, spans below ``spans``) at its peak live
    size, zero slack where it peaks; with ``below``, one under the peak half the time (never
    under the largest rectangle): ``(n, start, end, size, cap)``."""
    n = int(rng.integers(*n_range))
    start = rng.integers(0, starts, n)
    end = start + rng.integers(0, spans, n)
    size = rng.integers(1, max_size + 1, n)
    cap = max(int(size[(start <= t) & (end >= t)].sum()) for t in range(starts + spans))
    if below:
        cap = max(cap - int(rng.integers(0, 2)), int(size.max()))
    return n, start, end, size, cap


def assert_prefixes_pass(start, end, size, cap, offsets, rank):
    """Every canonical prefix of the packing ``offsets`` (in ``rank`` order) passes the cover
    state's checks, and no rectangle still to place is barred from its own offset."""
    n = len(size)
    dropped, order = canonical_prefixes(start, end, size, offsets, rank)
    for k in range(1, n):
        state = np.full(n, -1, dtype=np.int64)
        state[order[:k]] = dropped[order[:k]]
        ok, bad, low = cover_state(start, end, size, cap, state)
        assert ok, (start, end, size, cap, state, dropped)
        for b in order[k:]:
            assert not (dropped[b] == low[b] and bad[b]), (start, end, size, cap, state, dropped, b)


def all_packings(start, end, size, cap, limit):
    """Up to ``limit`` packings placing every rectangle (offsets in any order), by backtracking."""
    n = len(size)
    found, offsets = [], [-1] * n

    def place(b):
        if len(found) >= limit:
            return
        if b == n:
            found.append(tuple(offsets))
            return
        for o in range(cap - size[b] + 1):
            if all(offsets[c] + size[c] <= o or o + size[b] <= offsets[c]
                   for c in range(b) if overlaps(start, end, b, c)):
                offsets[b] = o
                place(b + 1)
        offsets[b] = -1

    place(0)
    return found


@settings(max_examples=80, deadline=None)
@given(hs.lists(hs.integers(1, 9), max_size=8), hs.integers(0, 40))
def test_subset_sum_is_exact_like_brute_force(sizes, target):
    """The gap test's subset sum (sizes largest first) against every subset."""
    z = np.array(sorted(sizes, reverse=True) + [0], dtype=np.int64)
    k = len(sizes)
    suf = np.concatenate([np.cumsum(z[:k][::-1])[::-1], [0]]).astype(np.int64)
    truth = any(sum(c) == target for r in range(k + 1) for c in itertools.combinations(sizes, r))
    assert P._subset_sum(z, k, suf, target, np.zeros((k + 2, 2), dtype=np.int64), 10**6) == truth


@settings(max_examples=60, deadline=None)
@given(hs.integers(0, 2**32 - 1))
def test_gap_subset_sums_never_cut_a_state_with_a_completion(seed):
    """As above, with sizes 1-6, so that a gap under a rectangle at a higher level can be the
    wrong size for the rectangles that could fill it (the subset-sum test of
    :func:`P._gaps_fillable`): every canonical prefix of every packing must pass."""
    rng = np.random.default_rng(seed)
    n, start, end, size, cap = tight_instance(rng, (3, 7), 6)
    for offsets in all_packings(start, end, size, cap, 30):
        assert_prefixes_pass(start, end, size, cap, offsets, rng.permutation(n))


def test_gap_subset_sum_proves_a_dead_state():
    """Capacity 13, ops 0-2: Q [0,0] (7) and P [1,1] (5) placed at 0; E [0,1] (6) can start
    at 7 only (on Q), so op 1, tight at level 5, is covered by A [1,2] (2) alone. Op 2 is tight
    at level 0 with A, B, C, D (op 2 only): A at 5 leaves a gap of 5 below it there, which
    sizes 2, 2, 7 cannot fill (2 + 2 is the two smallest, so the smallest-two test passes it);
    with 2, 3, 6 they can (2 + 3 below, 6 above)."""
    start, end = [0, 1, 0, 1, 2, 2, 2], [0, 1, 1, 2, 2, 2, 2]
    state = [0, 0, -1, -1, -1, -1, -1]
    dead, live = [7, 5, 6, 2, 2, 2, 7], [7, 5, 6, 2, 2, 3, 6]
    assert not cover_state(start, end, dead, 13, state)[0]
    assert cover_state(start, end, live, 13, state)[0]
    for sizes, want in ((dead, "infeasible"), (live, "optimal")):
        pinned = [0, 0] + [13 - z for z in sizes[2:]]
        assert P.pack(start, end, sizes, 13, max_offset=pinned, time_limit_s=5).status == want


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.tuples(hs.lists(hs.integers(1, 9), max_size=7), hs.integers(1, 30)), min_size=1, max_size=30))
def test_kept_subset_sums_answer_like_brute_force(questions):
    """The gap test's subset sums kept across nodes (:func:`P._subset_sum_kept`), by the sizes
    and the gap: a run of questions through one cache (and through a 2-slot one, whose slots
    are overwritten), each asked twice, against every subset; each question comes with the
    next gap and with one size one larger, so that a key missing either would answer one
    question with another's answer."""
    shared, tiny = np.zeros((1 << 10, 3), dtype=np.uint64), np.zeros((2, 3), dtype=np.uint64)
    asked = []
    for sizes, gap in questions:
        asked += [(sizes, gap), (sizes, gap + 1)] + ([(sizes[:-1] + [sizes[-1] + 1], gap)] if sizes else [])
    for sizes, gap in asked + asked[::-1]:
        truth = any(sum(c) == gap for r in range(len(sizes) + 1) for c in itertools.combinations(sizes, r))
        z = np.array(sorted(sizes, reverse=True) + [0], dtype=np.int64)
        for cache in (shared, tiny):
            got = P._subset_sum_kept(z.copy(), len(sizes), np.zeros(len(sizes) + 1, dtype=np.int64), gap,
                                     np.zeros((len(sizes) + 2, 2), dtype=np.int64), cache)
            assert got == truth, (sizes, gap)


@settings(max_examples=100, deadline=None)
@given(hs.lists(hs.integers(0, 60), max_size=80), hs.integers(0, 4))
def test_releases_sorted_with_their_rectangles(values, spread):
    """The stacking's sort (:func:`P._sort_releases`, bucketed by distinct value, ``argsort``
    past ``SORT_DISTINCT`` of them): keys ascending, each rectangle still with its own key;
    up to 61 distinct values, so both ways are taken."""
    keys = np.array([v * 10**spread for v in values] + [0], dtype=np.int64)
    cand = np.arange(keys.size, dtype=np.int64) * 3 + 1
    m = len(values)
    want = sorted(zip(keys[:m].tolist(), cand[:m].tolist()))
    k, c = keys.copy(), cand.copy()
    P._sort_releases(k, c, m, np.empty(max(m + 1, 3 * P.SORT_DISTINCT + 1), dtype=np.int64),
                     np.empty(m + 2, dtype=np.int64), np.empty(m + 1, dtype=np.int64))
    assert k[:m].tolist() == sorted(keys[:m].tolist())
    assert sorted(zip(k[:m].tolist(), c[:m].tolist())) == want


# ------------------------------------------------------------------------------------ twins
def test_stacked_twins_lie_largest_first():
    """Twins (same ops, same highest top): A [0,1] 1 unit and B [0,1] 2 units in 3. Both
    A 0, B 1 and B 0, A 2 pack. Under a preorder that tries A first, a plain run finds A 0,
    B 1; a run keeping twins in order (``/s``) never puts the larger B directly on A, so it
    finds B 0, A 2. With A's highest offset 0 they are not twins (highest tops 1 and 3), and
    A 0, B 1 is found under ``/s`` too. Three twins A, B, C of 1, 2, 2 units in 5: B (the
    lower index at equal size) lies below C, and A on top."""
    def run(size, cap, maxoff, name):
        n = len(size)
        part = P._Part.make(np.arange(n), np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64),
                            np.array(size), np.array(maxoff), cap)
        part.preorders["A first"] = np.arange(n)  # rank 0 first: by index
        return part.twin_rank.tolist(), P._solve_part(part, name, None, [10**6], float("inf")).tolist()

    assert run([1, 2], 3, [2, 1], "A first") == ([1, 0], [0, 1])
    assert run([1, 2], 3, [2, 1], "A first/s") == ([1, 0], [2, 0])
    assert run([1, 2], 3, [0, 1], "A first/s") == ([-1, -1], [0, 1])
    assert run([1, 2, 2], 5, [4, 3, 3], "A first/s") == ([2, 0, 1], [4, 0, 2])
    assert run([1, 2, 2], 5, [4, 3, 3], "A first/ts") == ([2, 0, 1], [4, 0, 2])


def brute_feasible(start, end, size, cap, max_offset) -> bool:
    """Whether every rectangle fits at some offset in ``[0, min(max_offset, cap - size)]``."""
    choices = [range(min(int(max_offset[b]), cap - int(size[b])) + 1) for b in range(len(size))]
    return any(valid(start, end, size, cap, p) for p in itertools.product(*choices))


@settings(max_examples=150, deadline=None)
@given(hs.integers(0, 2**32 - 1))
def test_twin_order_decides_like_brute_force(seed):
    """Instances made mostly of twins (few distinct intervals, sizes 1-3, capacity at or just
    below the peak, some highest offsets lowered so that twins differ in their highest top):
    ``pack`` (restarts, shared failed states) and single plain and ``/t`` runs decide each one
    as brute force does, with stacked twins kept in order (``/s``) or not."""
    rng = np.random.default_rng(seed)
    n, start, end, size, cap = tight_instance(rng, (2, 7), 3, starts=3, spans=2, below=True)
    maxoff = cap - size
    lowered = rng.random(n) < 0.3
    maxoff[lowered] = rng.integers(0, maxoff[lowered] + 1)
    truth = brute_feasible(start, end, size, cap, maxoff)
    got = P.pack(start, end, size, cap, max_offset=maxoff, time_limit_s=5)
    assert got.status == ("optimal" if truth else "infeasible")
    if truth:
        assert valid(start, end, size, cap, got.offsets) and np.all(got.offsets <= maxoff)
    part = P._Part.make(np.arange(n), start, end, size, np.minimum(maxoff, cap - size), cap)
    for name in ("TWA/s", "ZWA/ts", "RST/s", "TWA/t"):
        found = P._solve_part(part, name, None, [10**9], float("inf"))
        assert (found is not None) == truth, name


@settings(max_examples=150, deadline=None)
@given(hs.integers(0, 2**32 - 1))
def test_single_runs_decide_like_brute_force_with_slack(seed):
    """Tiny instances with room to spare (capacity from the largest rectangle to a little above
    the peak, some highest offsets lowered), so that a placement often lifts no unplaced
    rectangle (every one it overlaps already lies higher): then, when its subtree fails, its
    later siblings are not tried. Single runs, no restarts and no table of failed states,
    under several preorders, plain, ``/t`` and ``/s``, decide each instance as brute force
    does."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    start = rng.integers(0, 4, n)
    end = start + rng.integers(0, 3, n)
    size = rng.integers(1, 4, n)
    peak = max(int(size[(start <= t) & (end >= t)].sum()) for t in range(7))
    cap = int(rng.integers(int(size.max()), peak + 2))
    maxoff = cap - size
    lowered = rng.random(n) < 0.3
    maxoff[lowered] = rng.integers(0, maxoff[lowered] + 1)
    truth = brute_feasible(start, end, size, cap, maxoff)
    part = P._Part.make(np.arange(n), start, end, size, maxoff, cap)
    for name in ("TWA", "ZWA/t", "RST/s", "WAT", "ATW/t", "TAW/s"):
        found = P._solve_part(part, name, None, [10**9], float("inf"))
        assert (found is not None) == truth, name
        if found is not None:
            assert valid(start, end, size, cap, found) and np.all(found <= maxoff) and np.all(found >= 0)


# -------------------------------------------------------------------------------- bottom layers
def swap_sizes(start, end, size, rng, times: int = 1) -> None:
    """``times`` times, swap the sizes of two rectangles over the same sections with different
    sizes, where there are such (in place: every section keeps its total; it may no longer fit)."""
    for _ in range(times):
        pairs = [(i, j) for i, j in itertools.combinations(range(size.size), 2)
                 if start[i] == start[j] and end[i] == end[j] and size[i] != size[j]]
        if pairs:
            i, j = pairs[int(rng.integers(len(pairs)))]
            size[i], size[j] = size[j], size[i]


def zero_slack_instance(seed):
    """A tiny planted instance (every section full), two sizes swapped (:func:`swap_sizes`)."""
    rng = np.random.default_rng(seed)
    scenario, _ = planted(seed, n_buffers=int(rng.integers(3, 7)), n_ops=4, capacity=5)
    w, align = scenario.workload, scenario.hardware.alignment
    cap = int(scenario.hardware.fast_capacity) // align
    start, end, size = w.start.astype(np.int64), w.end.astype(np.int64), (w.size // align).astype(np.int64)
    swap_sizes(start, end, size, rng)
    return start, end, size, cap


def covers_once(part, chosen) -> bool:
    """Whether the rectangles ``chosen`` cover each section of ``part`` exactly once."""
    hits = np.zeros(part.nsec, dtype=np.int64)
    for b in chosen:
        hits[part.s0[b]:part.s1[b]] += 1
    return bool(np.all(hits == 1))


def exact_covers(part):
    """Every set of rectangles that covers each section of ``part`` exactly once (brute force)."""
    n = part.size.size
    for k in range(1, n + 1):
        yield from (chosen for chosen in itertools.combinations(range(n), k) if covers_once(part, chosen))


@pytest.mark.parametrize("seed", range(40))
def test_held_bottom_layers_decide_like_brute_force(seed):
    """Each exact cover of a zero-slack instance's sections held at offset 0 (the restarts
    ``_decide`` gives a bottom layer): its restarts pack it, with the layer at 0, exactly when
    brute force finds a packing with that layer at 0, and prove it impossible otherwise."""
    start, end, size, cap = zero_slack_instance(seed)
    part = P._Part.make(np.arange(size.size), start, end, size, cap - size, cap)
    assert np.all(part.section_totals() == cap)
    for layer in exact_covers(part):
        maxoff = cap - size
        maxoff[list(layer)] = 0
        truth = brute_feasible(start, end, size, cap, maxoff)
        held = P._Part.make(np.arange(size.size), start, end, size, maxoff, cap)
        restarts = P._Restarts(held, P.PREORDERS, tt_size=1 << 6, layer=layer)
        status = "unknown"
        while status == "unknown":
            status, found = restarts.run(float("inf"), 10**9)
        assert status == ("optimal" if truth else "infeasible"), layer
        if truth:
            assert valid(start, end, size, cap, found) and np.all(found[list(layer)] == 0)


@pytest.mark.parametrize("seed", [0, 1, 4, 5])
def test_runs_record_their_bottom_layer(seed):
    """Runs stopped at their node limit record the rectangles at offset 0 on their path only
    once those cover every section, each section once (paths stopped earlier record nothing)."""
    scenario, _ = planted(seed, n_buffers=64)
    w = scenario.workload
    cap = int(scenario.hardware.fast_capacity)
    size = w.size.astype(np.int64)
    part = P._Part.make(np.arange(size.size), w.start.astype(np.int64), w.end.astype(np.int64), size, cap - size,
                        cap)
    assert len(P.components(w.start, w.end)) == 1 and np.all(part.section_totals() == cap)
    layers = []
    for name in ("TWA", "RST/t", "ZWA", "ZWA/t", "WAT"):
        for nodes in (1, 2, 3, 5, 10, 40):
            try:
                P._solve_part(part, name, None, [nodes], float("inf"), {}, layers)
            except P._Limit:
                pass
    assert layers and all(covers_once(part, layer) for layer in layers)


@pytest.mark.parametrize("seed", range(30))
def test_bottom_layer_restarts_decide_like_one_plain_search(seed, monkeypatch):
    """``pack`` with most nodes on bottom-layer restarts and runs of a node or a few (so that
    many runs stop past offset 0 and their layers are held) decides zero-slack planted
    instances, sizes swapped between rectangles over the same sections so that some no longer
    fit, as one search of the whole tree does; brute force on tiny ones; packings valid."""
    monkeypatch.setattr(P, "RESTART_UNIT", 0)
    monkeypatch.setattr(P, "MIN_RUN", 1)
    monkeypatch.setattr(P, "LAYER_SHARE", 0.9)
    start, end, size, cap = zero_slack_instance(seed)
    truth = brute_feasible(start, end, size, cap, cap - size)
    got = P.pack(start, end, size, cap, time_limit_s=20)
    assert got.status == ("optimal" if truth else "infeasible")
    if truth:
        assert valid(start, end, size, cap, got.offsets)
    rng = np.random.default_rng(seed)
    scenario, _ = planted(seed, n_buffers=24, n_ops=8, capacity=12)
    w = scenario.workload
    cap = int(scenario.hardware.fast_capacity)
    start, end, size = w.start.astype(np.int64), w.end.astype(np.int64), w.size.astype(np.int64)
    swap_sizes(start, end, size, rng, times=3)
    part = P._Part.make(np.arange(size.size), start, end, size, cap - size, cap)
    plain = P._solve_part(part, "TWA", None, [10**9], float("inf"))
    got = P.pack(start, end, size, cap, time_limit_s=20)
    assert got.status == ("optimal" if plain is not None else "infeasible")
    if got.status == "optimal":
        assert valid(start, end, size, cap, got.offsets)


def test_bottom_layers_pack_hard_tuning_instances_and_prove_nothing_wrong():
    """Two planted zero-slack instances of the hard tuning set that the restarts without
    bottom layers did not pack within 100,000 nodes are packed within 20,000 (their layers
    held at offset 0); on a third, held layers are refuted within 30,000 nodes, which must not
    make the (packable) instance infeasible."""
    for seed, nodes, want in ((196, 20_000, {"optimal"}), (262, 20_000, {"optimal"}),
                              (266, 30_000, {"optimal", "unknown"})):
        scenario, _ = planted(seed, n_buffers=256)
        w = scenario.workload
        cap = int(scenario.hardware.fast_capacity)
        got = P.pack(w.start, w.end, w.size, cap, max_nodes=nodes, time_limit_s=60)
        assert got.status in want, seed
        if got.status == "optimal":
            assert evaluate(w, got.offsets, scenario.hardware).placed_bytes_fraction == 1.0


def test_held_bottom_layers_are_capped(monkeypatch):
    """At most ``MAX_LAYERS`` bottom layers are held at once (each keeps a table): with runs of
    a node or a few, many runs stop under a bottom layer, and this run holds more than 2
    without the cap; capped at 2, it builds no more than 2."""
    monkeypatch.setattr(P, "RESTART_UNIT", 0)
    monkeypatch.setattr(P, "MIN_RUN", 1)
    built = []

    class Counted(P._Restarts):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if self.layer:
                built.append(self.layer)

    monkeypatch.setattr(P, "_Restarts", Counted)
    scenario, _ = planted(262, n_buffers=256)
    w = scenario.workload
    cap = int(scenario.hardware.fast_capacity)
    P.pack(w.start, w.end, w.size, cap, max_nodes=3_000, time_limit_s=60)
    assert len(built) > 2
    built.clear()
    monkeypatch.setattr(P, "MAX_LAYERS", 2)
    P.pack(w.start, w.end, w.size, cap, max_nodes=3_000, time_limit_s=60)
    assert 1 <= len(built) <= 2


# ------------------------------------------------------------------------------ planted optima
@pytest.mark.parametrize("seed", range(4))
def test_planted_instances_are_packed_fully(seed):
    scenario, known = planted(seed, n_buffers=48)
    w = scenario.workload
    got = P.pack(w.start, w.end, w.size, int(scenario.hardware.fast_capacity), time_limit_s=20)
    assert got.status == "optimal"
    assert evaluate(w, got.offsets, scenario.hardware).placed_bytes_fraction == 1.0
    solution = make_agent("pack:20").solve(scenario)
    ev = evaluate(w, solution.offsets, scenario.hardware)
    assert ev.placed_bytes_fraction == 1.0 and solution.info["status"] == "optimal"
    assert ev.time == pytest.approx(evaluate(w, known, scenario.hardware).time, rel=1e-12)


# ---------------------------------------------------------------------- the agent, cost model
def brute_time(workload: Workload, hardware: Hardware) -> float:
    """The least program time over every mapping (each buffer slow or at any aligned offset)."""
    n, cap, align = workload.num_buffers, hardware.fast_capacity, hardware.alignment
    best = None
    choices = [[-1] + list(range(0, cap - int(workload.size[b]) + 1, align)) for b in range(n)]
    for offsets in itertools.product(*choices):
        try:
            t = evaluate(workload, list(offsets), hardware).time
        except ValueError:
            continue
        best = t if best is None else min(best, t)
    return best


def random_program(rng, index):
    n_ops, n = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    size = rng.integers(1, 4, n) * 2
    start = rng.integers(0, n_ops, n)
    end = start + rng.integers(0, n_ops - start)
    accesses = [[(int(t), int(rng.integers(0, 3 * size[b] + 1)), k == 0)
                 for k, t in enumerate(rng.integers(start[b], end[b] + 1, int(rng.integers(1, 3))))]
                for b in range(n)]
    op_bytes = np.zeros(n_ops)
    for rows in accesses:
        for t, nbytes, _ in rows:
            op_bytes[t] += nbytes
    flops = (op_bytes / 1000.0) * rng.uniform(0.0, 1.2, n_ops) * (rng.random(n_ops) < 0.6) * 1e12
    workload = Workload.from_buffers(f"r{index}", flops.tolist(), size.tolist(), start.tolist(), end.tolist(), accesses)
    hardware = Hardware(peak_flops=1e12, slow_bw=1000.0, fast_bw=10000.0, fast_capacity=int(rng.integers(2, 7)),
                        alignment=int(rng.choice([1, 2])))
    return workload, hardware


@pytest.mark.parametrize("index", range(10))
def test_agent_matches_brute_force_on_the_cost_model(index):
    workload, hardware = random_program(np.random.default_rng(2000 + index), index)
    optimum = brute_time(workload, hardware)
    solution = solve_pack(Scenario("r", workload, hardware), PackConfig(time_limit_s=5.0))
    got = evaluate(workload, solution.offsets, hardware).time  # validates the mapping too
    assert solution.info["status"] == "optimal"
    assert got == pytest.approx(optimum, rel=1e-6)
    assert solution.time_lower_bound <= optimum * (1 + 1e-12)
    assert optimum - solution.time_lower_bound <= 1e-6 * optimum


def test_agent_on_a_contended_program_is_valid_bounded_and_not_worse_than_xla():
    scenario = mlp_scenario(0)
    solution = make_agent("pack:2").solve(scenario)
    ev = evaluate(scenario.workload, solution.offsets, scenario.hardware)
    xla = evaluate(scenario.workload, make_agent("xla").solve(scenario).offsets, scenario.hardware)
    assert ev.time <= xla.time
    assert 0 < solution.time_lower_bound <= ev.time
    assert solution.info["saving"] <= solution.info["saving_bound"]


@pytest.mark.parametrize("time_limit_s", [1e-6, 0.5])
def test_pack_is_never_below_the_best_greedy_mapping(time_limit_s):
    """A planted 64-buffer program (seed 6) in 15/16 of the memory it was cut for: not
    everything fits, first fit places 92.1 % of the bytes, XLA-like and best fit 90.9 %. With
    1 us the search alone ends before its first node (nothing placed), so ``pack`` must return
    its starting mapping, which is the best greedy one (first fit's), not XLA-like's."""
    from mallocgym.agents.exact import build_problem
    from mallocgym.agents.pack import GREEDY, _values
    from mallocgym.heuristics import HEURISTICS

    base, _ = planted(6, n_buffers=64)
    hw = base.hardware.with_capacity(base.hardware.fast_capacity * 15 // 16)
    scenario = Scenario("planted-6", base.workload, hw)
    w = scenario.workload
    greedy = {name: evaluate(w, HEURISTICS[name](scenario), hw) for name in GREEDY}
    assert greedy["first-fit"].placed_bytes_fraction > greedy["xla"].placed_bytes_fraction + 0.01
    assert greedy["first-fit"].time < min(greedy["xla"].time, greedy["best-fit"].time)
    if time_limit_s < 1e-3:  # the search alone (no starting mapping) places nothing in that time
        problem = build_problem(scenario, 1 << 30)
        lin, gains, _ = _values(problem)
        ids = problem.buffers
        _, value, _, proven, _ = P.maximise_parts(
            w.start[ids].astype(np.int64), w.end[ids].astype(np.int64), problem.length.astype(np.int64),
            int(problem.capacity_units), problem.max_offset.astype(np.int64), lin, gains, time_limit_s=time_limit_s)
        assert value == 0 and not proven
    solution = solve_pack(scenario, PackConfig(time_limit_s=time_limit_s, knapsack_s=0, lp_bound=False))
    got = evaluate(w, solution.offsets, hw)
    assert solution.info["greedy_start"] == "first-fit"
    assert got.time <= greedy["first-fit"].time
    assert got.placed_bytes_fraction >= greedy["first-fit"].placed_bytes_fraction


# ----------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("spec", ["pack:0", "pack:-1", "pack:nan", "pack:time_limit_s=0"])
def test_time_limit_must_be_positive(spec):
    with pytest.raises(ValueError, match="time_limit_s"):
        make_agent(spec)


def test_bad_arrays_are_named():
    with pytest.raises(ValueError, match="time_limit_s"):
        P.pack([0], [0], [1], 1, time_limit_s=0)
    with pytest.raises(ValueError, match="end 0 is before start 1"):
        P.pack([1], [0], [1], 1)
    with pytest.raises(ValueError, match="size 0 must be >= 1"):
        P.pack([0], [0], [0], 1)
    with pytest.raises(ValueError, match="one entry per rectangle"):
        P.pack([0, 1], [0], [1], 1)
    with pytest.raises(ValueError, match="capacity"):
        P.pack([0], [0], [1], -1)
    with pytest.raises(ValueError, match="value"):
        P.pack_max([0], [0], [1], 1, [-1])


def test_capacity_below_the_alignment_and_oversized_buffers():
    # 32 bytes of fast memory, alignment 64: only offset 0 exists; the 16-byte buffer fits
    # there, the 48-byte one is larger than the memory and stays slow (as everywhere)
    w = Workload.from_buffers("small", flops=[0.0, 0.0], size=[16, 48], start=[0, 0], end=[1, 1])
    hw = Hardware(1e12, 1000.0, 10000.0, fast_capacity=32, alignment=64)
    solution = make_agent("pack:2").solve(Scenario("small", w, hw))
    assert solution.offsets.tolist() == [0, -1]
    assert solution.info["status"] == "optimal"
    assert P.pack([0], [0], [3], 2).status == "infeasible"  # a rectangle larger than the capacity


def test_pack_then_exact_keeps_the_better_mapping_and_the_larger_bound():
    pytest.importorskip("ortools")
    scenario = mlp_scenario(1)
    alone = solve_pack(scenario, PackConfig(time_limit_s=1.0))
    both = solve_pack(scenario, PackConfig(time_limit_s=1.0, exact_s=2.0))
    t_alone = evaluate(scenario.workload, alone.offsets, scenario.hardware).time
    t_both = evaluate(scenario.workload, both.offsets, scenario.hardware).time
    assert t_both <= t_alone * (1 + 1e-12)
    assert alone.time_lower_bound <= both.time_lower_bound * (1 + 1e-12) <= t_both * (1 + 1e-12)
    if alone.info["status"] != "optimal":
        assert both.info["exact"]["status"] in ("OPTIMAL", "FEASIBLE")


@pytest.mark.parametrize("index", range(10, 16))
def test_exact_seeded_by_pack_matches_brute_force(index):
    pytest.importorskip("ortools")
    from mallocgym.agents.exact import ExactConfig, build_problem, solve_exact
    from mallocgym.agents.pack import _values

    workload, hardware = random_program(np.random.default_rng(2000 + index), index)
    scenario = Scenario("r", workload, hardware)
    optimum = brute_time(workload, hardware)
    seeded = solve_pack(scenario, PackConfig(time_limit_s=5.0))
    problem = build_problem(scenario, 1 << 30)
    _, _, o0 = _values(problem)
    floor = o0 - seeded.info["saving_bound"]
    solution = solve_exact(scenario, ExactConfig(time_limit_s=20.0, workers=1), initial=seeded.offsets,
                           objective_floor=floor)
    assert evaluate(workload, solution.offsets, hardware).time == pytest.approx(optimum, rel=1e-6)
    assert solution.time_lower_bound <= optimum * (1 + 1e-12)


# ------------------------------------------------------------------ the knapsack relaxation
@pytest.mark.parametrize("index", range(6))
def test_knapsack_relaxation_is_the_best_subset_that_meets_every_clique_row(index):
    """Brute force over subsets: the relaxation's optimum is the best saving among the sets whose
    co-live lengths fit, which is at least the best packing's saving."""
    pytest.importorskip("ortools")
    from mallocgym.agents.exact import build_problem
    from mallocgym.agents.pack import _saving, _values, knapsack_relaxation

    workload, hardware = random_program(np.random.default_rng(3000 + index), index)
    problem = build_problem(Scenario("r", workload, hardware), 1 << 30)
    lin, gains, o0 = _values(problem)
    n = len(problem.buffers)
    best = 0
    for chosen in itertools.product([False, True], repeat=n):
        chosen = np.array(chosen, dtype=bool)
        if all(problem.length[c][chosen[c]].sum() <= problem.capacity_units for c in problem.cliques):
            best = max(best, _saving(np.where(chosen, 0, -1), lin, gains))
    bound, picked, status = knapsack_relaxation(problem, 5.0)
    assert status == "OPTIMAL"
    assert bound == best
    assert _saving(np.where(picked, 0, -1), lin, gains) == best
    packed = solve_pack(Scenario("r", workload, hardware), PackConfig(time_limit_s=2.0, knapsack_s=0))
    assert packed.info["saving"] <= bound


def test_knapsack_bound_closes_a_gap_the_lp_leaves():
    """Co-live buffers of 3 and 2 bytes, 4 bytes of fast memory, each saving in proportion to the
    bytes it moves at its own always-memory-bound op: the LP takes all of one and part of the
    other (4 bytes' worth), the knapsack relaxation and the optimum only the 3-byte one."""
    pytest.importorskip("ortools")
    from mallocgym.agents.exact import build_problem
    from mallocgym.agents.pack import knapsack_relaxation, lp_saving_bound

    w = Workload.from_buffers("two", flops=[0.0, 0.0], size=[3, 2], start=[0, 0], end=[1, 1],
                              accesses=[[(0, 3, True)], [(1, 2, True)]])
    hw = Hardware(1e12, 1000.0, 10000.0, fast_capacity=4, alignment=1)
    problem = build_problem(Scenario("two", w, hw), 1 << 30)
    big = -problem.linear[0]  # the 3-byte buffer's saving, in quanta
    assert problem.capacity_units == 4 and problem.length.tolist() == [3, 2]
    assert lp_saving_bound(problem) >= big * 4 // 3
    assert knapsack_relaxation(problem, 5.0)[0] == big
    both = solve_pack(Scenario("two", w, hw), PackConfig(time_limit_s=1.0))
    assert both.info["knapsack"]["saving_bound"] == both.info["saving"] == big
    assert both.info["status"] == "optimal"
    time = evaluate(w, both.offsets, hw).time
    assert both.offsets.tolist() == [0, -1]
    assert time == pytest.approx(3 / 10000 + 2 / 1000)
    assert both.time_lower_bound == pytest.approx(time, rel=1e-6)


@pytest.mark.parametrize("field,value", [("knapsack_s", -1.0), ("knapsack_s", float("nan")),
                                         ("repair_share", 1.0), ("repair_share", -0.1)])
def test_knapsack_settings_are_checked(field, value):
    with pytest.raises(ValueError, match=field):
        PackConfig(**{field: value})
