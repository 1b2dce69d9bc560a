"""MallocGame-v1's rules on tiny hand-worked programs.

Hardware with round numbers: slow memory 100 B/s, fast memory 1000 B/s, 1 FLOP/s (so an op's
flops are its compute seconds), no overhead. A 100 B copy takes 1 s; a 100 B access takes 1 s
slow, 0.1 s fast. Per op: ``elapsed = max(compute, slow + fast)``; the copy queues drain in each
op's slow-memory idle time ``elapsed - slow``; a copy not done by its use stalls the program.
The prefetch picker's starts (ratios 0.8 / 1.5 / 10): for use ``u`` and copy time ``c``, with
``I(p)`` the all-slow time of ops ``p+1 .. u-1``, latest = the largest ``p`` with
``I(p) >= 0.8 c``, preferred = the largest with ``I(p) >= 1.5 c``, earliest = the smallest with
``I(p) <= 10 capacity / slow_bw``, midpoint = (earliest + latest) // 2, each clamped to the
window, listed preferred, latest, earliest, midpoint without repeats.

Actions are picked by what they mean (``action_meaning``), never by number.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from mallocgym import Hardware, Workload
from mallocgym.env.v1 import MallocGameV1Env
from mallocgym.pricing.v1 import evaluate_v1
from mallocgym.scenarios import Scenario

from reference_v1 import ReferenceV1


def hardware(capacity):
    return Hardware(peak_flops=1.0, slow_bw=100.0, fast_bw=1000.0, fast_capacity=capacity, alignment=1,
                    op_overhead=0.0)


def env_for(workload, capacity, order="start"):
    env = MallocGameV1Env(Scenario(workload.name, workload, hardware(capacity)), order=order)
    obs, info = env.reset(seed=0)
    return env, obs, info


def legal(env, obs):
    return {int(a): env.action_meaning(int(a)) for a in np.flatnonzero(obs["action_mask"])}


def pick(env, obs, kind, offset=None, pstart=None):
    """The action meaning ``(kind, offset, pstart)`` now (``None``: any); fails if not offered."""
    options = legal(env, obs)
    for a, (k, o, p) in options.items():
        if k == kind and (offset is None or o == offset) and (pstart is None or p == pstart):
            return a
    raise AssertionError(f"no legal {kind} offset={offset} pstart={pstart} at buffer {env.current_buffer}: {options}")


def play(env, obs, *choices):
    """Play ``(buffer, kind, offset, pstart)`` choices; check each is for the buffer to decide.
    Returns the rewards and the last info."""
    rewards, info = [], None
    for b, kind, off, p in choices:
        assert env.current_buffer == b, (env.current_buffer, b)
        obs, reward, terminated, _, info = env.step(pick(env, obs, kind, off, p))
        rewards.append(reward)
    return obs, rewards, info


def check_against_evaluate_and_reference(env, workload, capacity, info, rewards):
    """The finished game: ``evaluate_v1`` and the reference price its mapping as the env did."""
    mapping = info["mapping"]
    ev = evaluate_v1(workload, mapping, hardware(capacity))
    assert ev.time == pytest.approx(info["time"], rel=1e-12)
    ref = ReferenceV1(workload, hardware(capacity), [int(s) for s in env.static.order], play_forced=False)
    ref.replay(mapping["allocations"])
    assert ref.done
    assert ref.time() == pytest.approx(info["time"], rel=1e-12)
    assert ref.evictions() == mapping["evictions"]
    assert sum(rewards) == pytest.approx(1 - info["time"] / info["time_all_slow"], rel=1e-12)


# ------------------------------------------------------------------------------ (a) hidden prefetch
def test_a_prefetch_hidden_behind_compute():
    # Ops 0 and 1 compute 2 s each; op 2 reads the program input X (100 B, live from op 0).
    # All slow: 2 + 2 + 1 (X read slow) = 5 s.
    # X's one segment: window [start - 1, use - 1] = [-1, 1]; I(1) = 0, I(0) = 2, I(-1) = 4,
    # copy 1 s: latest = preferred = 0, earliest = -1 (4 <= 10 * 100 / 100), midpoint -1.
    # PREFETCH after op 0 into [0, 100): the copy drains in op 1's idle slow memory (2 s > 1 s),
    # done before op 2 with no stall; op 2 reads X fast: 0.1 s.
    # Time = 2 + 2 + 0.1 = 4.1 s, no stall, 100 B copied.
    w = Workload.from_buffers("hidden", [2.0, 2.0, 0.0], [100], [0], [2], [[(2, 100, False)]])
    env, obs, info = env_for(w, 100)
    assert info["time_all_slow"] == pytest.approx(5.0)
    starts = sorted({p for k, _, p in legal(env, obs).values() if k == "prefetch"})
    assert starts == [-1, 0]
    assert not any(k == "fast" for k, _, _ in legal(env, obs).values())  # an input is never produced fast
    obs, rewards, info = play(env, obs, (0, "prefetch", 0, 0))
    assert info["time"] == pytest.approx(4.1)
    assert info["stall_time"] == 0.0
    assert info["copy_bytes"] == 100
    assert info["mapping"]["allocations"] == [
        {"buffer": 0, "segment": 0, "use_op": 2, "kind": "prefetch", "offset": 0, "prefetch_after": 0}]
    assert info["mapping"]["evictions"] == []
    check_against_evaluate_and_reference(env, w, 100, info, rewards)


# ------------------------------------------------------------------------------ (b) a stall
def test_b_prefetch_that_stalls():
    # Op 0 computes 0.5 s; op 1 reads the input X (100 B). All slow: 0.5 + 1 = 1.5 s.
    # Window [-1, 0]; I(0) = 0, I(-1) = 0.5 < 0.8: every start clamps to -1, the only one.
    # The copy (1 s) is issued before op 0 and drains 50 B in op 0's 0.5 s idle time; the
    # other 50 B stall op 1 for 0.5 s. Op 1 reads X fast: 0.1 s.
    # Time = 0.5 + 0.5 (stall) + 0.1 = 1.1 s.
    w = Workload.from_buffers("stall", [0.5, 0.0], [100], [0], [1], [[(1, 100, False)]])
    env, obs, info = env_for(w, 100)
    assert {p for k, _, p in legal(env, obs).values() if k == "prefetch"} == {-1}
    obs, rewards, info = play(env, obs, (0, "prefetch", 0, -1))
    assert info["stall_time"] == pytest.approx(0.5)
    assert info["time"] == pytest.approx(1.1)
    assert rewards[0] == pytest.approx((1.5 - 1.1) / 1.5)
    check_against_evaluate_and_reference(env, w, 100, info, rewards)


# ------------------------------------------------------------------------------ (c) evict + re-prefetch
def _evict_workload():
    # A (100 B): written at op 0, read at ops 1 and 5. B (100 B): written at op 2, read at op 3.
    # Ops 1 and 4 compute 2 s. Fast memory 100 B: A and B never fit together.
    return Workload.from_buffers("evict", [0.0, 2.0, 0.0, 0.0, 2.0, 0.0], [100, 100], [0, 2], [5, 3],
                                 [[(0, 100, True), (1, 100, False), (5, 100, False)],
                                  [(2, 100, True), (3, 100, False)]])


def test_c_eviction_and_prefetch_free_room_for_another_buffer():
    # All slow: op0 1 + op1 2 + op2 1 + op3 1 + op4 2 + op5 1 = 8 s. Order "start": A, then B.
    # A seg 0 FAST at 0: chunk [0, 1]. A seg 1 (use 5): the fast run is going on, so a slow copy
    # can exist from op u_0 + 1 = 2 on: window [2, 4]. I(4) = 0, I(3) = 2, I(2) = 3: latest =
    # preferred = 3, earliest = 2, midpoint 2. PREFETCH after op 3: chunk [4, 5].
    # Eviction: needed by op 3 (the prefetch's issue); preferred end = the first t with
    # I(0, t) >= 1.5 s: I(0, 2) = 2 (op 1) -> 2; e = min(max(2, l + 1 = 2), 3) = 2: done before
    # op 2, the chunk not held past op 1. Ops 2-3 are free: B FAST at 0 over [2, 3].
    # Copies: eviction (after op 0, done before op 2) drains in op 1's idle 2 s; prefetch (after
    # op 3, done before op 5) drains in op 4's idle 2 s: no stall.
    # Every access fast: ops 0, 2, 3, 5 take 0.1 s; ops 1 and 4 2 s. Time = 4.4 s.
    w = _evict_workload()
    env, obs, info = env_for(w, 100)
    assert info["time_all_slow"] == pytest.approx(8.0)
    obs, first, _ = play(env, obs, (0, "fast", 0, None))
    # the run is still going on: the tentative eviction is priced (needed by A's undecided,
    # so slow, use at op 5): preferred end 2, done before op 2
    assert env.mapping()["evictions"] == [{"buffer": 0, "done_before": 2}]
    assert {p for k, _, p in legal(env, obs).values() if k == "prefetch"} == {2, 3}
    obs, rewards, info = play(env, obs, (0, "prefetch", 0, 3), (1, "fast", 0, None))
    rewards = first + rewards
    assert info["time"] == pytest.approx(4.4)
    assert info["stall_time"] == 0.0
    assert info["copy_bytes"] == 200
    assert info["mapping"]["evictions"] == [{"buffer": 0, "done_before": 2}]
    assert info["forced_decisions"] == 0
    check_against_evaluate_and_reference(env, w, 100, info, rewards)


def test_c_without_the_copies_the_second_buffer_cannot_be_placed():
    # A kept in fast memory over [0, 5]: B's only segment (over [2, 3]) has no FAST candidate and
    # no prefetch (its window [2, 2] puts the chunk at op 3, still A's): forced SLOW.
    w = _evict_workload()
    env, obs, info = env_for(w, 100)
    obs, _, info = play(env, obs, (0, "fast", 0, None), (0, "fast", 0, None))
    assert env.current_segment == -1
    assert info["forced_decisions"] == 1
    assert info["mapping"]["allocations"][-1] == {"buffer": 1, "segment": 0, "use_op": 3, "kind": "slow"}
    # A lives to the last op (an output) and is fast to its last use at op 5: the eviction is
    # needed by T = 6 and cannot end before l + 1 = 6 (preferred 2): done before 6; it drains in
    # op 1's idle 2 s. Ops 0, 1, 5 with A fast: 0.1, 2, 0.1; B slow at ops 2, 3: 1 + 1; op 4: 2.
    # Time = 6.2 s, no stall.
    assert info["mapping"]["evictions"] == [{"buffer": 0, "done_before": 6}]
    assert info["stall_time"] == 0.0
    assert info["time"] == pytest.approx(6.2)


# ------------------------------------------------------------------------------ (d) v0 vs v1 input
def test_d_program_input_free_in_v0_costs_a_prefetch_in_v1():
    # One op reading the input X (100 B). All slow: 1 s.
    # v0 places X for free: 0.1 s, speedup 10.
    # v1: X must be prefetched; its window is [-1, -1] (issued before op 0, done before op 0):
    # no op runs in between, the whole 1 s copy stalls. Time = 1 (stall) + 0.1 = 1.1 s.
    w = Workload.from_buffers("input", [0.0], [100], [0], [0], [[(0, 100, False)]])
    v0 = gym.make("MallocGame-v0", workload=w, hardware=hardware(100))
    obs, info = v0.reset(seed=0)
    assert obs["action_mask"][0] == 1
    _, _, terminated, _, info0 = v0.step(0)  # place X at the first candidate offset
    assert terminated
    assert info0["speedup"] == pytest.approx(10.0)
    assert info0["speedup"] > 1
    env, obs, info = env_for(w, 100)
    assert not any(k == "fast" for k, _, _ in legal(env, obs).values())
    obs, rewards, info = play(env, obs, (0, "prefetch", 0, -1))
    assert info["stall_time"] == pytest.approx(1.0)
    assert info["time"] == pytest.approx(1.1)
    assert info["speedup"] == pytest.approx(1 / 1.1)
    check_against_evaluate_and_reference(env, w, 100, info, rewards)


# ------------------------------------------------------------------------------ (e) FIFO queue
def test_e_fifo_prefetches_the_earlier_delays_the_later():
    # Inputs X (100 B, live from op 0, read at op 2) and Y (100 B, live from op 1, read at op 1).
    # Op 0 computes 0.6 s. All slow: 0.6 + 1 + 1 = 2.6 s. Fast memory 200 B.
    # X: window [-1, 1]; I(1) = 0, I(0) = 1, I(-1) = 1.6: latest 0, preferred -1, earliest -1.
    # Y: slow from op 0 (start - 1): window [0, 0], the one start 0.
    # X issued before op 0 drains 60 B in op 0's 0.6 s idle time. Y is queued after op 0,
    # behind X's 40 B (one FIFO for prefetches): op 1 waits 0.4 s (X's rest) + 1 s (Y) = 1.4 s.
    # Ops 1 and 2 read Y and X fast: 0.1 s each. Time = 0.6 + 1.4 + 0.1 + 0.1 = 2.2 s.
    w = Workload.from_buffers("fifo", [0.6, 0.0, 0.0], [100, 100], [0, 1], [2, 1],
                              [[(2, 100, False)], [(1, 100, False)]])
    env, obs, info = env_for(w, 200)
    assert {p for k, _, p in legal(env, obs).values() if k == "prefetch"} == {-1, 0}
    obs, rewards, info = play(env, obs, (0, "prefetch", 0, -1), (1, "prefetch", 100, 0))
    assert info["stall_time"] == pytest.approx(1.4)
    assert info["time"] == pytest.approx(2.2)
    check_against_evaluate_and_reference(env, w, 200, info, rewards)
    # Y alone (X slow): its copy waits for nothing: stall 1 s; time 0.6 + 1 + 0.1 + 1 = 2.7 s
    env, obs, info = env_for(w, 200)
    obs, _, info = play(env, obs, (0, "slow", None, None), (1, "prefetch", None, 0))
    assert info["stall_time"] == pytest.approx(1.0)
    assert info["time"] == pytest.approx(2.7)


# ------------------------------------------------------------------------------ (f) output eviction
def test_f_output_produced_fast_is_evicted_by_the_end():
    # Z (100 B): written at op 0, read at op 1, live to the last op 2 (an output). Op 2 computes
    # 0.6 s. All slow: 1 + 1 + 0.6 = 2.6 s.
    # Z FAST: its one segment is fast, it is an output: the slow copy is needed by T = 3.
    # Preferred end: the first t with I(0, t) >= 1.5 s: I(0, 2) = 1, I(0, 3) = 1.6 -> 3;
    # e = min(max(3, l + 1 = 2), 3) = 3; the chunk is held to op 2 (free).
    # The eviction (after op 0) drains 10 B in op 1's idle 0.1 s (op 1 = 0.1 s fast read) and
    # 60 B in op 2's 0.6 s; 30 B are left at the end: 0.3 s stall.
    # Time = 0.1 + 0.1 + 0.6 + 0.3 = 1.1 s.
    w = Workload.from_buffers("output", [0.0, 0.0, 0.6], [100], [0], [2], [[(0, 100, True), (1, 100, False)]])
    env, obs, info = env_for(w, 100)
    obs, rewards, info = play(env, obs, (0, "fast", 0, None))
    assert info["mapping"]["evictions"] == [{"buffer": 0, "done_before": 3}]
    assert info["copy_bytes"] == 100
    assert info["stall_time"] == pytest.approx(0.3)
    assert info["time"] == pytest.approx(1.1)
    check_against_evaluate_and_reference(env, w, 100, info, rewards)


# ------------------------------------------------------------------------------ (g) oversized buffer
def test_g_buffer_larger_than_fast_memory_is_forced_slow():
    # W (300 B > 200 B): written at op 0, read at ops 1 and 2: two segments, both forced SLOW.
    # V (100 B): written at op 0, read at op 1. Order "size": W first.
    w = Workload.from_buffers("big", [0.0, 0.0, 0.0], [300, 100], [0, 0], [2, 1],
                              [[(0, 300, True), (1, 300, False), (2, 300, False)], [(0, 100, True), (1, 100, False)]])
    env, obs, info = env_for(w, 200, order="size")
    assert info["forced_decisions"] == 2
    assert info["oversized_buffers"] == 1
    assert env.current_buffer == 1
    obs, rewards, info = play(env, obs, (1, "fast", None, None))
    assert info["forced_decisions"] == 2 and info["agent_decisions"] == 1
    assert [a["kind"] for a in info["mapping"]["allocations"] if a["buffer"] == 0] == ["slow", "slow"]
    # ops: 0: W 3 s slow + V 0.1 fast; 1: 3 + 0.1; 2: 3. Time = 9.2 s (all slow 11 s)
    assert info["time"] == pytest.approx(9.2)
    # W alone: every segment forced, the game is over at reset
    w = Workload.from_buffers("big1", [0.0, 0.0, 0.0], [300], [0], [2],
                              [[(0, 300, True), (1, 300, False), (2, 300, False)]])
    env, obs, info = env_for(w, 200)
    assert env.current_segment == -1 and info["forced_decisions"] == 2
    assert info["time"] == pytest.approx(info["time_all_slow"])


# ------------------------------------------------------------------------------ eviction pulled earlier
def test_eviction_is_pulled_earlier_by_another_buffers_chunk():
    # B (input, 100 B, read at op 4) and A (100 B, written at op 0, read at op 1, live to op 5:
    # an output). Op 3 computes 1 s. Fast memory 100 B. Order "start", ties by size then id: B.
    # All-slow op times: 1 (A write), 1 (A read), 0, 1, 1 (B read), 0.
    # B: window [-1, 3]; I(3) = 0, I(2) = 1, I(1) = 1, I(0) = 2, I(-1) = 3; copy 1 s:
    # latest 2, preferred 0, earliest -1, midpoint 0. PREFETCH after op 2: chunk [3, 4].
    # A FAST at 0 over [0, 1]. Output: needed by T = 6; preferred end: I(0, 2) = 1, I(0, 3) = 1,
    # I(0, 4) = 2 >= 1.5 -> 4; e = min(max(4, 2), 6) = 4; holding the chunk over [2, 3] meets B's
    # chunk at op 3: e is pulled to 3 (chunk held to op 2).
    w = Workload.from_buffers("pulled", [0.0, 0.0, 0.0, 1.0, 0.0, 0.0], [100, 100], [0, 0], [4, 5],
                              [[(4, 100, False)], [(0, 100, True), (1, 100, False)]])
    env, obs, info = env_for(w, 100)
    assert {p for k, _, p in legal(env, obs).values() if k == "prefetch"} == {-1, 0, 2}
    obs, rewards, info = play(env, obs, (0, "prefetch", 0, 2), (1, "fast", 0, None))
    assert info["mapping"]["evictions"] == [{"buffer": 1, "done_before": 3}]
    # Time: op 0 0.1 (A write fast), op 1 0.1, op 2 0, op 3 1, op 4 0.1 (B fast), op 5 0.
    # Copies: the eviction of A (after op 0, by op 3) drains 10 B in op 1's idle 0.1 s, nothing
    # in op 2 (0 s). B's prefetch (after op 2, by op 4) is in the other queue, so while op 3
    # waits for the eviction's 90 B both queues are busy at 50 B/s each: a 1.8 s stall, in which
    # B's copy moves 90 B; op 3's idle 1 s moves its last 10 B. No stall at op 4.
    # Time = 0.1 + 0.1 + 0 + 1.8 (stall) + 1 + 0.1 + 0 = 3.1 s.
    assert info["stall_time"] == pytest.approx(1.8)
    assert info["time"] == pytest.approx(3.1)
    check_against_evaluate_and_reference(env, w, 100, info, rewards)


# ------------------------------------------------------------------------------ exact ratio ties
def test_a_ratio_met_exactly_counts_for_the_earliest_prefetch_start():
    # X (1 B): written at op 0, read at op 2. F (99 B, larger than the 8 B fast memory, always
    # slow): 1 B at op 0, 80 B at op 1. slow_bw 1e6 B/s: op times 2, 80, 1 us.
    # X's segment: window [0, 1]; I(1) = 0, I(0) = 80 us; copy 1 us. latest = preferred = 0;
    # earliest: the smallest p with I(p) <= 10 * 8 B / 1e6 B/s = 80 us: I(-1) = 82 us, I(0) = 80
    # us (met exactly) -> 0; midpoint 0. So the one prefetch start is 0 (after op 0).
    w = Workload.from_buffers("tie", [0.0] * 3, [1, 99], [0, 0], [2, 1],
                              [[(0, 1, True), (2, 1, False)], [(0, 1, True), (1, 80, False)]])
    hw = Hardware(peak_flops=1e9, slow_bw=1e6, fast_bw=1e7, fast_capacity=8, alignment=1)
    env = MallocGameV1Env(Scenario("tie", w, hw))
    obs, _ = env.reset(seed=0)
    assert env.current_buffer == 0
    assert {p for k, _, p in legal(env, obs).values() if k == "prefetch"} == {0}


def test_a_ratio_met_exactly_counts_for_the_eviction_end():
    # Z (8 B): written at op 0, read (1 B) at op 1, live to op 3 (an output). F (99 B, always
    # slow): 2 B at op 0, 1 B at op 1, 10 B at op 2. slow_bw 1e6 B/s: op times 10, 2, 10, 0 us.
    # Z FAST: needed by T = 4; preferred end: the first t with I(0, t) >= 1.5 * 8 us = 12 us:
    # I(0, 2) = 2, I(0, 3) = 2 + 10 = 12 (met exactly) -> 3; e = min(max(3, 2), 4) = 3.
    w = Workload.from_buffers("evtie", [0.0] * 4, [8, 99], [0, 0], [3, 2],
                              [[(0, 8, True), (1, 1, False)], [(0, 2, True), (1, 1, False), (2, 10, False)]])
    hw = Hardware(peak_flops=1e9, slow_bw=1e6, fast_bw=1e7, fast_capacity=8, alignment=1)
    env = MallocGameV1Env(Scenario("evtie", w, hw))
    obs, _ = env.reset(seed=0)
    assert env.current_buffer == 0
    _, _, _, _, info = env.step(pick(env, obs, "fast", 0))
    assert info["mapping"]["evictions"] == [{"buffer": 0, "done_before": 3}]


def test_outputs_field_decides_which_values_must_end_slow():
    """A value the last op reads is an output by default (it must be evicted by the end); with
    ``outputs`` naming another buffer it is not, and staying fast to the end is legal without a copy."""
    accesses = [[(0, 100, True), (1, 100, False)]]
    mapping = {"format": "mallocgym-v1-mapping", "version": 1, "evictions": [],
               "allocations": [{"buffer": 0, "segment": 0, "kind": "fast", "offset": 0}]}
    hw = hardware(100)
    default = Workload.from_buffers("out", [1.0, 1.0], [100], [0], [1], accesses)
    with pytest.raises(ValueError, match="needed in slow memory by the end of the program"):
        evaluate_v1(default, mapping, hw)
    # buffer 1 (the output, moving no bytes) leaves buffer 0 a plain value live at the last op
    none = Workload.from_buffers("out", [1.0, 1.0], [100, 1], [0, 0], [1, 1], accesses + [[(0, 0, True), (1, 0, False)]],
                                 outputs=[1])
    ev = evaluate_v1(none, mapping, hw)
    assert ev.evictions == 0 and ev.copy_bytes == 0.0
    # all slow: op 0 writes 100 B (1 s), op 1 reads it (1 s) = 2 s; fast: 0.1 s memory each,
    # compute 1 s each: 2 s -> no gain in time, but no copy either
    assert ev.time == pytest.approx(2.0)
