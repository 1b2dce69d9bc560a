"""MallocGame-v1 against the plain-Python reference of its rules (``tests/reference_v1.py``).

Random small programs (``strategies.scenarios``, with some buffers turned into program inputs or
defined after a first read), random legal play over the env's mask; after every step the env and
the reference must agree on the position, the legal actions and what they mean, the program
time, the copies and the evictions. At the end the mapping must price the same under
``evaluate_v1`` and illegal edits of it must be rejected.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from mallocgym import Hardware, Workload
from mallocgym.env.v1 import MallocGameV1Env
from mallocgym.pricing.v1 import evaluate_v1
from mallocgym.scenarios import Scenario
from mallocgym.sim import msa, v1

from reference_v1 import FAST, PREFETCH, SLOW, ReferenceV1
from strategies import scenarios

REL = 1e-9
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@hs.composite
def cases(draw, max_ops: int = 14, max_buffers: int = 12):
    """``strategies.scenarios()`` with the buffers' accesses varied, so that every rule is met:
    a buffer may become a program input (its writes become reads), be defined after its start
    (its first write becomes a read), have its last read moved earlier (an output whose last
    use is before the last op: its eviction has room to move), or get more reads (several use
    points, so fast runs and later segments)."""
    workload, hardware = draw(scenarios(max_ops, max_buffers))
    # a slower slow memory now and then: copies then take as long as several ops, so the ratio
    # tests of the prefetch picker and the eviction fall in the middle of the windows
    hardware = dataclasses.replace(hardware, slow_bw=draw(hs.sampled_from([hardware.slow_bw, 1e5, 2e4])))
    modes = draw(hs.lists(hs.sampled_from(["keep", "keep", "input", "late", "short", "more"]),
                          min_size=workload.num_buffers, max_size=workload.num_buffers))
    accesses = []
    for b in range(workload.num_buffers):
        acc = workload.accesses(b)
        s, e, size = int(workload.start[b]), int(workload.end[b]), int(workload.size[b])
        if modes[b] == "input":
            acc = [(op, n, False) for op, n, _ in acc]
        elif modes[b] == "late":
            first = min(i for i, a in enumerate(acc) if a[2])
            acc = [(op, n, w and i != first) for i, (op, n, w) in enumerate(acc)]
        elif modes[b] == "short":  # the read at the end (access 1) moves earlier
            acc[1] = (draw(hs.integers(s, e)), acc[1][1], False)
        elif modes[b] == "more":
            acc += [(op, draw(hs.integers(0, size)), False)
                    for op in draw(hs.lists(hs.integers(s, e), min_size=1, max_size=4))]
        accesses.append(acc)
    workload = Workload.from_buffers("h", workload.flops, workload.size, workload.start, workload.end, accesses)
    return workload, hardware


@hs.composite
def sparse_cases(draw):
    """Few buffers with long live ranges and sparse uses on light ops: long gaps between uses,
    so evictions can sit strictly between the last fast use and the op that needs the slow copy
    (and be pulled earlier by another buffer's chunk)."""
    n_ops = draw(hs.integers(2, 16))
    n = draw(hs.integers(1, 6))
    alignment = draw(hs.sampled_from([1, 2, 4]))
    capacity = draw(hs.integers(2, 12)) * alignment
    flops = [draw(hs.sampled_from([0.0, 0.0, 0.0, 1e3, 1e4])) for _ in range(n_ops)]
    size, start, end, accesses = [], [], [], []
    for _ in range(n):
        s = draw(hs.integers(0, n_ops - 1))
        e = draw(hs.integers(s, n_ops - 1))
        sz = draw(hs.integers(1, capacity + alignment))
        acc = [] if draw(hs.integers(0, 3)) == 0 else [(s, sz, True)]  # 1 in 4: a program input
        acc += [(op, draw(hs.integers(1, sz)), draw(hs.booleans()) and bool(acc))
                for op in draw(hs.lists(hs.integers(s, e), min_size=1, max_size=3))]
        size.append(sz)
        start.append(s)
        end.append(e)
        accesses.append(acc)
    workload = Workload.from_buffers("sparse", flops, size, start, end, accesses)
    hardware = Hardware(peak_flops=1e9, slow_bw=draw(hs.sampled_from([1e6, 1e5])), fast_bw=1e7,
                        fast_capacity=capacity, alignment=alignment, op_overhead=draw(hs.sampled_from([0.0, 1e-6])))
    return workload, hardware


def any_case():
    return hs.one_of(cases(), sparse_cases())


RATIOS = [(0.8, 1.5, 10.0), (0.8, 1.5, 10.0), (1.0, 6.0, 20.0), (0.5, 20.0, 50.0), (2.0, 50.0, 100.0)]


def kernel_msa(st):
    """The reference's MSA oracle: XLA's picks (``mallocgym.sim.msa.decide``) on a kernel state
    rebuilt from the reference's own decisions. MSA is a baseline, not a rule, so the reference
    takes its picks as given and checks each one legal by the rules alone."""
    ms = msa.msa_static(st)
    ids = np.empty(st.seg_use.shape[0] + 1, np.int64)
    starts = np.empty(st.compute_time.shape[0] + 2, np.int64)
    kinds = {SLOW: v1.SLOW, FAST: v1.FAST, PREFETCH: v1.PREFETCH_SEG}

    def oracle(ref, s):
        state = v1.new_state(st)
        for seg, kind, off, pstart, _ in ref.history:
            v1.apply(st, state, seg, kinds[kind], off, pstart)
            state.counters[v1.POS] += 1
        assert int(st.order[state.counters[v1.POS]]) == s
        out = np.empty(6, np.int64)
        msa.decide(st, state, ms, ids, s, starts, out)
        return int(out[3]), int(out[4]), int(out[5])

    return oracle


def make(case, k=16, j=4, order="boundedness", ratios=RATIOS[0]):
    workload, hardware = case
    env = MallocGameV1Env(Scenario("h", workload, hardware), n_candidates=k, n_starts=j, order=order, ratios=ratios)
    ref = ReferenceV1(workload, hardware, [int(s) for s in env.unwrapped.static.order], n_candidates=k, n_starts=j,
                      ratios=ratios, msa=kernel_msa(env.unwrapped.static))
    obs, info = env.reset(seed=0)
    return env, ref, obs, info


def close(a, b):
    return a == pytest.approx(b, rel=REL, abs=1e-15)


def describe(env, ref):
    """The decisions so far, for failure messages."""
    ties = f" ratio ties met on the way (the env's float rounding may decide them otherwise): {sorted(ref.ties)}" \
        if ref.ties else ""
    return f"history={ref.history} order={ref.order} segments={ref.segments}{ties}"


def compare(env, ref, obs, info):
    """The env's position and everything it shows equals the reference's."""
    u = env.unwrapped
    where = describe(env, ref)
    assert u.current_segment == ref.current, where
    assert info["forced_decisions"] == ref.forced, where
    assert info["agent_decisions"] == ref.chosen, where
    time, _, stall = ref.simulate()
    assert close(info["time"], time), (info["time"], time, where)
    assert close(info["stall_time"], math.fsum(stall)), (info["stall_time"], math.fsum(stall), where)
    assert info["copy_bytes"] == ref.copy_bytes(), where
    mapping = u.mapping()
    assert mapping["evictions"] == ref.evictions(), (mapping["evictions"], ref.evictions(), where)
    assert mapping["allocations"] == ref.allocations(), where
    if ref.done:
        assert u.current_segment == -1, where
        return
    mask = obs["action_mask"]
    s = ref.current
    legal = {int(a) for a in np.flatnonzero(mask)}
    for a in legal:
        kind, off, pstart = u.action_meaning(a)
        assert ref.is_legal(s, kind, off, pstart), (a, kind, off, pstart, ref.why_illegal(s, kind, off, pstart), where)
    expected = ref.actions()
    got = {a: u.action_meaning(a) for a in legal}
    assert got == expected, (got, expected, where)
    assert len(expected) > 1, "a forced position was left to the agent"


def random_play(env, ref, obs, info, rng, style="uniform"):
    """Play over the mask to the end; return (actions, rewards, last info). ``style``:
    ``"uniform"`` over the legal actions; ``"copies"`` avoids SLOW 70% of the time; ``"fast"``
    takes a FAST action (produce or keep) when there is one 80% of the time, else uniform (long
    fast runs, so evictions); ``"runs"`` keeps each buffer fast (produce, then keep) for a random
    number of segments, then takes SLOW or PREFETCH (evictions in every variety)."""
    run_length = {}
    actions, rewards = [], []
    compare(env, ref, obs, info)
    while not ref.done:
        legal = [int(a) for a in np.flatnonzero(obs["action_mask"])]
        if style == "copies" and len(legal) > 1 and rng.random() < 0.7:
            legal = legal[1:]
        elif style == "fast" and rng.random() < 0.8:
            fast = [a for a in legal if 1 <= a <= ref.K]
            legal = fast or legal
        elif style == "runs":
            b, k, _, _ = ref.segments[ref.current]
            n = run_length.setdefault(b, rng.randint(1, 3))
            fast = [a for a in legal if 1 <= a <= ref.K]
            legal = (fast or legal) if k < n else ([a for a in legal if not 1 <= a <= ref.K] if k == n else legal)
        a = rng.choice(legal)
        obs, reward, terminated, truncated, info = env.step(a)
        ref.decide_action(a)
        actions.append(a)
        rewards.append(reward)
        assert not truncated
        assert terminated == ref.done, describe(env, ref)
        compare(env, ref, obs, info)
    return actions, rewards, info


def env_play(env, obs, rng, style):
    """The env alone, played to the end over its mask (``"copies"``: avoid SLOW 70% of the
    time; ``"fast"``/``"runs"``: FAST when there is one 80% of the time); returns the actions."""
    actions = []
    done = env.unwrapped.current_segment < 0
    while not done:
        legal = [int(a) for a in np.flatnonzero(obs["action_mask"])]
        if style == "copies" and len(legal) > 1 and rng.random() < 0.7:
            legal = legal[1:]
        elif style in ("fast", "runs") and rng.random() < 0.8:
            legal = [a for a in legal if 1 <= a <= env.unwrapped.k] or legal
        a = rng.choice(legal)
        obs, _, done, _, _ = env.step(a)
        actions.append(a)
    return actions


# ------------------------------------------------------------------------------ static tables
@settings(max_examples=150, **SETTINGS)
@given(any_case())
def test_segments_definitions_and_all_slow_time_match(case):
    workload, hardware = case
    env, ref, obs, info = make(case)
    st = env.unwrapped.static
    assert [int(x) for x in st.def_op] == ref.def_op
    assert [int(x) for x in st.is_output] == [int(o) for o in ref.is_output]
    assert [int(x) for x in st.seg_use] == [seg[3] for seg in ref.segments]
    assert [int(x) for x in st.seg_prev] == [seg[2] for seg in ref.segments]
    assert [int(x) for x in st.seg_buf] == [seg[0] for seg in ref.segments]
    assert close(info["time_all_slow"], ref.time_all_slow)
    # nothing decided by the agent yet: only forced SLOW moves, priced as all slow
    assert close(info["time"], ref.time())


# ------------------------------------------------------------------------------ random play
@settings(max_examples=200, **SETTINGS)
@given(any_case(), hs.integers(0, 2**31 - 1), hs.sampled_from([1, 2, 16]), hs.sampled_from([1, 2, 4]),
       hs.sampled_from(["boundedness", "start", "size"]), hs.sampled_from(["uniform", "copies", "fast", "runs"]),
       hs.sampled_from(RATIOS))
def test_random_play_matches_the_reference_step_by_step(case, seed, k, j, order, style, ratios):
    workload, hardware = case
    env, ref, obs, info = make(case, k, j, order, ratios)
    rng = random.Random(seed)
    _, rewards, info = random_play(env, ref, obs, info, rng, style=style)
    assert "mapping" in info or ref.S == 0 or ref.forced == ref.S
    final = ref.time()
    assert close(info["time"], final)
    assert math.fsum(rewards) == pytest.approx(1 - final / ref.time_all_slow, rel=1e-9, abs=1e-12)
    mapping = env.unwrapped.mapping()
    assert mapping["evictions"] == ref.evictions()
    if "mapping" in info:
        assert info["mapping"] == mapping
    ev = evaluate_v1(workload, mapping, hardware)
    assert close(ev.time, info["time"])
    assert close(ev.stall_time, info["stall_time"])
    assert ev.copy_bytes == info["copy_bytes"]


def _raises_naming(workload, hardware, mapping, b):
    label = workload.buffer_label(b)
    with pytest.raises(ValueError) as exc:
        evaluate_v1(workload, mapping, hardware)
    assert label in str(exc.value), (label, str(exc.value))


@settings(max_examples=150, **SETTINGS)
@given(any_case(), hs.integers(0, 2**31 - 1), hs.sampled_from(["copies", "fast", "runs"]))
def test_illegal_edits_of_a_played_mapping_are_rejected(case, seed, style):
    workload, hardware = case
    env, _, obs, info = make(case)
    env_play(env, obs, random.Random(seed), style)
    mapping = env.unwrapped.mapping()
    # the reference replays the env's decisions (forced ones included), checking each
    ref = ReferenceV1(workload, hardware, [int(s) for s in env.unwrapped.static.order], play_forced=False)
    ref.replay(mapping["allocations"])
    assert ref.done
    assert ref.evictions() == mapping["evictions"], (ref.evictions(), mapping["evictions"], describe(env, ref))
    assert close(evaluate_v1(workload, mapping, hardware).time, ref.time())
    entries = {(a["buffer"], a["segment"]): i for i, a in enumerate(mapping["allocations"])}
    sizes = ref.size

    # (1) overlap: move one chunk (its opening segment and the keeps after it) onto another
    #     buffer's chunk that is live at the same time
    pairs = ref.chunk_segments()
    for (c1, group), (c2, _) in ((x, y) for x in pairs for y in pairs):
        b1, b2 = c1[3], c2[3]
        if b1 == b2 or not (c1[0] <= c2[1] and c2[0] <= c1[1]) or c1[2] == c2[2]:
            continue
        if c2[2] + sizes[b1] > ref.capacity:
            continue
        bad = copy.deepcopy(mapping)
        for s in group:
            bad["allocations"][entries[(b1, ref.segments[s][1])]]["offset"] = c2[2]
        _raises_naming(workload, hardware, bad, b1)
        break

    # (2) a prefetch issued before its window opens
    for s in range(ref.S):
        if ref.kind(s) == PREFETCH:
            b, kk, _, _ = ref.segments[s]
            lo, _ = ref.prefetch_window(s)
            bad = copy.deepcopy(mapping)
            bad["allocations"][entries[(b, kk)]]["prefetch_after"] = lo - 1
            _raises_naming(workload, hardware, bad, b)
            break

    # (3) a program input produced in fast memory
    for b in range(ref.N):
        if ref.def_op[b] < 0 and ref.seg_ids[b] and sizes[b] <= ref.capacity:
            bad = copy.deepcopy(mapping)
            entry = {"buffer": b, "segment": 0, "kind": FAST, "offset": 0}
            if (b, 0) in entries:
                bad["allocations"][entries[(b, 0)]] = entry
            else:
                bad["allocations"].append(entry)
            _raises_naming(workload, hardware, bad, b)
            break


@settings(max_examples=100, **SETTINGS)
@given(any_case(), hs.integers(0, 2**31 - 1))
def test_evaluate_v1_prices_any_legal_play_like_the_reference(case, seed):
    """Decisions the env would not offer (any legal offset, any issue op in the window) still
    make a mapping that ``evaluate_v1`` accepts and prices as the reference does."""
    workload, hardware = case
    order = [int(s) for s in make(case)[0].unwrapped.static.order]
    ref = ReferenceV1(workload, hardware, order, play_forced=False)
    rng = random.Random(seed)
    while not ref.done:
        options = ref.all_legal()
        ref.decide(*(options[0] if len(options) == 1 or rng.random() < 0.3 else rng.choice(options[1:])))
    mapping = {"format": "mallocgym-v1-mapping", "version": 1, "allocations": ref.allocations(),
               "evictions": ref.evictions()}
    ev = evaluate_v1(workload, mapping, hardware)
    time, _, stall = ref.simulate()
    assert close(ev.time, time)
    assert close(ev.stall_time, math.fsum(stall))
    assert ev.copy_bytes == ref.copy_bytes()


# ------------------------------------------------------------------------------ search support
@settings(max_examples=100, **SETTINGS)
@given(any_case(), hs.integers(0, 2**31 - 1), hs.integers(0, 50))
def test_clone_restore_replays_identically(case, seed, cut):
    env, _, obs, info = make(case)
    u = env.unwrapped
    actions = env_play(env, obs, random.Random(seed), "uniform")
    # replay the first `cut` actions on a fresh env, snapshot, play the rest twice
    cut = min(cut, len(actions))
    obs, info = env.reset(seed=0)
    for a in actions[:cut]:
        obs, *_ = env.step(a)
    snap = u.clone_state()
    obs0 = u.observation()
    first = [env.step(a) for a in actions[cut:]]
    env.restore_state(snap)
    assert all(np.array_equal(u.observation()[key], obs0[key]) for key in obs0)
    second = [env.step(a) for a in actions[cut:]]
    for (o1, r1, t1, _, i1), (o2, r2, t2, _, i2) in zip(first, second):
        assert r1 == r2 and t1 == t2
        assert all(np.array_equal(o1[key], o2[key]) for key in o1)
        assert i1["time"] == i2["time"] and i1.get("mapping") == i2.get("mapping")
    # the snapshot stays reusable
    env.restore_state(snap)
    third = [env.step(a) for a in actions[cut:]]
    assert [x[1] for x in third] == [x[1] for x in first]


# ------------------------------------------------------------------------------ XLA's own play
@settings(max_examples=150, **SETTINGS)
@given(any_case(), hs.sampled_from([1, 2, 16]), hs.sampled_from([1, 2, 4]), hs.sampled_from(RATIOS))
def test_msa_played_through_the_env_leaves_its_plan(case, k, j, ratios):
    """Issue 29 on generated programs: whatever K, J and the picker's ratios, playing the env's
    MSA action at every decision (a masked action raises) leaves exactly the plan of
    ``mallocgym.sim.msa.plan`` on the same compiled scenario, time included, bit for bit."""
    from mallocgym.pricing.v1 import mapping_from_state

    workload, hardware = case
    env = MallocGameV1Env(Scenario("h", workload, hardware), n_candidates=k, n_starts=j, ratios=ratios,
                          invalid_action="raise")
    env.reset(seed=0)
    u = env.unwrapped
    while u.current_segment >= 0:
        env.step(u.msa_action())
    st = v1.compile_v1(workload, hardware, ratios=ratios)
    state = v1.new_state(st)
    msa.plan(st, state, msa.msa_static(st), np.empty(st.seg_use.shape[0] + 1, np.int64),
             np.empty(st.compute_time.shape[0] + 2, np.int64))
    assert u.mapping() == mapping_from_state(workload, st, state)
    assert u.sim_state.totals[v1.TIME] == state.totals[v1.TIME]
