"""The user examples run with a tiny budget and print what their docstrings promise.

The SB3 and MuZero trainers have their smoke tests beside their agents (tests/test_sb3.py,
tests/test_sb3_eval.py, tests/test_muzero_train.py).
"""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mallocgym
from mallocgym import harness, scenarios

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "unet-infer@1/8"


def run_example(script: str, *args: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def load_example(script: str):
    spec = importlib.util.spec_from_file_location(Path(script).stem, ROOT / "examples" / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_v1_quickstart_plays_xla_msa_exactly(tmp_path):
    out = run_example("v1_quickstart.py", "--scenario", SCENARIO, cwd=tmp_path)
    table = out.split("\npolicy ", 1)[1].splitlines()[1:]  # name (22 columns), speedup, stall, copied
    speedups = {line[:22].strip(): float(line[22:].split()[0]) for line in table if line.strip()}
    assert set(speedups) == {"all slow", "xla msa (msa_action)", "random legal", "first fast"}, out
    assert speedups["all slow"] == 1.0
    msa = harness.solve(scenarios.get(SCENARIO), "xla-msa", env="v1").speedup
    assert speedups["xla msa (msa_action)"] == pytest.approx(msa, abs=6e-4)
    assert re.search(r"^\s+0\s+slow\s+-1", out, re.M), out  # the action table: SLOW is always legal


def test_my_agent_is_scored_against_xla_msa(tmp_path):
    out = run_example("my_agent.py", "--scenarios", SCENARIO, "--out", str(tmp_path / "entry"), cwd=tmp_path)
    assert "| scenario | one-step | xla-msa |" in out
    rows = json.loads((tmp_path / "entry" / "results.json").read_text())
    assert [(r["scenario"], r["agent"]) for r in rows] == [(SCENARIO, "one-step"), (SCENARIO, "xla-msa")]
    scenario = scenarios.get(SCENARIO)
    for (name, agent), mapping in harness.load_mappings(tmp_path / "entry").items():
        row = next(r for r in rows if r["agent"] == agent)
        assert mallocgym.evaluate_v1(scenario.workload, mapping, scenario.hardware).speedup == \
            pytest.approx(row["speedup"], rel=1e-12)


def test_my_agent_on_v0_is_one_clear_error():
    agent = load_example("my_agent.py").OneStepAgent()
    with pytest.raises(ValueError, match="plays MallocGame-v1 only"):
        harness.bench([scenarios.get(SCENARIO)], [agent], env="v0", progress=False)


def test_my_agent_rejects_an_unknown_scenario(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "my_agent.py"), "--scenarios", "nope"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "unknown scenario 'nope'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_xla_dump_mappings_pass_mallocgym_evaluate(tmp_path):
    out = tmp_path / "out"
    text = run_example("xla_dump.py", "--seconds", "0.5", "--out", str(out), cwd=tmp_path)
    found = dict(re.findall(r"^(\S+?)(?::\S+)?: speedup (\d+\.\d+) \(mallocgym evaluate: (?:\2)\)", text, re.M))
    assert set(found) == {"xla-msa", "rollout"}, text
    workload = mallocgym.load(out / "workload.json")
    capacity = int(re.search(r"fast memory (\d+) B", text)[1])
    hardware = mallocgym.profile("tpu-v4-like").with_capacity(capacity)
    checked = {agent: mallocgym.evaluate_v1(workload, out / f"{agent}.mapping.json", hardware).speedup
               for agent in found}
    assert checked == pytest.approx({agent: float(s) for agent, s in found.items()}, abs=6e-5)
    assert checked["rollout"] >= checked["xla-msa"] > 1.0  # the search starts from MSA's play


def test_xla_dump_names_a_missing_dump(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "xla_dump.py"), str(tmp_path / "none"),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and str(tmp_path / "none") in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


# The step-benchmark scripts of docs/speed.md live under tests/benchmarks (not collected by pytest).
def run_script(relative: str, *args: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / relative), *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_v1_step_growth_script_prints_a_row_per_size(tmp_path):
    out = run_script("tests/benchmarks/v1_step_growth.py", "--sizes", "100,200", "--steps", "20", cwd=tmp_path)
    rows = [line.split("|")[1:-1] for line in out.splitlines() if re.match(r"\| \d", line)]
    assert [int(r[0]) for r in rows] == sorted(int(r[0]) for r in rows) and len(rows) == 2, out
    assert all(float(r[3]) > 0 and float(r[4]) > 0 for r in rows), out


def test_v1_step_parts_script_prints_every_part(tmp_path):
    out = run_script("tests/benchmarks/v1_step_parts.py", "--buffers", "100", "--steps", "20", "--reps", "1",
                     cwd=tmp_path)
    names = [line.split()[0] for line in out.splitlines()[1:]]
    assert names == ["copy", "rules", "cost", "legal", "observation", "kernel"], out
