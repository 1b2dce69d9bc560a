"""The trainer (expert iteration on labelled games, issue 31's only one): a run, its log, its
checkpoint, --resume and the command line. Issue 31 removed the version-1 trainer (MuZero's
self-play over the learned model, its teacher, replay and learner) with its tests."""

import json
import math

import numpy as np
import pytest
import torch

from mallocgym import sim
from mallocgym.agents import make_agent
from mallocgym.agents.muzero.agent import make_env
from mallocgym.agents.muzero.checkpoint import load_checkpoint
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.train import main, train
from mallocgym.agents.search import CompletionScorer
from mallocgym.pricing.v0 import evaluate
from mallocgym.heuristics import complete
from mallocgym.workloads import save
from mallocgym.workloads.synthetic import mlp_training_step

from conftest import mlp_scenario

torch.set_num_threads(1)

TINY = MuZeroConfig().with_overrides([
    "network.hidden=32", "network.candidate_hidden=16", "network.memory_hidden=8", "train.min_replay=40",
    "train.batch_size=16", "train.replay_capacity=4000", "train.label_positions=1000",
    "train.checkpoint_every_s=1000", "train.log_every_s=0.5", "train.replay_ratio=8",
])


def test_smoke_training_run_and_resume(tmp_path):
    scenario = mlp_scenario(0)
    summary = train(TINY, scenarios=[scenario], out_dir=tmp_path, minutes=0.06, seed=0,
                    use_generator=False, progress=False)
    assert summary["train_steps"] > 0 and summary["episodes"] > 0
    # the end record's losses cover the updates since the last log line: there may be none
    assert all(math.isfinite(v) for v in summary.get("losses", {}).values())
    lines = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert lines[0]["event"] == "start" and lines[-1]["event"] == "end"
    progress = [line for line in lines if line["event"] == "progress" and "losses" in line]
    assert progress and all(math.isfinite(line["losses"]["loss"]) for line in progress)
    payload = load_checkpoint(tmp_path)
    assert payload["config"] == TINY and payload["progress"]["train_steps"] == summary["train_steps"]
    for spec in (f"muzero-pol:{tmp_path}", f"muzero-sim:{tmp_path},sims=2"):
        solution = make_agent(spec).solve(scenario)
        evaluate(scenario.workload, solution.offsets, scenario.hardware)
    again = train(TINY, scenarios=[scenario], out_dir=tmp_path, minutes=0.02, seed=0, resume=True,
                  use_generator=False, progress=False)
    assert again["env_steps"] > summary["env_steps"]
    assert again["train_steps"] >= summary["train_steps"]
    assert again["elapsed_s"] > summary["elapsed_s"]


def test_a_version_1_checkpoint_is_not_resumed(tmp_path):
    """A checkpoint of the removed version-1 trainer plays, but its run does not go on."""
    from mallocgym.agents.muzero.checkpoint import save_checkpoint
    from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec

    scenario = mlp_scenario(0)
    v1 = TINY.with_overrides(["network.version=1"])
    save_checkpoint(tmp_path, net=MuZeroNet(ObsSpec.from_env(make_env(scenario, v1)), v1.network), config=v1,
                    progress={})
    with pytest.raises(ValueError, match="network.version = 1: the version-1 trainer .* was removed"):
        train(TINY, scenarios=[scenario], out_dir=tmp_path, minutes=0.02, resume=True, use_generator=False,
              progress=False)
    make_agent(f"muzero-sim:{tmp_path},sims=2").solve(scenario)


def test_command_line_errors(tmp_path):
    workload = save(mlp_training_step(0), tmp_path / "mlp.json")
    with pytest.raises(ValueError, match="simulator.num_simulation"):
        main(["--minutes", "1", "--out", str(tmp_path), "--set", "simulator.num_simulation=3"])
    with pytest.raises(ValueError, match="no mallocMuZero checkpoint"):
        main(["--minutes", "1", "--out", str(tmp_path / "none"), "--resume", "--scenario", str(workload)])
    with pytest.raises(ValueError, match="drop --config/--set"):
        main(["--minutes", "1", "--out", str(tmp_path), "--resume", "--set", "train.lr=0.1"])
    with pytest.raises((ValueError, OSError), match="nope.json"):
        main(["--minutes", "1", "--out", str(tmp_path), "--scenario", str(tmp_path / "nope.json")])
    with pytest.raises(ValueError, match="minutes must be > 0"):
        main(["--minutes", "0", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="drop --suite/--split"):
        main(["--minutes", "1", "--out", str(tmp_path), "--scenario", str(workload), "--split", "test"])


def test_split_picks_the_scenarios_trained_on(tmp_path, monkeypatch):
    """``train muzero --split`` names the training data as ``train sb3 --split`` does."""
    import importlib

    from mallocgym.scenarios import names

    trainer = importlib.import_module("mallocgym.agents.muzero.train")  # the module, not the package's train()

    seen = {}
    monkeypatch.setattr(trainer, "train", lambda config, scenarios, **kw: seen.setdefault("names", [
        s.name for s in scenarios]) and {})
    for split in ("test", None):
        seen.clear()
        main(["--minutes", "1", "--out", str(tmp_path / f"run-{split}")] + (["--split", split] if split else []))
        assert seen["names"] == names("default", split or "train"), split


def test_cli_reports_bad_input_in_one_line(tmp_path, capsys):
    from mallocgym.cli import main as cli_main

    assert cli_main(["train", "muzero", "--minutes", "1", "--out", str(tmp_path), "--set", "train.lr=-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.lr must be > 0" in err


@pytest.mark.slow
def test_example_script_trains_and_compares(tmp_path):
    """examples/muzero_train.py end to end (a subprocess; covered faster by the smoke run)."""
    import subprocess
    import sys
    from pathlib import Path

    workload = save(mlp_training_step(5), tmp_path / "mlp5.json")
    script = Path(__file__).resolve().parent.parent / "examples" / "muzero_train.py"
    tiny = [f"--set={s}" for s in ["network.hidden=32", "network.candidate_hidden=16", "network.memory_hidden=8",
                                   "simulator.num_simulations=2", "train.min_replay=20", "train.batch_size=8"]]
    done = subprocess.run([sys.executable, str(script), "--minutes", "0.03", "--out", str(tmp_path / "run"),
                           "--scenario", str(workload), *tiny], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| mlp-train-s5 |" in done.stdout and "muzero-sim" in done.stdout
    assert (tmp_path / "run" / "checkpoint.pt").is_file()


def test_completion_scorer_matches_stepping_the_env_and_finishing_with_xla():
    scenario = mlp_scenario(3)
    env = make_env(scenario, TINY).unwrapped
    env.reset(options={"workload": scenario})
    rng = np.random.default_rng(0)
    scorer = CompletionScorer(env.static, env.k)
    work = sim.new_state(env.static)
    tas = float(env.static.params[sim.TIME_ALL_SLOW])
    step_times = np.empty(env.k + 1)
    for _ in range(12):                      # a few positions along a random game
        plain, _ = scorer(env.sim_state)
        times, best = scorer(env.sim_state, step_times)
        np.testing.assert_array_equal(times, plain)     # the optional output changes nothing else
        legal = env.action_masks()
        assert np.array_equal(np.isfinite(times), legal)
        assert np.array_equal(np.isfinite(step_times), legal)
        assert times[best] == times.min()
        now = float(env.sim_state.totals[sim.TIME])
        for a in np.flatnonzero(legal):
            snap = env.clone_state()
            _, reward, _, _, _ = env.step(int(a))
            # step_times: the program time right after the action, as the env's reward says
            assert float(env.sim_state.totals[sim.TIME]) == pytest.approx(step_times[a], rel=1e-12)
            assert reward == pytest.approx((now - step_times[a]) / tas, rel=1e-9, abs=1e-15)
            assert complete(env.static, env.sim_state, work) == pytest.approx(times[a], rel=1e-12)
            env.restore_state(snap)
        env.step(int(rng.choice(np.flatnonzero(legal))))
