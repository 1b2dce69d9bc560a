"""Search agents: never worse than XLA-like, optimal on hand-worked traps, budgets respected,
and the mappings they return are games MallocGame-v0 itself can play."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mallocgym import Hardware, Workload, evaluate, heuristics
from mallocgym.agents import make_agent
from mallocgym.agents.base import parse_config
from mallocgym.agents.search import (BeamAgent, BeamConfig, MCTSAgent, MCTSConfig, RolloutAgent,
                                     RolloutConfig, pace_allowance)
from mallocgym.env import MallocGameEnv
from mallocgym.harness import solve
from mallocgym.scenarios import capacity_for, resolve
from mallocgym.scenarios import planted
from mallocgym.workloads.generator import generate
from mallocgym.workloads.synthetic import mlp_training_step

from conftest import MINIMALLOC, baseline_script

SMALL = {  # cheap settings so the default run stays fast
    "rollout": "rollout",
    "beam": "beam:width=2",
    "mcts": "mcts:simulations=4",
}


def _scenarios():
    out = [(f"minimalloc-{x}", lambda x=x: resolve(MINIMALLOC / f"{x}.1048576.csv")) for x in "ABCDE"]
    for seed in (1, 4):
        w = mlp_training_step(seed)
        for f in (Fraction(1, 8), Fraction(1, 2)):
            out.append((f"mlp-s{seed}@{f}", lambda w=w, f=f: resolve(w, capacity=capacity_for(w, f))))
    for seed in range(2):
        out.append((f"generated-s{seed}", lambda s=seed: resolve(generate("small", s))))
        out.append((f"planted-s{seed}", lambda s=seed: planted(s, n_buffers=40)[0]))
    return out


SCENARIOS = _scenarios()


@pytest.fixture
def trap_scenario(trap):
    workload, hw = trap
    return resolve(workload, hw)


@pytest.mark.parametrize("kind", list(SMALL))
@pytest.mark.parametrize("sid,make", SCENARIOS, ids=[s for s, _ in SCENARIOS])
def test_never_worse_than_xla(kind, sid, make):
    """Validated by evaluate() in the harness; XLA-like's own mapping is the starting incumbent."""
    scenario = make()
    xla = solve(scenario, "xla")
    result = solve(scenario, SMALL[kind])
    assert result.time <= xla.time * (1 + 1e-12), (sid, result.speedup, xla.speedup)


@pytest.mark.parametrize("letter", "ABCDE")
def test_rollout_beats_greedy_on_minimalloc(letter):
    """MiniMalloc A-E: rollout places clearly more bytes than XLA-like and best fit."""
    scenario = resolve(MINIMALLOC / f"{letter}.1048576.csv")
    rollout = solve(scenario, "rollout")
    for greedy in ("xla", "best-fit"):
        assert rollout.placed_bytes_fraction >= solve(scenario, greedy).placed_bytes_fraction + 0.004


@pytest.mark.parametrize("spec", ["rollout", "beam", "mcts", "rollout:levels=2", "beam:width=1",
                                  "mcts:simulations=4"])
def test_optimum_of_trap(spec, trap_scenario, trap):
    """XLA-like takes the big buffer (0.86 s); skipping it for the two small ones is optimal:
    0.68 s."""
    workload, hw = trap
    result = solve(trap_scenario, spec)
    np.testing.assert_array_equal(result.offsets, [-1, 0, 100])
    assert result.time == pytest.approx(0.68, rel=1e-12)
    assert solve(trap_scenario, "xla").time == pytest.approx(0.86, rel=1e-12)


def test_optimum_of_tiny(tiny, tiny_hw):
    """tiny's optimum, 0.85 s, is XLA-like's own: the search keeps it."""
    scenario = resolve(tiny, tiny_hw)
    for spec in SMALL.values():
        assert solve(scenario, spec).time == pytest.approx(0.85, rel=1e-12)


def _brute_force_game(scenario, k):
    """Best time over every action sequence of MallocGame on ``scenario`` (tiny instances)."""
    env = MallocGameEnv(scenario, n_candidates=k, invalid_action="raise")
    env.reset()
    best = np.inf

    def walk():
        nonlocal best
        legal = np.flatnonzero(env.action_masks())
        snap = env.clone_state()
        for a in legal:
            env.restore_state(snap)
            _, _, done, _, info = env.step(int(a))
            if done:
                best = min(best, info["time"])
            else:
                walk()

    walk()
    return best


@pytest.mark.parametrize("seed", range(4))
def test_beam_and_mcts_reach_game_optimum_on_small_instances(seed):
    """On 7-buffer programs, a wide beam and MCTS with enough simulations find the best
    mapping the game can express (checked by enumerating every action sequence)."""
    rng = np.random.default_rng(seed)
    n = 7
    start = rng.integers(0, 6, n)
    end = start + rng.integers(0, 4, n)
    size = rng.integers(1, 9, n) * 10
    workload = Workload.from_buffers(f"rand{seed}", flops=np.zeros(int(end.max()) + 1), size=size,
                                     start=start, end=end)
    hw = Hardware(peak_flops=1e12, slow_bw=1000.0, fast_bw=10000.0, fast_capacity=int(size.sum()) // 3)
    scenario = resolve(workload, hw)
    optimum = _brute_force_game(scenario, 4)
    for agent in (BeamAgent(BeamConfig(width=64, n_candidates=4)),
                  MCTSAgent(MCTSConfig(simulations=200, n_candidates=4))):
        assert solve(scenario, agent).time == pytest.approx(optimum, rel=1e-12), agent.name


def _replay(scenario, offsets, k):
    """Play ``offsets`` through the env (default order, K candidates): every decision must be
    one of the env's legal actions. Returns the env's final info."""
    env = MallocGameEnv(scenario, n_candidates=k, invalid_action="raise")
    env.reset()
    while True:
        b = env.unwrapped.current_buffer
        cands = env.unwrapped.candidate_offsets
        if offsets[b] < 0:
            action = k
        else:
            hits = np.flatnonzero(cands == offsets[b])
            assert hits.size == 1, f"buffer {b} at {offsets[b]} is not a candidate {cands.tolist()}"
            action = int(hits[0])
        _, _, done, _, info = env.step(action)
        if done:
            return info


@pytest.mark.parametrize("spec", ["rollout", "beam:width=2", "mcts:simulations=4",
                                  "rollout:n_candidates=3"])
@pytest.mark.parametrize("letter", "AE")
def test_search_plays_the_env_game(spec, letter):
    """The search branches on the simulator, not the env; its answer is still a MallocGame
    episode, with the same time as the env computes."""
    scenario = resolve(MINIMALLOC / f"{letter}.1048576.csv")
    agent = make_agent(spec)
    solution = agent.solve(scenario)
    info = _replay(scenario, solution.offsets, agent.config.n_candidates)
    np.testing.assert_array_equal(info["offsets"], solution.offsets)
    ev = evaluate(scenario.workload, solution.offsets, scenario.hardware)
    assert info["time"] == pytest.approx(ev.time, rel=1e-12)


def test_rollout_completion_budget():
    """max_completions caps the XLA-like completions; with 1 the answer is XLA-like's."""
    scenario = resolve(MINIMALLOC / "A.1048576.csv")
    xla = heuristics.xla_like(scenario)
    one = RolloutAgent(RolloutConfig(max_completions=1)).solve(scenario)
    np.testing.assert_array_equal(one.offsets, xla)
    assert one.info["completions"] == 1
    for budget in (10, 100):
        capped = RolloutAgent(RolloutConfig(max_completions=budget)).solve(scenario)
        assert capped.info["completions"] <= budget
    full = RolloutAgent().solve(scenario)
    assert full.info["completions"] > 100
    n, k = scenario.workload.num_buffers, 16
    assert full.info["completions"] <= 1 + n * (k + 1)


def test_nested_rollout_budget():
    scenario = planted(0, n_buffers=24)[0]
    capped = RolloutAgent(RolloutConfig(levels=2, max_completions=50)).solve(scenario)
    assert capped.info["completions"] <= 50
    full = RolloutAgent(RolloutConfig(levels=2)).solve(scenario)
    assert full.info["completions"] > 50
    assert solve(scenario, RolloutAgent(RolloutConfig(levels=2))).time <= solve(scenario, "rollout").time * (1 + 1e-12)


def test_beam_budget_and_width_one_is_rollout():
    scenario = resolve(MINIMALLOC / "B.1048576.csv")
    capped = BeamAgent(BeamConfig(width=3, max_completions=200)).solve(scenario)
    assert capped.info["completions"] <= 200
    one = BeamAgent(BeamConfig(width=1)).solve(scenario)
    rollout = RolloutAgent().solve(scenario)
    np.testing.assert_array_equal(one.offsets, rollout.offsets)
    wide = BeamAgent(BeamConfig(width=3)).solve(scenario)
    assert wide.info["completions"] <= 1 + 3 * 17 * scenario.workload.num_buffers


def test_mcts_simulation_budget():
    """``simulations`` per decision with more than one legal action, at most one completion each."""
    scenario = resolve(MINIMALLOC / "C.1048576.csv")
    for sims in (1, 3):
        sol = MCTSAgent(MCTSConfig(simulations=sims)).solve(scenario)
        assert sol.info["simulations"] % sims == 0
        assert 0 < sol.info["simulations"] <= sims * scenario.workload.num_buffers
        assert sol.info["completions"] <= 1 + sol.info["simulations"] + scenario.workload.num_buffers


@pytest.mark.parametrize("spec", ["rollout", "rollout:levels=2", "beam", "mcts"])
def test_spent_time_limit_returns_xla(spec):
    """A time limit already over at the first decision: the answer is XLA-like's mapping."""
    scenario = resolve(MINIMALLOC / "E.1048576.csv")
    agent = make_agent(f"{spec}{',' if ':' in spec else ':'}time_limit=1e-9")
    np.testing.assert_array_equal(agent.solve(scenario).offsets, heuristics.xla_like(scenario))


def test_agents_are_deterministic():
    scenario = resolve(MINIMALLOC / "D.1048576.csv")
    for spec in SMALL.values():
        a = make_agent(spec).solve(scenario, seed=0).offsets
        b = make_agent(spec).solve(scenario, seed=5).offsets
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- agent arguments
def test_agent_arguments():
    assert make_agent("mcts:64").config == MCTSConfig(simulations=64)
    assert make_agent("mcts:simulations=8,c_uct=1.5").config == MCTSConfig(simulations=8, c_uct=1.5)
    assert make_agent("beam:8").config == BeamConfig(width=8)
    assert make_agent("rollout:levels=2,time_limit=30").config == RolloutConfig(levels=2, time_limit=30.0)
    assert make_agent("rollout:max_completions=none").config == RolloutConfig()
    assert make_agent("rollout").name == "rollout" and make_agent("beam:8").name == "beam:8"


@pytest.mark.parametrize("spec,match", [
    ("mcts:depth=3", "unknown setting 'depth'"),
    ("mcts:lots", "cannot read 'lots'"),
    ("mcts:0", "simulations must be >= 1"),
    ("beam:width=0", "width must be >= 1"),
    ("rollout:levels=3", "levels must be 1 or 2"),
    ("rollout:time_limit=-1", "time_limit must be > 0"),
    ("mcts:c_uct=nan", "c_uct must be"),
    ("beam:4,8", "expected key=value"),
])
def test_bad_agent_arguments(spec, match):
    with pytest.raises(ValueError, match=match):
        make_agent(spec)


def test_parse_config_bool_and_none():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class C:
        flag: bool = False
        limit: int | None = 3

    assert parse_config(C, "flag=yes,limit=None") == C(True, None)
    with pytest.raises(ValueError, match="cannot read"):
        parse_config(C, "flag=maybe")


# ----------------------------------------------------------------------------- leaderboard
def test_make_readme_builds_tables(tmp_path):
    """Two entries on MiniMalloc scenarios: the table has both agents, the best in bold, the
    gap where a bound is known, the summary's geometric mean, and each entry's command."""
    import json

    mr = baseline_script("make_readme.py")
    rows = {
        "xla/minimalloc": [("minimalloc-A@1MiB", "xla", 2.0, 0.9, None), ("minimalloc-B@1MiB", "xla", 8.0, 0.95, None)],
        "rollout/minimalloc": [("minimalloc-A@1MiB", "rollout", 4.0, 0.97, 0.25),
                               ("minimalloc-B@1MiB", "rollout", 8.0, 0.95, None)],
    }
    for entry, results in rows.items():
        folder = tmp_path / entry
        folder.mkdir(parents=True)
        (folder / "command.txt").write_text(f"mallocgym bench --agents {entry.split('/')[0]}\n")
        (folder / "results.json").write_text(json.dumps([
            {"scenario": s, "agent": a, "speedup": x, "placed_bytes_fraction": p, "wall_s": 0.5,
             "time": 1.0 / x, "time_all_slow": 1.0, "gap": g} for s, a, x, p, g in results]))
    rows, where = mr.load_entries(tmp_path), mr.suite_of()
    text, summary = mr.render(rows, where)
    page = mr.entry_pages(rows, where)["rollout/minimalloc"]   # xla's column first, for reference
    assert "| minimalloc-A@1MiB | 2.000 | **4.000 (gap 25.0%)** |" in page
    assert "| minimalloc-B@1MiB | **8.000** | **8.000** |" in page
    assert "`mallocgym bench --agents rollout`" in page
    # geomean of 2 and 8 is 4; rollout: sqrt(4 * 8); wins A (4 > 2), ties B; wall 2 x 0.5 s
    assert "| xla | 4.000 | baseline | 1.0 |  | [xla/minimalloc](xla/minimalloc/RESULTS.md) |" in text
    assert "| rollout | 5.657 | 1 / 1 / 0 | 1.0 |  | [rollout/minimalloc](rollout/minimalloc/RESULTS.md) |" in text
    assert "minimalloc-A@1MiB" not in text   # per-scenario rows live in the entries' pages
    assert "(../baselines/rollout/minimalloc/RESULTS.md)" in summary


def test_make_readme_rejects_bad_results(tmp_path):
    mr = baseline_script("make_readme.py")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "results.json").write_text('[{"scenario": "a"}]')
    with pytest.raises(ValueError, match="missing field 'agent'"):
        mr.load_entries(tmp_path)


def test_make_readme_lists_training_budgets(tmp_path):
    import json

    mr = baseline_script("make_readme.py")
    (tmp_path / "mz").mkdir()
    log = [{"event": "progress", "elapsed_s": 10.0, "env_steps": 5, "episodes": 0, "train_steps": 0},
           {"event": "end", "elapsed_s": 1800.2, "env_steps": 12345, "episodes": 67, "train_steps": 890}]
    (tmp_path / "mz" / "train-log.jsonl").write_text("\n".join(json.dumps(e) for e in log) + "\n")
    (tmp_path / "ppo" / "model").mkdir(parents=True)
    (tmp_path / "ppo" / "model" / "train.json").write_text(json.dumps({"trained": {"minutes": 9.9999, "steps": 1000}}))
    lines = mr.training_budgets(tmp_path)
    assert lines[0].endswith("30 minutes of wall-clock training, 12,345 moves in 67 games, 890 updates "
                             "(`mz/train-log.jsonl`)")
    assert "10 minutes of wall-clock training, 1,000 env steps" in lines[1]
    labelled = {"event": "end", "elapsed_s": 1500.0, "env_steps": 40, "episodes": 40, "positions": 1900,
                "train_steps": 77}   # a labelled-games run: one actor step per game
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "train-log.jsonl").write_text(json.dumps(labelled) + "\n")
    assert ("25 minutes of wall-clock training, 40 labelled games (1,900 labelled positions to the replay), "
            "77 updates (`lab/train-log.jsonl`)") in mr.training_budgets(tmp_path)[0]
    # a run started from another's weights (--init): both budgets, and the training column their sum
    (tmp_path / "lab" / "train-log.jsonl").write_text(json.dumps({**labelled, "init_elapsed_s": 3300.0}) + "\n")
    assert ("25 minutes of wall-clock training after 55 minutes of the run it started from (`--init`), "
            "40 labelled games") in mr.training_budgets(tmp_path)[0]
    assert mr.trained_models(tmp_path)["lab"] == "80 min"
    (tmp_path / "lab" / "train-log.jsonl").unlink()
    (tmp_path / "lab").rmdir()
    text, docs = mr.render([], {}, lines)
    assert "**Training budgets" in docs and "[`mz`](../baselines/mz/)" in docs
    (tmp_path / "mz" / "train-log.jsonl").write_text(json.dumps(log[0]) + "\n")
    with pytest.raises(ValueError, match="no 'end' event"):
        mr.training_budgets(tmp_path)


# ----------------------------------------------------------------------------- pace
def test_pace_allowance_hand_worked():
    """10 s left, 4 buffers to place (this one included), 1 of 2 decisions so far searched
    (f = 0.5). Equal shares: 4 x 0.5 = 2 searched decisions expected, 5 s each. By length: the
    decisions weigh 4, 3, 2, 1 (10 in all), half of them searched: 5, so this one (weight 4)
    gets 10 x 4 / 5 = 8 s, i.e. 10 / (0.5 x 5 / 2)."""
    assert pace_allowance(10.0, 4, 1, 2) == pytest.approx(5.0)
    assert pace_allowance(10.0, 4, 1, 2, by_length=True) == pytest.approx(8.0)
    # the last buffer, or nothing searched yet: at most the whole time left
    assert pace_allowance(10.0, 1, 1, 1, by_length=True) == pytest.approx(10.0)
    assert pace_allowance(10.0, 40, 0, 3) == pytest.approx(10.0)
    assert pace_allowance(-1.0, 4, 1, 2) == 0.0 and pace_allowance(-1.0, 4, 1, 2, by_length=True) == 0.0


def test_mcts_pace_spends_its_time_limit(monkeypatch):
    """Each completion takes 0.001 fake s: one simulation per decision ends far inside 0.5 s;
    paced, the same search runs more simulations and ends within the limit plus one
    simulation, never worse than XLA-like."""
    from mallocgym.agents.search import UCT, V0Game
    from mallocgym import sim

    scenario = resolve(MINIMALLOC / "C.1048576.csv")
    clock = [0.0]
    real = V0Game.complete

    def complete(self, state):
        clock[0] += 0.001
        return real(self, state)

    monkeypatch.setattr(V0Game, "complete", complete)

    def run(cfg):
        clock[0] = 0.0
        st = sim.compile_scenario(scenario.workload, scenario.hardware, "boundedness")
        game = V0Game(st, cfg.n_candidates)
        sims = UCT(game, game.root, cfg).run(cfg.time_limit, clock=lambda: clock[0])
        return sims, clock[0], game.incumbent

    fixed_sims, fixed_time, _ = run(MCTSConfig(simulations=1, time_limit=0.5))
    paced_sims, paced_time, incumbent = run(MCTSConfig(simulations=1, time_limit=0.5, pace=True))
    assert fixed_time < 0.25 and paced_sims > 2 * fixed_sims
    assert 0.25 < paced_time <= 0.5 + 0.001 + 1e-9
    xla = evaluate(scenario.workload, heuristics.xla_like(scenario), scenario.hardware).time
    assert evaluate(scenario.workload, incumbent.offsets, scenario.hardware).time <= xla * (1 + 1e-12)


@pytest.mark.parametrize("spec,match", [
    ("mcts:pace=1", "pace=1 spends a wall budget"),
    ("mcts:pace=1,time_limit=5,order=canonical", "pace=1 paces the default game only"),
    ("mcts:pace=2", "cannot read '2'"),
])
def test_mcts_pace_refusals(spec, match):
    scenario = resolve(MINIMALLOC / "C.1048576.csv")
    with pytest.raises(ValueError, match=match):
        make_agent(spec).solve(scenario)


def test_mcts_pace_is_refused_on_v1():
    from conftest import mlp_scenario

    with pytest.raises(ValueError, match="pace=1 is a MallocGame-v0 setting"):
        make_agent("mcts:pace=1,time_limit=5").solve_v1(mlp_scenario(0))
