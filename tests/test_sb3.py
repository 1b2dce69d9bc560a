"""Stable-Baselines3 agents: configs, the candidate policies, checkpoints, training, examples."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import small_random_workload  # noqa: E402

from mallocgym import Hardware, Workload  # noqa: E402
from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.agents.sb3 import checkpoint, config as cfg  # noqa: E402
from mallocgym.agents.sb3.agent import SB3Agent  # noqa: E402
from mallocgym.agents.sb3.extractor import action_scores  # noqa: E402
from mallocgym.agents.sb3.train import main as train_main  # noqa: E402
from mallocgym.agents.sb3.vec_env import make_vec_env  # noqa: E402
from mallocgym.env import MallocGameEnv  # noqa: E402
from mallocgym.pricing.v0 import evaluate  # noqa: E402
from mallocgym.scenarios import SUITES, Scenario, suite  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)


def _workload(seed: int, n: int) -> Workload:
    return small_random_workload(seed, n, "r")


HW = Hardware(peak_flops=1e12, slow_bw=1e9, fast_bw=1e10, fast_capacity=2048)
SMALL = Scenario("r1", _workload(1, 24), HW)
ENV = cfg.EnvConfig(n_candidates=6, n_next=3, memory_bins=(8, 8))


def _smallest_train_scenario() -> str:
    return min(suite("default", "train"), key=lambda s: s.workload.num_buffers).name


def _tiny_config(algo: str):
    base = cfg.default_config(algo)
    common = dict(n_envs=2, env=ENV, policy=cfg.PolicyConfig(hidden=16, memory_pool=4))
    if algo == "dqn":
        return cfg.DQNConfig(**common, learning_starts=16, batch_size=16, buffer_size=1000,
                             target_update_interval=50, exploration_steps=100)
    return type(base)(**common, n_steps=32, batch_size=32, n_epochs=1)


# ------------------------------------------------------------------------------------ configs
@pytest.mark.parametrize("make, field", [
    (lambda: cfg.MaskablePPOConfig(learning_rate=0.0), "learning_rate"),
    (lambda: cfg.MaskablePPOConfig(gamma=1.5), "gamma"),
    (lambda: cfg.PPOConfig(batch_size=1), "batch_size"),
    (lambda: cfg.PPOConfig(vec="threads"), "vec"),
    (lambda: cfg.DQNConfig(exploration_final_eps=-0.1), "exploration_final_eps"),
    (lambda: cfg.DQNConfig(learning_starts=-1), "learning_starts"),
    (lambda: cfg.EnvConfig(invalid_action="ignore"), "invalid_action"),
    (lambda: cfg.EnvConfig(memory_bins=(8,)), "memory_bins"),
    (lambda: cfg.PolicyConfig(extractor="transformer"), "extractor"),
    (lambda: cfg.PolicyConfig(net_arch=(64, 0)), "net_arch"),
])
def test_bad_config_names_the_field(make, field):
    with pytest.raises(ValueError, match=field):
        make()


def test_config_overrides_and_json_round_trip():
    c = cfg.default_config("maskable_ppo")
    c = cfg.override(c, "learning_rate=1e-4")
    c = cfg.override(c, "policy.extractor=flat")
    c = cfg.override(c, "env.memory_bins=16,8")
    c = cfg.override(c, "n_steps=1e3")
    assert (c.learning_rate, c.policy.extractor, c.env.memory_bins, c.n_steps) == (1e-4, "flat", (16, 8), 1000)
    back = cfg.config_from_dict("maskable_ppo", json.loads(json.dumps(cfg.config_to_dict(c))))
    assert back == c
    with pytest.raises(ValueError, match="no field 'lr'"):
        cfg.override(c, "lr=1")
    with pytest.raises(ValueError, match="cannot read 'fast'"):
        cfg.override(c, "n_steps=fast")
    with pytest.raises(ValueError, match="unknown field"):
        cfg.config_from_dict("dqn", {"n_steps": 3})


# ------------------------------------------------------------------------- candidate policies
def _model(algo: str, config=None):
    config = config or _tiny_config(algo)
    venv = make_vec_env("native", 1, dict(config.env.env_kwargs(), workload=SMALL), seed=0)
    return checkpoint.build_model(algo, config, venv, seed=0)


def _observation_with_candidates(k_min: int = 3):
    env = MallocGameEnv(SMALL, **ENV.env_kwargs())
    obs, _ = env.reset(seed=0)
    for _ in range(SMALL.workload.num_buffers):
        if obs["action_mask"][:-1].sum() >= k_min:
            return obs
        obs, *_ = env.step(0)
    raise AssertionError("no position with enough candidates")


def _permute_rows(obs, perm):
    k, f = len(perm), obs["candidates"].size // len(perm)
    out = dict(obs)
    out["candidates"] = obs["candidates"].reshape(k, f)[perm].reshape(-1).copy()
    out["action_mask"] = np.concatenate([obs["action_mask"][:-1][perm], obs["action_mask"][-1:]])
    return out


@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo", "dqn"])
def test_candidate_scores_follow_the_rows(algo):
    """Permuting the candidate rows permutes the per-candidate logits / Q-values; skip's stays."""
    model = _model(algo)
    obs = _observation_with_candidates()
    k = ENV.n_candidates
    perm = np.random.default_rng(0).permutation(k)
    assert (perm != np.arange(k)).any()
    base = action_scores(model.policy, obs)[0]
    permuted = action_scores(model.policy, _permute_rows(obs, perm))[0]
    np.testing.assert_allclose(permuted[:k], base[:k][perm], rtol=1e-5, atol=1e-6)
    assert permuted[k] == pytest.approx(base[k], rel=1e-5, abs=1e-6)
    assert np.ptp(base[:k]) > 0  # rows get different scores: the test can see a permutation


def test_flat_policy_is_not_row_equivariant():
    """The comparison baseline: SB3's flattening policy gives no such guarantee."""
    flat = cfg.MaskablePPOConfig(n_envs=1, env=ENV, policy=cfg.PolicyConfig(extractor="flat", net_arch=(32,)))
    model = _model("maskable_ppo", flat)
    obs = _observation_with_candidates()
    perm = np.roll(np.arange(ENV.n_candidates), 1)
    base = action_scores(model.policy, obs)[0]
    permuted = action_scores(model.policy, _permute_rows(obs, perm))[0]
    assert not np.allclose(permuted[:-1], base[:-1][perm], atol=1e-6)


# ------------------------------------------------------------------------------- checkpoints
def _save(model, algo, out, config):
    checkpoint.save_checkpoint(model, out, {"algo": algo, "config": cfg.config_to_dict(config)})


@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo", "dqn"])
def test_checkpoint_round_trip_restores_identical_actions(tmp_path, algo):
    config = _tiny_config(algo)
    model = _model(algo, config)
    model.learn(64)  # move the weights away from their initialisation
    _save(model, algo, tmp_path, config)
    agent = make_agent(f"{algo}:{tmp_path}")
    assert isinstance(agent, SB3Agent)
    env = MallocGameEnv(SMALL, **ENV.env_kwargs())
    obs, _ = env.reset(seed=0)
    for _ in range(SMALL.workload.num_buffers):
        kwargs = {"action_masks": env.action_masks()} if algo == "maskable_ppo" else {}
        expected, _ = model.predict(obs, deterministic=True, **kwargs)
        assert agent.act(env, obs) == int(expected)
        np.testing.assert_array_equal(action_scores(agent.model.policy, obs), action_scores(model.policy, obs))
        obs, _, done, _, _ = env.step(int(expected))
        if done:
            break
    first = agent.solve(SMALL, seed=0)
    second = make_agent(f"{algo}:{tmp_path}").solve(SMALL, seed=0)
    np.testing.assert_array_equal(first.offsets, second.offsets)
    evaluate(SMALL.workload, first.offsets, SMALL.hardware)  # a legal mapping


def test_unmasked_agents_follow_invalid_action(tmp_path):
    """PPO/DQN predict without masks: a masked pick leaves the buffer in slow memory."""
    config = _tiny_config("ppo")
    _save(_model("ppo", config), "ppo", tmp_path, config)
    agent = make_agent(f"ppo:{tmp_path}")
    agent.act = lambda env, obs: ENV.n_candidates - 1  # the last candidate: masked whenever fewer exist
    solution = agent.solve(SMALL, seed=0)
    env = MallocGameEnv(SMALL, **ENV.env_kwargs())
    obs, _ = env.reset(seed=0)
    masked = 0
    while True:
        legal = obs["action_mask"][ENV.n_candidates - 1] == 1
        masked += not legal
        obs, _, done, _, info = env.step(ENV.n_candidates - 1 if legal else ENV.n_candidates)
        if done:
            break
    assert masked > 0
    assert solution.info["invalid_actions"] == masked
    np.testing.assert_array_equal(solution.offsets, info["offsets"])


def test_missing_or_corrupt_checkpoint_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="train.json: missing"):
        make_agent(f"maskable_ppo:{tmp_path}")
    config = _tiny_config("maskable_ppo")
    _save(_model("maskable_ppo", config), "maskable_ppo", tmp_path, config)
    with pytest.raises(ValueError, match="trained 'maskable_ppo', not 'dqn'"):
        make_agent(f"dqn:{tmp_path}")
    model_file = tmp_path / "model.zip"
    model_file.write_bytes(model_file.read_bytes()[:200])
    with pytest.raises(ValueError, match=r"model\.zip: not a readable maskable_ppo checkpoint"):
        make_agent(f"maskable_ppo:{tmp_path}")
    model_file.unlink()
    with pytest.raises(ValueError, match=r"model\.zip: missing checkpoint"):
        make_agent(f"maskable_ppo:{tmp_path}")
    (tmp_path / "train.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"train\.json: not a valid"):
        make_agent(f"maskable_ppo:{tmp_path}")
    with pytest.raises(ValueError, match="needs a trained run"):
        make_agent("maskable_ppo")


# ---------------------------------------------------------------------------------- training
def _train(out, *extra):
    args = ["--algo", "maskable_ppo", "--scenario", _smallest_train_scenario(), "--out", str(out), "--quiet",
            "--set", "n_steps=32", "--set", "batch_size=32", "--set", "n_epochs=1", "--set", "policy.hidden=16",
            "--n-envs", "2", "--eval-programs", "0"]  # evaluation and selection: tests/test_sb3_eval.py
    return train_main(args + list(extra))


def test_train_resume_continues_the_step_count(tmp_path):
    _train(tmp_path, "--steps", "100")
    meta = json.loads((tmp_path / "train.json").read_text())
    first = meta["trained"]["steps"]
    assert first >= 100 and meta["trained"]["runs"] == 1
    assert (tmp_path / "logs" / "progress.csv").is_file()
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files
    with pytest.raises(ValueError, match="already holds a run"):
        _train(tmp_path, "--steps", "200")
    train_main(["--algo", "maskable_ppo", "--scenario", _smallest_train_scenario(), "--out", str(tmp_path),
                "--quiet", "--resume", "--steps", "200", "--n-envs", "2"])
    meta = json.loads((tmp_path / "train.json").read_text())
    assert meta["trained"]["steps"] >= 200 and meta["trained"]["runs"] == 2
    assert meta["runs"][1]["steps"] == meta["trained"]["steps"] - first
    model, _, _ = checkpoint.load_checkpoint(tmp_path)
    assert model.num_timesteps == meta["trained"]["steps"]
    # rollouts of 32 x 2 = 64 steps: run 1 = iteration 1 (64) + a cut rollout (100); run 2 goes on
    # from 100: iteration 1 (164) + a cut rollout (200); the resumed run appends to the file
    rows = _progress_rows(tmp_path)
    assert [(r["time/iterations"], r["time/total_timesteps"]) for r in rows] == [
        ("1", "64"), ("", "100"), ("1", "164"), ("", "200")]


def _progress_rows(run_dir) -> list[dict]:
    import csv

    with open(run_dir / "logs" / "progress.csv", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo"])
def test_progress_csv_has_one_flushed_row_per_rollout_iteration(tmp_path, algo):
    # n_steps=32 per env x 2 envs = 64 steps a rollout; --steps 192 = 3 whole rollouts, so 3
    # iterations, each trained on (the last one too) and each with its own row and losses
    _train(tmp_path, "--steps", "192", "--algo", algo)
    rows = _progress_rows(tmp_path)
    assert [(r["time/iterations"], r["time/total_timesteps"]) for r in rows] == [
        ("1", "64"), ("2", "128"), ("3", "192")]
    assert all(r["train/loss"] != "" and r["train/n_updates"] == r["time/iterations"] for r in rows)
    assert json.loads((tmp_path / "train.json").read_text())["trained"]["steps"] == 192
    assert (tmp_path / "logs" / "progress.csv").read_text().endswith("\n")


def test_progress_csv_of_dqn_ends_with_a_row_at_the_last_step(tmp_path):
    train_main(["--algo", "dqn", "--scenario", _smallest_train_scenario(), "--quiet", "--steps", "120",
                "--n-envs", "1", "--set", "learning_starts=50", "--set", "batch_size=16", "--set", "policy.hidden=16",
                "--out", str(tmp_path), "--eval-programs", "0"])
    rows = _progress_rows(tmp_path)
    assert rows and rows[-1]["time/total_timesteps"] == "120" and rows[-1]["train/loss"] != ""


def test_dqn_epsilon_falls_over_exploration_steps(tmp_path):
    common = ["--algo", "dqn", "--scenario", _smallest_train_scenario(), "--quiet", "--steps", "200", "--n-envs", "1",
              "--set", "learning_starts=50", "--set", "batch_size=16", "--set", "policy.hidden=16",
              "--eval-programs", "0"]
    train_main(common + ["--out", str(tmp_path / "short"), "--set", "exploration_steps=100"])
    train_main(common + ["--out", str(tmp_path / "long"), "--set", "exploration_steps=2000"])
    short, _, _ = checkpoint.load_checkpoint(tmp_path / "short")
    long, _, _ = checkpoint.load_checkpoint(tmp_path / "long")
    assert short.exploration_rate == pytest.approx(0.05)
    assert long.exploration_rate == pytest.approx(1.0 - 0.95 * 200 / 2000, abs=0.01)


@pytest.mark.parametrize("kind", ["native", "dummy"])
def test_vec_env_kinds_give_masks_to_maskable_ppo(kind):
    venv = make_vec_env(kind, 2, dict(ENV.env_kwargs(), workload=SMALL), seed=3)
    obs = venv.reset()
    masks = np.stack(venv.env_method("action_masks"))
    np.testing.assert_array_equal(masks, obs["action_mask"].astype(bool))
    model = checkpoint.build_model("maskable_ppo", _tiny_config("maskable_ppo"), venv)
    model.learn(64)
    assert model.num_timesteps >= 64


def test_tensorboard_logs(tmp_path):
    pytest.importorskip("tensorboard")
    _train(tmp_path, "--steps", "64", "--tensorboard")
    assert list((tmp_path / "logs").glob("events.out.tfevents.*"))


def test_training_mix_draws_generated_and_named_scenarios(tmp_path):
    from mallocgym.agents.sb3.data import TrainingMix

    name = _smallest_train_scenario()
    rng = np.random.default_rng(0)
    assert {TrainingMix((name,), "small", 0.0)(rng).name for _ in range(3)} == {name}
    generated = [TrainingMix((), "small", 1.0)(np.random.default_rng(s)) for s in (1, 1, 2)]
    assert all(s.workload.name.startswith("gen-small") for s in generated)
    assert generated[0].name == generated[1].name != generated[2].name  # seeded by the env's rng
    with pytest.raises(ValueError, match="preset"):
        TrainingMix((name,), "huge", 0.5)
    with pytest.raises(ValueError, match="needs scenarios"):
        TrainingMix((), "small", 0.5)
    _train(tmp_path, "--steps", "64", "--generator", "small", "--generator-share", "0.5")
    meta = json.loads((tmp_path / "train.json").read_text())
    assert meta["data"]["generator"] == "small" and meta["data"]["generator_share"] == 0.5


def test_train_needs_a_budget(tmp_path):
    with pytest.raises(ValueError, match="give a budget"):
        train_main(["--algo", "ppo", "--out", str(tmp_path)])


@pytest.mark.parametrize("extra, message", [
    (["--steps", "-5"], "--steps must be in [1, 1000000000000], got -5"),
    (["--steps", "10000000000000"], "--steps must be in [1, "),
    (["--steps", "10", "--seed", "-1"], "--seed must be in [0, 4294967295], got -1"),
    (["--minutes", "nan"], "--minutes must be > 0 and finite, got nan"),
    (["--minutes", "-1"], "--minutes must be > 0"),
    (["--steps", "10", "--n-envs", "0"], "--n-envs must be in [1, 4096], got 0"),
    (["--steps", "10", "--checkpoint-minutes", "0"], "--checkpoint-minutes must be > 0"),
    (["--steps", "10", "--generator", "small", "--generator-share", "2"], "--generator-share must be in [0, 1]"),
    (["--steps", "10", "--generator-share", "0.3"], "--generator-share needs --generator"),
    (["--steps", "10", "--scenario", "mlp-train-s0@1/8", "--suite", "synthetic"], "drop --suite/--split"),
    (["--steps", "10", "--scenario", "mlp-train-s0@1/8", "--split", "test"], "drop --suite/--split"),
    (["--steps", "10", "--resume"], "--resume: "),
])
def test_train_command_refuses_bad_numbers_and_contradictions(tmp_path, capsys, extra, message):
    from mallocgym.cli import main as cli_main

    out = tmp_path / "run"
    code = cli_main(["train", "sb3", "--algo", "ppo", "--out", str(out), "--quiet", *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("mallocgym: error: ") and message in err, err
    assert not out.exists()  # nothing created


def test_train_resume_of_a_bad_folder_writes_nothing(tmp_path, capsys):
    from mallocgym.cli import main as cli_main

    config = _tiny_config("maskable_ppo")
    _save(_model("maskable_ppo", config), "maskable_ppo", tmp_path, config)
    (tmp_path / "model.zip").write_bytes(b"garbage")
    before = sorted(p.name for p in tmp_path.iterdir())
    code = cli_main(["train", "sb3", "--algo", "maskable_ppo", "--out", str(tmp_path), "--quiet", "--resume",
                     "--steps", "100"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "model.zip: not a readable maskable_ppo checkpoint" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no logs/, no temporary files


def test_train_command_error_is_one_line(tmp_path, capsys):
    from mallocgym.cli import main as cli_main

    code = cli_main(["train", "sb3", "--algo", "dqn", "--out", str(tmp_path), "--steps", "10", "--set", "gamma=2"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "mallocgym: error: DQNConfig.gamma must be in [0, 1], got 2.0"]
    assert not (tmp_path / "model.zip").exists()


# ---------------------------------------------------------------------------------- examples
# The examples evaluate on a whole test split: the small synthetic suite keeps that quick.
EXAMPLE_SUITE = "synthetic" if "synthetic" in SUITES else "default"


@pytest.mark.parametrize("script, extra", [
    ("sb3_maskable_ppo.py", ["--n-steps", "64", "--batch-size", "64"]),
    ("sb3_ppo.py", ["--n-steps", "64", "--batch-size", "64"]),
    ("sb3_dqn.py", ["--learning-starts", "64", "--exploration-steps", "200"]),
])
def test_example_scripts_train_and_evaluate(tmp_path, script, extra):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--total-timesteps", "300",
                           "--n-envs", "2", "--suite", EXAMPLE_SUITE, "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines[0]["trained_steps"] >= 300
    rows = lines[1:]
    assert [r["scenario"] for r in rows] == [s.name for s in suite(EXAMPLE_SUITE, "test")]
    algo = script[len("sb3_"):-len(".py")]
    for r in rows:
        assert r[algo] >= 1.0 and r["xla"] >= 1.0  # speedups of legal mappings, via evaluate()
    solution = make_agent(f"{algo}:{out}").solve(SMALL, seed=0)  # the saved run loads as an agent
    evaluate(SMALL.workload, solution.offsets, SMALL.hardware)
