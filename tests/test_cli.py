import json
import subprocess
import sys

import pytest

from mallocgym.cli import main

from conftest import MINIMALLOC


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json_has_both_splits(capsys):
    code, out, _ = run(capsys, "list", "--json")
    rows = json.loads(out)
    assert code == 0 and {r["split"] for r in rows} == {"train", "test"}
    code, out, _ = run(capsys, "list", "--split", "test", "--json")
    assert all(r["split"] == "test" for r in json.loads(out))


def test_solve_json_is_validated_and_complete(capsys, tmp_path):
    from mallocgym import evaluate, scenarios

    name = scenarios.suite("default", "test")[0].name
    png = tmp_path / "map.png"
    code, out, _ = run(capsys, "solve", name, "--agent", "xla", "--json", "--png", str(png))
    result = json.loads(out)
    assert code == 0
    assert set(result) >= {"scenario", "agent", "speedup", "placed_bytes_fraction", "time",
                           "time_all_slow", "wall_s", "offsets"}
    s = scenarios.get(name)
    ev = evaluate(s.workload, result["offsets"], s.hardware)
    assert ev.speedup == pytest.approx(result["speedup"]) and result["speedup"] > 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_solve_minimalloc_csv_with_capacity(capsys):
    code, out, _ = run(capsys, "solve", str(MINIMALLOC / "A.1048576.csv"), "--agent", "xla", "--json",
                       "--capacity", "700000")
    result = json.loads(out)
    assert code == 0 and len(result["offsets"]) == 154
    assert 0 < max(result["offsets"]) < 700000


def test_bench_writes_markdown_csv_json(capsys, tmp_path):
    code, out, _ = run(capsys, "bench", "--split", "test", "--agents", "all-slow,xla", "--out", str(tmp_path))
    assert code == 0
    rows = json.loads((tmp_path / "results.json").read_text())
    assert {r["agent"] for r in rows} == {"all-slow", "xla"}
    assert all(r["speedup"] == 1.0 for r in rows if r["agent"] == "all-slow")
    assert "| scenario | all-slow | xla |" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "results.csv").read_text().splitlines()[0].startswith("scenario,agent,speedup")


def test_import_minimalloc(capsys, tmp_path):
    out_file = tmp_path / "a.npz"
    code, out, _ = run(capsys, "import", "minimalloc", str(MINIMALLOC / "A.1048576.csv"), "-o", str(out_file))
    import mallocgym

    assert code == 0 and mallocgym.load(out_file).num_buffers == 154


@pytest.mark.parametrize("argv, message", [
    (["solve", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
    (["solve", str(MINIMALLOC / "A.1048576.csv"), "--capacity", "1000"], "is larger than the fast memory"),
    (["solve", "missing.json"], "missing.json: no such file"),
    (["solve", "x", "--agent", "alphago"], "unknown"),
    (["eval", "--agent", "nope"], "unknown agent 'nope'"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("mallocgym: error:") and message in err
    assert "Traceback" not in err


def test_bad_csv_through_the_console_script(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,lower,upper,size\nb1,0,3,four\n")
    proc = subprocess.run([sys.executable, "-m", "mallocgym.cli", "solve", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"mallocgym: error: {bad}: line 2: field 'size' = 'four' is not an integer"


def test_bench_agent_list_keeps_agent_options_together():
    from mallocgym.cli import split_agents

    assert split_agents("xla, muzero:runs/a,sims=64,span=1 ,mcts,rollout:levels=2") == [
        "xla", "muzero:runs/a,sims=64,span=1", "mcts", "rollout:levels=2"]
    with pytest.raises(ValueError, match="sims=4"):
        split_agents("sims=4,xla")
