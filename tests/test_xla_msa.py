"""``xla-msa``: MSA's picker, copy resource, offsets and order worked by hand; MSA's own
``EvictAndPrefetch`` test module reproduced; the in-env policy's env play equals ``evaluate``."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from mallocgym.agents import make_agent
from mallocgym.env.v1 import MallocGameV1Env
from mallocgym.pricing.v1 import evaluate_v1
from mallocgym.hardware import Hardware
from mallocgym.scenarios import Scenario, suite
from mallocgym.sim import buffer_order, copy_budget, msa, v1
from mallocgym.workloads import Workload
from mallocgym.workloads.io import load_json

from conftest import mlp_scenario

MSA_DATA = Path(__file__).parent / "data" / "msa"


# ------------------------------------------------------------------------------ the picker
def _one_use_program(n_ops: int, *, size: int = 2, capacity: int = 2):
    """Ops of 1 s each (compute-bound, peak 1 flop/s) but the last, which reads input X (``size``
    bytes at 1 B/s: 2 s all slow, 1 s with X fast at 2 B/s): interval(p, u) = u - 1 - p seconds."""
    flops = [1.0] * (n_ops - 1) + [0.0]
    w = Workload.from_buffers("picker", flops, [size], [0], [n_ops - 1], [[(n_ops - 1, size, False)]])
    hw = Hardware(peak_flops=1.0, slow_bw=1.0, fast_bw=2.0, fast_capacity=capacity)
    return w, hw


def _starts(w, hw, picker="cost", ratios=(0.8, 1.5, 3.0), lo=None, **kw):
    st = v1.compile_v1(w, hw, ratios=ratios)
    ms = msa.msa_static(st, picker, **kw)
    out = np.empty(w.num_ops + 2, np.int64)
    s = 0
    n = msa.picker_starts(st, ms, s, st.seg_prev[s] if lo is None else lo, out)
    return out[:n].tolist()


def test_cost_picker_start_times_and_search_order_by_hand():
    # u = 11, copy = 2 s, the use saves 1 s. latest: 10 - p + 1 >= 0.8 * 2 -> p <= 9; earliest:
    # 10 - p <= 3 * capacity / slow_bw = 6 -> p >= 4; preferred: 10 - p nearest 1.5 * 2 = 3 -> 7.
    # Then alternately later / earlier: 8, 6, 9, 5, and 4 once the later side is done.
    w, hw = _one_use_program(12)
    assert _starts(w, hw) == [7, 8, 6, 9, 5, 4]


def test_cost_picker_samples_the_earlier_side_once_the_later_is_exhausted():
    # 300 ops of 1 s, u = 299, copy 2 s, max no-copy time 10 * 30 = 300 s: earliest = -1 (the
    # input's v1 start), interval(-1, 299) = 299 s. latest 297 (1 + 1 >= 1.6), preferred 295
    # (3 s). Order: 295, 296, 294, 297, 293; then the earlier side only in steps of at least
    # 299 / 100 = 2.99 s, i.e. every 3rd op: 290, 287, ... down to -1.
    w, hw = _one_use_program(300, capacity=30)
    got = _starts(w, hw, ratios=(0.8, 1.5, 10.0))
    assert got[:5] == [295, 296, 294, 297, 293]
    assert all(a - b == 3 for a, b in zip(got[4:], got[5:]))
    assert got[-1] == -1 and len(got) == 4 + 99


def test_instruction_count_picker_by_hand():
    # InstructionCountPrefetchIntervalPicker(min=2, max=10): from max(lo, u - 10) while u - p > 2
    w, hw = _one_use_program(20)
    assert _starts(w, hw, "count", count_min=2, count_max=10) == list(range(9, 17))
    assert _starts(w, hw, "count", lo=12, count_min=2, count_max=10) == [12, 13, 14, 15, 16]
    assert _starts(w, hw, "count", lo=17, count_min=2, count_max=10) == []


def test_nocopy_bound_of_both_pickers():
    w, hw = _one_use_program(12)
    st = v1.compile_v1(w, hw, ratios=(0.8, 1.5, 3.0))
    cost = msa.msa_static(st)  # max no-copy time 3 * 2 / 1 = 6 s, strict
    assert msa.nocopy_ok(st, cost, 0, 6) and not msa.nocopy_ok(st, cost, 0, 7)  # 5 s, then 6 s
    count = msa.msa_static(st, "count", count_min=2, count_max=10)
    assert msa.nocopy_ok(st, count, 0, 10) and not msa.nocopy_ok(st, count, 0, 11)


# ------------------------------------------------------------------------------ copy resource
class _Resource:
    """A copy budget over ops of the given all-slow times, with the v1 state's field names."""

    def __init__(self, elapsed=(1.0,) * 10, slots=4):
        elapsed = np.asarray(elapsed, float)
        self.cum = np.concatenate([[0.0], np.cumsum(elapsed)])
        self.bud = copy_budget.new_budget(slots, elapsed.size)

    def fits(self, start, end, amount):
        return copy_budget.fits(self.cum, 1e-12, self.bud, start, end, amount)

    def add(self, start, end, amount):
        copy_budget.add(self.cum, 1e-12, self.bud, start, end, amount)


class _ReferenceResource:
    """``AsynchronousCopyResource`` as MSA writes it (recursive, op by op), in plain Python."""

    def __init__(self, elapsed):
        self.initial = list(elapsed)
        self.delay = [0.0] * (len(elapsed) + 1)
        self.copies = []  # [start, end, amount] in start order

    def consume(self, start, end, resource, update, current=None):
        if resource == 0:
            return True
        if current is None:
            resource += self.delay[start + 1]
            later = [i for i, c in enumerate(self.copies) if c[0] > start]
            nxt = later[0] if later else len(self.copies)
        else:
            nxt = current + 1
        pushed = None
        t = start + 1
        while t < end and resource > 1e-12:
            used = min(resource, self.initial[t])
            if nxt < len(self.copies) and self.copies[nxt][0] == t - 1:
                pushed = resource
            if update and pushed is None:
                self.delay[t] = resource
            resource -= used
            t += 1
        if resource > 1e-12:
            return False
        if pushed is not None:
            c = self.copies[nxt]
            return self.consume(c[0], c[1], pushed + c[2], update, nxt)
        return True

    def add(self, start, end, amount):
        self.consume(start, end, amount, True)
        at = len([c for c in self.copies if c[0] <= start])
        self.copies.insert(at, [start, end, amount])


def test_copy_resource_fits_pushes_back_and_refuses_by_hand():
    res = _Resource()
    # a 1 s copy after op 2, done before op 6: ops 3, 4, 5 (1 s each) inside
    assert res.fits(2, 6, 1.0)
    res.add(2, 6, 1.0)
    # a 3 s copy after op 0 before op 6 fits by itself (ops 1..5 = 5 s) and is still copying
    # (1 s left) when the first is issued: that one now needs 2 s of ops 3..5: it fits
    assert res.fits(0, 6, 3.0)
    # 4.5 s: 2.5 s left at op 3, pushing the first copy to 3.5 s > 3 s: refused
    assert not res.fits(0, 6, 4.5)
    # a copy with no op strictly inside its window never fits
    assert not res.fits(4, 5, 0.1)
    delay = res.bud.rs_delay.copy()
    res.fits(0, 6, 3.0)
    assert np.array_equal(res.bud.rs_delay, delay)  # a check consumes nothing
    res.add(0, 6, 3.0)
    assert res.bud.rs_count[0] == 2 and res.bud.rs_start[:2].tolist() == [2, 0]  # in the order added
    assert res.bud.rs_start[copy_budget.in_order(res.bud)].tolist() == [0, 2]  # linked in start order
    # left over at the start of ops 1, 2 (the new copy) and 3, 4 (the pushed one: 1 + 1 s)
    assert res.bud.rs_delay[1:5].tolist() == [3.0, 2.0, 2.0, 1.0]
    # a later copy issued after op 3 waits for the 1 s still queued at op 4
    assert res.fits(3, 6, 0.5) and not res.fits(3, 6, 1.5)


@settings(max_examples=150, deadline=None)
@given(st_.lists(st_.integers(1, 4), min_size=8, max_size=8),
       st_.lists(st_.tuples(st_.integers(-1, 6), st_.integers(1, 5), st_.integers(1, 12)), min_size=1, max_size=6))
def test_copy_resource_matches_msa_op_by_op(elapsed, copies):
    """fits (prefix sums) and add's leftovers equal MSA's recursive op-by-op
    ConsumeResource on random copies (op times and amounts in quarters: exact in binary)."""
    elapsed = [e / 4 for e in elapsed]
    res = _Resource(elapsed, slots=len(copies))
    ref = _ReferenceResource(elapsed)
    for start, length, amount in copies:
        end = min(start + 1 + length, len(elapsed))
        amount /= 4
        want = ref.consume(start, end, amount, False)
        assert res.fits(start, end, amount) == want
        if want:
            ref.add(start, end, amount)
            res.add(start, end, amount)
            assert res.bud.rs_delay.tolist() == ref.delay
            order = copy_budget.in_order(res.bud)
            assert [(res.bud.rs_start[i], res.bud.rs_end[i], res.bud.rs_amount[i]) for i in order] == [
                tuple(c) for c in ref.copies]


# ------------------------------------------------------------------------------ offsets
def _index(st, state):
    ix = np.empty(st.seg_use.shape[0] + 1, np.int64)  # scratch: the state keeps the chunk index
    return ix


def _fit_program():
    """Capacity 4 B, alignment 1, 10 ops. Placed first: A (1 B, ops 0-9) at 1, B (1 B, 5-9) at 0;
    C (2 B, 0-2) at 2. X (1 B, defined at op 0, read at 2 and 6) is placed last."""
    acc = lambda lo, hi, n: [(lo, n, True), (hi, n, False)]  # noqa: E731
    w = Workload.from_buffers(
        "fit", [1.0] * 10, [1, 1, 2, 1], [0, 5, 0, 0], [9, 9, 2, 6],
        [acc(0, 9, 1), acc(5, 9, 1), acc(0, 2, 2), [(0, 1, True), (2, 1, False), (6, 1, False)]])
    hw = Hardware(peak_flops=1.0, slow_bw=1.0, fast_bw=2.0, fast_capacity=4, alignment=1)
    st = v1.compile_v1(w, hw, "start")
    state = v1.new_state(st)
    for b, off in ((0, 1), (1, 0), (2, 2)):
        v1.apply(st, state, int(st.seg_ptr[b]), v1.FAST, off, -1)
    return st, state


def test_best_fit_smallest_gap_then_lowest_offset_top_gap_last():
    st, state = _fit_program()
    # over ops 0-2: A at 1 and C at [2, 4) leave [0, 1) (1 B) below and nothing above: offset 0
    assert msa.best_fit(st, state, _index(st, state), 3, 0, 2) == 0
    # over ops 0-6 B covers [0, 1) from op 5: bytes 0-3 are all taken at some op: nothing fits
    assert msa.best_fit(st, state, _index(st, state), 3, 0, 6) == -1
    # over ops 3-6 C is gone: [2, 4) above A (the top gap, ranked last) is the only fit
    assert msa.best_fit(st, state, _index(st, state), 3, 3, 6) == 2


def test_look_ahead_takes_the_offset_that_lasts_to_a_later_use():
    st, state = _fit_program()
    s = int(st.seg_ptr[3])  # X's first segment: op 0 -> 2; the second: 2 -> 6
    cost = msa.msa_static(st)  # 40 s no-copy bound: use 6 is reachable without a copy
    assert msa.look_ahead_fit(st, state, cost, _index(st, state), s, 0) == 0  # nothing lasts to op 6: fit to op 2
    # without C: the best fit up to op 2 is still the tight [0, 1), but [2, 4) lasts through op 6
    state = v1.new_state(st)
    for b, off in ((0, 1), (1, 0)):
        v1.apply(st, state, int(st.seg_ptr[b]), v1.FAST, off, -1)
    assert msa.best_fit(st, state, _index(st, state), 3, 0, 2) == 0
    assert msa.look_ahead_fit(st, state, cost, _index(st, state), s, 0) == 2
    short = msa.msa_static(st, "count", count_min=0, count_max=3)  # 2 -> 6 is 4 ops: no look-ahead
    assert msa.look_ahead_fit(st, state, short, _index(st, state), s, 0) == 0


# ------------------------------------------------------------------------------ order
def test_spatial_order_by_hand():
    size = np.array([4, 8, 8, 4])
    start = np.array([0, 0, 2, 1])
    end = np.array([9, 3, 9, 9])
    # size descending, then live range descending, then id
    assert buffer_order(np.zeros(4), size, start, end, "spatial").tolist() == [2, 1, 0, 3]


# ------------------------------------------------------------------------------ MSA's own test
def _evict_and_prefetch():
    w = load_json(MSA_DATA / "evict_and_prefetch.json")
    expected = json.loads((MSA_DATA / "expected_evict_and_prefetch.json").read_text())
    o = expected["options"]["hardware_for_mallocgym"]
    hw = Hardware(peak_flops=o["peak_flops"], peak_transcendentals=o["peak_transcendentals"], slow_bw=o["slow_bw"],
                  fast_bw=o["fast_bw"], fast_capacity=o["fast_capacity"], alignment=o["alignment"])
    return Scenario("msa-evict-and-prefetch", w, hw), expected


def test_evict_and_prefetch_reproduces_msa():
    scenario, expected = _evict_and_prefetch()
    w = scenario.workload
    st = v1.compile_v1(w, scenario.hardware, "spatial")
    order = [w.buffer_names[b] for b in dict.fromkeys(st.seg_buf[st.order].tolist())]
    assert order == expected["options"]["msa_processing_order"]
    agent = make_agent("xla-msa:picker=count,min=2,max=10,order=spatial")
    mapping = agent.solve_v1(scenario).mapping
    want = expected["mallocgym_v1"]["v1_mapping_msa"]
    key = lambda a: (a["buffer"], a["segment"], a["kind"], a.get("offset"), a.get("prefetch_after"))  # noqa: E731
    assert sorted(key(a) for a in mapping["allocations"] if a["kind"] != "slow") == \
        sorted(key(a) for a in want["allocations"])
    assert mapping["evictions"] == want["evictions"]
    # the asserted core: tanh produced fast, evicted right after op 2, prefetched back for the
    # root after op 8; the root produced slow; o kept without a copy
    by = {(w.buffer_names[a["buffer"]], a["segment"]): a for a in mapping["allocations"]}
    assert by[("tanh", 0)]["kind"] == "fast" and by[("tanh", 1)]["kind"] == "prefetch"
    assert by[("tanh", 1)]["prefetch_after"] == 8 and by.get(("add", 0), {"kind": "slow"})["kind"] == "slow"
    assert by[("o", 0)]["kind"] == "fast"
    assert evaluate_v1(w, mapping, scenario.hardware).evictions == 1


def test_evict_and_prefetch_is_deterministic():
    scenario, _ = _evict_and_prefetch()
    agent = make_agent("xla-msa:picker=count,min=2,max=10,order=spatial")
    first = agent.solve_v1(scenario).mapping
    assert all(agent.solve_v1(scenario).mapping == first for _ in range(3))  # MSA's Determinism test


# ------------------------------------------------------------------------------ in the env
def _play_env(scenario):
    env = MallocGameV1Env(scenario, invalid_action="raise")
    env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        _, reward, done, _, _ = env.step(env.msa_action())
        total += reward
    return env, total


def _bundled(name):
    """Every bundled scenario of ``name``; the large suite's (5,400-6,200 buffers, tens of seconds
    each on 2 cores) are marked slow: ``pytest -m slow`` runs them."""
    marks = [pytest.mark.slow] if name == "large" else []
    return [pytest.param(s.name, marks=marks) for s in suite(name)]


@pytest.mark.parametrize("name", _bundled("default") + _bundled("minimalloc") + _bundled("synthetic") + _bundled("large"))
def test_in_env_play_leaves_exactly_the_plan_on_every_bundled_scenario(name):
    """Issue 29: every decision of xla-msa's plan is one legal env action at the state where it
    is made, so playing ``msa_action()`` (masked actions raise) leaves the plan's mapping and
    time bit for bit; the step rewards sum to its return."""
    from mallocgym.scenarios import get

    scenario = get(name)
    env, total = _play_env(scenario)
    mapping = env.mapping()
    plan = make_agent("xla-msa").solve_v1(scenario).mapping
    assert mapping == plan
    ev = evaluate_v1(scenario.workload, mapping, scenario.hardware)
    assert float(env.sim_state.totals[v1.TIME]) == ev.time
    assert total == pytest.approx(1.0 - ev.time / ev.time_all_slow, abs=1e-9)
    # the agent's in-env mode (one kernel, no env) leaves the same mapping
    assert make_agent("xla-msa:in_env=1").solve_v1(scenario).mapping == plan


def test_msa_action_plays_msas_choice_first_in_the_table():
    """MSA's own move is action 1 (produce or keep) or ``1 + K`` (prefetch: first start, first
    offset), else 0; a produced value's first FAST offset and the first prefetch are MSA's
    alternatives even where it chooses otherwise."""
    scenario = mlp_scenario(1, Fraction(1, 4))
    env = MallocGameV1Env(scenario)
    env.reset(seed=0)
    st, k = env.static, env.k
    ms = msa.msa_static(st)
    ids, starts, out = np.empty(st.seg_use.shape[0] + 1, np.int64), np.empty(st.compute_time.shape[0] + 2, np.int64), \
        np.empty(6, np.int64)
    seen = set()
    while env.current_segment >= 0:
        s = env.current_segment
        msa.decide(st, env.sim_state, ms, ids, s, starts, out)
        a = env.msa_action()
        kind, off, pstart = env.action_meaning(a)
        assert kind == {v1.SLOW: "slow", v1.FAST: "fast", v1.PREFETCH_SEG: "prefetch"}[int(out[0])]
        assert a == {"slow": 0, "fast": 1, "prefetch": 1 + k}[kind]
        if kind != "slow":
            assert off == out[1] and (kind == "fast" or pstart == out[2])
        if out[3] >= 0:
            assert env.action_meaning(1) == ("fast", int(out[3]), -1)
        if out[4] != v1.NO_START:
            assert env.action_meaning(1 + k) == ("prefetch", int(out[5]), int(out[4]))
        seen.add(kind)
        env.step(a)
    assert seen == {"slow", "fast", "prefetch"}  # the case exercises every kind


@pytest.mark.parametrize("name", [s.name for s in suite("default", "test")])
def test_no_search_agent_ends_below_the_plan_on_the_test_split(name):
    """rollout, beam and MCTS start from and complete with MSA's exact in-env play, and keep the
    best complete game: at any budget (here 1 s, which ends most searches part-way), none ends
    below xla-msa's plan."""
    from mallocgym.scenarios import get

    scenario = get(name)
    plan = evaluate_v1(scenario.workload, make_agent("xla-msa").solve_v1(scenario).mapping, scenario.hardware)
    for spec in ("rollout:time_limit=1", "beam:width=2,time_limit=1", "mcts:time_limit=1"):
        got = evaluate_v1(scenario.workload, make_agent(spec).solve_v1(scenario).mapping, scenario.hardware)
        assert got.time <= plan.time, (spec, got.speedup, plan.speedup)


def test_plan_mapping_is_valid_and_rollout_and_mcts_complete_with_it():
    scenario = mlp_scenario(1, Fraction(1, 4))
    plan = make_agent("xla-msa").solve_v1(scenario)
    ev = evaluate_v1(scenario.workload, plan.mapping, scenario.hardware)
    assert ev.speedup > 1.0 and plan.info["prefetches"] == ev.prefetches
    base = make_agent("xla-msa:in_env=1").solve_v1(scenario)
    base_speedup = evaluate_v1(scenario.workload, base.mapping, scenario.hardware).speedup
    for spec in ("rollout:max_completions=40", "mcts:simulations=3"):
        got = make_agent(spec).solve_v1(scenario)
        assert evaluate_v1(scenario.workload, got.mapping, scenario.hardware).speedup >= base_speedup - 1e-12, spec


@pytest.mark.parametrize("spec, text", [
    ("xla-msa:picker=best", "picker must be one of"),
    ("xla-msa:min=5,max=3,picker=count", "0 <= min <= max"),
    ("xla-msa:min=3", "settings of picker=count"),
    ("xla-msa:picker=count,max_ratio=20", "settings of picker=cost"),
    ("xla-msa:min_ratio=2,preferred_ratio=1", "min_ratio <= preferred_ratio"),
    ("xla-msa:in_env=1,order=spatial", "order= applies to the plan only"),
    ("xla-msa:order=random", "order must be one of"),
    ("mcts:completion=best", "completion must be one of"),
])
def test_bad_settings_are_one_clear_error(spec, text):
    with pytest.raises(ValueError, match=text):
        make_agent(spec)


def test_v0_refuses_xla_msa_and_v1_completion_settings():
    scenario = mlp_scenario(0)
    with pytest.raises(ValueError, match="MallocGame-v1 only"):
        make_agent("xla-msa").solve(scenario)
    with pytest.raises(ValueError, match="MallocGame-v1 setting"):
        make_agent("rollout:completion=greedy").solve(scenario)
