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
    (["solve", str(MINIMALLOC / "A.1048576.csv"), "--hardware", "tpu-v9"], "unknown hardware profile 'tpu-v9'"),
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

    assert split_agents("xla, muzero-sim:runs/a,sims=64,gate=0 ,mcts,rollout:levels=2") == [
        "xla", "muzero-sim:runs/a,sims=64,gate=0", "mcts", "rollout:levels=2"]
    with pytest.raises(ValueError, match="sims=4"):
        split_agents("sims=4,xla")


# ------------------------------------------------------------------ empty or contradictory requests
def one_line_error(capsys, argv, *fragments):
    """``argv`` fails with exit status 2 and one line ``mallocgym: error: ...`` holding ``fragments``."""
    code, out, err = run(capsys, *argv)
    assert code == 2, (argv, out, err)
    assert err.count("\n") == 1 and err.startswith("mallocgym: error:"), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


@pytest.mark.parametrize("argv, fragments", [
    (["bench", "--agents", ""], ["--agents", "names no agent"]),
    (["bench", "--agents", " , ,"], ["--agents", "names no agent"]),
    (["bench", "--agents", "xla,xla", "--scenario", "mlp-train-s0@1/8"], ["'xla'"]),
    (["eval", "--agent", " "], ["--agent is empty"]),
    (["eval", "--agent", "xla", "--suite", "synthetic", "--scenario", "unet-infer@1/8"],
     ["--scenario 'unet-infer@1/8'", "--suite 'synthetic'"]),
    (["eval", "--agent", "xla", "--split", "train", "--scenario", "unet-infer@1/8"],
     ["--scenario 'unet-infer@1/8'", "--split 'train'"]),
    (["bench", "--agents", "xla", "--suite", "synthetic", "--split", "test", "--scenario", "mlp-train-s0@1/8"],
     ["--scenario 'mlp-train-s0@1/8'", "--suite 'synthetic' and --split 'test'"]),
    (["bench", "--agents", "xla", "--suite", "default", "--scenario", str(MINIMALLOC / "A.1048576.csv")],
     ["A.1048576.csv", "--suite 'default'"]),
    (["bench", "--agents", "xla", "--scenario", "mlp-train-s0@1/8", "--scenario", "mlp-train-s0@1/8"],
     ["--scenario 'mlp-train-s0@1/8' is given twice"]),
    (["bench", "--agents", "xla", "--scenario", "mlp-train-s0", "--scenario", "mlp-train-s0@1/8"],
     ["--scenario 'mlp-train-s0@1/8' is given twice", "also as 'mlp-train-s0'"]),
    (["bench", "--suite", "minimalloc", "--split", "train"], ["suite 'minimalloc' has no 'train' scenarios"]),
    (["eval", "--agent", "xla", "--suite", "minimalloc", "--split", "train"], ["has no 'train' scenarios"]),
    (["list", "--suite", "minimalloc", "--split", "train"], ["suite 'minimalloc' has no 'train' scenarios"]),
    (["bench", "--speed", "--agents", "xla"], ["--speed", "--agents"]),
    (["bench", "--speed", "--suite", "default", "--split", "test", "--seed", "1"],
     ["--speed", "--suite, --split, --seed"]),
    (["bench", "--speed", "--scenario", "mlp-train-s0@1/8"], ["--speed", "--scenario"]),
    (["solve", "mlp-train-s0@1/8", "--minimalloc-out", "x.csv"], ["--minimalloc-out"]),
    (["import", "minimalloc", str(MINIMALLOC / "A.1048576.csv"), "-o", "out.txt"], ["-o out.txt", ".json or .npz"]),
])
def test_empty_or_contradictory_request_is_one_line_exit_2(capsys, tmp_path, monkeypatch, argv, fragments):
    monkeypatch.chdir(tmp_path)
    one_line_error(capsys, argv, *fragments)
    assert not list(tmp_path.iterdir())  # nothing written


def test_scenario_from_any_suite_unless_suite_is_given(capsys):
    code, out, _ = run(capsys, "eval", "--agent", "all-slow", "--scenario", "mlp-train-s0@1/8", "--json")
    assert code == 0 and [r["scenario"] for r in json.loads(out)] == ["mlp-train-s0@1/8"]  # a train scenario
    code, out, _ = run(capsys, "eval", "--agent", "all-slow", "--suite", "synthetic", "--split", "train",
                       "--scenario", "mlp-train-s0@1/8", "--json")
    assert code == 0 and len(json.loads(out)) == 1


# ------------------------------------------------------------------ numbers
@pytest.mark.parametrize("argv, fragments", [
    (["solve", "mlp-train-s0@1/8", "--capacity", "99999999999999999999999"], ["argument --capacity", "outside [1, "]),
    (["solve", "mlp-train-s0@1/8", "--capacity", "-5"], ["argument --capacity", "-5 bytes is outside"]),
    (["solve", "mlp-train-s0@1/8", "--capacity", "0"], ["argument --capacity", "0 bytes is outside"]),
    (["solve", "mlp-train-s0@1/8", "--capacity", "1e6"], ["argument --capacity", "not a whole number of bytes"]),
    (["show", "mlp-train-s0@1/8", "--capacity", "-1"], ["argument --capacity", "outside"]),
    (["solve", "mlp-train-s0@1/8", "--seed", "-1"], ["argument --seed", "seed -1 is outside [0, 4294967295]"]),
    (["solve", "mlp-train-s0@1/8", "--seed", "4294967296"], ["argument --seed", "outside"]),
    (["bench", "--seed", "-3"], ["argument --seed", "outside"]),
    (["eval", "--agent", "xla", "--seed", "x"], ["argument --seed", "'x' is not a whole number"]),
])
def test_bad_number_is_refused_by_the_parser_naming_the_flag(capsys, argv, fragments):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"mallocgym: error: mallocgym {argv[0]}: "), err
    for fragment in fragments:
        assert fragment in err


def test_huge_capacity_through_the_console_script():
    proc = subprocess.run([sys.executable, "-m", "mallocgym.cli", "solve", "mlp-train-s0@1/8", "--capacity",
                           "99999999999999999999999"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "argument --capacity: 99999999999999999999999 bytes is outside [1, 281474976710656]" in proc.stderr


# ------------------------------------------------------------------ what solve and show print
def test_solve_and_show_print_the_scenario_hardware_and_capacity_used(capsys):
    from mallocgym.scenarios import resolve

    s = resolve("mlp-train-s0@1/8", None, 2_000_000)  # the scenario the CLI gets (renamed by resolve)
    code, out, _ = run(capsys, "solve", "mlp-train-s0@1/8", "--capacity", "2000000", "--json")
    result = json.loads(out)
    assert code == 0
    assert (result["scenario"], result["hardware"], result["fast_capacity"]) == (s.name, s.hardware.name, 2_000_000)
    code, out, _ = run(capsys, "solve", "mlp-train-s0@1/8", "--capacity", "2000000")
    assert code == 0 and out.startswith(f"{s.name} ") and f"hardware {s.hardware.name}" in out
    assert "fast memory 2000000 B" in out
    code, out, _ = run(capsys, "show", "mlp-train-s0@1/8", "--capacity", "2000000", "--json")
    stats = json.loads(out)
    assert (stats["scenario"], stats["hardware"], stats["fast_capacity"]) == (s.name, s.hardware.name, 2_000_000)
    code, out, _ = run(capsys, "show", "mlp-train-s0@1/8", "--capacity", "2000000")
    lines = dict(line.split(None, 1) for line in out.splitlines())
    assert lines["scenario"] == s.name and lines["hardware"] == s.hardware.name
    assert lines["fast_capacity"] == "2000000"


# ------------------------------------------------------------------ nothing half-written
def test_bench_out_is_not_created_when_an_agent_is_unknown(capsys, tmp_path):
    out = tmp_path / "res"
    one_line_error(capsys, ["bench", "--scenario", "mlp-train-s0@1/8", "--agents", "xla,nope", "--out", str(out)],
                   "unknown agent 'nope'")
    assert not out.exists()


def test_bench_out_is_not_created_when_an_agent_fails_mid_run(capsys, tmp_path, monkeypatch):
    import mallocgym.harness as harness

    real, calls = harness.solve, []

    def failing(scenario, agent, *, seed=0, env="v0"):
        calls.append(scenario.name)
        if len(calls) == 3:
            raise ValueError("agent blew up on the second scenario")
        return real(scenario, agent, seed=seed, env=env)

    monkeypatch.setattr(harness, "solve", failing)
    out = tmp_path / "res"
    code, _, err = run(capsys, "bench", "--scenario", "mlp-train-s0@1/8", "--scenario", "mlp-train-s1@1/8",
                       "--agents", "all-slow,xla", "--out", str(out))
    errors = [line for line in err.splitlines()  # without the progress bar's lines and the finished runs
              if not line.startswith("mallocgym bench:") and ": speedup " not in line]
    assert code == 2 and errors == ["mallocgym: error: agent blew up on the second scenario"]
    assert len(calls) == 3 and not out.exists()
    # an existing --out folder keeps its old results when a bench fails
    out.mkdir()
    (out / "results.json").write_text("old")
    calls.clear()
    run(capsys, "bench", "--scenario", "mlp-train-s0@1/8", "--scenario", "mlp-train-s1@1/8",
        "--agents", "all-slow,xla", "--out", str(out))
    assert [p.name for p in out.iterdir()] == ["results.json"] and (out / "results.json").read_text() == "old"


def test_bench_out_that_is_a_file_is_refused_before_running(capsys, tmp_path):
    out = tmp_path / "file"
    out.write_text("x")
    one_line_error(capsys, ["bench", "--scenario", "mlp-train-s0@1/8", "--agents", "xla", "--out", str(out)],
                   f"--out {out}: exists and is not a folder")


def test_harness_refuses_empty_or_repeated_selections(tmp_path):
    from mallocgym.harness import bench, write_results
    from mallocgym.scenarios import get

    s = get("mlp-train-s0@1/8")
    with pytest.raises(ValueError, match="no scenarios"):
        bench([], ["xla"], progress=False)
    with pytest.raises(ValueError, match="no agents"):
        bench([s], [], progress=False)
    with pytest.raises(ValueError, match="'mlp-train-s0@1/8' is given twice"):
        bench([s, s], ["xla"], progress=False)
    with pytest.raises(ValueError, match="no results"):
        write_results([], tmp_path / "res")
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("kind, content", [
    ("minimalloc", "id,lower,upper,size\nb1,0,3,four\n"),
    ("xla", None),  # an empty dump folder
])
def test_import_of_a_bad_input_writes_nothing(capsys, tmp_path, kind, content):
    source = tmp_path / ("bad.csv" if content is not None else "dump")
    if content is None:
        source.mkdir()
    else:
        source.write_text(content)
    target = tmp_path / "new" / "out.npz"
    one_line_error(capsys, ["import", kind, str(source), "-o", str(target)], str(source))
    assert not (tmp_path / "new").exists()


def test_train_muzero_resume_of_a_missing_or_bad_folder_creates_nothing(capsys, tmp_path):
    pytest.importorskip("torch")
    missing = tmp_path / "missing"
    one_line_error(capsys, ["train", "muzero", "--resume", "--minutes", "1", "--out", str(missing),
                            "--scenario", "mlp-train-s0@1/8", "--no-progress"], "no mallocMuZero checkpoint")
    assert not missing.exists()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "checkpoint.pt").write_bytes(b"not a checkpoint")
    one_line_error(capsys, ["train", "muzero", "--resume", "--minutes", "1", "--out", str(bad),
                            "--scenario", "mlp-train-s0@1/8", "--no-progress"], "not a readable checkpoint")
    assert [p.name for p in bad.iterdir()] == ["checkpoint.pt"]   # no config.json, no log.jsonl
    # a folder holding a run is not overwritten without --resume
    one_line_error(capsys, ["train", "muzero", "--minutes", "1", "--out", str(bad), "--scenario",
                            "mlp-train-s0@1/8"], "already holds a run; pass --resume")


@pytest.mark.parametrize("argv, fragments", [
    (["--seed", "-1"], ["--seed must be in [0, 4294967295], got -1"]),
    (["--minutes", "inf"], ["--minutes must be > 0 and finite, got inf"]),
    (["--minutes", "nan"], ["--minutes must be > 0"]),
    (["--suite", "synthetic"], ["drop --suite"]),
])
def test_train_muzero_bad_numbers_and_contradictions(capsys, tmp_path, argv, fragments):
    pytest.importorskip("torch")
    base = {"--minutes": "1", "--out": str(tmp_path / "run"), "--scenario": "mlp-train-s0@1/8"}
    base.update(zip(argv[::2], argv[1::2]))
    one_line_error(capsys, ["train", "muzero", *[x for kv in base.items() for x in kv]], *fragments)
    assert not (tmp_path / "run").exists()


def test_bench_budget_s_is_checked(capsys):
    for argv, text in ((["bench", "--budget-s", "0", "--agents", "rollout"], "--budget-s 0.0: a number of seconds > 0"),
                       (["bench", "--budget-s", "2", "--agents", "xla", "--scenario", "mlp-train-s0@1/8"],
                        "budget_s=2.0 applies to search agents"),
                       (["bench", "--speed", "--budget-s", "2"], "it takes no --budget-s")):
        assert main(argv) == 2
        assert text in capsys.readouterr().err, argv
