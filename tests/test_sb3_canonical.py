"""Stable-Baselines3 agents in MallocGame-v0's canonical decision mode (``env.order=canonical``):
configs, the two-headed row policy, training, saving, reloading and playing through the harness."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import small_random_workload  # noqa: E402

from mallocgym import Hardware, Workload  # noqa: E402
from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.agents.sb3 import checkpoint, config as cfg  # noqa: E402
from mallocgym.agents.sb3.evaluation import Evaluator  # noqa: E402
from mallocgym.agents.sb3.extractor import CandidateSetExtractor, action_scores, greedy_actions  # noqa: E402
from mallocgym.agents.sb3.train import main as train_main  # noqa: E402
from mallocgym.agents.sb3.vec_env import make_vec_env  # noqa: E402
from mallocgym.env import MallocGameEnv  # noqa: E402
from mallocgym.env.canonical import CanonicalGameEnv  # noqa: E402
from mallocgym.pricing.v0 import evaluate  # noqa: E402
from mallocgym.harness import solve  # noqa: E402
from mallocgym.scenarios import Scenario  # noqa: E402
from mallocgym.workloads.io import save  # noqa: E402

torch.set_num_threads(1)


def _workload(seed: int, n: int) -> Workload:
    return small_random_workload(seed, n, "c")


HW = Hardware(peak_flops=1e12, slow_bw=1e9, fast_bw=1e10, fast_capacity=1024)
SMALL = Scenario("c1", _workload(1, 24), HW)
K = 6
ENV = cfg.EnvConfig(n_candidates=K, n_next=3, memory_bins=(8, 8), order="canonical")


def _tiny_config(algo: str):
    common = dict(n_envs=2, vec="dummy", env=ENV, policy=cfg.PolicyConfig(hidden=16, memory_pool=4))
    if algo == "dqn":
        return cfg.DQNConfig(**common, learning_starts=16, batch_size=16, buffer_size=1000,
                             target_update_interval=50, exploration_steps=100)
    return cfg.ALGOS[algo](**common, n_steps=32, batch_size=32, n_epochs=1)


def _model(algo: str):
    config = _tiny_config(algo)
    venv = make_vec_env("dummy", 1, dict(ENV.env_kwargs(), workload=SMALL), seed=0)
    return checkpoint.build_model(algo, config, venv, seed=0), config


def _positions(seed: int = 0):
    """The observations of one random legal canonical episode of SMALL."""
    env = MallocGameEnv(SMALL, **ENV.env_kwargs())
    assert isinstance(env, CanonicalGameEnv)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    while True:
        out.append(obs)
        obs, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        if done:
            return out


def _permute_rows(obs, perm):
    """``obs`` with its candidate rows reordered by ``perm``, and both halves of the mask with them."""
    k = len(perm)
    out = dict(obs)
    out["candidates"] = obs["candidates"].reshape(k, -1)[perm].reshape(-1).copy()
    mask = obs["action_mask"]
    out["action_mask"] = np.concatenate([mask[:k][perm], mask[k:][perm]])
    return out


# ------------------------------------------------------------------------------------ configs
def test_canonical_config_defaults_and_round_trip():
    c = cfg.default_config("maskable_ppo", canonical=True)
    assert (c.env.order, c.env.canonical, c.vec, c.env.n_actions) == ("canonical", True, "dummy", 32)
    assert ENV.n_actions == 2 * K and cfg.EnvConfig().n_actions == 17
    assert cfg.config_from_dict("maskable_ppo", json.loads(json.dumps(cfg.config_to_dict(c)))) == c
    assert isinstance(c.env.env_class()(SMALL, **c.env.env_kwargs()), CanonicalGameEnv)


@pytest.mark.parametrize("make, message", [
    (lambda: cfg.EnvConfig(version="v1", order="canonical"), "'canonical' is a MallocGame-v0 decision mode"),
    (lambda: cfg.EnvConfig(order="canon"), "EnvConfig.order must be one of"),
    (lambda: cfg.MaskablePPOConfig(env=ENV), "vec 'native' .* does not run env.order=canonical"),
    (lambda: cfg.default_config("dqn", "v1", canonical=True), "MallocGame-v0 decision mode; not available on v1"),
    (lambda: make_vec_env("native", 1, ENV.env_kwargs()), "does not run v0's canonical decision mode"),
])
def test_bad_canonical_config_is_one_clear_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_extractor_is_told_the_mode_and_refuses_the_wrong_one():
    canonical = MallocGameEnv(SMALL, **ENV.env_kwargs()).observation_space
    default = MallocGameEnv(SMALL, **dict(ENV.env_kwargs(), order="boundedness")).observation_space
    # both modes have K rows of 9 features: only the flag says which game it is
    assert canonical["candidates"].shape == default["candidates"].shape
    assert CandidateSetExtractor(canonical, hidden=8, memory_bins=(8, 8), canonical=True).canonical
    with pytest.raises(ValueError, match="an order='canonical' env needs canonical=True"):
        CandidateSetExtractor(canonical, hidden=8, memory_bins=(8, 8))
    with pytest.raises(ValueError, match="canonical=True needs a MallocGame-v0 order='canonical' observation"):
        CandidateSetExtractor(default, hidden=8, memory_bins=(8, 8), canonical=True)
    with pytest.raises(ValueError, match="canonical must be True or False"):
        CandidateSetExtractor(canonical, hidden=8, memory_bins=(8, 8), canonical="yes")


# --------------------------------------------------------------------------- the row policy
@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo", "dqn"])
def test_both_halves_of_the_scores_follow_the_rows(algo):
    """Permuting the candidate rows permutes the place scores and the slow scores the same way."""
    model, _ = _model(algo)
    obs = max(_positions(), key=lambda o: o["action_mask"].sum())
    assert obs["action_mask"][:K].sum() >= 3
    perm = np.array([3, 0, 5, 1, 4, 2])
    base = action_scores(model.policy, obs)[0]
    after = action_scores(model.policy, _permute_rows(obs, perm))[0]
    assert base.shape == (2 * K,)
    np.testing.assert_allclose(after[:K], base[:K][perm], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(after[K:], base[K:][perm], rtol=1e-5, atol=1e-6)
    # the test can fail: the rows score differently, and a row's two actions differently
    assert np.ptp(base[:K]) > 0 and np.ptp(base[K:]) > 0
    assert not np.allclose(base[:K], base[K:], atol=1e-6)


@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo", "dqn"])
def test_masked_actions_are_never_chosen(algo):
    model, _ = _model(algo)
    positions = _positions(0) + _positions(1)
    batch = {key: np.stack([o[key] for o in positions]) for key in positions[0]}
    masks = batch["action_mask"].astype(bool)
    assert (~masks).any(axis=1).sum() > 5  # positions with masked actions exist
    scores = action_scores(model.policy, batch)
    chosen = greedy_actions(model.policy, batch, masks)
    assert masks[np.arange(len(chosen)), chosen].all()
    np.testing.assert_array_equal(chosen, np.where(masks, scores, -np.inf).argmax(axis=1))
    boosted = np.where(masks, scores, scores + 1e6)  # an illegal action would win unmasked
    assert not masks[np.arange(len(chosen)), boosted.argmax(axis=1)].all()
    if algo == "maskable_ppo":  # SB3's own masked sampling never picks a masked action either
        for obs in positions:
            action, _ = model.predict(obs, deterministic=False, action_masks=obs["action_mask"].astype(bool))
            assert obs["action_mask"][int(action)] == 1


# ------------------------------------------------------------------------- train and play
def _train(out, workload_file, *extra):
    return train_main(["--algo", "maskable_ppo", "--scenario", str(workload_file), "--out", str(out), "--quiet",
                       "--n-envs", "2", "--set", "env.order=canonical", "--set", "n_steps=64",
                       "--set", "batch_size=64", "--set", "n_epochs=1", "--set", "policy.hidden=16",
                       "--set", f"env.n_candidates={K}", "--set", "env.memory_bins=8,8", "--eval-programs", "0",
                       *extra])


def test_tiny_canonical_run_reloads_and_plays_legal_complete_episodes(tmp_path, capsys):
    from mallocgym.cli import main as cli_main

    workload_file = save(SMALL.workload, tmp_path / "c1.json")
    run = tmp_path / "run"
    _train(run, workload_file, "--steps", "256")
    meta = json.loads((run / "train.json").read_text())
    assert meta["config"]["env"]["order"] == "canonical" and meta["config"]["vec"] == "dummy"
    assert meta["trained"]["steps"] == 256
    agent = make_agent(f"maskable_ppo:{run}")
    assert agent.config.env.canonical and agent.model.policy.features_extractor.canonical
    result = solve(SMALL, agent)  # the harness checks the mapping with evaluate()
    # a complete canonical episode, replayed by hand: every move legal, the same mapping
    env = MallocGameEnv(SMALL, **agent.env_kwargs)
    assert isinstance(env, CanonicalGameEnv)
    obs, _ = env.reset(seed=0)
    done, info, steps = False, {}, 0
    while not done:
        action = agent.act(env, obs)
        assert obs["action_mask"][action] == 1
        obs, _, done, _, info = env.step(action)
        steps += 1
    assert steps == result.info["steps"] and result.info["invalid_actions"] == 0
    assert info["step"] == steps <= SMALL.workload.num_buffers
    np.testing.assert_array_equal(result.offsets, info["offsets"])
    assert evaluate(SMALL.workload, result.offsets, HW).speedup == pytest.approx(info["speedup"], rel=1e-9)
    assert result.speedup >= 1.0
    # the batched evaluator plays exactly like the agent
    played = Evaluator([SMALL], agent.config.env, masked=True).run(agent.model)["all"]
    assert played.speedups[0] == pytest.approx(result.speedup, rel=1e-9)
    # through the command line: the agent plays the mode it was trained in
    assert cli_main(["solve", str(workload_file), "--capacity", "1024", "--agent", f"maskable_ppo:{run}",
                     "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    evaluate(SMALL.workload, np.asarray(row["offsets"]), HW)  # legal
    # --resume keeps the mode
    train_main(["--algo", "maskable_ppo", "--scenario", str(workload_file), "--out", str(run), "--quiet", "--resume",
                "--steps", "384"])
    meta = json.loads((run / "train.json").read_text())
    assert meta["trained"]["steps"] == 384 and meta["config"]["env"]["order"] == "canonical"


@pytest.mark.parametrize("algo, sets", [
    ("ppo", ["n_steps=32", "batch_size=32", "n_epochs=1"]),
    ("dqn", ["learning_starts=16", "batch_size=16", "buffer_size=1000", "exploration_steps=100"]),
])
def test_unmasked_algorithms_train_and_play_the_canonical_mode(tmp_path, algo, sets):
    """PPO and DQN act without masks: a masked pick sends candidate 0 to slow memory (the env's
    ``invalid_action="skip"``), counted in the solution's ``invalid_actions``."""
    workload_file = save(SMALL.workload, tmp_path / "c1.json")
    run = tmp_path / "run"
    train_main(["--algo", algo, "--scenario", str(workload_file), "--out", str(run), "--quiet", "--n-envs", "2",
                "--set", "env.order=canonical", "--set", "policy.hidden=16", "--set", f"env.n_candidates={K}",
                "--set", "env.memory_bins=8,8", "--eval-programs", "0", "--steps", "128",
                *[x for a in sets for x in ("--set", a)]])
    agent = make_agent(f"{algo}:{run}")
    assert not agent.masked and agent.config.env.canonical
    result = solve(SMALL, agent)  # the mapping is checked by evaluate()
    env = MallocGameEnv(SMALL, **agent.env_kwargs)
    obs, _ = env.reset(seed=0)
    done, invalid, steps = False, 0, 0
    while not done:
        action = agent.act(env, obs)
        invalid += int(obs["action_mask"][action] == 0)
        obs, _, done, _, info = env.step(action)
        steps += 1
    assert (steps, invalid) == (result.info["steps"], result.info["invalid_actions"])
    np.testing.assert_array_equal(result.offsets, info["offsets"])


@pytest.mark.parametrize("extra, message", [
    (["--set", "env.order=canonical", "--vec", "native"], "does not run env.order=canonical; use vec=dummy"),
    (["--env", "v1", "--set", "env.order=canonical"], "canonical is a MallocGame-v0 decision mode"),
])
def test_canonical_train_flags_refuse_contradictions(tmp_path, capsys, extra, message):
    from mallocgym.cli import main as cli_main

    out = tmp_path / "run"
    code = cli_main(["train", "sb3", "--algo", "maskable_ppo", "--out", str(out), "--quiet", "--steps", "10", *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not out.exists()
