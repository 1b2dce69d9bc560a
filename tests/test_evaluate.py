import numpy as np
import pytest

import mallocgym
from mallocgym import Hardware, Workload, evaluate


def test_tiny_all_slow_and_each_buffer_alone(tiny, tiny_hw):
    # op bytes: op0 = 100 + 200, op1 = 100 + 300 (compute 0.5 s), op2 = 200, op3 = 300
    ev = evaluate(tiny, [-1, -1, -1], tiny_hw)
    assert ev.time == pytest.approx(0.3 + 0.5 + 0.2 + 0.3)
    assert ev.time_all_slow == pytest.approx(1.3)
    assert ev.speedup == pytest.approx(1.0) and ev.placed_bytes_fraction == 0.0
    assert ev.compute_bound_ops == pytest.approx(0.25)
    # buffer 0 alone: op0 0.2 + 0.01; op1 stays compute-bound at 0.5
    assert evaluate(tiny, [0, -1, -1], tiny_hw).time == pytest.approx(0.21 + 0.5 + 0.2 + 0.3)
    # buffer 1 alone: op0 0.1 + 0.02, op2 0.02
    assert evaluate(tiny, [-1, 0, -1], tiny_hw).time == pytest.approx(0.12 + 0.5 + 0.02 + 0.3)
    # buffer 2 alone: op1 memory 0.13 < compute 0.5 so no gain there; op3 0.03
    assert evaluate(tiny, [-1, -1, 0], tiny_hw).time == pytest.approx(0.3 + 0.5 + 0.2 + 0.03)


def test_tiny_optimum(tiny, tiny_hw):
    ev = evaluate(tiny, [200, 0, -1], tiny_hw)
    assert ev.time == pytest.approx(0.03 + 0.5 + 0.02 + 0.3)
    assert ev.speedup == pytest.approx(1.3 / 0.85)
    assert ev.placed_bytes_fraction == pytest.approx(300 / 600)
    assert ev.placed_buffers == 2 and ev.normalized_return == pytest.approx(1 - 0.85 / 1.3)


def test_op_overhead_and_transcendentals():
    w = Workload.from_buffers("t", flops=[10.0, 0.0], size=[4], start=[0], end=[1],
                              transcendentals=[0.0, 6.0])
    hw = Hardware(peak_flops=10.0, slow_bw=4.0, fast_bw=8.0, fast_capacity=4, op_overhead=0.25,
                  peak_transcendentals=2.0)
    # op0: max(10/10, 4/4) + 0.25 = 1.25; op1: max(6/2, 4/4) + 0.25 = 3.25
    assert evaluate(w, [-1], hw).time == pytest.approx(4.5)
    # fast: op0 max(1, 0.5) + .25, op1 max(3, .5) + .25 -> no change, both compute-bound
    assert evaluate(w, [0], hw).time == pytest.approx(4.5)


def test_conflict_names_the_first_pair(tiny, tiny_hw):
    with pytest.raises(ValueError, match=r"buffer 0 .*and buffer 2 .*overlap in fast memory"):
        evaluate(tiny, [0, 100, 50], tiny_hw)
    with pytest.raises(ValueError, match=r"buffer 0 .*and buffer 1 .*overlap"):
        evaluate(tiny, [0, 99, -1], tiny_hw)
    # disjoint in time: buffer 0 ends at op 1, a buffer starting at op 2 may reuse its bytes
    w = Workload.from_buffers("reuse", flops=[0, 0, 0], size=[8, 8], start=[0, 2], end=[1, 2])
    assert evaluate(w, [0, 0], Hardware(fast_capacity=8)).placed_buffers == 2


@pytest.mark.parametrize("offsets, message", [
    ([0, -1], r"shape \(2,\), expected \(3,\)"),
    ([-2, -1, -1], r"buffer 0: offset -2 is negative"),
    ([301, -1, -1], r"buffer 0: offset 301 \+ size 100 exceeds the fast memory \(400 bytes\)"),
    ([0.5, -1, -1], r"must be integers"),
])
def test_bad_mappings(tiny, tiny_hw, offsets, message):
    with pytest.raises(ValueError, match=message):
        evaluate(tiny, offsets, tiny_hw)


def test_alignment(tiny, tiny_hw):
    import dataclasses

    hw = dataclasses.replace(tiny_hw, alignment=64)
    with pytest.raises(ValueError, match="buffer 1: offset 100 is not a multiple of the alignment 64"):
        evaluate(tiny, [-1, 100, -1], hw)
    assert evaluate(tiny, [-1, 128, -1], hw).placed_buffers == 1


def test_unset_capacity_resolves_to_workload_default(tiny):
    w = Workload.from_buffers("c", flops=[0, 0], size=[10], start=[0], end=[1], default_capacity=10)
    assert evaluate(w, [0], Hardware()).placed_buffers == 1


def test_evaluate_matches_reference_on_minimalloc():
    from conftest import MINIMALLOC
    from reference import program_time
    from mallocgym.heuristics import xla_like
    from mallocgym.scenarios import resolve

    s = resolve(MINIMALLOC / "A.1048576.csv")
    offsets = xla_like(s)
    ev = evaluate(s.workload, offsets, s.hardware)
    assert ev.time == pytest.approx(program_time(s.workload, offsets, s.hardware), rel=1e-12)
    # MiniMalloc: zero flops, so savings are proportional to bytes placed
    saved_per_byte = 2 * (1 / s.hardware.slow_bw - 1 / s.hardware.fast_bw)
    placed = offsets >= 0
    assert ev.time_all_slow - ev.time == pytest.approx(saved_per_byte * s.workload.size[placed].sum(), rel=1e-9)


def test_hardware_validation():
    with pytest.raises(ValueError, match="slow_bw must be a finite number > 0"):
        Hardware(slow_bw=0)
    with pytest.raises(ValueError, match="alignment must be an integer >= 1"):
        Hardware(alignment=0)
    with pytest.raises(ValueError, match="fast_capacity must be an integer >= 1"):
        Hardware(fast_capacity=-3)
    with pytest.raises(ValueError, match="unknown hardware profile"):
        mallocgym.profile("tpu-v9")
    assert mallocgym.profile("tpu-v4-like", 1024).fast_capacity == 1024
