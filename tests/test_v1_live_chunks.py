"""The chunks live in an op window (``mallocgym.sim.v1.live_chunks``, issue 33): the index walk,
its sort and its order by place in ``active`` (``_live_by_rank``), against a plain scan of every
chunk opened, on random chunks opened, grown, shrunk and merged in any order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st_

from mallocgym.sim import v1
from mallocgym.speed import program_with_buffers

_SC = program_with_buffers(120)
_ST = v1.compile_v1(_SC.workload, _SC.hardware)


def _scan(state, lo, hi, skip, msa_hold):
    """The reference: every chunk opened, live at some op of ``[lo, hi]``, by (offset, id)."""
    out = []
    for c in state.active[:int(state.counters[v1.N_CHUNKS])].tolist():
        b = int(state.ch_buf[c])
        held = int(state.ch_hi[c])
        if msa_hold and state.ev_chunk[b] == c and state.ev_done[b] > held:
            held = int(state.ev_done[b])
        if b != skip and state.ch_lo[c] <= hi and held >= lo:
            out.append(c)
    return sorted(out, key=lambda c: (int(state.ch_off[c]), c))


@settings(max_examples=150, deadline=None)
@given(st_.integers(0, 2 ** 32 - 1), st_.integers(0, 300), st_.integers(1, 12), st_.integers(0, 4))
def test_live_chunks_equal_a_scan(seed, n_steps, n_offsets, merge_every):
    """After any sequence of chunks opened (few distinct offsets, so ties are common), held longer
    or shorter, evicted (held one op longer in MSA's view) and merges of ``active``: the chunks
    live in a window are those a scan finds, in offset order; ``_live_by_rank`` (what a long
    window uses) lists them by (offset, id) whether merged or not."""
    rng = np.random.default_rng(seed)
    st = _ST
    state = v1.new_state(st)
    n_seg, n_ops = st.seg_use.shape[0], st.compute_time.shape[0]
    opened = []
    ids = np.empty(n_seg + 1, np.int64)
    for _ in range(n_steps):
        kind = int(rng.integers(0, 8))
        if kind <= 4 or not opened:  # open a chunk inside its buffer's live range
            c = int(rng.integers(0, n_seg))
            if state.ch_buf[c] >= 0:
                continue
            b = int(st.seg_buf[c])
            lo_b, hi_b = int(st.start[b]), int(st.end[b])
            a = int(rng.integers(lo_b, hi_b + 1))
            state.ch_lo[c] = a
            state.ch_hi[c] = int(rng.integers(a, hi_b + 1))
            state.ch_off[c] = int(rng.integers(0, n_offsets)) * 64
            state.ch_buf[c] = b
            v1._activate(st, state, c)
            opened.append(c)
        elif kind <= 6:  # hold longer or shorter, or evict (held through ev_done in MSA's view)
            c = opened[int(rng.integers(0, len(opened)))]
            b = int(st.seg_buf[c])
            new_hi = int(rng.integers(int(state.ch_lo[c]), int(st.end[b]) + 1))
            v1._set_hi(st, state, c, new_hi)
            z = int(rng.integers(0, 3))
            if z == 0:
                state.ev_chunk[b] = c
                state.ev_done[b] = new_hi + int(rng.integers(0, 2))  # the rules hold it at most one op longer
            elif z == 1:
                state.ev_chunk[b] = -1
                state.ev_done[b] = -1
        elif merge_every and rng.integers(0, merge_every) == 0:
            v1._merge_active(state, ids)
    queries = [(int(rng.integers(0, n_ops)), int(rng.integers(0, n_ops)), int(rng.integers(0, st.size.shape[0] + 1)))
               for _ in range(8)]
    for x, y, z in queries:
        lo = x % n_ops - 1
        hi = max(lo, 0) + y % (n_ops - max(lo, 0))
        skip = int(z % (st.size.shape[0] + 1)) - 1
        for msa_hold in (False, True):
            want = _scan(state, lo, hi, skip, msa_hold)
            m = v1.live_chunks(st, state, lo, hi, skip, ids, msa_hold)
            got = ids[:m].tolist()
            assert sorted(got) == sorted(want)
            offs = [int(state.ch_off[c]) for c in got]
            assert offs == sorted(offs)
            w = int(state.counters[v1.IX_WIDTH])
            k0, k1 = max(lo, 0) // w, min(hi // w, state.ix_head.shape[0] - 1)
            m = v1._live_by_rank(st, state, lo, hi, skip, ids, msa_hold, k0, k1)
            assert ids[:m].tolist() == want
            assert not state.rank_bits.any()  # the scratch is left clear
    n = int(state.counters[v1.N_CHUNKS])
    k = int(state.counters[v1.ACT_SORTED])
    assert all(state.ch_rank[c] == i for i, c in enumerate(state.active[:k].tolist()))
    assert all(state.ch_rank[c] == -1 for c in state.active[k:n].tolist())


_BIG = program_with_buffers(5000)
_BIG_ST = v1.compile_v1(_BIG.workload, _BIG.hardware)


@settings(max_examples=12, deadline=None)
@given(st_.integers(0, 2 ** 32 - 1), st_.integers(1, 40), st_.integers(0, 300))
def test_live_by_rank_over_many_summary_words(seed, n_offsets, n_tail):
    """``_live_by_rank`` reads the set rank bits through a summary (a bit per word of ranks, 4,096
    ranks each): with thousands of chunks merged into ``active`` (ranks over several summary
    words) and some opened since, the chunks of any window are a scan's, by (offset, id), and the
    scratch is left clear."""
    rng = np.random.default_rng(seed)
    st = _BIG_ST
    state = v1.new_state(st)
    n_seg, n_ops = st.seg_use.shape[0], st.compute_time.shape[0]
    ids = np.empty(n_seg + 1, np.int64)
    order = rng.permutation(n_seg)
    for i, c in enumerate(order.tolist()):
        if i == n_seg - n_tail:  # the rest are opened after the merge
            v1._merge_active(state, ids)
        b = int(st.seg_buf[c])
        lo_b, hi_b = int(st.start[b]), int(st.end[b])
        a = int(rng.integers(lo_b, hi_b + 1))
        state.ch_lo[c] = a
        state.ch_hi[c] = int(rng.integers(a, min(hi_b, a + 40) + 1))
        state.ch_off[c] = int(rng.integers(0, n_offsets)) * 64
        state.ch_buf[c] = b
        v1._activate(st, state, c)
    if n_tail == 0:
        v1._merge_active(state, ids)
    assert int(state.counters[v1.ACT_SORTED]) > 2 * 4096
    w = int(state.counters[v1.IX_WIDTH])
    for _ in range(6):
        lo = int(rng.integers(-1, n_ops))
        hi = min(n_ops - 1, max(lo, 0) + int(rng.integers(0, 3 * w + 1)))
        want = _scan(state, lo, hi, -1, True)
        k0, k1 = max(lo, 0) // w, min(hi // w, state.ix_head.shape[0] - 1)
        m = v1._live_by_rank(st, state, lo, hi, -1, ids, True, k0, k1)
        assert ids[:m].tolist() == want
        assert not state.rank_bits.any()
