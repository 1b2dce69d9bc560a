"""Agents on MallocGame-v1 through the harness and the CLI: valid mappings, search never worse
than its greedy completion, mappings the env can replay, clear errors for v0-only agents."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from mallocgym.cli import main
from mallocgym.env.v1 import MallocGameV1Env
from mallocgym.pricing.v1 import evaluate_v1
from mallocgym.harness import bench, solve

from conftest import mlp_scenario

SCENARIO = mlp_scenario(0, Fraction(1, 8))


@pytest.fixture(scope="module")
def results():
    agents = ["all-slow", "random", "greedy", "xla-msa", "xla-msa:in_env=1", "rollout:max_completions=60",
              "beam:width=2,max_completions=60", "mcts:simulations=4", "rollout:max_completions=60,completion=greedy"]
    return {r.agent: r for r in bench([SCENARIO], agents, env="v1", progress=False)}


def test_v1_bench_runs_every_v1_agent_with_valid_mappings(results):
    for r in results.values():
        assert r.env == "v1" and r.offsets == [] and r.mapping["format"] == "mallocgym-v1-mapping"
        ev = evaluate_v1(SCENARIO.workload, r.mapping, SCENARIO.hardware)
        assert ev.speedup == r.speedup and ev.stall_time == r.stall_time
    assert results["all-slow"].speedup == 1.0 and results["all-slow"].copy_bytes == 0.0
    assert results["all-slow"].mapping["evictions"] == []


def test_search_agents_are_never_worse_than_their_default_policy(results):
    base = results["xla-msa:in_env=1"].speedup  # the default completion: xla-msa in the env
    assert base > 1.0 and results["xla-msa"].speedup > 1.0
    for name in ("rollout:max_completions=60", "beam:width=2,max_completions=60", "mcts:simulations=4"):
        assert results[name].speedup >= base - 1e-12, name
    assert results["rollout:max_completions=60,completion=greedy"].speedup >= results["greedy"].speedup - 1e-12


def _replay(mapping, scenario):
    """Play ``mapping`` through the env: at each real decision, the action whose meaning is the
    mapping's allocation of that segment (SLOW where none is listed)."""
    env = MallocGameV1Env(scenario, invalid_action="raise")
    obs, info = env.reset(seed=0)
    st = env.static
    wanted = {}
    for a in mapping["allocations"]:
        s = int(st.seg_ptr[a["buffer"]]) + a["segment"]
        wanted[s] = (a["kind"], a.get("offset", -1), a.get("prefetch_after", -1))
    done = False
    while not done:
        want = wanted.get(env.current_segment, ("slow", -1, -1))
        legal = np.flatnonzero(info["action_mask"])
        actions = [a for a in legal if env.action_meaning(int(a)) == want]
        assert actions, (env.current_segment, want, [env.action_meaning(int(a)) for a in legal])
        obs, _, done, _, info = env.step(int(actions[0]))
    return info


@pytest.mark.parametrize("agent", ["greedy", "rollout:max_completions=60", "mcts:simulations=4"])
def test_search_mappings_replay_through_the_env(results, agent):
    r = results[agent]
    info = _replay(r.mapping, SCENARIO)
    assert info["time"] == r.time
    assert info["mapping"] == r.mapping


@pytest.mark.parametrize("agent", ["xla", "first-fit", "exact"])
def test_v0_only_agents_are_a_clear_error_on_v1(agent):
    with pytest.raises(ValueError, match=rf"agent '{agent}' plays MallocGame-v0 only; on v1 use"):
        solve(SCENARIO, agent, env="v1")


def test_greedy_is_a_v1_agent_only():
    with pytest.raises(ValueError, match=r"agent 'greedy' plays MallocGame-v1 only"):
        solve(SCENARIO, "greedy")


def test_unknown_env_version_is_an_error():
    with pytest.raises(ValueError, match=r"unknown game version 'v2'"):
        solve(SCENARIO, "all-slow", env="v2")


# ------------------------------------------------------------------------------ CLI
def test_cli_solve_v1_json_then_evaluate_the_mapping(capsys, tmp_path):
    assert main(["solve", "mlp-train-s0@1/8", "--env", "v1", "--agent", "greedy", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["env"] == "v1" and "offsets" not in doc and doc["mapping"]["allocations"]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc["mapping"]))
    assert main(["evaluate", "mlp-train-s0@1/8", str(path), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["speedup"] == doc["speedup"] and ev["stall_time"] == doc["stall_time"]
    # the whole solve object is accepted too
    path.write_text(json.dumps(doc))
    assert main(["evaluate", "mlp-train-s0@1/8", str(path)]) == 0
    assert "valid v1 mapping" in capsys.readouterr().out


def test_cli_evaluate_rejects_an_overlapping_mapping_in_one_line(capsys, tmp_path):
    assert main(["solve", "mlp-train-s0@1/8", "--env", "v1", "--agent", "greedy", "--json"]) == 0
    mapping = json.loads(capsys.readouterr().out)["mapping"]
    fast = [a for a in mapping["allocations"] if a["kind"] != "slow"]
    assert len(fast) >= 2
    # put every fast allocation at offset 0: two of them live at the same time must collide
    for a in fast:
        a["offset"] = 0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(mapping))
    code = main(["evaluate", "mlp-train-s0@1/8", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "overlaps" in err and "bad.json" in err


@pytest.mark.parametrize("argv, text", [
    (["solve", "tests/data/minimalloc/input.12.csv", "--env", "v1", "--minimalloc-out", "x.csv"],
     "--minimalloc-out writes v0 mappings"),
    (["solve", "mlp-train-s0@1/8", "--env", "v1", "--agent", "xla"], "plays MallocGame-v0 only"),
    (["bench", "--speed", "--env", "v1"], "it takes no --env"),
    (["bench", "--scenario", "mlp-train-s0@1/8", "--env", "v1", "--agents", "all-slow,best-fit"],
     "agent 'best-fit' plays MallocGame-v0 only"),
])
def test_cli_v1_contradictions_are_one_error_line(capsys, argv, text):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and text in err, err


def test_cli_solve_v1_png_draws_the_chunks(capsys, tmp_path):
    out = tmp_path / "v1.png"
    assert main(["solve", "mlp-train-s0@1/8", "--env", "v1", "--agent", "greedy", "--png", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {out}" in capsys.readouterr().out


def test_chunks_of_a_played_mapping_are_disjoint_and_mark_copies():
    from mallocgym.pricing.v1 import chunks_v1

    r = solve(SCENARIO, "greedy", env="v1")
    chunks = chunks_v1(SCENARIO.workload, r.mapping, SCENARIO.hardware)
    prefetched = {(a["buffer"], a["prefetch_after"] + 1) for a in r.mapping["allocations"] if a["kind"] == "prefetch"}
    assert {(c["buffer"], c["first_op"]) for c in chunks if c["prefetched"]} <= prefetched
    assert sum(c["evict_from"] is not None for c in chunks) <= len(r.mapping["evictions"])
    for i, a in enumerate(chunks):
        for b in chunks[i + 1:]:
            time = a["first_op"] <= b["last_op"] and b["first_op"] <= a["last_op"]
            space = a["offset"] < b["offset"] + b["size"] and b["offset"] < a["offset"] + a["size"]
            assert not (time and space), (a, b)


def test_make_readme_keeps_v1_results_in_their_own_tables(tmp_path):
    """The same scenario and agent names on v0 and v1 are two games: two tables, never merged."""
    from conftest import baseline_script

    mr = baseline_script("make_readme.py")
    for entry, env, speedup in (("rollout", "v0", 2.0), ("v1-test", "v1", 3.0)):
        folder = tmp_path / entry
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps([
            {"scenario": "unet-infer@1/8", "agent": "rollout", "env": env, "speedup": speedup,
             "placed_bytes_fraction": 0.5, "wall_s": 1.0, "time": 1.0 / speedup, "time_all_slow": 1.0}]))
    rows, where = mr.load_entries(tmp_path), mr.suite_of()
    text, _ = mr.render(rows, where)
    v1, v0 = text.index("## MallocGame-v1"), text.index("## MallocGame-v0")
    assert v1 < v0   # v1 first
    assert "| rollout | 3.000 |" in text[v1:v0] and "2.000" not in text[v1:v0]
    assert "| rollout | 2.000 |" in text[v0:] and "3.000" not in text[v0:]
    pages = mr.entry_pages(rows, where)
    assert "| unet-infer@1/8 | **2.000** |" in pages["rollout"] and "3.000" not in pages["rollout"]
    assert "| unet-infer@1/8 | **3.000** |" in pages["v1-test"] and "2.000" not in pages["v1-test"]


def test_make_readme_states_the_headroom_of_search_over_xla_msa(tmp_path):
    """Per scenario, the best of rollout/beam/mcts over xla-msa: 2.2 / 2.0 = +10 %, 1.5 / 1.5 = 0 %;
    geometric mean sqrt(1.1 * 1.0) - 1 = +4.9 %."""
    from conftest import baseline_script

    mr = baseline_script("make_readme.py")
    folder = tmp_path / "v1"
    folder.mkdir()
    rows = [(s, a, v) for s, vals in (("unet-infer@1/8", (2.0, 2.1, 2.2)), ("unet-infer@1/2", (1.5, 1.5, 1.4)))
            for a, v in zip(("xla-msa", "rollout:time_limit=20", "mcts:time_limit=20"), vals)]
    (folder / "results.json").write_text(json.dumps([
        {"scenario": s, "agent": a, "env": "v1", "speedup": v, "placed_bytes_fraction": 0.5, "wall_s": 1.0}
        for s, a, v in rows]))
    text = mr.entry_pages(mr.load_entries(tmp_path), mr.suite_of())["v1"]
    assert "| unet-infer@1/8 | 2.000 | 2.200 | mcts:time_limit=20 | +10.0% |" in text
    assert "| unet-infer@1/2 | 1.500 | 1.500 | rollout:time_limit=20 | +0.0% |" in text
    assert "Geometric mean headroom: +4.9%" in text


@pytest.mark.parametrize("edit, text", [
    (lambda m: m["allocations"][0].pop("kind"), "allocation 0 (buffer"),
    (lambda m: m["allocations"][0].update(buffer=10**6), "allocation 0: unknown buffer 1000000"),
    (lambda m: m["allocations"][0].update(segment=999), "has no segment 999"),
    (lambda m: m["allocations"][0].update(kind="fastest"), "field 'kind' = 'fastest'"),
    (lambda m: m["allocations"].append(dict(m["allocations"][0])), "the segment is allocated twice"),
    (lambda m: m.update(format="other"), "field 'format' must be 'mallocgym-v1-mapping'"),
    (lambda m: m["allocations"][0].update(use_op=-7), "field 'use_op' = -7 must be >= 0"),
])
def test_cli_evaluate_names_the_bad_entry(capsys, tmp_path, edit, text):
    assert main(["solve", "mlp-train-s0@1/8", "--env", "v1", "--agent", "greedy", "--json"]) == 0
    mapping = json.loads(capsys.readouterr().out)["mapping"]
    edit(mapping)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(mapping))
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["evaluate", "mlp-train-s0@1/8", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and text in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_cli_evaluate_rejects_a_file_that_is_not_json(capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    code = main(["evaluate", "mlp-train-s0@1/8", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "invalid JSON" in err


def test_top_level_evaluate_v1_is_the_function_even_after_its_module_is_imported():
    import mallocgym
    import mallocgym.pricing.v1  # noqa: F401  (its module: must not shadow the function)

    r = solve(SCENARIO, "greedy", env="v1")
    assert mallocgym.evaluate_v1(SCENARIO.workload, r.mapping, SCENARIO.hardware).speedup == r.speedup


def test_write_results_keeps_v1_mappings_in_a_compressed_file(tmp_path, results):
    from mallocgym.harness import load_mappings, write_results

    rows = list(results.values())
    write_results(rows, tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert all("mapping" not in d and d["env"] == "v1" for d in doc)
    mappings = load_mappings(tmp_path / "out")
    assert set(mappings) == {(r.scenario, r.agent) for r in rows}
    for r in rows:
        assert evaluate_v1(SCENARIO.workload, mappings[(r.scenario, r.agent)], SCENARIO.hardware).time == r.time
    with pytest.raises(ValueError, match="no such file"):
        load_mappings(tmp_path)


def test_the_published_v1_entry_reprices_to_its_table():
    """Rows of baselines/v1/default-test: their stored mappings check and price as published."""
    from pathlib import Path

    from mallocgym.harness import load_mappings
    from mallocgym.scenarios import resolve

    folder = Path(__file__).resolve().parents[1] / "baselines" / "v1" / "default-test"
    mappings = load_mappings(folder)
    rows = [r for r in json.loads((folder / "results.json").read_text()) if r["scenario"] == "unet-infer@1/8"
            and r["agent"] in ("greedy", "xla-msa", "mcts:time_limit=10")]
    assert len(rows) == 3
    scenario = resolve("unet-infer@1/8")
    for r in rows:
        ev = evaluate_v1(scenario.workload, mappings[(r["scenario"], r["agent"])], scenario.hardware)
        assert ev.speedup == r["speedup"]  # priced by this version: exactly


def test_the_published_xla_msa_rows_reproduce():
    """xla-msa is deterministic: rerunning it gives the published mappings of baselines/v1."""
    from pathlib import Path

    from mallocgym.agents import make_agent
    from mallocgym.harness import load_mappings
    from mallocgym.scenarios import resolve

    folder = Path(__file__).resolve().parents[1] / "baselines" / "v1" / "default-test"
    mappings = load_mappings(folder)
    for name in ("unet-infer@1/8", "strassen2-matmul@1/2"):
        for agent in ("xla-msa", "xla-msa:picker=count", "xla-msa:in_env=1"):
            assert make_agent(agent).solve_v1(resolve(name)).mapping == mappings[(name, agent)], (name, agent)


def test_bench_budget_sets_every_search_agents_time_limit_and_refuses_when_none_searches():
    from mallocgym.agents import make_agent
    from mallocgym.harness import with_budget

    rollout, msa = make_agent("rollout"), make_agent("xla-msa")
    assert with_budget(rollout, 2.5) and rollout.config.time_limit == 2.5
    assert not with_budget(msa, 2.5)
    with pytest.raises(ValueError, match="budget_s must be a number of seconds > 0"):
        with_budget(rollout, 0)
    with pytest.raises(ValueError, match="none of xla-msa, greedy searches"):
        bench([SCENARIO], ["xla-msa", "greedy"], env="v1", progress=False, budget_s=1.0)
    mcts = make_agent("mcts:simulations=2")
    rows = bench([SCENARIO], ["xla-msa:in_env=1", mcts], env="v1", progress=False, budget_s=30.0)
    assert mcts.config.time_limit == 30.0 and rows[1].speedup >= rows[0].speedup - 1e-12  # its completion
