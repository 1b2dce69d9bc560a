"""Issue 18, step 6: the learned-dynamics mode (the paper's MuZero) trained from the labelled
games: the played trajectories (hand-worked on the trap), the unroll targets, the dynamics
loss, the advantage frame, the refusal of untrained dynamics and a tiny run that plays."""

import json
from fractions import Fraction

import numpy as np
import pytest
import torch

from mallocgym.agents import make_agent
from mallocgym.agents.muzero.agent import make_env
from mallocgym.agents.muzero.checkpoint import save_checkpoint
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.expert import (AdvantageModel, ExpertLearner, ExpertReplay, TrajectoryReplay,
                                            dynamics_loss)
from mallocgym.agents.muzero.labels import label_game
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec
from mallocgym.agents.muzero.train import train
from mallocgym.pricing.v0 import evaluate

from conftest import mlp_scenario

torch.set_num_threads(1)

V2 = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16", "network.memory_hidden=8",
                                    "network.version=2"])
DYN = V2.with_overrides(["train.label_fraction=1.0", "train.dynamics_weight=1.0", "train.unroll_steps=2"])
RS = V2.network.residual_scale
K = V2.env.n_candidates


def trap_game(scenario, explore):
    config = V2.with_overrides(["train.label_positions=1000", f"train.label_explore={explore}"])
    return label_game(scenario, config, np.random.default_rng(0), trajectory=True)


# ------------------------------------------------------------------ the played trajectory
def test_trajectory_on_the_trap_hand_worked(trap_scenario):
    """The trap (conftest; all slow 1.4 s, 0.0009 s saved per byte): exploring, the game skips
    buffer 0 (saves nothing), then places buffers 1 and 2 (0.36 s each): rewards 0, 0.36 / 1.4,
    0.36 / 1.4, summing to the return 1 - 0.68 / 1.4. XLA-like's game places buffer 0 (0.54 s)
    and the two others are forced skips: rewards 0.54 / 1.4, 0, 0, only the first position
    labelled."""
    records, ret, _, tr = trap_game(trap_scenario, 1.0)
    assert len(tr) == 3 and tr.actions[0] == K and (tr.actions[1:] < K).all()
    np.testing.assert_allclose(tr.rewards * 1.4, [0.0, 0.36, 0.36], atol=1e-12)
    assert tr.rewards.sum() == pytest.approx(ret) and ret == pytest.approx(1 - 0.68 / 1.4)
    np.testing.assert_allclose(tr.returns_to_go() * 1.4, [0.72, 0.72, 0.36], atol=1e-12)
    assert tr.labelled.tolist() == [True, True, True] and len(records) == 3
    assert np.flatnonzero(tr.legal[0]).tolist() == [0, K]
    assert tr.advantage[0, K] == pytest.approx(RS * 0.18 / 0.86, rel=1e-6) and tr.advantage[0, 0] == 0.0
    assert tr.residual[0] == pytest.approx(RS * 0.18 / 0.86, rel=1e-6) and tr.policy[0, K] > 0.99
    for i in range(3):   # the move played is legal there, and legal is within the env's mask
        assert tr.legal[i, tr.actions[i]] and np.isfinite(tr.advantage[i, tr.actions[i]])
        assert not (tr.legal[i] & (tr.obs["action_mask"][i] == 0)).any()
    np.testing.assert_allclose(tr.obs["progress"][:, 0], [0, 1 / 3, 2 / 3], atol=1e-6)

    records, ret, _, tr = trap_game(trap_scenario, 0.0)
    assert tr.actions.tolist() == [0, K, K]
    np.testing.assert_allclose(tr.rewards * 1.4, [0.54, 0.0, 0.0], atol=1e-12)
    assert tr.rewards.sum() == pytest.approx(ret) and ret == pytest.approx(1 - 0.86 / 1.4)
    assert tr.labelled.tolist() == [True, False, False] and tr.legal.sum(1).tolist() == [2, 1, 1]
    # unlabelled: only the played move's advantage is known, 0 (XLA-like's own move)
    assert tr.advantage[1, K] == 0.0 and np.isnan(np.delete(tr.advantage[1], K)).all()
    assert np.isnan(tr.residual[1:]).all() and not tr.policy[1:].any()
    # recording the trajectory does not change the game's draws
    again = label_game(trap_scenario, V2.with_overrides(["train.label_positions=1000", "train.label_explore=0.0"]),
                       np.random.default_rng(0))
    assert len(again) == 3 and again[1] == ret and len(again[0]) == len(records)


def trap_replay(trap_scenario, capacity=8):
    spec = ObsSpec.from_env(make_env(trap_scenario, V2))
    replay = TrajectoryReplay(capacity, spec, reward_scale=100.0)
    replay.add_trajectory(trap_game(trap_scenario, 1.0)[3])   # positions 0-2
    replay.add_trajectory(trap_game(trap_scenario, 0.0)[3])   # positions 3-5
    return replay


def test_unroll_targets_hand_worked(trap_scenario):
    """Unroll 2 from the exploring game's first position, from its last (past the end: value
    and reward 0, skip, nothing labelled) and from XLA-like's game's first. Units: reward_scale
    100, so a reward of 0.36 s of 1.4 s is 36 / 1.4."""
    replay = trap_replay(trap_scenario)
    u = replay.unroll_targets(np.array([0, 2, 3]), 2)
    explore = trap_game(trap_scenario, 1.0)[3]
    assert u["actions"].tolist() == [[K, int(explore.actions[1])], [int(explore.actions[2]), K], [0, K]]
    np.testing.assert_allclose(u["values"], np.array([[72, 72, 36], [36, 0, 0], [54, 0, 0]]) / 1.4, rtol=1e-5)
    np.testing.assert_allclose(u["rewards"][:, 1:], np.array([[0, 36], [36, 0], [54, 0]]) / 1.4, rtol=1e-5)
    assert u["mask"].tolist() == [[True] * 3, [True, False, False], [True, True, True]]
    assert u["labelled"].tolist() == [[True] * 3, [True, False, False], [True, False, False]]
    assert u["advantage"][0, 0, K] == pytest.approx(RS * 0.18 / 0.86, rel=1e-6)
    assert np.isnan(u["advantage"][1, 1:]).all() and np.isnan(u["residual"][1, 1:]).all()
    assert u["advantage"][2, 1, K] == 0.0 and np.isfinite(u["advantage"][2, 1]).sum() == 1
    assert u["policies"][2, 1].sum() == 0.0 and u["policies"][0, 0].sum() == pytest.approx(1.0)
    # a third game does not fit before the end (capacity 8): it is written at 0, over the first,
    # with its own labels; the second game stays
    replay.add_trajectory(trap_game(trap_scenario, 0.0)[3])
    assert replay.size == 6 and replay.pointer == 3 and replay.labelled[:6].tolist() == [True, False, False] * 2
    assert replay.unroll_targets(np.array([0]), 2)["actions"].tolist() == [[0, K]]


# ------------------------------------------------------------------ the loss and the learner
def mlp_trajectories(config, games=2):
    scenario = mlp_scenario(0, Fraction(1, 2))
    spec = ObsSpec.from_env(make_env(scenario, config))
    replay = TrajectoryReplay(4096, spec, reward_scale=config.network.reward_scale)
    rng = np.random.default_rng(0)
    records = []
    for _ in range(games):
        recs, _, _, tr = label_game(scenario, config, rng, trajectory=True)
        replay.add_trajectory(tr)
        records += recs
    return spec, replay, records


def test_a_few_learner_steps_lower_the_dynamics_loss_on_a_fixed_batch():
    config = DYN.with_overrides(["train.label_positions=20"])
    spec, replay, _ = mlp_trajectories(config)
    torch.manual_seed(0)
    net = MuZeroNet(spec, config.network)
    idx = np.random.default_rng(1).choice(np.flatnonzero(replay.weight > 0), size=64, replace=False)
    _, before = dynamics_loss(net, replay, idx, config)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(40):
        loss, _ = dynamics_loss(net, replay, idx, config)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    _, after = dynamics_loss(net, replay, idx, config)
    assert after["dyn_loss"] < 0.6 * before["dyn_loss"]
    assert after["dyn_reward"] < 0.6 * before["dyn_reward"] and after["dyn_value"] < 0.6 * before["dyn_value"]
    assert after["dyn_reward_mae"] < before["dyn_reward_mae"]


def test_the_learner_adds_the_dynamics_loss_only_when_asked():
    config = DYN.with_overrides(["train.label_positions=20", "train.batch_size=16"])
    spec, trajectories, records = mlp_trajectories(config, games=1)
    replay = ExpertReplay(1024, spec, positive_weight=1.0)
    replay.add(records)
    net = MuZeroNet(spec, config.network)
    learner = ExpertLearner(net, config, np.random.default_rng(0))
    assert {"dyn_loss", "dyn_reward", "dyn_value", "dyn_advantage"} <= set(learner.step(replay, trajectories))
    assert not any(k.startswith("dyn_") for k in learner.step(replay))          # no trajectories (finetuning)
    off = ExpertLearner(net, config.with_overrides(["train.dynamics_weight=0"]), np.random.default_rng(0))
    assert not any(k.startswith("dyn_") for k in off.step(replay, trajectories))


def test_the_advantage_frame_reads_the_heads_of_parent_and_child(trap_scenario):
    """AdvantageModel: a move's reward is the advantage head at the parent for that move, the
    child's value the residual head at the unrolled state, the root's value the residual."""
    torch.manual_seed(0)
    replay = trap_replay(trap_scenario)
    net = MuZeroNet(replay.spec, DYN.network).eval()
    model = AdvantageModel(net)
    obs = replay.observations(np.array([0, 3]))
    value, logits, emb = model.root(obs)
    with torch.no_grad():
        _, residual, advantage = net.expert({k: torch.as_tensor(v) for k, v in obs.items()})
    np.testing.assert_allclose(value, residual.numpy(), rtol=1e-5, atol=1e-6)
    actions = np.array([K, 3])
    reward, child_value, _, child = model.recurrent(emb, actions)
    np.testing.assert_allclose(reward, [advantage[0, K].item(), advantage[1, 3].item()], rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        step = net.recurrent_inference(emb[0], emb[1], torch.from_numpy(actions))
        _, child_residual = net.heads(step.latent, step.cands)
    np.testing.assert_allclose(child_value, child_residual.numpy(), rtol=1e-5, atol=1e-6)
    assert torch.allclose(child[0], step.latent)


# ------------------------------------------------------------------ playing it, or refusing it
def test_untrained_dynamics_are_refused_and_options_checked(trap_scenario, tmp_path):
    net = MuZeroNet(ObsSpec.from_env(make_env(trap_scenario, V2)), V2.network)
    save_checkpoint(tmp_path / "plain", net=net, config=V2.with_overrides(["train.label_fraction=1.0"]), progress={})
    with pytest.raises(ValueError, match="untrained, train.dynamics_weight = 0"):
        make_agent(f"muzero:{tmp_path / 'plain'}")
    save_checkpoint(tmp_path / "dyn", net=net, config=DYN, progress={})
    assert make_agent(f"muzero:{tmp_path / 'dyn'},frame=advantage").config.search.frame == "advantage"
    with pytest.raises(ValueError, match="frame is one of"):
        make_agent(f"muzero:{tmp_path / 'dyn'},frame=relative")
    with pytest.raises(ValueError, match="applies to muzero only"):
        make_agent(f"muzero-sim:{tmp_path / 'dyn'},frame=advantage")
    with pytest.raises(ValueError, match="network.version = 2, train.label_fraction > 0"):
        V2.with_overrides(["train.dynamics_weight=1"])                 # no labelled games
    with pytest.raises(ValueError, match="network.version = 2, train.label_fraction > 0"):
        MuZeroConfig().with_overrides(["train.dynamics_weight=1"])     # version 1
    with pytest.raises(ValueError, match="advantage and residual heads"):
        MuZeroConfig().with_overrides(["search.frame=advantage"])
    with pytest.raises(ValueError, match="dynamics_weight must be a finite number"):
        V2.with_overrides(["train.label_fraction=1", "train.dynamics_weight=-1"])


def test_a_tiny_run_with_dynamics_plays_muzero(tmp_path):
    scenario = mlp_scenario(0, Fraction(1, 2))
    config = DYN.with_overrides(["train.label_positions=20", "train.batch_size=32", "train.min_replay=1",
                                 "train.replay_ratio=1", "train.heldout_fraction=0.5", "train.log_every_s=0.5",
                                 "train.replay_capacity=4096"])
    summary = train(config, scenarios=[scenario], out_dir=tmp_path, minutes=0.07, use_generator=False,
                    progress=False)
    assert summary["train_steps"] >= 1 and summary["trajectory_positions"] >= 43
    lines = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert any("dyn_reward" in r.get("losses", {}) for r in lines)
    assert any("heldout_dynamics" in r and "train_dynamics" in r for r in lines)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["train"]["dynamics_weight"] == 1.0
    for spec in (f"muzero:{tmp_path},sims=4", f"muzero:{tmp_path},sims=4,frame=advantage"):
        solution = make_agent(spec).solve(scenario)
        result = evaluate(scenario.workload, solution.offsets, scenario.hardware)   # validates the mapping
        assert result.speedup >= 1.0 and solution.info["mode"] == "learned"
