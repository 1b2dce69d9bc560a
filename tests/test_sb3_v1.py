"""Stable-Baselines3 agents on MallocGame-v1: the per-action policy, training, playing, refusing v0."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import small_random_workload  # noqa: E402

from mallocgym import Hardware, Workload  # noqa: E402
from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.agents.sb3 import checkpoint, config as cfg  # noqa: E402
from mallocgym.agents.sb3.evaluation import Evaluator  # noqa: E402
from mallocgym.agents.sb3.extractor import action_scores, action_tags, greedy_actions  # noqa: E402
from mallocgym.agents.sb3.train import main as train_main  # noqa: E402
from mallocgym.agents.sb3.vec_env import make_vec_env  # noqa: E402
from mallocgym.env.v1 import MallocGameV1Env  # noqa: E402
from mallocgym.harness import solve  # noqa: E402
from mallocgym.scenarios import Scenario, get, suite  # noqa: E402

torch.set_num_threads(1)


def _workload(seed: int, n: int) -> Workload:
    return small_random_workload(seed, n, "v1r", min_span=1)


HW = Hardware(peak_flops=1e12, slow_bw=1e9, fast_bw=1e10, fast_capacity=2048)
SMALL = Scenario("v1r1", _workload(1, 24), HW)
ENV = cfg.EnvConfig(n_candidates=4, n_next=3, memory_bins=(8, 8), version="v1", n_starts=2)  # 1 + 4 + 2*4 = 13


def _tiny_config(algo: str):
    common = dict(n_envs=2, vec="dummy", env=ENV, policy=cfg.PolicyConfig(hidden=16, memory_pool=4))
    if algo == "dqn":
        return cfg.DQNConfig(**common, learning_starts=16, batch_size=16, buffer_size=1000,
                             target_update_interval=50, exploration_steps=100)
    return cfg.ALGOS[algo](**common, n_steps=32, batch_size=32, n_epochs=1)


def _model(algo: str):
    config = _tiny_config(algo)
    venv = make_vec_env("dummy", 1, dict(ENV.env_kwargs(), workload=SMALL), seed=0, version="v1")
    return checkpoint.build_model(algo, config, venv, seed=0), config


def _positions(limit: int = 200):
    """Observations of SMALL along a random legal v1 episode."""
    env = MallocGameV1Env(SMALL, **ENV.env_kwargs())
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(limit):
        out.append(obs)
        obs, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        if done:
            return out
    return out


def _smallest_train_scenario() -> str:
    return min(suite("default", "train"), key=lambda s: s.workload.num_buffers).name


# ------------------------------------------------------------------------------- the policy
@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo", "dqn"])
def test_v1_scores_have_one_entry_per_action_and_masked_ones_are_never_chosen(algo):
    model, _ = _model(algo)
    env = MallocGameV1Env(SMALL, **ENV.env_kwargs())
    assert env.n_actions == ENV.n_actions == 13
    positions = _positions()
    batch = {key: np.stack([o[key] for o in positions]) for key in positions[0]}
    scores = action_scores(model.policy, batch)
    assert scores.shape == (len(positions), env.n_actions)
    masks = batch["action_mask"].astype(bool)
    assert (~masks).any(axis=1).sum() > 5  # positions with masked actions exist
    chosen = greedy_actions(model.policy, batch, masks)
    assert masks[np.arange(len(chosen)), chosen].all()
    # the test can fail: with every action's score pushed up, an illegal one would win unmasked
    boosted = scores.copy()
    boosted[~masks] += 1e6
    np.testing.assert_array_equal(chosen, np.where(masks, scores, -np.inf).argmax(axis=1))
    assert not masks[np.arange(len(chosen)), boosted.argmax(axis=1)].all()
    if algo == "maskable_ppo":  # SB3's own masked sampling never picks a masked action either
        for obs in positions[:40]:
            action, _ = model.predict(obs, deterministic=False, action_masks=obs["action_mask"].astype(bool))
            assert obs["action_mask"][int(action)] == 1


def test_v1_scores_follow_the_offsets_within_each_kind():
    """Permuting the K offsets of FAST, or of one PREFETCH start slot, permutes their scores."""
    model, _ = _model("maskable_ppo")
    k, j = ENV.n_candidates, ENV.starts
    obs = max(_positions(), key=lambda o: o["action_mask"].sum())
    perm = np.array([2, 0, 3, 1])
    order = np.arange(ENV.n_actions)
    order[1:1 + k] = 1 + perm  # the FAST rows
    order[1 + k + k:1 + k + 2 * k] = 1 + k + k + perm  # the second prefetch slot's rows
    rows = obs["actions"].reshape(ENV.n_actions, -1)
    permuted = dict(obs, actions=rows[order].reshape(-1).copy(), action_mask=obs["action_mask"][order].copy())
    base = action_scores(model.policy, obs)[0]
    after = action_scores(model.policy, permuted)[0]
    np.testing.assert_allclose(after, base[order], rtol=1e-5, atol=1e-6)
    assert len(np.unique(np.round(base, 6))) > 3  # the rows score differently: a wrong order would show
    tags = action_tags(k, j)
    assert tags.shape == (ENV.n_actions, 3 + j)
    assert tags[0, 0] == 1 and tags[1:1 + k, 1].all() and tags[1 + k:, 2].all()
    assert tags[1 + k + k:1 + k + 2 * k, 4].all() and not tags[1 + k:1 + 2 * k, 4].any()


def test_v1_extractor_needs_the_starts():
    from mallocgym.agents.sb3.extractor import CandidateSetExtractor

    space = MallocGameV1Env(SMALL, **ENV.env_kwargs()).observation_space
    with pytest.raises(ValueError, match="needs n_starts"):
        CandidateSetExtractor(space, hidden=8, memory_bins=(8, 8))
    with pytest.raises(ValueError, match="wrong n_starts"):
        CandidateSetExtractor(space, hidden=8, memory_bins=(8, 8), n_starts=4)  # 13 = 1 + K * 5 has no K


# ------------------------------------------------------------------------------ configs
@pytest.mark.parametrize("make, message", [
    (lambda: cfg.EnvConfig(n_starts=2), "n_starts is MallocGame-v1's"),
    (lambda: cfg.EnvConfig(version="v1", n_starts=5), "n_starts must be an integer in"),
    (lambda: cfg.EnvConfig(version="v2"), "version must be one of"),
    (lambda: cfg.MaskablePPOConfig(env=cfg.EnvConfig(version="v1")), "plays MallocGame-v0 only"),
])
def test_bad_v1_config_is_one_clear_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_v1_config_round_trips_and_defaults():
    c = cfg.default_config("maskable_ppo", "v1")
    assert (c.env.version, c.vec, c.env.env_kwargs()["n_starts"], c.env.n_actions) == ("v1", "dummy", 4, 81)
    c = cfg.override(c, "env.n_starts=2")
    assert c.env.n_starts == 2 and c.env.n_actions == 1 + 16 * 3
    assert cfg.config_from_dict("maskable_ppo", json.loads(json.dumps(cfg.config_to_dict(c)))) == c
    old = cfg.config_to_dict(cfg.default_config("ppo"))
    del old["env"]["version"], old["env"]["n_starts"]  # a train.json from before v1
    assert cfg.config_from_dict("ppo", old).env.version == "v0"


# ------------------------------------------------------------------------- train and play
def _train_v1(out, *extra):
    return train_main(["--algo", "maskable_ppo", "--env", "v1", "--scenario", _smallest_train_scenario(),
                       "--out", str(out), "--quiet", "--n-envs", "2", "--set", "n_steps=64", "--set", "batch_size=64",
                       "--set", "n_epochs=1", "--set", "policy.hidden=16", "--set", "env.n_candidates=4",
                       "--set", "env.n_starts=2", "--eval-programs", "0", *extra])


def test_tiny_v1_run_reloads_and_plays_legal_complete_episodes(tmp_path):
    _train_v1(tmp_path, "--steps", "256")
    meta = json.loads((tmp_path / "train.json").read_text())
    assert meta["config"]["env"]["version"] == "v1" and meta["trained"]["steps"] == 256
    assert meta["config"]["vec"] == "dummy"
    agent = make_agent(f"maskable_ppo:{tmp_path}")
    assert agent.version == "v1" and agent.plays_v1 and not agent.plays_v0
    for name in (_smallest_train_scenario(), "unet-infer@1/8"):
        scenario = get(name)
        result = solve(scenario, agent, env="v1")  # checked and priced by evaluate_v1
        assert result.env == "v1" and result.speedup >= 1.0
        # a complete episode: every segment decided, by the agent or forced
        env = MallocGameV1Env(scenario, **agent.env_kwargs)
        obs, _ = env.reset(seed=0)
        done, info = False, {}
        steps = 0
        while not done:
            action = agent.act(env, obs)
            assert obs["action_mask"][action] == 1  # never a masked action
            obs, _, done, _, info = env.step(action)
            steps += 1
        assert info["agent_decisions"] == steps == result.info["steps"]
        assert info["forced_decisions"] + steps == env.static.seg_use.shape[0]
        assert result.info["invalid_actions"] == 0
        assert info["speedup"] == pytest.approx(result.speedup, rel=1e-9)
    # the batched evaluator plays exactly like the agent
    played = Evaluator([get(_smallest_train_scenario())], agent.config.env, masked=True).run(agent.model)["all"]
    assert played.speedups[0] == pytest.approx(solve(get(_smallest_train_scenario()), agent, env="v1").speedup,
                                               rel=1e-9)


def test_each_version_refuses_the_other_with_one_clear_error(tmp_path, capsys):
    from mallocgym.cli import main as cli_main
    from mallocgym.harness import bench

    v1_run, v0_run = tmp_path / "v1", tmp_path / "v0"
    _train_v1(v1_run, "--steps", "64")
    train_main(["--algo", "maskable_ppo", "--scenario", _smallest_train_scenario(), "--out", str(v0_run), "--quiet",
                "--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=32", "--set", "policy.hidden=16",
                "--steps", "64", "--eval-programs", "0"])
    v1_agent, v0_agent = make_agent(f"maskable_ppo:{v1_run}"), make_agent(f"maskable_ppo:{v0_run}")
    scenario = get(_smallest_train_scenario())
    with pytest.raises(ValueError, match="trained on MallocGame-v1 and plays only that version, not MallocGame-v0"):
        v1_agent.solve(scenario)
    with pytest.raises(ValueError, match="trained on MallocGame-v0 and plays only that version, not MallocGame-v1"):
        v0_agent.solve_v1(scenario)
    with pytest.raises(ValueError, match="plays MallocGame-v0 only"):
        bench([scenario], [v0_agent], env="v1", progress=False)  # refused before anything runs
    with pytest.raises(ValueError, match="this run was trained on MallocGame-v1, not MallocGame-v0"):
        checkpoint.load_checkpoint(v1_run, version="v0")
    for env, run in (("v0", v1_run), ("v1", v0_run)):
        code = cli_main(["eval", "--env", env, "--agent", f"maskable_ppo:{run}", "--scenario", scenario.name])
        err = capsys.readouterr().err
        # one error line, the last (a v1 run on v0 is refused at its first scenario, after the
        # harness's progress bar has started: the harness checks only v1 up front)
        assert code == 2 and err.count("mallocgym: error: ") == 1, err
        assert err.splitlines()[-1].startswith("mallocgym: error: ") and "MallocGame-v0" in err.splitlines()[-1]
    # both play their own version through the CLI
    assert cli_main(["eval", "--env", "v1", "--agent", f"maskable_ppo:{v1_run}", "--scenario", scenario.name,
                     "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["env"] == "v1" and rows[0]["speedup"] >= 1.0


@pytest.mark.parametrize("extra, message", [
    (["--env", "v1", "--vec", "native"], "plays MallocGame-v0 only; on v1 use vec=dummy or vec=subproc"),
    (["--env", "v0", "--set", "env.n_starts=2"], "n_starts is MallocGame-v1's"),
    (["--env", "v1", "--set", "env.version=v0"], "--env v1 contradicts --set env.version=v0"),
])
def test_v1_train_flags_refuse_contradictions(tmp_path, capsys, extra, message):
    from mallocgym.cli import main as cli_main

    out = tmp_path / "run"
    code = cli_main(["train", "sb3", "--algo", "maskable_ppo", "--out", str(out), "--quiet", "--steps", "10", *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_resume_keeps_the_game_version(tmp_path, capsys):
    from mallocgym.cli import main as cli_main

    _train_v1(tmp_path, "--steps", "64")
    code = cli_main(["train", "sb3", "--algo", "maskable_ppo", "--out", str(tmp_path), "--quiet", "--resume",
                     "--steps", "128", "--env", "v0"])
    err = capsys.readouterr().err
    assert code == 2 and "this run trains on MallocGame-v1; --resume cannot switch it to --env v0" in err
    train_main(["--algo", "maskable_ppo", "--out", str(tmp_path), "--quiet", "--resume", "--steps", "128",
                "--scenario", _smallest_train_scenario()])  # no --env: the run's
    meta = json.loads((tmp_path / "train.json").read_text())
    assert meta["trained"]["steps"] == 128 and meta["config"]["env"]["version"] == "v1"
