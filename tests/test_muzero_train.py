"""Learning, self-play and the training command (a few seconds each)."""

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
from mallocgym.agents.muzero.learner import Learner, sample_action_pairs
from mallocgym.agents.muzero.mcts import NetworkModel, effective_legal
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec, obs_to_tensors
from mallocgym.agents.muzero.replay import Replay, nstep_returns
from mallocgym.agents.muzero.selfplay import (ScenarioSource, SelfPlay, action_value_targets, teacher_choice,
                                              teacher_targets)
from mallocgym.agents.muzero.train import main, train
from mallocgym.agents.search import CompletionScorer
from mallocgym.pricing.v0 import evaluate
from mallocgym.heuristics import complete
from mallocgym.workloads import save
from mallocgym.workloads.synthetic import mlp_training_step

from conftest import mlp_scenario

torch.set_num_threads(1)



TINY = MuZeroConfig().with_overrides([
    "network.hidden=32", "network.candidate_hidden=16", "network.memory_hidden=8",
    "search.num_simulations=4", "search.eval_simulations=4", "train.num_actors=4", "train.min_replay=40",
    "train.batch_size=16", "train.unroll_steps=3", "train.td_steps=5", "train.replay_capacity=4000",
    "train.checkpoint_every_s=1000", "train.log_every_s=0.5", "train.replay_ratio=8",
])


def fill_replay(config, seed=0, games=8, scenario=None):
    scenario = scenario or mlp_scenario(0)
    rngs = [np.random.default_rng([seed, i]) for i in range(config.train.num_actors)]
    selfplay = SelfPlay(config, ScenarioSource([scenario], None, 0.0), rngs)
    torch.manual_seed(seed)
    net = MuZeroNet(ObsSpec.from_env(selfplay.actors[0].env), config.network).eval()
    replay = Replay(config.train.replay_capacity, net.spec)
    records = []
    while len(records) < games:
        for record, episode in selfplay.step(NetworkModel(net)):
            z = nstep_returns(record.rewards, record.values, config.train.td_steps, 1.0)
            replay.add(record, np.abs(z - record.values))
            records.append((record, episode))
    return net, replay, records


def test_selfplay_records_are_consistent_with_the_game():
    _, replay, records = fill_replay(TINY, games=4)
    for record, episode in records:
        assert len(record) == 43 == episode.length
        # dense rewards are the env's, scaled: they sum to the normalised return
        assert record.rewards.sum() / TINY.network.reward_scale == pytest.approx(episode.ret, rel=1e-5)
        assert 0.0 <= episode.ret < 1.0 and 0.0 < episode.xla_return < 1.0
        np.testing.assert_allclose(record.policies.sum(1), 1.0, rtol=1e-5)
        legal = record.obs["action_mask"].astype(bool)
        assert legal[np.arange(len(record)), record.actions].all()


def test_self_competition_reward_scores_the_episode_against_the_baseline():
    config = TINY.with_overrides(["train.reward_mode=self_competition"])
    _, _, records = fill_replay(config, games=4)
    for record, episode in records:
        assert np.count_nonzero(record.rewards[:-1]) == 0
        expected = math.tanh((episode.ret - episode.xla_return) / 0.01)   # first visit: XLA-like's return
        if episode is records[0][1]:
            assert record.rewards[-1] == pytest.approx(expected * 100, rel=1e-5)
        assert abs(record.rewards[-1]) <= 100.0


def fit_fixed_replay(overrides: list[str], **fill):
    """Sixty learner steps on a fixed replay; the loss of one fixed batch before and after."""
    config = TINY.with_overrides(["train.lr=3e-3", "train.batch_size=32", *overrides])
    net, replay, _ = fill_replay(config, **fill)
    learner = Learner(net, config, np.random.default_rng(0))
    idx, w = replay.sample(64, np.random.default_rng(1))
    before = learner.loss(replay, idx, w)
    for _ in range(60):
        learner.step(replay)
    return before, learner.loss(replay, idx, w)


def test_learner_fits_a_fixed_replay():
    (before, _), (after, parts) = fit_fixed_replay([], games=4)
    assert math.isfinite(float(after.detach()))
    before, after = float(before.detach()), float(after.detach())
    assert after < 0.7 * before, (before, after)
    assert parts.priorities.shape == (64,)


def test_learner_with_reanalyse_runs_fresh_searches():
    config = TINY.with_overrides(["train.reanalyse_fraction=0.5"])
    net, replay, _ = fill_replay(config, games=2)
    learner = Learner(net, config, np.random.default_rng(0))
    idx, _ = replay.sample(8, np.random.default_rng(0))
    values, policies = learner._reanalyse(replay, idx)
    assert len(policies) > 0
    for p, pi in policies.items():
        assert pi.sum() == pytest.approx(1.0, rel=1e-5)
        assert (pi[replay.obs["action_mask"][p] == 0] == 0).all()
    changed = np.flatnonzero(values != replay.values.astype(np.float64))
    assert changed.size > 0
    parts = learner.step(replay)
    assert math.isfinite(parts.total)


def test_smoke_training_run_and_resume(tmp_path):
    scenario = mlp_scenario(0)
    summary = train(TINY, scenarios=[scenario], out_dir=tmp_path, minutes=0.06, seed=0,
                    use_generator=False, progress=False)
    assert summary["train_steps"] > 0 and summary["episodes"] > 0
    assert all(math.isfinite(v) for v in summary["losses"].values())
    lines = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert lines[0]["event"] == "start" and lines[-1]["event"] == "end"
    progress = [line for line in lines if line["event"] == "progress" and "losses" in line]
    assert progress and all(math.isfinite(line["losses"]["loss"]) for line in progress)
    payload = load_checkpoint(tmp_path)
    assert payload["config"] == TINY and payload["progress"]["train_steps"] == summary["train_steps"]
    solution = make_agent(f"muzero:{tmp_path}").solve(scenario)
    evaluate(scenario.workload, solution.offsets, scenario.hardware)
    again = train(TINY, scenarios=[scenario], out_dir=tmp_path, minutes=0.02, seed=0, resume=True,
                  use_generator=False, progress=False)
    assert again["env_steps"] > summary["env_steps"]
    assert again["train_steps"] >= summary["train_steps"]
    assert again["elapsed_s"] > summary["elapsed_s"]


def test_command_line_errors(tmp_path):
    workload = save(mlp_training_step(0), tmp_path / "mlp.json")
    with pytest.raises(ValueError, match="search.num_simulation"):
        main(["--minutes", "1", "--out", str(tmp_path), "--set", "search.num_simulation=3"])
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
                                   "search.num_simulations=2", "search.eval_simulations=2", "simulator.num_simulations=2",
                                   "train.num_actors=2", "train.min_replay=20", "train.batch_size=8"]]
    done = subprocess.run([sys.executable, str(script), "--minutes", "0.03", "--out", str(tmp_path / "run"),
                           "--scenario", str(workload), *tiny], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| mlp-train-s5 |" in done.stdout and "muzero-sim" in done.stdout
    assert (tmp_path / "run" / "checkpoint.pt").is_file()


# ------------------------------------------------------------------------------ the teacher
def test_teacher_targets_hand_worked():
    # all-slow time 200, current time 150; actions 0, 1 and skip (3) end at 100, 110, 120
    times = np.array([100.0, 110.0, np.inf, 120.0])
    policy, value = teacher_targets(times, 0, time_now=150.0, time_all_slow=200.0, scale=100.0, temperature=0.0)
    assert value == pytest.approx(25.0)            # 100 * (150 - 100) / 200
    np.testing.assert_array_equal(policy, [1, 0, 0, 0])
    # Q = 25, 20, -, 15 (percent); temperature 5 gives weights e^0, e^-1, e^-2
    policy, _ = teacher_targets(times, 0, time_now=150.0, time_all_slow=200.0, scale=100.0, temperature=5.0)
    w = np.exp([0.0, -1.0, -2.0])
    np.testing.assert_allclose(policy[[0, 1, 3]], w / w.sum(), rtol=1e-6)
    assert policy[2] == 0.0
    with pytest.raises(ValueError, match="not a legal action"):
        teacher_targets(times, 2, time_now=150.0, time_all_slow=200.0, scale=100.0, temperature=0.0)


def test_teacher_choice_hand_worked():
    times = np.array([100.0, 99.0, np.inf, 98.5])   # XLA-like's move (0) ends at 100
    assert teacher_choice(times, 0, 0.0) == 3        # the rollout's move: skip saves 1.5 %
    assert teacher_choice(times, 0, 0.01) == 3       # 98.5 < 100 * 0.99
    assert teacher_choice(times, 0, 0.015) == 0      # 98.5 is not < 98.5: XLA-like's move kept
    assert teacher_choice(times, 0, 0.5) == 0
    assert teacher_choice(np.array([100.0, 100.0, 100.0]), 2, 0.0) == 2   # ties keep the base
    with pytest.raises(ValueError, match="not a legal action"):
        teacher_choice(times, 2, 0.0)


def test_teacher_with_a_large_margin_plays_xla_like():
    """No move saves half the program time: the teacher keeps XLA-like's move everywhere, so its
    game ends with XLA-like's mapping and its targets are XLA-like's moves."""
    config = TINY.with_overrides(["train.teacher_fraction=1.0", "train.teacher_margin=0.5"])
    scenario = mlp_scenario(1)
    _, _, records = fill_replay(config, games=2, scenario=scenario)
    xla = make_agent("xla").solve(scenario)
    for record, episode in records:
        assert episode.ret == pytest.approx(episode.xla_return, abs=1e-12)
        np.testing.assert_allclose(record.policies[np.arange(len(record)), record.actions], 1.0)
        env = make_env(scenario, config).unwrapped
        env.reset(options={"workload": scenario})
        for a in record.actions:
            _, _, done, _, info = env.step(int(a))
        assert done and np.array_equal(info["offsets"], xla.offsets)


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


def test_teacher_games_play_the_rollout_algorithm():
    """A teacher-played game is the rollout baseline's game: same moves, same final mapping,
    never worse than XLA-like; its stored values are the returns still to come."""
    config = TINY.with_overrides(["train.teacher_fraction=1.0"])
    scenario = mlp_scenario(1)
    _, _, records = fill_replay(config, games=4, scenario=scenario)
    rollout = make_agent("rollout").solve(scenario)
    for record, episode in records:
        assert episode.teacher
        assert episode.ret >= episode.xla_return - 1e-12
        np.testing.assert_allclose(record.policies[np.arange(len(record)), record.actions], 1.0)
        # values are returns still to come of the best action then XLA-like: the estimate of the
        # whole game (rewards so far + value) never falls (policy improvement) and ends exact
        estimate = np.concatenate([[0.0], np.cumsum(record.rewards)[:-1]]) + record.values
        assert np.all(np.diff(estimate) >= -1e-3)
        assert estimate[-1] == pytest.approx(record.rewards.sum(), rel=1e-4)
    env = make_env(scenario, config).unwrapped
    env.reset(options={"workload": scenario})
    for a in records[0][0].actions:
        _, _, done, _, info = env.step(int(a))
    assert done and np.array_equal(info["offsets"], rollout.offsets)


def test_teacher_values_equal_fresh_scores_at_every_position():
    """The teacher reuses the previous move's score on single-move positions; its stored values
    must equal a fresh CompletionScorer's at every position of its games."""
    config = TINY.with_overrides(["train.teacher_fraction=1.0", "train.teacher_epsilon=0.3"])
    scenario = mlp_scenario(2)
    _, _, records = fill_replay(config, games=3, scenario=scenario)
    env = make_env(scenario, config).unwrapped
    scorer = CompletionScorer(env.static, env.k)
    tas = float(env.static.params[sim.TIME_ALL_SLOW])
    single = 0
    for record, _ in records:
        obs, _ = env.reset(options={"workload": scenario})
        for t, a in enumerate(record.actions):
            legal = effective_legal({k: obs[k][None] for k in ("action_mask", "buffer")},
                                    prune_no_benefit=config.search.prune_no_benefit)[0]
            single += int(legal.sum() == 1)
            times, _ = scorer(env.sim_state)
            times[~legal] = np.inf
            best = int(record.policies[t].argmax())
            q = config.network.reward_scale * (float(env.sim_state.totals[sim.TIME]) - times[best]) / tas
            assert record.values[t] == pytest.approx(q, rel=1e-5, abs=1e-5)
            obs, _, _, _, _ = env.step(int(a))
    assert single > 0   # the reuse was exercised


def test_teacher_epsilon_explores_but_keeps_the_teachers_targets():
    config = TINY.with_overrides(["train.teacher_fraction=1.0", "train.teacher_epsilon=0.5"])
    _, _, records = fill_replay(config, games=4, scenario=mlp_scenario(1))
    off_target = 0
    for record, _ in records:
        legal = record.obs["action_mask"].astype(bool)
        assert legal[np.arange(len(record)), record.actions].all()
        # one-hot teacher targets; the move differs from the target where epsilon struck
        assert np.all(record.policies.max(1) == 1.0)
        off_target += int(np.sum(record.policies.argmax(1) != record.actions))
    assert off_target > 0


# ------------------------------------------------------------------ per-action (action-value) targets
def test_action_value_targets_hand_worked():
    # now 10 s, all-slow 20 s, scale 100; action 0: 9 s after the step, 6 s after XLA-like's
    # completion; action 1 illegal; action 2 (skip): 10 s after the step, 7 s at the end
    rewards, values = action_value_targets(np.array([6.0, np.inf, 7.0]), np.array([9.0, np.inf, 10.0]),
                                           time_now=10.0, time_all_slow=20.0, scale=100.0)
    np.testing.assert_allclose(rewards, [5.0, np.nan, 0.0])
    np.testing.assert_allclose(values, [15.0, np.nan, 15.0])
    # reward + value is the teacher's Q(a)
    _, q0 = teacher_targets(np.array([6.0, np.inf, 7.0]), 0, time_now=10.0, time_all_slow=20.0, scale=100.0,
                            temperature=0.0)
    assert rewards[0] + values[0] == pytest.approx(q0)
    with pytest.raises(ValueError, match="legal"):
        action_value_targets(np.array([6.0, 7.0]), np.array([9.0, np.inf]), time_now=10.0, time_all_slow=20.0,
                             scale=100.0)


def test_teacher_games_store_per_action_targets_consistent_with_the_game():
    config = TINY.with_overrides(["train.teacher_fraction=1.0", "train.action_value_weight=1.0"])
    _, replay, records = fill_replay(config, games=3, scenario=mlp_scenario(2))
    known_rows = 0
    for record, _ in records:
        assert record.action_rewards.shape == record.action_values.shape == record.policies.shape
        rows = np.flatnonzero(np.isfinite(record.action_values).any(1))
        known_rows += len(rows)
        t, a = rows, record.actions[rows]
        # the taken action's per-action reward is the reward the game received, and its reward
        # plus value is the teacher's stored value Q(best) (no epsilon: the move is the best)
        np.testing.assert_allclose(record.action_rewards[t, a], record.rewards[t], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(record.action_rewards[t, a] + record.action_values[t, a], record.values[t],
                                   rtol=1e-4, atol=1e-4)
        # known exactly where the action is legal and the position has a choice
        legal = record.obs["action_mask"].astype(bool)[rows]
        assert np.all(np.isfinite(record.action_values[rows]) <= legal)
        assert np.all(np.isfinite(record.action_values[rows]).sum(1) >= 2)
    assert known_rows > 0
    stored = np.isfinite(replay.action_values).any(1)
    assert stored.sum() == known_rows


def test_sample_action_pairs_draws_distinct_known_actions():
    known = np.array([[True, False, True, True], [False, False, False, False], [False, True, False, False]])
    rows, acts = sample_action_pairs(known, 2, np.random.default_rng(0))
    assert known[rows, acts].all()
    assert np.bincount(rows, minlength=3).tolist() == [2, 0, 1]
    assert len(set(zip(rows.tolist(), acts.tolist()))) == len(rows)
    seen = set()
    for seed in range(40):                                   # every known action gets drawn
        r, a = sample_action_pairs(known, 2, np.random.default_rng(seed))
        seen |= set(a[r == 0].tolist())
    assert seen == {0, 2, 3}


def test_action_value_loss_is_the_hand_computed_cross_entropy():
    config = TINY.with_overrides(["train.teacher_fraction=1.0", "train.action_value_weight=1.0",
                                  "train.action_value_actions=1"])
    net, replay, _ = fill_replay(config, games=2, scenario=mlp_scenario(2))
    learner = Learner(net, config, np.random.default_rng(0))
    idx = np.flatnonzero(np.isfinite(replay.action_values).any(1))[:6]
    idx = np.concatenate([idx, [int(np.flatnonzero(~np.isfinite(replay.action_values).any(1)
                                                   & (replay.weight > 0))[0])]])
    keep = np.full_like(replay.action_values[idx], np.nan)
    chosen = np.argmax(np.isfinite(replay.action_values[idx]), axis=1)   # one known action per row
    rows = np.arange(len(idx) - 1)
    keep[rows, chosen[rows]] = replay.action_values[idx[rows], chosen[rows]]
    replay.action_values[idx] = keep
    with torch.no_grad():
        out = net.initial_inference(obs_to_tensors(replay.observations(idx)))
        got = learner._action_value_loss(replay, idx, out.latent, out.cands).numpy()
        assert got[-1] == 0.0                                # no targets: no loss
        for b in rows:
            a = int(chosen[b])
            step = net.recurrent_inference(out.latent[b:b + 1], out.cands[b:b + 1], torch.tensor([a]))
            r = torch.tensor([float(replay.action_rewards[idx[b], a])])
            v = torch.tensor([float(replay.action_values[idx[b], a])])
            ce_r = -(net.reward_support.encode(r) * torch.log_softmax(step.reward_logits, -1)).sum()
            ce_v = -(net.value_support.encode(v) * torch.log_softmax(step.value_logits, -1)).sum()
            assert got[b] == pytest.approx(float(ce_r + config.train.value_loss_weight * ce_v), rel=1e-5)


def test_learner_with_action_values_reduces_that_loss():
    (_, before), (_, after) = fit_fixed_replay(["train.teacher_fraction=1.0", "train.action_value_weight=1.0"],
                                               games=3, scenario=mlp_scenario(2))
    assert before.action_value > 0
    assert after.action_value < 0.7 * before.action_value, (before.action_value, after.action_value)
