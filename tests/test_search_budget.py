"""Search budgets: every search agent returns within its wall budget (plus 10 % and a small fixed
allowance) at any program size, and never below its starting policy's mapping; completions that
give up at a deadline play exactly what the untimed ones play; ``bench`` shows and keeps the
finished runs of a run that is stopped.

"Returns within budget" is a behavioural contract, tested with generous bounds against the
agent's own recorded times (``wall_s``, ``info["fallback_s"]``), so a loaded machine does not
make it flaky: before the deadline was read inside the completions, these searches overran a
0.2 s budget by seconds (a whole expansion, 32 MCTS simulations, a nested level-1 rollout).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from mallocgym import sim
from mallocgym._clock import NO_DEADLINE, deadline_after, now_ns
from mallocgym.agents import make_agent
from mallocgym.agents.search.base import OutOfTime, _Budget
from mallocgym.agents.search.v1 import V1Game
from mallocgym.harness import BenchInterrupted, bench, solve, with_budget
from mallocgym.heuristics import complete, decide
from mallocgym.features.v1 import advance_forced
from mallocgym.heuristics.v1 import complete_greedy, complete_msa, new_game, play_action
from mallocgym.sim import canonical, v1
from mallocgym.speed import program_with_buffers

SLACK_S = 0.3  # fixed allowance past budget + 10 %: the final mapping, scheduling on a loaded machine


@pytest.fixture(scope="module")
def medium():
    return program_with_buffers(3000)


@pytest.fixture(scope="module")
def small():
    return program_with_buffers(600)


def test_clock_is_the_kernels_and_deadlines_are_absolute():
    a = now_ns()
    time.sleep(0.01)
    b = now_ns()
    assert 5e6 < b - a < 5e9
    assert deadline_after(None) == NO_DEADLINE
    assert abs(deadline_after(1.0) - now_ns() - 1e9) < 5e8


# ------------------------------------------------------------------------ completions with a deadline
def _v0_root(scenario, order="boundedness"):
    st = sim.compile_scenario(scenario.workload, scenario.hardware, order)
    return st, sim.new_state(st)


def test_v0_completions_with_a_deadline_play_what_they_play_without(medium):
    st, root = _v0_root(medium)
    mid = sim.copy_state(root)
    for _ in range(40):  # a position some way in (these buffers left slow)
        decide(st, mid, -1)
    work, timed = sim.copy_state(root), sim.copy_state(root)
    for start in (root, mid):
        expected = complete(st, start, work)
        for deadline in (NO_DEADLINE, deadline_after(600.0)):
            sim.copy_into(start, timed)
            assert sim.run_greedy(st, timed, True, False, deadline) == expected
            np.testing.assert_array_equal(timed.offsets, work.offsets)
        sim.copy_into(start, timed)
        assert np.isnan(sim.run_greedy(st, timed, True, False, now_ns() - 1))


def test_canonical_completion_with_a_deadline_plays_what_it_plays_without(medium):
    st, _ = _v0_root(medium)
    rank = canonical.ranks(st)
    state, cs = sim.new_state(st), canonical.new_canon(st)
    work = (sim.copy_state(state), canonical.copy_canon(cs))
    expected = canonical.complete(st, state, cs, rank, *work)
    for deadline in (NO_DEADLINE, deadline_after(600.0)):
        timed = (sim.copy_state(state), canonical.copy_canon(cs))
        assert canonical.run_canonical(st, *timed, rank, deadline) == expected
        np.testing.assert_array_equal(timed[0].offsets, work[0].offsets)
    timed = (sim.copy_state(state), canonical.copy_canon(cs))
    assert np.isnan(canonical.run_canonical(st, *timed, rank, now_ns() - 1))


@pytest.mark.parametrize("policy", ["xla-msa", "greedy"])
def test_v1_completions_with_a_deadline_play_what_they_play_without(small, policy):
    st, root, table, work = new_game(small)
    # a position halfway through MSA's game, and the root
    half = v1.copy_state(root)
    s = advance_forced(st, half, table)
    while s >= 0 and int(half.counters[v1.POS]) < st.seg_use.shape[0] // 2:
        s = play_action(st, half, s, table, table.msa_action[0])
    for start in (root, half):
        a = v1.copy_state(start)
        expected = (complete_msa(st, a, table) if policy == "xla-msa" else complete_greedy(st, a, table, work))
        for deadline in (NO_DEADLINE, deadline_after(600.0)):
            b = v1.copy_state(start)
            got = (complete_msa(st, b, table, deadline) if policy == "xla-msa"
                   else complete_greedy(st, b, table, work, deadline))
            assert got == expected
            for field in ("seg_kind", "seg_off", "seg_pstart", "totals"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        b = v1.copy_state(start)
        late = (complete_msa(st, b, table, now_ns() - 1) if policy == "xla-msa"
                else complete_greedy(st, b, table, work, now_ns() - 1))
        assert np.isnan(late)


def test_v1_game_runs_its_fallback_in_full_and_later_completions_give_up(small):
    game = V1Game(small, deadline=now_ns() - 1)  # a deadline already past
    assert game.completions == 1 and np.isfinite(game.best_time)  # the root's completion ran
    moves, _ = game.legal(game.root)
    with pytest.raises(OutOfTime):
        game.complete(game.play(game.root, moves[0]))
    assert game.completions == 1


def test_budget_starts_at_creation_and_records_the_overrun():
    clock = [0.0]
    budget = _Budget(None, 1.0, clock=lambda: clock[0])
    assert budget.deadline_ns == NO_DEADLINE  # a test clock: the kernels get no deadline
    clock[0] = 0.4
    budget.fallback_done()
    assert not budget.exhausted(0)
    clock[0] = 1.5
    assert budget.exhausted(0)
    assert budget.info() == {"fallback_s": 0.4, "stopped": "time", "over_budget_s": 0.5}
    assert _Budget(3, None).exhausted(2, 2) and _Budget(3, None).info() == {}


# ------------------------------------------------------------------------ the contract
def _check_within_budget(result, budget_s):
    info = result.info
    assert info["fallback_s"] > 0
    # the fallback always runs in full: when it alone exceeds the budget, that is the floor
    bound = 1.1 * max(budget_s, info["fallback_s"]) + SLACK_S
    assert result.wall_s <= bound, (result.agent, result.wall_s, info)
    assert info.get("stopped") == "time", info  # the budget, not the game's end, stopped it


V0_SPECS = ["rollout", "beam", "mcts", "rollout:levels=2", "rollout:order=canonical", "beam:order=canonical",
            "mcts:order=canonical", "mcts:pace=1"]


@pytest.mark.parametrize("spec", V0_SPECS)
def test_v0_search_returns_within_budget_and_not_below_xla(medium, spec):
    reference = solve(medium, "xla")
    agent = make_agent(spec)
    with_budget(agent, 3.0)
    solve(medium, agent)  # warm: a first run in a process loads (or compiles) every kernel it reaches
    with_budget(agent, 0.2)
    result = solve(medium, agent)
    _check_within_budget(result, 0.2)
    if "canonical" not in spec:  # the canonical mode's guarantee is its own greedy, not XLA-like
        assert result.speedup >= reference.speedup - 1e-12


@pytest.mark.parametrize("spec", ["rollout", "beam", "mcts", "rollout:completion=greedy"])
def test_v1_search_returns_within_budget_and_not_below_its_start(medium, spec):
    start = solve(medium, "xla-msa" if "greedy" not in spec else "greedy", env="v1")
    agent = make_agent(spec)
    with_budget(agent, 3.0)
    solve(medium, agent, env="v1")  # warm: every kernel the search reaches loaded (or compiled)
    # long enough for the fallback and some search, short enough that one more completion
    # (as long as the fallback's) would overrun it by far
    probe = make_agent(spec)
    with_budget(probe, 1e-3)
    fallback = solve(medium, probe, env="v1").info["fallback_s"]
    budget = 1.5 * fallback
    with_budget(agent, budget)
    result = solve(medium, agent, env="v1")
    _check_within_budget(result, budget)
    assert result.speedup >= start.speedup - 1e-12


def test_fallback_longer_than_the_budget_is_returned_and_recorded(medium):
    agent = make_agent("mcts")
    with_budget(agent, 1e-3)
    result = solve(medium, agent, env="v1")
    reference = solve(medium, "xla-msa", env="v1")
    assert result.speedup == reference.speedup  # the fallback: MSA's game in the env, its plan exactly
    assert result.info["over_budget_s"] > 0 and result.info["completions"] == 1


# ------------------------------------------------------------------------ bench as it goes
def test_bench_prints_each_row_and_an_interrupt_keeps_the_finished_ones(monkeypatch, capsys, tmp_path):
    from mallocgym import harness
    from mallocgym.cli import main

    def stopped_runner(runs):
        yield 0, solve(runs[0].scenario, runs[0].agent)
        raise KeyboardInterrupt

    monkeypatch.setattr(harness, "local_runner", stopped_runner)
    scenario = "mlp-train@1/8"
    with pytest.raises(BenchInterrupted) as caught:
        bench([harness_scenario(scenario)], ["all-slow", "xla"], progress=False)
    assert [r.agent for r in caught.value.results] == ["all-slow"] and caught.value.total == 2
    capsys.readouterr()
    out = tmp_path / "res"
    code = main(["bench", "--scenario", scenario, "--agents", "all-slow,xla", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 130 and "interrupted" in captured.err
    assert f"{scenario}  all-slow: speedup 1.0000" in captured.err  # the row, as it finished
    assert "| all-slow |" in captured.out and "| xla |" not in captured.out  # the partial table
    rows = json.loads((out / "results.json").read_text())
    assert [r["agent"] for r in rows] == ["all-slow"]
    assert "Interrupted after 1 of 2 runs" in (out / "results.md").read_text()


def harness_scenario(name):
    from mallocgym import scenarios

    return scenarios.get(name)


def test_bench_stopped_by_sigterm_writes_what_finished(tmp_path):
    out = tmp_path / "res"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "mallocgym.cli", "bench", "--scenario", "alexnet-train@1/8",
                             "--agents", "xla,mcts:simulations=100000", "--budget-s", "300", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        seen = ""
        deadline = time.monotonic() + 240
        while "alexnet-train@1/8  xla: speedup" not in seen and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
            seen += line
        assert "alexnet-train@1/8  xla: speedup" in seen, seen
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "| xla |" in stdout and "mcts" not in stdout
    assert [r["agent"] for r in json.loads((out / "results.json").read_text())] == ["xla"]


# ------------------------------------------------------------------------ bench --speed --sizes
@pytest.mark.parametrize("text, message", [
    ("abc", "'abc' is not a whole number"), ("1000,1000", "1000 is given twice"), ("5", "5 is out of range"),
    (",", "a comma-separated list of buffer counts"), ("1000,-3", "'-3' is not a whole number"),
    ("1e4", "'1e4' is not a whole number")])
def test_bad_sizes_are_one_clear_error(capsys, text, message):
    from mallocgym.cli import main

    assert main(["bench", "--speed", "--sizes", text]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert main(["bench", "--sizes", "1000"]) == 2
    assert "--sizes is a setting of --speed" in capsys.readouterr().err


def test_size_sweep_measures_every_size_with_ratios_to_the_smallest():
    from mallocgym.speed import format_sizes, measure_sizes, parse_sizes, size_stages

    assert parse_sizes("1000, 10_000,60000") == [1000, 10000, 60000]
    stages = []
    report = measure_sizes([400, 200], progress=stages.append)
    rows = report["sizes"]
    assert [r["buffers_asked"] for r in rows] == [400, 200] and len(stages) == size_stages(2) == 1 + 2 + 4 * 3
    for r in rows:
        assert r["v1_episode_steps"] > 0 and r["completion_decisions"] > 0 and 0 < r["v0_episode_steps"] <= r["buffers"]
        assert r["msa_plan_s"] > 0 and r["v1_step_us"] > 0 and r["v0_step_us"] > 0
        assert r["msa_plan_wall_s"] > 0 and r["v1_step_wall_us"] > 0 and r["completion_wall_us_per_decision"] > 0
    table = format_sizes(report)
    small_row = [line for line in table.splitlines() if line.startswith(f"| {rows[1]['buffers']:,} ")][0]
    assert small_row.count("| 1.00 |") == 4  # its own ratios
    assert "ratio to the" in table
