"""The CP-SAT exact agent: optima against brute force, a rigorous lower bound, the agent glue."""

import sys
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("ortools")

from mallocgym import Hardware, Workload, evaluate  # noqa: E402
from mallocgym import cli, harness  # noqa: E402
from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.pricing.v0 import program_time  # noqa: E402
from mallocgym.agents.exact import (  # noqa: E402
    BOUND_SAFETY, ExactConfig, MissingSolverError, _maximal_cliques, build_problem, drop_to_grid, solve_exact,
)
from mallocgym.heuristics import xla_like  # noqa: E402
from mallocgym.scenarios import Scenario, resolve  # noqa: E402

from conftest import MINIMALLOC  # noqa: E402

FAST = ExactConfig(time_limit_s=20.0, workers=1)


def brute_force(workload: Workload, hardware: Hardware) -> tuple[float, np.ndarray]:
    """The least program time over every mapping: each buffer slow or at any aligned offset
    in ``[0, capacity - size]``, pairs checked for overlap; ``evaluate()`` prices one witness
    mapping per set of fast buffers (the time depends on nothing else)."""
    n, capacity, align = workload.num_buffers, hardware.fast_capacity, hardware.alignment
    size, start, end = workload.size.tolist(), workload.start.tolist(), workload.end.tolist()
    witness: dict[frozenset, list[int]] = {}
    offsets = [-1] * n

    def clash(b: int, off: int) -> bool:
        for j in range(b):
            o = offsets[j]
            if o >= 0 and start[j] <= end[b] and start[b] <= end[j] and o < off + size[b] and off < o + size[j]:
                return True
        return False

    def visit(b: int) -> None:
        if b == n:
            witness.setdefault(frozenset(i for i in range(n) if offsets[i] >= 0), list(offsets))
            return
        for off in [-1, *range(0, capacity - size[b] + 1, align)]:
            if off < 0 or not clash(b, off):
                offsets[b] = off
                visit(b + 1)
        offsets[b] = -1

    visit(0)
    priced = [(evaluate(workload, m, hardware).time, m) for m in witness.values()]
    best_time, best = min(priced, key=lambda p: p[0])
    return best_time, np.array(best)


def check_exact_matches_brute_force(workload: Workload, hardware: Hardware, config: ExactConfig = FAST) -> None:
    scenario = Scenario(workload.name, workload, hardware)
    optimum, _ = brute_force(workload, hardware)
    solution = solve_exact(scenario, config)
    got = evaluate(workload, solution.offsets, hardware).time
    slack = solution.info["rounding_slack_s"]
    assert solution.info["status"] == "OPTIMAL"
    assert got == pytest.approx(optimum, rel=1e-6, abs=slack)
    # the bound is rigorous (never above the true optimum) and tight up to the rounding slack
    assert solution.time_lower_bound <= optimum
    assert optimum - solution.time_lower_bound <= slack + 2 * BOUND_SAFETY * optimum


def random_instance(rng: np.random.Generator, index: int) -> tuple[Workload, Hardware]:
    """A tiny program: 2-5 ops, 2-5 buffers with 1-3 accesses each, some ops partly
    compute-bound, sizes that need not be multiples of the alignment, a few units of memory."""
    n_ops, n = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    align = int(rng.choice([1, 2, 4]))
    grain = int(rng.choice([1, align, 2 * align]))
    size = grain * rng.integers(1, 3, n) + (rng.integers(0, align, n) if grain == 1 else 0)
    start = rng.integers(0, n_ops, n)
    end = start + rng.integers(0, n_ops - start)
    accesses = []
    for b in range(n):
        ops = rng.integers(start[b], end[b] + 1, int(rng.integers(1, 4)))
        accesses.append([(int(t), int(rng.integers(0, 3 * size[b] + 1)), bool(k == 0)) for k, t in enumerate(ops)])
    slow_bw, fast_bw = 1000.0, float(rng.choice([2000.0, 10000.0]))
    op_bytes = np.zeros(n_ops)
    for per_buffer in accesses:
        for t, nbytes, _ in per_buffer:
            op_bytes[t] += nbytes
    # compute time somewhere between 0 and a bit more than the all-slow memory time
    flops = (op_bytes / slow_bw) * rng.uniform(0.0, 1.2, n_ops) * (rng.random(n_ops) < 0.6) * 1e12
    capacity = max(int(size.max()), align * int(rng.integers(2, 5)))
    workload = Workload.from_buffers(f"rand{index}", flops.tolist(), size.tolist(), start.tolist(),
                                     end.tolist(), accesses)
    hardware = Hardware(peak_flops=1e12, slow_bw=slow_bw, fast_bw=fast_bw, fast_capacity=capacity,
                        alignment=align, op_overhead=float(rng.choice([0.0, 0.01])))
    return workload, hardware


# ------------------------------------------------------------------------- hand-worked optima
def test_tiny_fixture_optimum(tiny, tiny_hw):
    solution = solve_exact(Scenario("tiny", tiny, tiny_hw), FAST)
    assert evaluate(tiny, solution.offsets, tiny_hw).time == pytest.approx(0.85)
    assert list(solution.offsets >= 0) == [True, True, False]
    assert solution.info["status"] == "OPTIMAL"
    assert 0.85 - solution.info["rounding_slack_s"] <= solution.time_lower_bound <= 0.85


def test_trap_fixture_beats_xla(trap):
    workload, hw = trap
    scenario = Scenario("trap", workload, hw)
    assert evaluate(workload, xla_like(scenario), hw).time == pytest.approx(0.86)
    solution = solve_exact(scenario, FAST)
    assert evaluate(workload, solution.offsets, hw).time == pytest.approx(0.68)
    assert list(solution.offsets >= 0) == [False, True, True]
    assert solution.info["status"] == "OPTIMAL" and solution.info["source"] == "cp-sat"
    assert 0.68 - solution.info["rounding_slack_s"] <= solution.time_lower_bound <= 0.68


def test_hand_made_instances_match_brute_force():
    # alignment 4, sizes 3/5/6 (occupying 4/8/8 bytes of aligned space), capacity 14 (not aligned)
    w = Workload.from_buffers("align", flops=[0.0, 0.0, 0.0], size=[3, 5, 6, 4], start=[0, 0, 1, 2],
                              end=[1, 2, 2, 2])
    check_exact_matches_brute_force(w, Hardware(1e12, 1000.0, 10000.0, fast_capacity=14, alignment=4))
    # a partly compute-bound op: op 1 computes 0.25 s, its memory goes 0.6 s -> 0.06 s
    w = Workload.from_buffers("bound", flops=[0.0, 2.5e11, 0.0], size=[300, 300, 200], start=[0, 0, 1],
                              end=[1, 1, 2])
    check_exact_matches_brute_force(w, Hardware(1e12, 1000.0, 10000.0, fast_capacity=500))
    # transcendentals and op overhead
    w = Workload.from_buffers("trans", flops=[1e11, 0.0], size=[100, 100], start=[0, 0], end=[1, 1],
                              transcendentals=[0.0, 3e11])
    check_exact_matches_brute_force(w, Hardware(1e12, 1000.0, 10000.0, fast_capacity=100,
                                                op_overhead=0.05, peak_transcendentals=1e12))


@pytest.mark.parametrize("index", range(16))
def test_random_tiny_instances_match_brute_force(index):
    workload, hardware = random_instance(np.random.default_rng(1000 + index), index)
    check_exact_matches_brute_force(workload, hardware)


@pytest.mark.parametrize("no_overlap", ["2d", "both"])
def test_other_placement_formulations_match_brute_force(no_overlap):
    config = ExactConfig(time_limit_s=20.0, workers=1, no_overlap=no_overlap)
    for index in range(16, 24):
        workload, hardware = random_instance(np.random.default_rng(1000 + index), index)
        check_exact_matches_brute_force(workload, hardware, config)


def test_slower_fast_memory_keeps_everything_slow():
    w = Workload.from_buffers("inverted", flops=[0.0, 0.0], size=[10, 10], start=[0, 1], end=[1, 1])
    hw = Hardware(1e12, slow_bw=1000.0, fast_bw=500.0, fast_capacity=20)
    problem = build_problem(Scenario("inverted", w, hw))
    assert problem.buffers.size == 0
    solution = solve_exact(Scenario("inverted", w, hw), FAST)
    assert list(solution.offsets) == [-1, -1]
    assert solution.time_lower_bound == pytest.approx(evaluate(w, [-1, -1], hw).time, rel=1e-9)
    assert solution.time_lower_bound <= evaluate(w, [-1, -1], hw).time


# ------------------------------------------------------------------------- the integer model
def test_problem_units_and_useful_buffers(tiny, tiny_hw):
    problem = build_problem(Scenario("tiny", tiny, tiny_hw))
    assert problem.unit == 100  # gcd of 100, 200, 300
    assert list(problem.length) == [1, 2, 3] and list(problem.max_offset) == [3, 2, 1]
    assert problem.capacity_units == 4
    # op 1 (compute 0.5 s, memory 0.4 s all slow) is a constant; the others are linear
    assert problem.max_ops == [] and len(problem.linear) == 3
    # alignment 64: sizes 100 and 200 occupy 128 and 256 bytes; unit 128; capacity 300 holds
    # aligned space up to ceil_64(300) = 320 bytes: 2 units (so the two cannot share it)
    w = Workload.from_buffers("a64", flops=[0.0], size=[100, 200], start=[0, 0], end=[0, 0])
    problem = build_problem(Scenario("a64", w, Hardware(fast_capacity=300, alignment=64)))
    assert problem.unit == 128 and list(problem.length) == [1, 2]
    assert list(problem.max_offset) == [1, 0] and problem.capacity_units == 2
    # a buffer touched only by a compute-bound op cannot help: it stays out of the model
    w = Workload.from_buffers("cb", flops=[1e12, 0.0], size=[8, 8], start=[0, 1], end=[0, 1])
    problem = build_problem(Scenario("cb", w, Hardware(1e12, 1000.0, 10000.0, fast_capacity=8)))
    assert list(problem.buffers) == [1]


def test_integer_objective_underestimates_every_mapping():
    rng = np.random.default_rng(7)
    for index in range(6):
        workload, hw = random_instance(rng, index)
        problem = build_problem(Scenario("r", workload, hw), resolution=1000)
        for _ in range(20):
            fast = rng.random(workload.num_buffers) < 0.5
            x = {i: bool(fast[b]) for i, b in enumerate(problem.buffers)}
            objective = sum(s for i, s in problem.linear.items() if x[i])
            for low, mem, gains in problem.max_ops:
                objective += max(low, mem - sum(s for i, s in gains.items() if x[i]))
            true = Fraction(program_time(workload, fast, hw)[0])
            estimate = problem.time_of(objective)
            assert estimate <= true * (1 + Fraction(1, 10**12))
            assert true - estimate <= problem.quantum * problem.terms * (1 + Fraction(1, 10**9))


def test_maximal_cliques_against_every_point():
    rng = np.random.default_rng(3)
    for _ in range(30):
        start = rng.integers(0, 8, 7)
        end = start + rng.integers(0, 4, 7)
        sets = {frozenset(np.flatnonzero((start <= t) & (end >= t)).tolist()) for t in range(12)}
        maximal = {s for s in sets if s and not any(s < o for o in sets)}
        assert {frozenset(c.tolist()) for c in _maximal_cliques(start, end)} == maximal


def test_drop_to_grid_keeps_the_split_and_lowers_offsets():
    scenario = resolve(MINIMALLOC / "A.1048576.csv")
    offsets = xla_like(scenario)
    dropped = drop_to_grid(scenario, offsets, 1024)
    evaluate(scenario.workload, dropped, scenario.hardware)  # valid
    assert np.array_equal(dropped >= 0, offsets >= 0)
    assert np.all(dropped <= offsets) and np.all(dropped[dropped >= 0] % 1024 == 0)


# ------------------------------------------------------------------------- MiniMalloc, harness
def test_minimalloc_small_file_optimal_and_short_run_never_worse_than_xla():
    small = resolve(MINIMALLOC / "input.12.csv", capacity=8)
    check_exact_matches_brute_force(small.workload, small.hardware)
    # the MiniMalloc path under a short time limit: valid, at least as good as XLA-like
    scenario = resolve(MINIMALLOC / "A.1048576.csv")
    solution = solve_exact(scenario, ExactConfig(time_limit_s=2.0, workers=1))
    ev = evaluate(scenario.workload, solution.offsets, scenario.hardware)
    assert ev.time <= evaluate(scenario.workload, xla_like(scenario), scenario.hardware).time
    assert solution.info["status"] in ("FEASIBLE", "OPTIMAL")
    assert solution.info["unit_bytes"] == 1024
    # MiniMalloc's A fits whole: no bound can exceed the all-fast time
    all_fast, _ = program_time(scenario.workload, np.ones(scenario.workload.num_buffers, bool), scenario.hardware)
    assert solution.time_lower_bound <= all_fast <= ev.time


def test_stopped_in_presolve_still_reports_a_valid_bound():
    # a limit too short to leave presolve: CP-SAT says UNKNOWN with a meaningless bound of 0
    scenario = resolve(MINIMALLOC / "A.1048576.csv")
    solution = solve_exact(scenario, ExactConfig(time_limit_s=0.001, workers=1))
    xla = evaluate(scenario.workload, xla_like(scenario), scenario.hardware)
    assert solution.info["status"] == "UNKNOWN" and solution.info["source"] == "xla"
    assert np.array_equal(solution.offsets, xla_like(scenario))
    all_fast, _ = program_time(scenario.workload, np.ones(scenario.workload.num_buffers, bool), scenario.hardware)
    assert solution.time_lower_bound <= all_fast < xla.time
    assert all_fast - solution.time_lower_bound <= solution.info["rounding_slack_s"]


@pytest.mark.slow
def test_minimalloc_a_time_limited_run_improves_on_xla():
    scenario = resolve(MINIMALLOC / "A.1048576.csv")
    result = harness.solve(scenario, make_agent("exact:5"))
    xla = evaluate(scenario.workload, xla_like(scenario), scenario.hardware)
    assert result.placed_bytes_fraction > xla.placed_bytes_fraction
    assert result.time_lower_bound <= result.time and result.gap is not None


def test_harness_reports_status_and_gap(tiny, tiny_hw):
    result = harness.solve(Scenario("tiny", tiny, tiny_hw), make_agent("exact:5"))
    assert result.agent == "exact:5" and result.info["status"] == "OPTIMAL"
    assert result.gap is not None and 0.0 <= result.gap < 1e-6
    assert result.time == pytest.approx(0.85) and result.info["wall_s"] > 0


# ------------------------------------------------------------------------- configuration, errors
def test_agent_spec_and_config_validation():
    assert make_agent("exact").config.time_limit_s == 10.0
    assert make_agent("exact:2.5").config.time_limit_s == 2.5
    for spec in ("exact:abc", "exact:0", "exact:-1", "exact:inf"):
        with pytest.raises(ValueError, match="exact"):
            make_agent(spec)
    for bad in ({"time_limit_s": 0}, {"workers": 0}, {"workers": 1.5}, {"resolution": 10},
                {"no_overlap": "3d"}):
        with pytest.raises(ValueError, match="ExactConfig"):
            ExactConfig(**bad)


def test_missing_ortools_names_the_extra(monkeypatch, tiny, tiny_hw, capsys):
    monkeypatch.setitem(sys.modules, "ortools.sat.python", None)
    monkeypatch.setitem(sys.modules, "ortools.sat.python.cp_model", None)
    with pytest.raises(ImportError, match=r"pip install mallocgym\[exact\]"):
        make_agent("exact")
    with pytest.raises(MissingSolverError):
        solve_exact(Scenario("tiny", tiny, tiny_hw))
    status = cli.main(["solve", str(MINIMALLOC / "input.12.csv"), "--capacity", "8", "--agent", "exact"])
    err = capsys.readouterr().err
    assert status == 2 and "pip install mallocgym[exact]" in err and len(err.strip().splitlines()) == 1
