"""Evaluation while training: the batched evaluator, the held-out set, checkpoint selection,
eval.csv, resuming, and the learning-curve script."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.agents.sb3 import checkpoint, config as cfg  # noqa: E402
from mallocgym.agents.sb3.evaluation import (VALIDATION_FIRST_SEED, Evaluator, geomean,  # noqa: E402
                                             validation_scenarios)
from mallocgym.agents.sb3.train import EVAL_COLUMNS, _Evaluate  # noqa: E402
from mallocgym.agents.sb3.train import main as train_main  # noqa: E402
from mallocgym.agents.sb3.vec_env import make_vec_env  # noqa: E402
from mallocgym.harness import solve  # noqa: E402
from mallocgym.scenarios import SUITES, get, suite  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)
ENV = cfg.EnvConfig(n_candidates=6, n_next=3, memory_bins=(8, 8))


def _small_train_scenarios(n: int) -> list[str]:
    return [s.name for s in sorted(suite("default", "train"), key=lambda s: s.workload.num_buffers)[:n]]


def _train(out, *extra):
    return train_main(["--algo", "maskable_ppo", "--scenario", _small_train_scenarios(1)[0], "--out", str(out),
                       "--quiet", "--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=32",
                       "--set", "n_epochs=1", "--set", "policy.hidden=16", "--set", "env.n_candidates=6",
                       "--set", "env.memory_bins=8,8", "--set", "env.n_next=3", *extra])


def _eval_rows(run) -> list[dict]:
    with open(Path(run) / "logs" / "eval.csv", newline="") as handle:
        return list(csv.DictReader(handle))


# ------------------------------------------------------------------------------ evaluator
@pytest.mark.parametrize("algo", ["maskable_ppo", "dqn"])
def test_evaluator_plays_like_the_harness_agent(tmp_path, algo):
    config = (cfg.MaskablePPOConfig(n_envs=1, env=ENV, policy=cfg.PolicyConfig(hidden=16, memory_pool=4), n_steps=32,
                                    batch_size=32, n_epochs=1) if algo == "maskable_ppo" else
              cfg.DQNConfig(n_envs=1, env=ENV, policy=cfg.PolicyConfig(hidden=16, memory_pool=4), learning_starts=16,
                            batch_size=16, exploration_steps=50))
    names = _small_train_scenarios(3)
    venv = make_vec_env("native", 1, dict(ENV.env_kwargs(), workload=names), seed=0)
    model = checkpoint.build_model(algo, config, venv, seed=0)
    model.learn(128)
    checkpoint.save_checkpoint(model, tmp_path, {"algo": algo, "config": cfg.config_to_dict(config)})
    agent = make_agent(f"{algo}:{tmp_path}")
    groups = {"a": [get(names[0]), get(names[1])], "b": [get(names[2])]}
    played = Evaluator(groups, ENV, masked=algo == "maskable_ppo").run(model)
    assert list(played) == ["a", "b"] and played["a"].names == tuple(names[:2]) and played["b"].names == (names[2],)
    for name, speedup in zip(names, played["a"].speedups + played["b"].speedups):
        assert speedup == pytest.approx(solve(get(name), agent).speedup, rel=1e-9)  # evaluate() of the mapping
    assert played["a"].geomean == pytest.approx(geomean(played["a"].speedups))
    assert played["a"].steps == sum(get(n).workload.num_buffers for n in names[:2])
    with pytest.raises(ValueError, match="no scenarios to play in b"):
        Evaluator({"a": groups["a"], "b": []}, ENV, masked=True)


def test_validation_set_is_generated_and_held_out():
    scenarios = validation_scenarios(3)
    assert len(scenarios) == 6 and [s.name for s in scenarios] == [s.name for s in validation_scenarios(3)]
    bundled = {s.name for name in SUITES for s in suite(name)}
    assert not {s.name for s in scenarios} & bundled
    seeds = {int(s.workload.name.rsplit("-s", 1)[1]) for s in scenarios}
    assert min(seeds) == VALIDATION_FIRST_SEED == 2**31  # WorkloadGenerator draws seeds below 2**31
    assert {str(s.name.rsplit("@", 1)[1]) for s in scenarios} == {"1/8", "1/2"}
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="validation programs"):
            validation_scenarios(bad)
    with pytest.raises(ValueError, match="positive"):
        geomean([1.0, 0.0])


# --------------------------------------------------------------------------- selection
class _FakeModel:
    def __init__(self):
        self.num_timesteps, self._n_updates = 0, 0


class _Scripted:
    """An evaluator whose held-out geomeans follow a script."""

    def __init__(self, scores):
        self.scores = list(scores)

    def run(self, model):
        class R:
            def __init__(self, g):
                self.geomean, self.names, self.speedups = g, ("x",), (g,)

        return {"valid": R(self.scores.pop(0)), "train": R(1.0)}


def test_selection_keeps_the_running_best_and_logs_every_evaluation(tmp_path):
    saved = []
    ev = _Evaluate(_Scripted([1.0, 1.5, 1.2, 1.5, 1.6, 1.1]), period_s=60.0, select_best=True, best=None,
                   log_path=tmp_path / "eval.csv", begin=0.0)
    ev.on_best = lambda record: saved.append(record["steps"])
    model = _FakeModel()
    for step in range(6):
        model.num_timesteps, model._n_updates = 100 * step, step
        ev.run(model)
    ev.finish(model)  # the last weights were evaluated already: no seventh evaluation
    ev.close()
    rows = _eval_rows_file(tmp_path / "eval.csv")
    assert [r["selected"] for r in rows] == ["1", "1", "0", "0", "1", "0"]  # a tie does not replace
    assert saved == [0, 100, 400] and ev.selected["steps"] == 400 and ev.selected["valid_speedup"] == 1.6
    assert tuple(rows[0]) == EVAL_COLUMNS and rows[0]["test_speedup"] == ""
    carried = _Evaluate(_Scripted([1.55, 1.7]), period_s=60.0, select_best=True, best=1.6,
                        log_path=tmp_path / "resumed.csv", begin=0.0)  # a resumed run's best so far
    carried.run(model), carried.run(model)
    assert [r["selected"] for r in _eval_rows_file(tmp_path / "resumed.csv")] == ["0", "1"]


def _eval_rows_file(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_training_keeps_the_best_checkpoint_and_the_newest_for_resuming(tmp_path):
    # every rollout of 64 steps is evaluated (the period is a microsecond): steps 0, 64, ..., 256
    _train(tmp_path, "--steps", "256", "--eval-programs", "1", "--eval-minutes", "1e-8", "--eval-test")
    rows = _eval_rows(tmp_path)
    assert [int(r["steps"]) for r in rows] == [0, 64, 128, 192, 256]
    assert all(r["test_speedup"] != "" and float(r["train_s"]) <= float(r["wall_s"]) for r in rows)
    valid = [float(r["valid_speedup"]) for r in rows]
    best = int(np.argmax(valid))  # the first maximum
    assert [int(r["selected"]) for r in rows][best] == 1
    meta = json.loads((tmp_path / "train.json").read_text())
    assert meta["selection"]["steps"] == int(rows[best]["steps"])
    assert meta["evaluation"]["programs"] == 1 and len(meta["evaluation"]["valid_scenarios"]) == 2
    chosen, _, config = checkpoint.load_checkpoint(tmp_path)
    newest, _, _ = checkpoint.load_checkpoint(tmp_path, latest=True)
    assert chosen.num_timesteps == int(rows[best]["steps"]) and newest.num_timesteps == 256
    held_out = Evaluator(validation_scenarios(1), config.env, masked=True)
    assert held_out.run(chosen)["all"].geomean == pytest.approx(valid[best], abs=2e-6)
    assert held_out.run(newest)["all"].geomean == pytest.approx(valid[-1], abs=2e-6)
    # --resume continues the newest weights, appends to eval.csv and keeps the best so far
    train_main(["--algo", "maskable_ppo", "--scenario", _small_train_scenarios(1)[0], "--out", str(tmp_path),
                "--quiet", "--n-envs", "2", "--steps", "384", "--resume", "--eval-minutes", "1e-8"])
    rows2 = _eval_rows(tmp_path)
    assert [int(r["steps"]) for r in rows2[len(rows):]] == [256, 320, 384]
    assert float(rows2[len(rows)]["wall_s"]) > float(rows[-1]["wall_s"])  # time carries on
    assert float(rows2[len(rows)]["valid_speedup"]) == pytest.approx(valid[-1], abs=2e-6)  # the newest weights
    best_so_far = max(valid)
    for r in rows2[len(rows):]:
        assert (r["selected"] == "1") == (float(r["valid_speedup"]) > best_so_far)
        best_so_far = max(best_so_far, float(r["valid_speedup"]))
    meta = json.loads((tmp_path / "train.json").read_text())
    assert meta["trained"]["steps"] == 384 and meta["trained"]["runs"] == 2


def test_holdout_programs_leave_training_and_choose_the_checkpoint(tmp_path):
    from mallocgym.agents.sb3.train import holdout_programs, score_groups

    train = list(suite("synthetic", "train"))  # 4 programs at 2 capacities: 2 are held out by default
    held = holdout_programs(train, 2)
    assert held == holdout_programs(train, 2) and len(set(held)) == 2  # fixed, not seeded by the run
    with pytest.raises(ValueError, match=r"--eval-holdout must be in \[0, 3\]"):
        holdout_programs(train, 4)
    assert score_groups(True, False) == ("holdout",) and score_groups(True, True) == ("valid", "holdout")
    assert score_groups(False, False) == ("valid",)
    common = ["--algo", "maskable_ppo", "--suite", "synthetic", "--quiet", "--n-envs", "2", "--steps", "128",
              "--set", "n_steps=32", "--set", "batch_size=32", "--set", "n_epochs=1", "--set", "policy.hidden=16",
              "--eval-programs", "1", "--eval-minutes", "1e-8"]
    train_main(common + ["--out", str(tmp_path / "a")])
    meta = json.loads((tmp_path / "a" / "train.json").read_text())
    held_names = {s.name for s in train if s.workload.name in held}
    assert set(meta["data"]["held_out"]) == held_names and len(held_names) == 4
    assert not held_names & set(meta["data"]["scenarios"]) and len(meta["data"]["scenarios"]) == 4
    assert meta["evaluation"]["holdout"] == 2 and meta["evaluation"]["score_groups"] == ["holdout"]
    rows = _eval_rows(tmp_path / "a")
    assert all(r["score"] == r["holdout_speedup"] for r in rows)  # the generated programs are logged only
    with open(tmp_path / "a" / "logs" / "eval_scenarios.csv", newline="") as handle:
        played = {(r["group"], r["scenario"]) for r in csv.DictReader(handle)}
    assert {name for group, name in played if group == "holdout"} == held_names
    assert not {name for group, name in played if group == "train"} & held_names
    # with generated programs in training, the generated held-out ones count too
    train_main(common + ["--out", str(tmp_path / "b"), "--generator", "small", "--eval-holdout", "1"])
    meta = json.loads((tmp_path / "b" / "train.json").read_text())
    assert meta["evaluation"]["score_groups"] == ["valid", "holdout"] and len(meta["data"]["held_out"]) == 2
    with open(tmp_path / "b" / "logs" / "eval_scenarios.csv", newline="") as handle:
        first = [r for r in csv.DictReader(handle) if r["steps"] == "0" and r["group"] in ("valid", "holdout")]
    assert float(_eval_rows(tmp_path / "b")[0]["score"]) == pytest.approx(
        geomean([float(r["speedup"]) for r in first]), rel=1e-6)
    with pytest.raises(ValueError, match="with --scenario, leave out"):
        _train(tmp_path / "c", "--steps", "64", "--eval-holdout", "1")


def test_select_last_without_evaluation_writes_no_eval_log(tmp_path):
    _train(tmp_path, "--steps", "64", "--eval-programs", "0")
    assert not (tmp_path / "logs" / "eval.csv").exists() and not (tmp_path / "latest.zip").exists()
    meta = json.loads((tmp_path / "train.json").read_text())
    assert meta["selection"] == {"rule": "last", "steps": 64} and meta["evaluation"]["programs"] == 0


@pytest.mark.parametrize("extra, message", [
    (["--eval-programs", "0", "--select", "best"], "--eval-programs 0 turns evaluation off; --select best needs it on"),
    (["--eval-programs", "0", "--eval-test"], "--eval-test needs it on"),
    (["--eval-minutes", "0"], "--eval-minutes must be > 0 and finite, got 0.0"),
    (["--eval-minutes", "inf"], "--eval-minutes must be > 0 and finite"),
    (["--eval-programs", "-1"], "--eval-programs must be in [0, 1024], got -1"),
    (["--eval-test", "--split", "test"], "--eval-test: the training data holds test scenarios"),
])
def test_evaluation_flags_refuse_bad_values(tmp_path, capsys, extra, message):
    from mallocgym.cli import main as cli_main

    out = tmp_path / "run"
    code = cli_main(["train", "sb3", "--algo", "maskable_ppo", "--out", str(out), "--quiet", "--steps", "10", *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_resume_keeps_the_evaluation_settings(tmp_path, capsys):
    from mallocgym.cli import main as cli_main

    _train(tmp_path, "--steps", "64", "--eval-programs", "1")
    code = cli_main(["train", "sb3", "--algo", "maskable_ppo", "--out", str(tmp_path), "--quiet", "--resume",
                     "--scenario", _small_train_scenarios(1)[0], "--steps", "128", "--eval-programs", "2"])
    err = capsys.readouterr().err
    assert code == 2 and "--resume keeps the run's evaluation (--eval-programs 1); got --eval-programs 2" in err


# --------------------------------------------------------------------------- the figure
def _fake_run(folder: Path, test: bool = True) -> Path:
    (folder / "logs").mkdir(parents=True)
    lines = [",".join(EVAL_COLUMNS)]
    for i, (v, t) in enumerate([(1.1, 1.9), (1.4, 2.3), (1.3, 2.2)]):
        row = {"steps": i * 1000, "wall_s": i * 60.0, "train_s": i * 55.0, "eval_s": 1.0, "score": v + 0.1,
               "valid_speedup": v, "holdout_speedup": v + 0.1, "train_speedup": v + 0.2,
               "test_speedup": t if test else "", "selected": int(i < 2)}
        lines.append(",".join(str(row[c]) for c in EVAL_COLUMNS))
    (folder / "logs" / "eval.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_learning_curve_script_draws_a_png_and_refuses_runs_without_test_curves(tmp_path):
    pytest.importorskip("matplotlib")
    script = str(ROOT / "examples" / "sb3_learning_curve.py")
    run = _fake_run(tmp_path / "a")
    out = tmp_path / "curve.png"
    proc = subprocess.run([sys.executable, script, str(run), "--out", str(out), "--reference", ""],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    bad = _fake_run(tmp_path / "b", test=False)
    proc = subprocess.run([sys.executable, script, str(run), str(bad), "--out", str(tmp_path / "x.png"),
                           "--reference", ""], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "trained without --eval-test" in proc.stderr
    assert not (tmp_path / "x.png").exists()
