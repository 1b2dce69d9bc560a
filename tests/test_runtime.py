"""MallocGame-v1's runtime cost model (``mallocgym.pricing.runtime``), XLA MSA's RuntimeSimulator.

Three layers: hand-worked cases, MSA's own golden numbers from ``simulator_test.cc`` (openxla/xla
``xla/service/memory_space_assignment/``), and random programs against the plain-Python reference
in ``tests/reference_runtime.py``. The hand and golden cases run on both implementations.

Ops are written ``(compute, slow, fast)`` in seconds, copies ``(start, done, bytes, kind)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import reference_runtime
from mallocgym.pricing import runtime

P, E = runtime.PREFETCH, runtime.EVICTION


def run_kernel(ops, copies, bw, overhead=0.0):
    ops = np.array(ops, dtype=np.float64).reshape(-1, 3)
    cp = np.array(copies, dtype=np.float64).reshape(-1, 4)
    n_ops = ops.shape[0]
    elapsed, stall = np.full(n_ops, np.nan), np.full(n_ops + 1, np.nan)
    args = (ops[:, 0].copy(), ops[:, 1].copy(), ops[:, 2].copy())
    rest = (float(bw), cp[:, 0].astype(np.int64), cp[:, 1].astype(np.int64), cp[:, 2].copy(),
            cp[:, 3].astype(np.int64), elapsed, stall)
    if np.ndim(overhead):
        total = runtime.simulate_per_op(*args, np.asarray(overhead, dtype=np.float64), *rest)
    else:
        total = runtime.simulate(*args, float(overhead), *rest)
    return total, elapsed.tolist(), stall.tolist()


def run_reference(ops, copies, bw, overhead=0.0):
    n_ops = len(ops)
    elapsed, stall = [None] * n_ops, [None] * (n_ops + 1)
    col = lambda rows, i: [r[i] for r in rows]  # noqa: E731
    total = reference_runtime.simulate(col(ops, 0), col(ops, 1), col(ops, 2), overhead, bw,
                                       col(copies, 0), col(copies, 1), col(copies, 2), col(copies, 3),
                                       elapsed, stall)
    return total, elapsed, stall


@pytest.fixture(params=["kernel", "reference"])
def sim(request):
    return run_kernel if request.param == "kernel" else run_reference


def close(a, b):
    return a == pytest.approx(b, rel=1e-12, abs=1e-12)


# ------------------------------------------------------------------------------ hand-worked cases
def test_prefetch_hidden_behind_compute(sim):
    # bw 1 B/s. op0: max(10, 2 + 0) = 10 s, idle = 10 - 2 = 8 s >= 5 s of copy: done in op0.
    # op1 waits for it: no stall. op1: max(1, 0 + 1) = 1 s. Total 11.
    total, elapsed, stall = sim([(10, 2, 0), (1, 0, 1)], [(-1, 1, 5, P)], bw=1.0)
    assert close(total, 11) and elapsed == [10, 1] and stall == [0, 0, 0]


def test_prefetch_that_stalls(sim):
    # As above with 20 bytes: op0's 8 s of idle move 8 bytes, 12 are left: op1 stalls 12 s.
    # Total 10 + 12 + 1 = 23.
    total, elapsed, stall = sim([(10, 2, 0), (1, 0, 1)], [(-1, 1, 20, P)], bw=1.0)
    assert close(total, 23) and elapsed == [10, 1] and stall == [0, 12, 0]


def test_fifo_early_issued_late_deadline_delays_later_copy(sim):
    # A: issued before op0, due before op3, 10 B. B: issued after op0, due before op2, 4 B.
    # op0 (idle 5): A 10 -> 5. B joins the queue behind A.
    # op1 (idle 3): only the front moves: A 5 -> 2, B untouched.
    # before op2, B: drain A (2 s) then B (4 s): stall 6. (Alone, B would have moved 3 B in op1
    # and stalled 1 s.) op2 1 s; before op3 A is done: 0. Total 5 + 3 + 6 + 1 + 1 = 16.
    ops = [(5, 0, 0), (3, 0, 0), (1, 0, 0), (1, 0, 0)]
    total, elapsed, stall = sim(ops, [(-1, 3, 10, P), (0, 2, 4, P)], bw=1.0)
    assert close(total, 16) and stall == [0, 0, 6, 0, 0]


def test_copies_issued_after_the_same_op_go_by_deadline(sim):
    # Both issued before op0, given late-deadline first: ScheduleAsynchronousCopies sorts by
    # (done, start), so B (due op2) is queued before A (due op3).
    # op0 (idle 5): B 4 B done at 4 s, A 10 -> 9. op1 (idle 3): A 9 -> 6. before op2: B done, 0.
    # op2 (idle 1): A 6 -> 5. before op3: stall 5. Total 5 + 3 + 1 + 5 + 1 = 15.
    # (In input order, A first, op2 would stall 6: A's 2 B left, then B's 4.)
    ops = [(5, 0, 0), (3, 0, 0), (1, 0, 0), (1, 0, 0)]
    total, elapsed, stall = sim(ops, [(-1, 3, 10, P), (-1, 2, 4, P)], bw=1.0)
    assert close(total, 15) and stall == [0, 0, 0, 5, 0]


def test_prefetch_and_eviction_share_bandwidth_then_full_rate(sim):
    # bw 2 B/s. op0 idle 4 s. Prefetch 7 B (due op1), eviction 2 B (due at the end).
    # 0-2 s: both busy, 1 B/s each: eviction done, prefetch 7 -> 5.
    # 2-4 s: prefetch alone at 2 B/s: 5 -> 1. before op1: 1 B / 2 B/s = 0.5 s stall.
    # Total 4 + 0.5 + 1 = 5.5.
    # MSA's ProcessAsyncCopyLikesInIdleTime keeps the halved rate once the eviction queue empties
    # (available_bandwidth *= 0.5 on a variable declared outside its loop): 2-4 s at 1 B/s,
    # prefetch 5 -> 3, stall 1.5 s, total 6.5. mallocgym deliberately restores the full rate.
    total, elapsed, stall = sim([(4, 0, 0), (1, 0, 0)], [(-1, 1, 7, P), (-1, 2, 2, E)], bw=2.0)
    assert close(total, 5.5) and close(stall[1], 0.5) and stall[2] == 0


def test_halving_is_not_cumulative(sim):
    # bw 2 B/s, op0 idle 4 s. Prefetch 10 B (due op1); evictions 2 B then 2 B (due at the end).
    # 0-2 s both busy (1 B/s each): first eviction done, prefetch 10 -> 8.
    # 2-4 s both busy (1 B/s each): second eviction done, prefetch 8 -> 6. Stall 6 / 2 = 3 s.
    # MSA halves again on the second pass (0.5 B/s for 2 s): prefetch 8 -> 7, eviction 2 -> 1;
    # the prefetch's done then moves 1 B beside the eviction at 1 B/s (1 s) and 6 B alone at
    # 2 B/s (3 s): stall 4 s, total 8.
    ops = [(4, 0, 0), (0, 0, 0)]
    total, _, stall = sim(ops, [(-1, 1, 10, P), (-1, 2, 2, E), (-1, 2, 2, E)], bw=2.0)
    assert close(stall[1], 3) and stall[2] == 0 and close(total, 7)


def test_stall_drains_the_other_queue_alongside(sim):
    # bw 1 B/s. op0 is memory-bound: max(0, 5) = 5 s, idle 5 - 5 = 0.
    # before op1, prefetch 4 B: both queues busy, 0.5 B/s each: 8 s; eviction 6 -> 2.
    # op1 (idle 1): eviction alone 2 -> 1. End: 1 s. Total 5 + 8 + 1 + 1 = 15.
    total, elapsed, stall = sim([(0, 5, 0), (1, 0, 0)], [(-1, 1, 4, P), (-1, 2, 6, E)], bw=1.0)
    assert close(total, 15) and elapsed == [5, 1] and stall == [0, 8, 1]


def test_copy_done_right_after_its_start_gets_no_idle_time(sim):
    # bw 2 B/s. Issued after op0 (idle 10 s, unused) and due before op1: stall = 6 / 2 = 3 s.
    total, elapsed, stall = sim([(10, 0, 0), (1, 0, 0)], [(0, 1, 6, P)], bw=2.0)
    assert close(total, 14) and stall == [0, 3, 0]


def test_copy_issued_after_previous_op_shares_the_stall(sim):
    # bw 1 B/s. op0 memory-bound (3 s, no idle). The eviction issued after op0 is queued when
    # op1 waits for the prefetch: 4 B each at 0.5 B/s: 8 s, both done. op1 1 s. Total 12.
    total, _, stall = sim([(0, 3, 0), (1, 0, 0)], [(-1, 1, 4, P), (0, 2, 4, E)], bw=1.0)
    assert close(total, 12) and stall == [0, 8, 0]


def test_overhead_inside_the_max_on_the_memory_side(sim):
    # overhead 1 s. op0: max(10, 3 + 2 + 1) = 10 (compute-bound: the overhead is hidden;
    # v0's max(...) + overhead would give 11). op1: max(1, 3 + 2 + 1) = 6, idle 6 - 3 = 3: the
    # fast access and the overhead leave slow memory free. The prefetch issued after op0
    # (5 B at 1 B/s) moves 3 B in op1 and stalls 2 s at the end. Total 10 + 6 + 2 = 18.
    total, elapsed, stall = sim([(10, 3, 2), (1, 3, 2)], [(0, 2, 5, P)], bw=1.0, overhead=1.0)
    assert close(total, 18) and elapsed == [10, 6] and stall == [0, 0, 2]


def test_per_op_overhead(sim):
    # op0 gets no overhead (max(0, 3) = 3), op1 gets 2 s (max(0, 3 + 2) = 5). Total 8.
    total, elapsed, _ = sim([(0, 3, 0), (0, 3, 0)], [], bw=1.0, overhead=[0.0, 2.0])
    assert close(total, 8) and elapsed == [3, 5]


def test_zero_byte_copies_and_empty_program(sim):
    assert sim([], [], bw=1.0) == (0.0, [], [0.0])
    total, _, stall = sim([(1, 0, 0)], [(-1, 0, 0, P), (-1, 1, 0, E)], bw=1.0)
    assert total == 1 and stall == [0, 0]
    # T = 0: only the end. 3 B at 1 B/s.
    assert sim([], [(-1, 0, 3, E)], bw=1.0) == (3.0, [], [3.0])


# ------------------------------------------------------------- MSA's golden cases (simulator_test.cc)
# MemorySpaceAssignmentSimulatorTest::Initialize: 1 FLOP/s, default memory 1 B/s, alternate
# memory 2 B/s; buffers whose layout has S(1) are in alternate (fast) memory. HloCostAnalysis
# counts an elementwise op as 1 FLOP per element and its operand + output bytes; f32 = 4 bytes.
# Parameters, constants and get-tuple-elements cost 0 and are left out unless a copy needs an
# op to be issued after. copy-start / copy-done / slice-start / slice-done are not ops here: they
# become copies (start = the op the copy-start follows, done = the op its copy-done precedes).
# Async slices are copy-likes in the prefetch queue (SimulateElapsedTime), so they are prefetches.
MSA_BW = 1.0


def test_msa_single_layer_loop(sim):
    # SingleLayerLoop: EXPECT_EQ(..., 1226). No loops in mallocgym: the while is flattened.
    # Per the test's comment: tuple(%constant.0) 8 B once; per iteration (42): %greater
    # (compare s32: 1 FLOP, 4 + 4 + 1 = 9 B) 9 s, %increment (add s32: 1 FLOP, 12 B) 12 s,
    # %loop_result (tuple: 8 B) 8 s. 8 + 42 * 29 = 1226.
    iteration = [(1, 9, 0), (1, 12, 0), (0, 8, 0)]
    total, _, _ = sim([(0, 8, 0)] + iteration * 42, [], bw=MSA_BW)
    assert close(total, 1226)


def test_msa_nested_layer_loop(sim):
    # NestedLayerLoop: EXPECT_EQ(..., 33893) = 1226 * 27 + 12 * 27 + 8 * 1 + 9 * 27 + 8 * 27.
    # Entry tuple 8 s once; per outer iteration (27): the inner loop (its tuple 8 s, then 42
    # inner iterations of 29 s) and the outer %greater 9, %increment 12, %loop_result 8.
    inner = [(1, 9, 0), (1, 12, 0), (0, 8, 0)]
    outer = [(0, 8, 0)] + inner * 42 + [(1, 9, 0), (1, 12, 0), (0, 8, 0)]
    total, _, _ = sim([(0, 8, 0)] + outer * 27, [], bw=MSA_BW)
    assert close(total, 33893)


def test_msa_single_async_copy_overhead(sim):
    # SingleAsyncCopyOverhead: param_0 f32[1,1,1024,2048]; copy-start after it, copy-done the
    # ROOT, i.e. at the end: EXPECT_EQ(..., 8388608) = 1024 * 2048 * 4 B / 1 B/s.
    total, _, stall = sim([(0, 0, 0)], [(0, 1, 1024 * 2048 * 4, P)], bw=MSA_BW)
    assert total == 8388608 and stall == [0, 8388608]


def test_msa_single_async_slice_copy_overhead(sim):
    # SingleAsyncSliceCopyOverhead: a slice f32[768,2048] of param_0 into S(1):
    # expected_elapsed_time = 6291456 = 768 * 2048 * 4 B / 1 B/s.
    total, _, _ = sim([(0, 0, 0)], [(0, 1, 768 * 2048 * 4, P)], bw=MSA_BW)
    assert total == 6291456


def test_msa_async_copy_with_computation_overhead(sim):
    # AsyncCopyWithComputationOverhead: EXPECT_EQ(..., 48).
    # ops: param_0, param_1 (0 s); neg_compute = negate(param_1 f32[2]): 2 FLOPs = 2 s,
    # 8 + 8 = 16 B of default memory = 16 s: memory-bound, idle 16 - 16 = 0.
    # copy-start.1 (param_0 f32[8] = 32 B) after param_1; copy-done.1 is the ROOT: the end,
    # 32 s. 16 + 32 = 48.
    total, elapsed, stall = sim([(0, 0, 0), (0, 0, 0), (2, 16, 0)], [(1, 3, 32, P)], bw=MSA_BW)
    assert total == 48 and elapsed == [0, 0, 16] and stall == [0, 0, 0, 32]


def test_msa_async_copy_and_async_slice_and_compute_overhead(sim):
    # AsyncCopyAndAsyncSliceAndComputeOverhead: EXPECT_EQ(..., 1024).
    # ops: param_0, param_1, param_2 (0 s); add f32[64] of slice-done and copy-done into S(1):
    # 64 FLOPs = 64 s; 3 * 64 * 4 = 768 B of alternate memory / 2 B/s = 384 s; no default
    # access: idle 384 s.
    # copies (all prefetches, 256 B, 256 B, 512 B): slice-start, copy-start after param_2, done
    # before add; copy-start-overlap, done at the end (ROOT).
    # before add: slice 256 s, then copy 256 s (stall 512). add moves 384 of the 512 B. End:
    # 128 s. 512 + 384 + 128 = 1024.
    # In the HLO copy-start-overlap comes after the two copy-dones; here it is issued after
    # param_2, before them. Same number: it sits behind them in the FIFO and only the front moves.
    ops = [(0, 0, 0)] * 3 + [(64, 0, 384)]
    copies = [(2, 3, 256, P), (2, 3, 256, P), (2, 4, 512, P)]
    total, elapsed, stall = sim(ops, copies, bw=MSA_BW)
    assert total == 1024 and elapsed[3] == 384 and stall == [0, 0, 0, 512, 128]


# SimulateAsyncCopyLikeDoneTest injects the queues before the program: copy-start.1 (prefetch,
# 512 B) and copy-start.2 (eviction, 128 B). Here: copies issued before op 0 (start = -1).

def test_msa_async_copy_full_bandwidth(sim):
    # AsyncCopyFullBandwidth: copy_done_elapsed_time == 512 = 512 B / 1 B/s.
    total, _, stall = sim([(0, 0, 0)], [(-1, 0, 512, P)], bw=MSA_BW)
    assert total == 512 and stall == [512, 0]


def test_msa_async_copy_already_completed(sim):
    # AsyncCopyAlreadyCompleted: the first copy-done takes 512 s, a second one for the same,
    # finished copy returns 0. A copy has one done here, so: a finished copy's done costs 0.
    # Copy 1 (512 B) is queued first, a 0-byte copy 2 behind it is due before op1: waiting for
    # it drains copy 1 (512 s). Copy 1 is due before op2: already complete, 0.
    ops = [(0, 0, 0), (0, 0, 0), (0, 0, 0)]
    total, _, stall = sim(ops, [(-1, 2, 512, P), (0, 1, 0, P)], bw=MSA_BW)
    assert total == 512 and stall == [0, 512, 0, 0]


def test_msa_async_copy_shared_bandwidth_and_partial_process(sim):
    # AsyncCopySharedBandwidth and AsyncCopyTransferPartialProcess: copy-done.2 (eviction 128 B)
    # shares with copy-start.1: 128 B at 0.5 B/s = 256 s, leaving 512 - 128 = 384 B of
    # copy-start.1; copy-done.1 then takes 384 / 1 = 384 s (full bandwidth).
    total, _, stall = sim([(0, 0, 0)], [(-1, 1, 512, P), (-1, 0, 128, E)], bw=MSA_BW)
    assert stall == [256, 384] and total == 640


def test_msa_compute_instruction_with_single_async_copy(sim):
    # SimulateComputeInstructionWithSingleAsyncCopy: neg f32[32]: 32 FLOPs = 32 s, 32*4*2 = 256 B
    # of default memory = 256 s: compute_elapsed_time == 256, no idle, the queue keeps
    # copy-start.1 at 512 B (seen here as a 512 s stall at its done, at the end).
    total, elapsed, stall = sim([(32, 256, 0)], [(-1, 1, 512, P)], bw=MSA_BW)
    assert elapsed == [256] and stall == [0, 512] and total == 768


def test_msa_compute_instruction_with_shared_bandwidth(sim):
    # SimulateComputeInstructionWithSharedBandwidth: neg reads param_1 (128 B) from alternate
    # memory (64 s) and writes 128 B to default (128 s): compute_elapsed_time == 192, idle 64 s.
    # Both queues busy: 32 B each: queues {copy-start.1: 480} and {copy-start.2: 96}.
    # Checked through the stalls: eviction done before op1 (a 0-s op): 96 B at 0.5 B/s = 192 s,
    # the prefetch moves 96 B alongside; its 480 - 96 = 384 B take 384 s at the end.
    ops = [(32, 128, 64), (0, 0, 0)]
    total, elapsed, stall = sim(ops, [(-1, 2, 512, P), (-1, 1, 128, E)], bw=MSA_BW)
    assert elapsed == [192, 0] and stall == [0, 192, 384] and total == 768


def test_msa_compute_instruction_with_full_bandwidth(sim):
    # SimulateComputeInstructionWithFullBandwidth: same neg, only the prefetch queue busy:
    # 64 s * 1 B/s = 64 B: {copy-start.1: 448}, seen as a 448 s stall at the end.
    total, elapsed, stall = sim([(32, 128, 64)], [(-1, 1, 512, P)], bw=MSA_BW)
    assert elapsed == [192] and stall == [0, 448] and total == 640


def test_msa_compute_instruction_with_empty_queues(sim):
    # SimulateComputeInstructionWithEmptyQueues: neg f32[128]: 128 s of compute, 128*4*2 B of
    # default memory: compute_elapsed_time == 1024.
    total, elapsed, stall = sim([(128, 1024, 0)], [], bw=MSA_BW)
    assert total == 1024 and elapsed == [1024] and stall == [0, 0]


# ---------------------------------------------------------------------------------- input errors
@pytest.mark.parametrize("copy", [(0, 0, 1, P), (1, 0, 1, P), (-2, 0, 1, P), (0, 3, 1, P),
                                  (-1, 1, 1, 2), (-1, 1, -1, P)])
def test_malformed_copies_raise(copy):
    with pytest.raises(ValueError):
        run_kernel([(1, 0, 0), (1, 0, 0)], [copy], bw=1.0)


def test_output_sizes_checked():
    z = np.zeros(2)
    no_copies = np.zeros(0, dtype=np.int64)
    with pytest.raises(ValueError, match="stall_out"):
        runtime.simulate(z, z, z, 0.0, 1.0, no_copies, no_copies, np.zeros(0), no_copies,
                         np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="slow_bw"):
        runtime.simulate(z, z, z, 0.0, 0.0, no_copies, no_copies, np.zeros(0), no_copies,
                         np.zeros(2), np.zeros(3))


# ------------------------------------------------------------------- random programs vs reference
TIMES = [0.0, 0.0, 1e-3, 0.25, 1.0, 3.0, 10.0]
BYTES = [0.0, 1.0, 2.5, 7.0, 40.0, 1e3]


@hs.composite
def programs(draw):
    n_ops = draw(hs.integers(0, 12))
    ops = [tuple(draw(hs.sampled_from(TIMES)) for _ in range(3)) for _ in range(n_ops)]
    copies = []
    for _ in range(draw(hs.integers(0, 8))):
        start = draw(hs.integers(-1, n_ops - 1))
        done = draw(hs.integers(start + 1, n_ops))
        copies.append((start, done, draw(hs.sampled_from(BYTES)), draw(hs.sampled_from([P, E]))))
    bw = draw(hs.sampled_from([0.5, 1.0, 3.0, 100.0]))
    if draw(hs.booleans()):
        overhead = draw(hs.sampled_from([0.0, 0.0, 0.5, 2.0]))
    else:
        overhead = [draw(hs.sampled_from([0.0, 0.5, 2.0])) for _ in range(n_ops)]
    return ops, copies, bw, overhead


@settings(max_examples=400, deadline=None)
@given(programs())
def test_kernel_matches_reference(program):
    ops, copies, bw, overhead = program
    total_k, elapsed_k, stall_k = run_kernel(ops, copies, bw, overhead)
    total_r, elapsed_r, stall_r = run_reference(ops, copies, bw, overhead)
    tol = dict(rel=1e-9, abs=1e-9 * max(1.0, total_r))  # per-op values: relative to the program
    assert total_k == pytest.approx(total_r, rel=1e-9)
    assert elapsed_k == pytest.approx(elapsed_r, **tol)
    assert stall_k == pytest.approx(stall_r, **tol)
    assert min(stall_k, default=0.0) >= 0.0
    assert total_k == pytest.approx(sum(elapsed_k) + sum(stall_k), rel=1e-12)


# ------------------------------------------------------------------------------ incremental runs
def _arrays(ops, copies):
    ops = np.array(ops, dtype=np.float64).reshape(-1, 3)
    cp = np.array(copies, dtype=np.float64).reshape(-1, 4)
    return ops, (cp[:, 0].astype(np.int64), cp[:, 1].astype(np.int64), cp[:, 2].copy(), cp[:, 3].astype(np.int64))


def _full(ops, copies, bw):
    """A fresh full run: (elapsed, stall, empty, blocks, total)."""
    ops, cp = _arrays(ops, copies)
    n = ops.shape[0]
    elapsed, stall, empty = np.zeros(n), np.zeros(n + 1), np.zeros(n + 1, np.bool_)
    stop = runtime.simulate_window(0, n, ops[:, 0].copy(), ops[:, 1].copy(), ops[:, 2].copy(), np.zeros(n), bw,
                                   *cp, elapsed, stall, empty, False, False)
    assert stop == n + 1
    blocks, stalls = np.zeros(runtime.n_blocks(n)), np.zeros(runtime.n_blocks(n))
    runtime.sum_blocks(elapsed, stall, 0, n + 1, blocks, stalls)
    return elapsed, stall, empty, blocks, stalls


def _incremental(old, ops, copies, bw, dirty_lo, dirty_hi):
    """Update ``old`` (a run of the program before a change that touched iterations
    ``[dirty_lo, dirty_hi]``) as v1's env does; return the arrays and where the run stopped."""
    elapsed, stall, empty, blocks, stalls = (a.copy() for a in old)
    t0 = dirty_lo
    while t0 > 0 and not empty[t0]:
        t0 -= 1
    keep = [c for c in copies if c[0] >= t0 - 1]
    ops_a, cp = _arrays(ops, keep)
    n = ops_a.shape[0]
    stop = runtime.simulate_window(t0, dirty_hi, ops_a[:, 0].copy(), ops_a[:, 1].copy(), ops_a[:, 2].copy(),
                                   np.zeros(n), bw, *cp, elapsed, stall, empty, True, False)
    runtime.sum_blocks(elapsed, stall, t0, stop, blocks, stalls)
    return (elapsed, stall, empty, blocks, stalls), stop


def test_window_stops_once_the_queues_are_empty_after_the_change():
    # bw 1 B/s, 6 ops of 10 s compute and no memory time: a 5 B copy issued before op 0 and due
    # at op 1 drains in op 0's idle time; the queues are empty from iteration 1 on. Making op 3
    # memory-bound (12 s of slow access) touches iteration 3 only: the update re-runs iteration 3
    # (t0 = 3, empty there) and stops at 4 (empty now, empty before, after the change).
    ops = [(10.0, 0.0, 0.0)] * 6
    copies = [(-1, 1, 5.0, P)]
    old = _full(ops, copies, 1.0)
    changed = list(ops)
    changed[3] = (10.0, 12.0, 0.0)
    new, stop = _incremental(old, changed, copies, 1.0, 3, 3)
    assert stop == 4
    assert new[0].tolist() == [10.0, 10.0, 10.0, 12.0, 10.0, 10.0]
    assert runtime.sum_in_order(new[3]) == 62.0
    # a copy in flight across the change: issued after op 2, 25 B due at the end; op 3 now leaves
    # no idle time (12 - 12), so the copy is still queued at iteration 4 and 5: no stop before the end
    copies = [(-1, 1, 5.0, P), (2, 6, 25.0, E)]
    old = _full(ops, copies, 1.0)
    new, stop = _incremental(old, changed, copies, 1.0, 3, 3)
    assert stop == 7 and new[1][6] == 5.0  # 25 B: 10 s in op 4, 10 s in op 5, 5 s of stall at the end


@settings(max_examples=300, deadline=None)
@given(programs(), hs.data())
def test_incremental_run_equals_a_full_run_bit_for_bit(program, data):
    """Change one op's times, add or drop a copy: the windowed update (restart at the last empty
    iteration, stop once empty in both runs) equals a fresh full run, block sums included."""
    ops, copies, bw, _ = program
    n = len(ops)
    old = _full(ops, copies, bw)
    ops, copies = list(ops), list(copies)
    touched = []
    for _ in range(data.draw(hs.integers(1, 3))):
        what = data.draw(hs.sampled_from(["op", "add", "drop"]))
        if what == "op" and n:
            t = data.draw(hs.integers(0, n - 1))
            ops[t] = tuple(data.draw(hs.sampled_from(TIMES)) for _ in range(3))
            touched.append(t)
        elif what == "add":
            start = data.draw(hs.integers(-1, n - 1))
            done = data.draw(hs.integers(start + 1, n))
            copies.append((start, done, data.draw(hs.sampled_from(BYTES)), data.draw(hs.sampled_from([P, E]))))
            touched.append(start + 1)
        elif what == "drop" and copies:
            touched.append(copies.pop(data.draw(hs.integers(0, len(copies) - 1)))[0] + 1)
    if not touched:
        return
    new, stop = _incremental(old, ops, copies, bw, min(touched), max(touched))
    full = _full(ops, copies, bw)
    for got, want in zip(new, full):
        assert got.tolist() == want.tolist()
    assert 0 < stop <= n + 1
