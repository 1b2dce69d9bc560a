import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from mallocgym import Hardware, Workload, evaluate, sim

import reference
from strategies import scenarios


def _state(workload, hardware, order="start"):
    st = sim.compile_scenario(workload, hardware, order)
    return st, sim.new_state(st)


def _candidates(st, state, b, k):
    n = st.size.shape[0]
    ids, lo, hi = np.empty(n, np.int64), np.empty(n + 1, np.int64), np.empty(n + 1, np.int64)
    co, cl, ch = np.zeros(k, np.int64), np.zeros(k, np.int64), np.zeros(k, np.int64)
    count, max_gap, free = sim.find_candidates(st, state, b, k, ids, lo, hi, co, cl, ch)
    return co[:count].tolist(), [(int(a), int(b)) for a, b in zip(cl[:count], ch[:count])], max_gap, free


def test_hand_worked_candidates():
    # capacity 100; buffers 0..2 placed at [0,10), [30,60), [70,75) over ops 0-3; buffer 3 asks.
    w = Workload.from_buffers("gaps", flops=[0] * 4, size=[10, 30, 5, 8], start=[0, 1, 3, 0], end=[3, 2, 3, 3])
    st, state = _state(w, Hardware(fast_capacity=100))
    for b, off in [(0, 0), (1, 30), (2, 70)]:
        sim.place(st, state, b, off)
    offsets, gaps, max_gap, free = _candidates(st, state, 3, 16)
    # gaps: [10,30) len 20, [60,70) len 10, [75,100) len 25 -> best fit first, low then high end
    assert offsets == [60, 62, 10, 22, 75, 92]
    assert gaps == [(60, 70), (60, 70), (10, 30), (10, 30), (75, 100), (75, 100)]
    assert (max_gap, free) == (25, 55)
    # K = 3 keeps the three best
    assert _candidates(st, state, 3, 3)[0] == [60, 62, 10]


def test_candidates_respect_alignment_and_time():
    w = Workload.from_buffers("al", flops=[0] * 3, size=[5, 8, 8], start=[0, 2, 1], end=[0, 2, 2])
    st, state = _state(w, Hardware(fast_capacity=32, alignment=8))
    sim.place(st, state, 0, 0)  # live only at op 0: does not block buffer 2 (ops 1-2)
    sim.place(st, state, 1, 8)  # [8,16) at op 2
    offsets, gaps, _, _ = _candidates(st, state, 2, 16)
    # gaps over ops 1-2: [0,8) len 8 -> offset 0; [16,32) len 16 -> 16 and 24
    assert offsets == [0, 16, 24]


def test_place_updates_cost_incrementally(tiny, tiny_hw):
    st, state = _state(tiny, tiny_hw)
    assert state.totals[sim.TIME] == pytest.approx(1.3)
    assert sim.marginal_benefit(st, state, 1) == pytest.approx(0.36)
    assert sim.marginal_benefit(st, state, 2) == pytest.approx(0.27)
    delta = sim.place(st, state, 1, 0)
    assert delta == pytest.approx(-0.36)
    # with buffer 1 fast, buffer 0 saves 0.09 at op0 (op1 compute-bound): unchanged
    assert sim.marginal_benefit(st, state, 0) == pytest.approx(0.09)
    assert state.totals[sim.TIME] == pytest.approx(0.94)
    assert state.counters[sim.PLACED] == 1 and state.totals[sim.PLACED_BYTES] == 200


def test_boundedness_order(tiny, tiny_hw):
    st = sim.compile_scenario(tiny, tiny_hw, "boundedness")
    # benefits 0.09, 0.36, 0.27 over sqrt(100, 200, 300): 0.009, 0.0255, 0.0156
    assert st.benefit == pytest.approx([0.09, 0.36, 0.27])
    assert st.order.tolist() == [1, 2, 0]
    assert sim.compile_scenario(tiny, tiny_hw, "size").order.tolist() == [2, 1, 0]
    assert sim.compile_scenario(tiny, tiny_hw, "start").order.tolist() == [1, 0, 2]
    with pytest.raises(ValueError, match="unknown order"):
        sim.compile_scenario(tiny, tiny_hw, "random")


def test_greedy_on_tiny_and_trap(tiny, tiny_hw, trap):
    st, state = _state(tiny, tiny_hw, "boundedness")
    assert sim.run_greedy(st, state, True) == pytest.approx(0.85)
    assert state.offsets.tolist() == [200, 0, -1]
    w, hw = trap
    st, state = _state(w, hw, "boundedness")
    assert sim.run_greedy(st, state, True) == pytest.approx(0.86)


@settings(max_examples=120, deadline=None)
@given(scenarios(), hs.randoms(use_true_random=False))
def test_candidates_and_costs_match_reference(case, rnd):
    """Random legal play on the simulator: at every step the candidates equal a brute-force scan
    of all placed buffers, and the incremental time equals the slow reference."""
    workload, hardware = case
    st, state = _state(workload, hardware, rnd.choice(sim.ORDERS))
    cap, align = hardware.fast_capacity, hardware.alignment
    for i in range(workload.num_buffers):
        b = int(st.order[i])
        state.counters[sim.STEP] = i + 1
        got, _, _, _ = _candidates(st, state, b, 4)
        want = reference.candidates(workload, state.offsets, cap, align, b, 4)
        assert got == want
        if got and rnd.random() < 0.8:
            sim.place(st, state, b, rnd.choice(got))
        expected = reference.program_time(workload, state.offsets, hardware)
        assert state.totals[sim.TIME] == pytest.approx(expected, rel=1e-9)
    assert reference.overlaps(workload, state.offsets) == []
    ev = evaluate(workload, state.offsets, hardware)
    assert ev.time == pytest.approx(state.totals[sim.TIME], rel=1e-9)


@settings(max_examples=120, deadline=None)
@given(scenarios(max_buffers=8), hs.randoms(use_true_random=False))
def test_first_conflict_matches_reference(case, rnd):
    workload, hardware = case
    offsets = np.array([rnd.choice([-1, rnd.randrange(0, hardware.fast_capacity - s + 1)])
                        if s <= hardware.fast_capacity else -1  # a buffer larger than fast memory stays slow
                        for s in workload.size.tolist()], dtype=np.int64)
    st, state = _state(workload, hardware)
    pairs = reference.overlaps(workload, offsets)
    got = sim.first_conflict(st, state, offsets)
    if pairs:
        want = min(pairs, key=lambda p: (p[1], p[0]))
        assert tuple(got) == want
    else:
        assert tuple(got) == (-1, -1)


def test_overlapping_placed_finds_only_buffers_live_in_the_window():
    # 200 short buffers, two ops each, in 200 buckets of width 2; a query over ops 3-4 must
    # return exactly the two buffers live there.
    n = 200
    w = Workload.from_buffers("far", flops=[0] * (2 * n), size=[1] * n, start=list(range(0, 2 * n, 2)),
                              end=list(range(1, 2 * n, 2)))
    st, state = _state(w, Hardware(fast_capacity=4))
    for b in range(n):
        sim.place(st, state, b, 0)
    assert st.iparams[sim.BUCKET_W] == 2
    out = np.empty(n, np.int64)
    m = sim.overlapping_placed(st, state, 3, 4, out)
    assert sorted(out[:m].tolist()) == [1, 2]


def test_first_fit_takes_the_lowest_free_offset():
    # capacity 10, buffers 0 and 1 at [0,3) and [6,8): buffer 2 (size 2) fits in the gaps [3,6)
    # and [8,10). First fit takes 3; best fit takes the exact-size gap at 8.
    w = Workload.from_buffers("ff", flops=[0, 0], size=[3, 2, 2], start=[0, 0, 0], end=[1, 1, 1])
    st, state = _state(w, Hardware(fast_capacity=10))
    sim.place(st, state, 0, 0)
    sim.place(st, state, 1, 6)
    n = w.num_buffers
    ids, lo, hi = np.empty(n, np.int64), np.empty(n + 1, np.int64), np.empty(n + 1, np.int64)
    assert sim.first_fit_offset(st, state, 2, ids, lo, hi) == 3
    assert _candidates(st, state, 2, 1)[0] == [8]   # best fit: the exact-size gap
