"""The index buckets' unions of occupied offsets (in ``State1.ix_meta``, issue 33) and MSA's best fit
read from them (``mallocgym.sim.msa._fit_by_unions``), against a plain recount from the chunks
and a best fit over a scan of every chunk, on games played with random legal moves."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st_

from mallocgym.features.v1 import advance_forced, play
from mallocgym.heuristics.v1 import new_game
from mallocgym.sim import msa, v1
from mallocgym.speed import program_with_buffers

_SC = {n: program_with_buffers(n, fraction=f) for n, f in ((300, 0.125), (600, 0.3))}


def _held(state, c) -> int:
    b = int(state.ch_buf[c])
    held = int(state.ch_hi[c])
    if state.ev_chunk[b] == c and state.ev_done[b] > held:
        held = int(state.ev_done[b])
    return held


def _chunks(state) -> list[int]:
    return state.active[:int(state.counters[v1.N_CHUNKS])].tolist()


def _merged(intervals) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, z in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], z)
        else:
            out.append([a, z])
    return [(a, z) for a, z in out]


def _unions_recounted(st, state) -> tuple[list[int], list]:
    """The reference: each chunk's last bucket, each bucket's merged intervals (None: too many)."""
    w = int(state.counters[v1.IX_WIDTH])
    n_seg, n_buckets = st.seg_use.shape[0], state.ix_head.shape[0]
    span = [-1] * n_seg
    per_bucket: list[list[tuple[int, int]]] = [[] for _ in range(n_buckets)]
    for c in _chunks(state):
        span[c] = min(_held(state, c) // w, n_buckets - 1)
        for k in range(int(state.ch_lo[c]) // w, span[c] + 1):
            off = int(state.ch_off[c])
            per_bucket[k].append((off, off + int(st.size[state.ch_buf[c]])))
    unions = [_merged(iv) for iv in per_bucket]
    return span, [u if len(u) <= v1.UNION_CAP else None for u in unions]


def _unions_kept(st, state) -> tuple[list[int], list]:
    n_seg = st.seg_use.shape[0]
    un = state.ix_meta
    out = []
    for k in range(state.ix_head.shape[0]):
        base = 2 * n_seg + k * v1.UNION_STRIDE
        n = int(un[base])
        out.append(None if n < 0 else [(int(un[base + 1 + 2 * i]), int(un[base + 2 + 2 * i])) for i in range(n)])
    return un[n_seg:2 * n_seg].tolist(), out


def _best_fit_scan(st, state, b, lo, hi) -> int:
    """The reference best fit: the union of every other buffer's chunk MSA holds in ``[lo, hi]``."""
    occupied = _merged((int(state.ch_off[c]), int(state.ch_off[c] + st.size[state.ch_buf[c]]))
                       for c in _chunks(state)
                       if state.ch_buf[c] != b and state.ch_lo[c] <= hi and _held(state, c) >= lo)
    size, align, capacity = int(st.size[b]), int(st.iparams[v1.ALIGNMENT]), int(st.iparams[v1.CAPACITY])
    best_gap, best_off, cursor = -1, -1, 0
    for a, z in occupied:
        low = -(-cursor // align) * align
        if a > cursor and low + size <= a and (best_gap < 0 or a - cursor < best_gap):
            best_gap, best_off = a - cursor, low
        cursor = max(cursor, z)
    low = -(-cursor // align) * align
    if best_off < 0 and low + size <= capacity:
        best_off = low
    return best_off


def _fits_agree_with_a_scan(st, state, rng, fit, span: int, rounds: int) -> int:
    """Ask ``fit`` (a kernel that may answer ``NO_UNIONS``) and :func:`msa.best_fit` for ``rounds``
    random buffers and windows of at most ``span`` ops: each answer must be the scan's. Returns how
    many ``fit`` answered."""
    n_ops = st.compute_time.shape[0]
    answered = 0
    ids = np.empty(st.seg_use.shape[0] + 1, np.int64)
    for _ in range(rounds):
        b = int(rng.integers(0, st.size.shape[0]))
        lo = int(rng.integers(-1, n_ops))
        hi = min(n_ops - 1, max(lo, 0) + int(rng.integers(0, span)))
        want = _best_fit_scan(st, state, b, lo, hi)
        got = fit(st, state, ids, b, lo, hi)
        if got != msa.NO_UNIONS:
            answered += 1
            assert got == want, (b, lo, hi)
        assert msa.best_fit(st, state, ids, b, lo, hi) == want, (b, lo, hi)
    return answered


def _random_game(n, seed, fraction, msa_share):
    rng = np.random.default_rng(seed)
    st, state, table, _ = new_game(_SC[n])
    s = advance_forced(st, state, table)
    while s >= 0 and state.counters[v1.POS] < fraction * st.seg_use.shape[0]:
        legal = np.flatnonzero(table.kind >= 0)
        a = int(table.msa_action[0]) if rng.random() < msa_share else int(rng.choice(legal))
        s = play(st, state, table, s, table.kind[a], table.off[a], table.pstart[a])
    return st, state, rng


@settings(max_examples=40, deadline=None)
@given(st_.integers(0, 2 ** 32 - 1), st_.sampled_from([300, 600]), st_.floats(0.05, 1.0), st_.floats(0.0, 1.0))
def test_unions_equal_a_recount_and_their_best_fit_a_scan(seed, n, fraction, msa_share):
    """After any sequence of legal moves (MSA's or random: evictions placed, moved and dropped,
    chunks kept longer): each bucket's union is the merge of the chunks MSA holds in it, each
    chunk's last bucket is right, and every best fit the unions answer is a scan's."""
    st, state, rng = _random_game(n, seed, fraction, msa_share)
    assert _unions_kept(st, state) == _unions_recounted(st, state)
    n_ops, w = st.compute_time.shape[0], int(state.counters[v1.IX_WIDTH])
    answered = _fits_agree_with_a_scan(st, state, rng, msa._fit_by_unions, 6 * w, 30)
    assert answered > 0 or state.counters[v1.N_CHUNKS] == 0 or n_ops < 3 * w


@settings(max_examples=25, deadline=None)
@given(st_.integers(0, 2 ** 32 - 1), st_.sampled_from([300, 600]), st_.floats(0.2, 1.0))
def test_unions_after_holds_shrink(seed, n, fraction):
    """Holds that shrink (an eviction's hold undone, a chunk cut short; legal play seldom does
    it): the buckets a chunk left are rebuilt, and still equal a recount."""
    st, state, rng = _random_game(n, seed, fraction, 0.5)

    def check():
        assert _unions_kept(st, state) == _unions_recounted(st, state)

    _shrink_holds(st, state, rng, check)


def _shrink_holds(st, state, rng, check) -> None:
    """Ten holds cut short at random (an eviction's hold undone, or a chunk's end moved earlier),
    each followed by the index's upkeep and ``check()``."""
    chunks = _chunks(state)
    for _ in range(10):
        if not chunks:
            break
        c = chunks[int(rng.integers(0, len(chunks)))]
        b = int(state.ch_buf[c])
        if state.ev_chunk[b] == c and rng.random() < 0.5:
            v1._unhold_eviction(st, state, b)
        else:
            v1._set_hi(st, state, c, int(rng.integers(int(state.ch_lo[c]), int(state.ch_hi[c]) + 1)))
        v1._sync_unions(st, state, b)
        check()


def test_a_union_outgrowing_its_room_is_not_kept_and_comes_back():
    """More than ``UNION_CAP`` disjoint intervals in a bucket: the union is marked not kept (the
    window walks instead); merging them back below the cap keeps it again."""
    un = np.zeros(1 + v1.UNION_STRIDE, np.int64)
    for i in range(v1.UNION_CAP):
        assert v1._union_add(un, 1, 10 * i, 10 * i + 5)
    assert un[1] == v1.UNION_CAP
    assert not v1._union_add(un, 1, 10 * v1.UNION_CAP, 10 * v1.UNION_CAP + 5)
    assert un[1] == v1.UNION_CAP  # unchanged: the caller rebuilds (and marks it -1)
    assert v1._union_add(un, 1, 3, 22)  # touches three intervals: one
    assert un[1] == v1.UNION_CAP - 2
    assert [tuple(un[2:8])] == [(0, 25, 30, 35, 40, 45)]
    assert v1._union_add(un, 1, 26, 28)  # inside a gap: a new interval, the rest shifted
    assert list(un[2:10]) == [0, 25, 26, 28, 30, 35, 40, 45]


def _candidates_scan(st, state, b, lo, hi, k) -> list[int]:
    """The reference candidates over ``[lo, hi]``: from each free gap of the union of every other
    buffer's chunk live there in the rules' view (``ch_hi``, not MSA's hold), its lowest aligned
    offset and, if different, its highest; by gap length, then offset; the first ``k``."""
    occupied = _merged((int(state.ch_off[c]), int(state.ch_off[c] + st.size[state.ch_buf[c]]))
                       for c in _chunks(state)
                       if state.ch_buf[c] != b and state.ch_lo[c] <= hi and state.ch_hi[c] >= lo)
    size, align, capacity = int(st.size[b]), int(st.iparams[v1.ALIGNMENT]), int(st.iparams[v1.CAPACITY])
    found, cursor = [], 0
    for a, z in occupied + [(capacity, capacity)]:
        if a > cursor:
            low = -(-cursor // align) * align
            if low + size <= a:
                found.append((a - cursor, low))
                high = (a - size) // align * align
                if high != low:
                    found.append((a - cursor, high))
        cursor = max(cursor, z)
    return [off for _, off in sorted(found)[:k]]


@settings(max_examples=40, deadline=None)
@given(st_.integers(0, 2 ** 32 - 1), st_.sampled_from([300, 600]), st_.floats(0.05, 1.0), st_.floats(0.0, 1.0))
def test_window_candidates_from_the_unions_equal_a_scan(seed, n, fraction, msa_share):
    """The legal moves' candidate offsets over a window read from the buckets' unions (kept with
    MSA's hold, ``v1._candidates_by_unions``) are those of a scan of every chunk in the rules'
    view, and so are ``window_candidates``' (the walk of the index they replace) and every option
    ``segment_options`` lists at the game's current position: windows of random buffers."""
    st, state, rng = _random_game(n, seed, fraction, msa_share)
    n_ops, w = st.compute_time.shape[0], int(state.counters[v1.IX_WIDTH])
    answered = _candidates_agree_with_a_scan(st, state, rng)
    assert answered > 0 or state.counters[v1.N_CHUNKS] == 0 or n_ops < 3 * w


def _candidates_agree_with_a_scan(st, state, rng) -> int:
    """Ask ``v1._candidates_by_unions`` and ``window_candidates`` for 30 random buffers and windows
    of at most six index buckets, and ``segment_options`` at the game's position: each answer must
    be the scan's. Returns how many the unions answered."""
    n_ops, w = st.compute_time.shape[0], int(state.counters[v1.IX_WIDTH])
    k = int(st.iparams[v1.N_CAND])
    ids = np.empty(st.seg_use.shape[0] + 1, np.int64)
    out = np.empty(k, np.int64)
    answered = 0
    for _ in range(30):
        b = int(rng.integers(0, st.size.shape[0]))
        if st.size[b] > st.iparams[v1.CAPACITY]:
            continue
        lo = int(rng.integers(0, n_ops))
        hi = min(n_ops - 1, lo + int(rng.integers(0, 6 * w)))
        want = _candidates_scan(st, state, b, lo, hi, k)
        got = v1._candidates_by_unions(st, state, b, lo, hi, k, ids, out)
        if got != v1.NO_FIT:
            answered += 1
            assert out[:got].tolist() == want, (b, lo, hi)
        got = v1.window_candidates(st, state, b, lo, hi, k, ids, out)
        assert out[:got].tolist() == want, (b, lo, hi)
    pos = int(state.counters[v1.POS])
    if pos < st.seg_use.shape[0]:  # the current position's options, each window against the scan
        s = int(st.order[pos])
        b, u = int(st.seg_buf[s]), int(st.seg_use[s])
        j_max = int(st.iparams[v1.N_STARTS])
        fast_off, starts = np.empty(k, np.int64), np.empty(j_max, np.int64)
        pf_count, pf_off = np.zeros(j_max, np.int64), np.empty((j_max, k), np.int64)
        n_fast, n_starts = v1.segment_options(st, state, s, fast_off, starts, pf_count, pf_off, ids, -1,
                                              v1.NO_START, -1)
        if s == st.seg_ptr[b] and st.def_op[b] >= 0 and st.size[b] <= st.iparams[v1.CAPACITY]:
            assert fast_off[:n_fast].tolist() == _candidates_scan(st, state, b, int(st.def_op[b]), u, k)
        for j in range(n_starts):
            want = _candidates_scan(st, state, b, int(starts[j]) + 1, u, k)
            assert pf_off[j, :pf_count[j]].tolist() == want, j
    return answered


@settings(max_examples=30, deadline=None)
@given(st_.integers(0, 2 ** 32 - 1), st_.sampled_from([300, 600]), st_.floats(0.3, 1.0))
def test_a_window_a_middle_union_leaves_no_room_in_fits_nowhere(seed, n, fraction):
    """``msa._fit_by_unions`` answers -1 at once where one middle bucket's union alone leaves no
    room for the buffer (``msa._no_room_in``): on long windows and the largest buffers (where it
    happens), every answer is a scan's, and the shortcut's -1 is checked on its own against the
    scan of that bucket's window."""
    st, state, rng = _random_game(n, seed, fraction, 0.8)
    n_ops, w = st.compute_time.shape[0], int(state.counters[v1.IX_WIDTH])
    n_seg = st.seg_use.shape[0]
    big = np.argsort(st.size)[-max(1, st.size.shape[0] // 10):]
    ids = np.empty(n_seg + 1, np.int64)
    capacity, align = int(st.iparams[v1.CAPACITY]), int(st.iparams[v1.ALIGNMENT])
    for _ in range(40):
        b = int(rng.choice(big))
        lo = int(rng.integers(-1, n_ops))
        hi = min(n_ops - 1, max(lo, 0) + int(rng.integers(2 * w, 8 * w)))
        got = msa._fit_by_unions(st, state, ids, b, lo, hi)
        if got != msa.NO_UNIONS:
            assert got == _best_fit_scan(st, state, b, lo, hi), (b, lo, hi)
        for k in range(max(lo, 0) // w + 1, hi // w):
            base = 2 * n_seg + k * v1.UNION_STRIDE
            if state.ix_meta[base] >= 0 and msa._no_room_in(state.ix_meta, base, int(st.size[b]), align, capacity):
                # the bucket's chunks alone: nothing fits beside them (b's own chunks left out)
                b_free = all(state.ch_buf[c] != b or _held(state, c) < k * w or state.ch_lo[c] > k * w + w - 1
                             for c in _chunks(state))
                if b_free:
                    assert _best_fit_scan(st, state, b, k * w, k * w + w - 1) == -1, (b, k)
