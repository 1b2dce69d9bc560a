"""The MaskablePPO warm start on MallocGame-v1: behaviour cloning of XLA's moves (msa_action)."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import small_random_workload  # noqa: E402

from mallocgym import Hardware  # noqa: E402
from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.agents.sb3 import checkpoint, config as cfg  # noqa: E402
from mallocgym.agents.sb3.data import TrainingMix  # noqa: E402
from mallocgym.agents.sb3.extractor import greedy_actions  # noqa: E402
from mallocgym.agents.sb3.vec_env import make_vec_env  # noqa: E402
from mallocgym.agents.sb3.warm_start import HELDOUT_EVERY, clone, collect_xla_msa  # noqa: E402
from mallocgym.env.v1 import MallocGameV1Env  # noqa: E402
from mallocgym.scenarios import Scenario  # noqa: E402

torch.set_num_threads(1)

# fast memory small and copies cheap enough that XLA's moves vary: on these programs about 30%
# SLOW, 40% FAST at offset 0 and 30% PREFETCH, so no single action is right most of the time
HW = Hardware(peak_flops=1e12, slow_bw=1e10, fast_bw=1e11, fast_capacity=1024)
ENV = cfg.EnvConfig(n_candidates=4, n_next=3, memory_bins=(8, 8), version="v1", n_starts=2)


class TinyPrograms:
    """A fresh 24-buffer random program per game (one of 10**6), as the generator gives training."""

    def __call__(self, rng):
        seed = int(rng.integers(10**6))
        return Scenario(f"tiny{seed}", small_random_workload(seed, 24, "ws", min_span=1), HW)


def _model(workload, xla_tag=True):
    config = cfg.MaskablePPOConfig(n_envs=1, vec="dummy", env=ENV,
                                   policy=cfg.PolicyConfig(hidden=32, memory_pool=4, xla_tag=xla_tag),
                                   n_steps=32, batch_size=32, n_epochs=1)
    venv = make_vec_env("dummy", 1, dict(ENV.env_kwargs(), workload=workload), seed=0, version="v1")
    return checkpoint.build_model("maskable_ppo", config, venv, seed=0)


def test_xla_games_are_recorded_as_played():
    """Each recorded position's action is msa_action, legal, and replaying them gives xla-msa's plan."""
    demos = collect_xla_msa(dict(ENV.env_kwargs(), workload=TinyPrograms()), 3, seed=5, gamma=0.9)
    assert len(demos.scenarios) == 3 and len(demos) == demos.masks.shape[0] == demos.returns.shape[0]
    assert demos.masks[np.arange(len(demos)), demos.actions].all()
    assert demos.obs["memory"].dtype == np.float16 and demos.obs["action_mask"].dtype == np.int8
    for g, name in enumerate(demos.scenarios):
        rows = np.flatnonzero(demos.game == g)
        env = MallocGameV1Env(_scenario(name), **ENV.env_kwargs())
        obs, _ = env.reset(seed=0)
        rewards = []
        for row in rows:
            np.testing.assert_allclose(obs["actions"], demos.obs["actions"][row].astype(np.float32), atol=1e-3)
            assert env.msa_action() == demos.actions[row]
            obs, reward, done, _, info = env.step(int(demos.actions[row]))
            rewards.append(reward)
        assert done and info["speedup"] == pytest.approx(demos.speedups[g])
        # the return-to-go: r_t + gamma * r_{t+1} + ...
        expected = sum(r * 0.9 ** i for i, r in enumerate(rewards))
        assert demos.returns[rows[0]] == pytest.approx(expected, rel=1e-5, abs=1e-7)
        assert demos.returns[rows[-1]] == pytest.approx(rewards[-1], rel=1e-5, abs=1e-7)


def _scenario(name: str) -> Scenario:
    seed = int(name.removeprefix("tiny"))
    return Scenario(name, small_random_workload(seed, 24, "ws", min_span=1), HW)


def test_cloned_policy_plays_xla_moves_on_held_out_programs():
    """After the warm start, the deterministic policy picks msa_action on most positions of games it
    did not train on (other programs of the same generator), far above the untrained policy and
    above always playing the most common move. Hand-checked (seed 0): 0.86 on 111 held-out
    positions (5 programs), 0.95 on 736 trained ones; the untrained policy 0.09, the most common
    move 0.45 (without ``policy.xla_tag`` far less: FAST and PREFETCH at XLA's offset look like
    other offsets)."""
    workload = TinyPrograms()
    demos = collect_xla_msa(dict(ENV.env_kwargs(), workload=workload), 40, seed=0, gamma=0.95)
    held = demos.heldout()
    assert sorted(set(demos.game[held].tolist())) == [HELDOUT_EVERY * i - 1 for i in range(1, 6)]
    trained = {demos.scenarios[g] for g in set(demos.game[~held].tolist())}
    unseen = [demos.scenarios[g] for g in sorted(set(demos.game[held].tolist())) if demos.scenarios[g] not in trained]
    assert len(unseen) == 5  # the held-out games are other programs
    model = _model(workload)
    records = []
    summary = clone(model, demos, epochs=40, value_weight=0.5, max_grad_norm=0.5, seed=0, batch_size=64,
                    log=records.append)
    assert [r["epoch"] for r in records] == list(range(41)) and records[0]["loss"] is None
    assert summary["initial_heldout_accuracy"] < 0.3
    assert summary["heldout_accuracy"] >= 0.8 and summary["train_accuracy"] >= 0.9
    common = np.bincount(demos.actions[held]).max() / held.sum()
    assert summary["heldout_accuracy"] >= common + 0.3
    # the summary's accuracy is what greedy play of the policy chooses on those positions
    rows = np.flatnonzero(held)
    chosen = greedy_actions(model.policy, demos.batch(rows), demos.masks[rows])
    assert (chosen == demos.actions[rows]).mean() == pytest.approx(summary["heldout_accuracy"])
    assert records[-1]["value_loss"] < records[1]["value_loss"]  # the value head learned the returns too


def test_xla_tag_starts_as_the_untagged_network_and_separates_xla_offsets():
    """policy.xla_tag adds one zero-initialised weight vector: the fresh network scores as the
    untagged one of the same seed; once it is non-zero, XLA's rows (1 and 1 + K) score apart from
    rows with identical features."""
    tagged, plain = _model(TinyPrograms()), _model(TinyPrograms(), xla_tag=False)
    env = MallocGameV1Env(_scenario("tiny3"), **ENV.env_kwargs())
    obs, _ = env.reset(seed=0)
    from mallocgym.agents.sb3.extractor import action_scores

    k = ENV.n_candidates
    rows = obs["actions"].reshape(ENV.n_actions, -1).copy()
    rows[1:1 + k] = rows[1]  # every FAST offset looks like XLA's
    same = dict(obs, actions=rows.reshape(-1))
    np.testing.assert_allclose(action_scores(tagged.policy, same), action_scores(plain.policy, same), atol=1e-6)
    scores = action_scores(tagged.policy, same)[0]
    assert np.allclose(scores[1:1 + k], scores[1])  # no tag: identical rows score alike
    with torch.no_grad():
        tagged.policy.features_extractor.xla_weight.fill_(1.0)
    scores = action_scores(tagged.policy, same)[0]
    assert not np.isclose(scores[1], scores[2]) and np.allclose(scores[2:1 + k], scores[2])


def test_xla_hint_lets_the_clone_play_xla_exactly():
    """With env.xla_hint (obs["xla_action"] read as one more row column) the same warm start as
    above plays XLA's move on every held-out position, where the tagged policy without it gets
    about 0.86; the config refuses the hint on v0."""
    env = cfg.EnvConfig(n_candidates=4, n_next=3, memory_bins=(8, 8), version="v1", n_starts=2, xla_hint=True)
    assert env.env_kwargs()["xla_hint"] is True and "xla_hint" not in ENV.env_kwargs()
    workload = TinyPrograms()
    demos = collect_xla_msa(dict(env.env_kwargs(), workload=workload), 40, seed=0, gamma=0.95)
    assert "xla_action" in demos.obs
    config = cfg.MaskablePPOConfig(n_envs=1, vec="dummy", env=env,
                                   policy=cfg.PolicyConfig(hidden=32, memory_pool=4, xla_tag=True),
                                   n_steps=32, batch_size=32, n_epochs=1)
    venv = make_vec_env("dummy", 1, dict(env.env_kwargs(), workload=workload), seed=0, version="v1")
    model = checkpoint.build_model("maskable_ppo", config, venv, seed=0)
    summary = clone(model, demos, epochs=40, value_weight=0.5, max_grad_norm=0.5, seed=0, batch_size=64)
    assert summary["heldout_accuracy"] == 1.0
    with pytest.raises(ValueError, match="xla_hint shows MallocGame-v1's XLA choice; v0 has none"):
        cfg.EnvConfig(xla_hint=True)
    with pytest.raises(ValueError, match="xla_hint must be true or false"):
        cfg.EnvConfig(version="v1", xla_hint="yes")


def _run(out, *extra, algo="maskable_ppo", env="v1"):
    from mallocgym.cli import main as cli_main

    return cli_main(["train", "sb3", "--algo", algo, "--env", env, "--scenario", "mlp-train@1/8", "--out", str(out),
                     "--quiet", "--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=32", "--set", "n_epochs=1",
                     "--set", "policy.hidden=16", "--set", "env.n_candidates=4", "--eval-programs", "0",
                     *(["--set", "env.n_starts=2"] if env == "v1" else []), *extra])


def test_warm_started_run_records_accuracy_and_keeps_the_start(tmp_path, capsys):
    out = tmp_path / "run"
    assert _run(out, "--steps", "64", "--warm-start", "xla-msa", "--warm-start-games", "9",
                "--warm-start-epochs", "2") == 0
    meta = json.loads((out / "train.json").read_text())
    assert meta["config"]["policy"]["xla_tag"] is True  # new v1 runs tag XLA's offset rows
    warm = meta["warm_start"]
    assert warm["teacher"] == "xla-msa" and warm["games"] == 9 and warm["epochs"] == 2
    assert warm["heldout_games"] == [HELDOUT_EVERY - 1] and warm["positions"] > warm["heldout_positions"] > 0
    rows = (out / "logs" / "warm_start.csv").read_text().splitlines()
    assert rows[0].startswith("epoch,loss,policy_loss,value_loss,train_accuracy,heldout_accuracy")
    assert len(rows) == 1 + 3 and float(rows[-1].split(",")[5]) == pytest.approx(warm["heldout_accuracy"], abs=1e-6)
    # warm_start.zip holds the weights before PPO: it plays, and differs from the trained model
    start, end = make_agent(f"maskable_ppo:{out / 'warm_start.zip'}"), make_agent(f"maskable_ppo:{out}")
    assert start.plays_v1
    a = dict(start.model.policy.state_dict())
    b = dict(end.model.policy.state_dict())
    assert any(not torch.equal(a[k], b[k]) for k in a)
    # without the option, neither the file nor the section exists
    plain = tmp_path / "plain"
    assert _run(plain, "--steps", "64") == 0
    assert not (plain / "warm_start.zip").exists()
    assert "warm_start" not in json.loads((plain / "train.json").read_text())
    untagged = tmp_path / "untagged"
    assert _run(untagged, "--steps", "32", "--set", "policy.xla_tag=false") == 0
    assert json.loads((untagged / "train.json").read_text())["config"]["policy"]["xla_tag"] is False
    assert make_agent(f"maskable_ppo:{untagged}").model.policy.features_extractor.xla_weight is None
    capsys.readouterr()


@pytest.mark.parametrize("extra, kwargs, message", [
    (["--warm-start", "xla-msa"], {"env": "v0"}, "imitates XLA's moves on MallocGame-v1 (--env v1); this run trains "
                                                 "on MallocGame-v0"),
    (["--warm-start", "xla-msa"], {"algo": "ppo"}, "--algo ppo has none"),
    (["--warm-start", "xla-msa"], {"algo": "dqn"}, "--algo dqn has none"),
    (["--warm-start-games", "4"], {}, "--warm-start-games only go with --warm-start xla-msa"),
    (["--warm-start-epochs", "4"], {}, "--warm-start-epochs only go with --warm-start xla-msa"),
    (["--warm-start", "xla-msa", "--warm-start-games", "0"], {}, "--warm-start-games must be in [1, 100000], got 0"),
    (["--warm-start", "xla-msa", "--warm-start-epochs", "0"], {}, "--warm-start-epochs must be in [1, 10000], got 0"),
    (["--generator-families", "cnn"], {}, "--generator-families needs --generator PRESET"),
    (["--set", "policy.xla_tag=true"], {"env": "v0"}, "policy.xla_tag marks MallocGame-v1's XLA offset rows"),
    (["--set", "policy.extractor=flat", "--set", "policy.xla_tag=true"], {}, "policy.extractor=flat (set "
                                                                              "policy.xla_tag=false)"),
    (["--generator-buffers", "10,20"], {}, "--generator-buffers needs --generator PRESET"),
])
def test_warm_start_and_generator_flags_refuse_what_does_not_apply(tmp_path, capsys, extra, kwargs, message):
    out = tmp_path / "run"
    algo = kwargs.get("algo", "maskable_ppo")
    env = kwargs.get("env", "v1")
    if algo == "dqn":
        extra = [*extra, "--set", "learning_starts=8"]
    code = _run(out, "--steps", "10", *extra, algo=algo, env=env)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_warm_start_refuses_a_resumed_run(tmp_path, capsys):
    out = tmp_path / "run"
    assert _run(out, "--steps", "32") == 0
    from mallocgym.cli import main as cli_main

    code = cli_main(["train", "sb3", "--algo", "maskable_ppo", "--out", str(out), "--quiet", "--resume",
                     "--steps", "64", "--scenario", "mlp-train@1/8", "--warm-start", "xla-msa"])
    err = capsys.readouterr().err
    assert code == 2 and "a resumed run keeps its weights" in err, err


def test_generator_families_and_buffers_shape_the_programs(tmp_path):
    mix = TrainingMix((), "small", 1.0, families=("unet", "rnn"), buffers=(100, 300))
    names = [mix(np.random.default_rng(s)).name for s in range(6)]
    assert all(n.startswith(("gen-small-unet-", "gen-small-rnn-")) for n in names), names
    counts = [mix(np.random.default_rng(s)).workload.num_buffers for s in range(4)]
    assert max(counts) <= 300 * 1.5, counts  # "medium"-sized programs would have 300 to 800
    with pytest.raises(ValueError, match="families"):
        TrainingMix((), "small", 1.0, families=("lstm",))
    with pytest.raises(ValueError, match="buffers"):
        TrainingMix((), "small", 1.0, buffers=(300, 100))
    out = tmp_path / "run"
    assert _run(out, "--steps", "32", "--generator", "small", "--generator-share", "0.5", "--generator-families",
                "mlp", "--generator-buffers", "100,200") == 0
    data = json.loads((out / "train.json").read_text())["data"]
    assert data["generator_families"] == ["mlp"] and data["generator_buffers"] == [100, 200]


@pytest.mark.parametrize("flag, value, message", [
    ("--generator-families", "cnn,lstm", "--generator-families 'cnn,lstm'"),
    ("--generator-buffers", "300,100", "--generator-buffers must be LOW,HIGH with 1 <= LOW <= HIGH, got '300,100'"),
    ("--generator-buffers", "100", "--generator-buffers must be LOW,HIGH"),
])
def test_generator_options_refuse_bad_values(tmp_path, capsys, flag, value, message):
    out = tmp_path / "run"
    code = _run(out, "--steps", "10", "--generator", "small", flag, value)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
