"""The narrow index (``State1.ix_meta`` after the wide buckets' unions, issue 33): each chunk
registered in the narrow bucket where it starts and where MSA's hold of it ends, each narrow
bucket's whole union (the offsets of the chunks MSA holds at every one of its ops), each chunk's
words there; and MSA's best fit read from them (``mallocgym.sim.msa._fit_narrow``), against a
plain recount from the chunks and a best fit over a scan of every chunk, on games played with
random legal moves. The test programs are small, where a plan keeps no narrow index: the games
are built with narrower buckets (``NARROW_STARTS``, ``NARROW_MIN`` patched)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from mallocgym.heuristics.v1 import new_game
from mallocgym.sim import msa, v1

from test_v1_unions import _SC, _chunks, _fits_agree_with_a_scan, _held, _merged, _random_game, _shrink_holds


def _narrow_game(n, seed, fraction, msa_share, starts):
    """:func:`test_v1_unions._random_game` with a narrow index of ``starts`` segments' uses a
    bucket (its width is set when the game's state is made)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(v1, "NARROW_STARTS", starts)
        m.setattr(v1, "NARROW_MIN", 1)
        return _random_game(n, seed, fraction, msa_share)


def _layout(st, state):
    n_seg = st.seg_use.shape[0]
    nb = v1.narrow_at(n_seg, state.ix_head.shape[0])
    chunks = nb + v1.NB_HEADER
    return nb, chunks, chunks + v1.NB_CHUNK * n_seg


def _check_narrow(st, state):
    """Every invariant the narrow best fit relies on, against a recount from the chunks."""
    un = state.ix_meta
    nb, chunks, blocks = _layout(st, state)
    nw, n_narrow = int(un[nb + v1.NW]), int(un[nb + v1.NB_COUNT])
    assert nw > 0  # (the games here never outgrow its room)
    capacity = int(st.iparams[v1.CAPACITY])
    listed: list[list[int]] = []
    for k in range(n_narrow):
        base = blocks + k * v1.NARROW_STRIDE
        cs, r = [], int(un[base])
        while r >= 0:
            cs.append(int(state.ix_cid[r]))
            r = int(state.ix_nxt[r])
        assert len(cs) == un[base + 1]
        listed.append(cs)
    whole: list[list[tuple[int, int]]] = [[] for _ in range(n_narrow)]
    for c in _chunks(state):
        held, lo = _held(state, c), int(state.ch_lo[c])
        off, end = int(state.ch_off[c]), int(state.ch_off[c] + st.size[state.ch_buf[c]])
        rec = chunks + v1.NB_CHUNK * c
        assert un[rec + v1.NC_SPAN] == (lo << 32) | held
        assert un[rec + v1.NC_IV] == off * (capacity + 1) + end
        assert un[rec + v1.NC_BUF] == state.ch_buf[c]
        last = min((held + 1) // nw - 1, n_narrow - 1)
        assert un[rec + v1.NC_WHOLE] == last
        assert c in listed[lo // nw] and c in listed[min(held // nw, n_narrow - 1)]
        for k in range(-(-lo // nw), last + 1):
            whole[k].append((off, end))
    for k in range(n_narrow):
        want = _merged(whole[k])
        n = int(un[blocks + k * v1.NARROW_STRIDE + 2])
        if n < 0:  # not kept (for good, once it outgrew its room)
            continue
        base = blocks + k * v1.NARROW_STRIDE + 2
        assert [(int(un[base + 1 + 2 * i]), int(un[base + 2 + 2 * i])) for i in range(n)] == want, k
        assert len(want) <= v1.UNION_CAP


@settings(max_examples=40, deadline=None)
@given(st_.integers(0, 2 ** 32 - 1), st_.sampled_from([300, 600]), st_.floats(0.05, 1.0), st_.floats(0.0, 1.0),
       st_.sampled_from([1, 2]))
def test_narrow_index_equals_a_recount_and_its_best_fit_a_scan(seed, n, fraction, msa_share, starts):
    """After any sequence of legal moves (MSA's or random: evictions placed, moved and dropped,
    chunks kept longer): every chunk is listed where it starts and where its hold ends, its words
    are its own, every kept whole union is the merge of the chunks held over its whole bucket,
    and every best fit the narrow index answers is a scan's."""
    st, state, rng = _narrow_game(n, seed, fraction, msa_share, starts)
    _check_narrow(st, state)
    nb, _, _ = _layout(st, state)
    nw = int(state.ix_meta[nb + v1.NW])
    answered = _fits_agree_with_a_scan(st, state, rng, msa._fit_narrow, 4 * nw, 40)
    assert answered > 0 or state.counters[v1.N_CHUNKS] == 0


@settings(max_examples=25, deadline=None)
@given(st_.integers(0, 2 ** 32 - 1), st_.sampled_from([300, 600]), st_.floats(0.2, 1.0))
def test_narrow_index_after_holds_shrink(seed, n, fraction):
    """Holds that shrink (an eviction's hold undone, a chunk cut short; legal play seldom does
    it): the narrow buckets a chunk is no longer held over whole are marked not kept, and it is
    listed where its hold now ends."""
    st, state, rng = _narrow_game(n, seed, fraction, 0.5, 2)
    _shrink_holds(st, state, rng, lambda: _check_narrow(st, state))


def test_no_narrow_index_where_it_does_not_pay():
    """Programs whose wide buckets span fewer than ``NARROW_MIN`` narrow ones keep none; the large
    ones do (the 59,998-buffer program's wide buckets span 339 ops, its narrow ones 17)."""
    st, state, _, _ = new_game(_SC[600])
    nb, _, _ = _layout(st, state)
    assert state.ix_meta[nb + v1.NW] == 0 and state.ix_meta.shape[0] == nb + v1.NB_HEADER


@pytest.mark.parametrize("name", ["mlp-train-s1@1/8", "lstm-train@1/2", "moe-layer-train@1/8", "minimalloc-C@1MiB",
                                  "alexnet-infer@1/8"])
def test_plans_with_a_narrow_index_are_the_plans_without(name, monkeypatch):
    """MSA's plan with the narrow index forced on (narrow buckets of a few ops, on programs small
    enough that a plan keeps none) equals the plan without it, field by field."""
    from mallocgym.agents.xla_msa import plan_msa
    from mallocgym.scenarios import get

    scenario = get(name)
    _, plain = plan_msa(scenario)
    monkeypatch.setattr(v1, "NARROW_STARTS", 1)
    monkeypatch.setattr(v1, "NARROW_MIN", 1)
    st, narrow = plan_msa(scenario)
    nb, _, _ = _layout(st, narrow)
    assert narrow.ix_meta[nb + v1.NW] > 0
    _check_narrow(st, narrow)
    for field in ("seg_kind", "seg_off", "seg_pstart", "seg_chunk", "ev_done", "ch_hi", "ch_off"):
        assert np.array_equal(getattr(plain, field), getattr(narrow, field)), field
    assert float(plain.totals[v1.TIME]).hex() == float(narrow.totals[v1.TIME]).hex()


def _blocked_scan(st, state, b, off, lo, hi) -> bool:
    """The reference keep check: another buffer's chunk MSA holds at some op of ``[lo, hi]`` meets
    ``[off, off + size_b)``."""
    end = off + int(st.size[b])
    return any(state.ch_buf[c] != b and state.ch_lo[c] <= hi and _held(state, c) >= lo
               and state.ch_off[c] < end and off < state.ch_off[c] + st.size[state.ch_buf[c]]
               for c in _chunks(state))


@settings(max_examples=40, deadline=None)
@given(st_.integers(0, 2 ** 32 - 1), st_.sampled_from([300, 600]), st_.floats(0.05, 1.0), st_.floats(0.0, 1.0),
       st_.sampled_from([1, 2]))
def test_keep_check_from_the_narrow_index_equals_a_scan(seed, n, fraction, msa_share, starts):
    """MSA's keep check read from the narrow index (``msa._blocked_narrow``) equals
    ``v1.first_blocked`` and a scan of every chunk, for random buffers, offsets (a chunk's own, or
    any) and windows a few narrow buckets long, after random legal play."""
    st, state, rng = _narrow_game(n, seed, fraction, msa_share, starts)
    nb, _, _ = _layout(st, state)
    nw = int(state.ix_meta[nb + v1.NW])
    n_ops, capacity = st.compute_time.shape[0], int(st.iparams[v1.CAPACITY])
    chunks = _chunks(state)
    answered = 0
    for _ in range(60):
        if chunks and rng.random() < 0.5:  # a chunk's own buffer and offset: the keep check's question
            c = int(rng.choice(chunks))
            b, off = int(state.ch_buf[c]), int(state.ch_off[c])
        else:
            b = int(rng.integers(0, st.size.shape[0]))
            off = int(rng.integers(0, max(1, capacity - int(st.size[b]) + 1)))
        lo = int(rng.integers(0, n_ops))
        hi = min(n_ops - 1, lo + int(rng.integers(0, 4 * nw)))
        want = _blocked_scan(st, state, b, off, lo, hi)
        assert (v1.first_blocked(st, state, b, off, lo, hi, True, True) <= hi) == want
        got = msa._blocked_narrow(st, state, b, off, lo, hi)
        if got != msa.NO_UNIONS:
            answered += 1
            assert got == int(want), (b, off, lo, hi)
    assert answered > 0 or not chunks
