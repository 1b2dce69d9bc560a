"""Expert-iteration targets (``network.version = 2``, issue 18 step 2): the residual over
XLA-like (hand-worked on the trap), the improved policy, the best-value backup, forced positions
left out, the positive-residual weighting, the leaf value, the learner and a training run."""

import json
import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mallocgym.agents.muzero.agent import MuZeroAgent, make_env
from mallocgym.agents.muzero.checkpoint import load_network
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.expert import (ExpertLearner, ExpertReplay, expert_loss, position_weight)
from mallocgym.agents.muzero.model import NetworkModel
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec
from mallocgym.agents.muzero.simsearch import ExpertRecord, SimulatorSearch, expert_targets, improved_policy
from mallocgym.agents.muzero.train import train
from mallocgym.pricing.v0 import evaluate
from mallocgym.heuristics import xla_like

from conftest import mlp_scenario

torch.set_num_threads(1)

# expert iteration on the simulator search's own games (train.label_fraction = 0)
V2 = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16", "network.memory_hidden=8",
                                    "network.version=2", "train.label_fraction=0"])
RS = V2.network.residual_scale
HALF = Fraction(1, 2)


def fresh_net(scenario, config=V2, seed=0):
    torch.manual_seed(seed)
    return MuZeroNet(ObsSpec.from_env(make_env(scenario, config)), config.network).eval()


def new_search(scenario, config=V2, *, sims=4, model=None, harvest=True):
    env = make_env(scenario, config)
    env.reset(seed=0)
    model = model or NetworkModel(fresh_net(scenario, config))
    return SimulatorSearch(env, model, config, num_simulations=sims, harvest=harvest)


def play_out(search):
    while not search.root.terminal:
        search.move()
    return search


class ConstantResidual:
    """A model whose residual is ``r`` everywhere (zero logits and advantages)."""

    def __init__(self, r, num_actions):
        self.r, self.a = r, num_actions
        self.calls = 0

    def expert(self, obs):
        b = len(obs["buffer"])
        self.calls += 1
        return np.zeros((b, self.a)), np.full(b, float(self.r)), np.zeros((b, self.a))


# ------------------------------------------------------------------ hand-worked targets
def test_residual_and_advantage_targets_hand_worked_on_the_trap(trap_scenario):
    """The trap: XLA-like places buffer 0 (0.86 s to the end); skipping it lets XLA-like place
    buffers 1 and 2 (0.68 s). At the first position the residual is RS x (0.86 - 0.68) / 0.86,
    as is the skip's advantage; placing buffer 0 (XLA-like's move) has advantage 0."""
    search = play_out(new_search(trap_scenario))
    first = [r for r in search.records if r.obs["progress"][0] == 0.0]
    assert len(first) == 1
    rec = first[0]
    k = search.k
    assert np.flatnonzero(rec.legal).tolist() == [0, k]
    expected = RS * (0.86 - 0.68) / 0.86
    assert rec.residual == pytest.approx(expected, rel=1e-9)
    assert rec.advantage[0] == 0.0
    assert rec.advantage[k] == pytest.approx(expected, rel=1e-6)
    assert np.isnan(rec.advantage[1:k]).all()
    assert rec.policy[[0, k]].sum() == pytest.approx(1.0) and not rec.policy[1:k].any()
    assert rec.policy[k] > rec.policy[0]             # the search's Q favours the skip
    # the game ends at the best mapping: 0.68 s
    assert evaluate(trap_scenario.workload, search.best_offsets, trap_scenario.hardware).time == pytest.approx(0.68)


def test_expert_targets_arithmetic():
    """Actions 0, 2 and skip (4) of A = 5; XLA-like's move 0 finishes at 2.0 s, action 2 at
    1.9 s, skip at 2.5 s; the best found below is 1.8 s. With RS = 400: residual 400 x 0.2 / 2
    = 40, advantages 0, 400 x 0.1 / 2 = 20, 400 x -0.5 / 2 = -100."""
    legal, pi, residual, adv = expert_targets(num_actions=5, actions=np.array([0, 2, 4]), base=0, final=2.0,
                                              best=1.8, child_finals=np.array([2.0, 1.9, 2.5]),
                                              policy=np.array([0.2, 0.7, 0.1]), residual_scale=400.0)
    assert legal.tolist() == [True, False, True, False, True]
    np.testing.assert_allclose(pi, [0.2, 0, 0.7, 0, 0.1], rtol=1e-6)
    assert residual == pytest.approx(40.0)
    np.testing.assert_allclose(adv[[0, 2, 4]], [0.0, 20.0, -100.0], rtol=1e-6)
    assert np.isnan(adv[[1, 3]]).all()
    with pytest.raises(ValueError, match="best <= final"):
        expert_targets(num_actions=5, actions=np.array([0, 4]), base=0, final=2.0, best=2.1,
                       child_finals=np.array([2.0, 2.1]), policy=np.array([0.5, 0.5]), residual_scale=400.0)


def test_improved_policy_hand_worked():
    """Prior (bounded logits) [0, -0.25], visits [1, 0], Q [1, 2]; c_visit 5, c_scale 0.1:
    sigma = (5 + 1) x 0.1 x [0, 1] = [0, 0.6]; softmax([0, 0.35]) = [1, e^0.35] / (1 + e^0.35)."""
    pi = improved_policy(np.array([0.0, -0.25]), np.array([1, 0]), np.array([1.0, 2.0]), c_visit=5.0, c_scale=0.1)
    e = math.exp(0.35)
    np.testing.assert_allclose(pi, [1 / (1 + e), e / (1 + e)], rtol=1e-12)
    # never one-hot: a legal action the search thinks worst keeps some mass
    pi = improved_policy(np.zeros(3), np.array([8, 0, 0]), np.array([5.0, 0.0, 1.0]), c_visit=5.0, c_scale=0.1)
    assert pi.argmax() == 0 and (pi > 0).all()


def test_the_selection_uses_the_improved_policy():
    search = SimpleNamespace(c_visit=5.0, c_scale=0.1)
    children = [SimpleNamespace(count=1, visits=2, total=2.0), SimpleNamespace(count=0, visits=1, total=2.0)]
    node = SimpleNamespace(children=children, prior=np.array([0.0, -0.25]))
    pi = SimulatorSearch.improved_policy(search, node)
    np.testing.assert_allclose(pi, improved_policy(node.prior, [1, 0], [1.0, 2.0], c_visit=5.0, c_scale=0.1))


# ------------------------------------------------------------------ the best-value backup
def test_best_value_backup_is_the_minimum_completion_below():
    """Every expanded node's ``best`` is the shortest completion in its subtree (itself, its
    children's), never a mean; residual targets are built from it."""
    scenario = mlp_scenario(4, fraction=HALF)
    search = new_search(scenario, sims=12, harvest=False)
    search.expand(search.root, [])
    assert len(search.root.children) >= 2
    for _ in range(12):
        search.simulate()
    seen = 0
    stack = [search.root]
    while stack:
        node = stack.pop()
        if node.actions is None:
            continue
        below = min([node.final] + [c.best for c in node.children])
        assert node.best == below
        seen += 1
        stack.extend(node.children)
    assert seen == 13 == search.expansions
    # the backup is a best, not an average: somewhere a position's best is below its mean value
    stack, below_mean = [search.root], 0
    while stack:
        node = stack.pop()
        below_mean += search.exact_value(node.best) > node.total / node.visits + 1e-9
        stack.extend(node.children)
    assert below_mean > 0


def test_records_are_every_expanded_position_with_a_choice_and_never_forced():
    scenario = mlp_scenario(4, fraction=HALF)
    search = play_out(new_search(scenario, sims=4))
    assert search.records
    assert all(int(r.legal.sum()) >= 2 for r in search.records)
    assert all(r.residual >= 0 for r in search.records)
    # every position the search expanded with a choice is harvested exactly once
    expanded_with_choice = []
    real = SimulatorSearch.expand

    def counting(self, node, path):
        real(self, node, path)
        if len(node.actions) >= 2:
            expanded_with_choice.append(node)

    search2 = new_search(scenario, sims=4)
    search2.expand = counting.__get__(search2)
    play_out(search2)
    assert len(search2.records) == len(expanded_with_choice) == len(search.records)
    # the residual is at least every advantage (the best below a position beats each child's
    # XLA-like completion or equals it)
    for r in search.records:
        assert r.residual >= np.nanmax(r.advantage) - 1e-4


def test_forced_positions_leave_the_replay():
    spec = ObsSpec.from_env(make_env(mlp_scenario(4), V2))
    a = spec.num_actions
    obs = {"buffer": np.zeros(spec.buffer_dim), "candidates": np.zeros(spec.k * spec.candidate_dim),
           "next": np.zeros(spec.n_next * spec.next_dim), "memory": np.zeros(spec.memory_dim),
           "progress": np.zeros(spec.progress_dim), "action_mask": np.zeros(a)}
    forced = np.zeros(a, bool)
    forced[-1] = True
    choice = forced.copy()
    choice[0] = True
    adv = np.where(choice, 0.0, np.nan).astype(np.float32)
    replay = ExpertReplay(10, spec, positive_weight=4.0)
    stored = replay.add([ExpertRecord(obs, forced, forced.astype(np.float32), 0.0, adv),
                         ExpertRecord(obs, choice, choice / 2.0, 1.5, adv)])
    assert stored == 1 and replay.size == 1 and replay.residual[0] == 1.5


# ------------------------------------------------------------------ weighting
def test_positive_residuals_are_weighted_up():
    np.testing.assert_array_equal(position_weight(np.array([0.0, 5e-4, 0.5, 3.0]), 4.0), [1, 1, 4, 4])
    spec = ObsSpec.from_env(make_env(mlp_scenario(4), V2))
    a = spec.num_actions
    legal = np.zeros(a, bool)
    legal[[0, -1]] = True
    obs = {key: np.zeros(n) for key, n in (("buffer", spec.buffer_dim), ("candidates", spec.k * spec.candidate_dim),
                                          ("next", spec.n_next * spec.next_dim), ("memory", spec.memory_dim),
                                          ("progress", spec.progress_dim), ("action_mask", a))}
    adv = np.where(legal, 0.0, np.nan).astype(np.float32)
    replay = ExpertReplay(4, spec, positive_weight=4.0)
    replay.add([ExpertRecord(obs, legal, legal / 2.0, 0.0, adv), ExpertRecord(obs, legal, legal / 2.0, 2.0, adv)])
    draws = replay.sample(20_000, np.random.default_rng(0))
    assert set(draws.tolist()) == {0, 1}
    assert np.mean(draws == 1) == pytest.approx(0.8, abs=0.01)     # 4 / (4 + 1)


# ------------------------------------------------------------------ the search with a residual
def test_leaf_value_is_exact_completion_plus_predicted_residual():
    """A model that predicts a residual of 40 units (RS = 400: 10 % of the completion time):
    every evaluated child's value is the value of finishing at 0.9 x its XLA-like completion."""
    scenario = mlp_scenario(4, fraction=HALF)
    env = make_env(scenario, V2)
    env.reset(seed=0)
    model = ConstantResidual(40.0, env.unwrapped.k + 1)
    search = SimulatorSearch(env, model, V2, num_simulations=2)
    search.expand(search.root, [])
    evaluated = [c for c in search.root.children if c.predicted is not None]
    assert evaluated and model.calls == 2    # the root's prior, then its children in one call
    for c in evaluated:
        assert c.value == pytest.approx(search.exact_value(0.9 * c.final), rel=1e-12)
        assert c.value > search.exact_value(c.final)


def test_version_2_search_is_never_worse_than_xla_like():
    scenario = mlp_scenario(4, fraction=HALF)
    agent = MuZeroAgent(fresh_net(scenario), V2, mode="simulator", num_simulations=3)
    solution = agent.solve(scenario)
    time = evaluate(scenario.workload, solution.offsets, scenario.hardware).time
    assert time <= evaluate(scenario.workload, xla_like(scenario), scenario.hardware).time * (1 + 1e-12)


# ------------------------------------------------------------------ the learner and a run
def test_expert_learner_fits_harvested_positions():
    scenario = mlp_scenario(4, fraction=HALF)
    search = play_out(new_search(scenario, sims=4))
    spec = ObsSpec.from_env(make_env(scenario, V2))
    replay = ExpertReplay(len(search.records), spec, positive_weight=4.0)
    replay.add(search.records)
    config = V2.with_overrides(["train.batch_size=64", "train.lr=0.003"])
    net = fresh_net(scenario, config)
    learner = ExpertLearner(net, config, np.random.default_rng(0))
    everything = replay.batch(np.arange(replay.size))
    pi = everything["policy"]
    entropy = float(-(pi * torch.log(pi.clamp(min=1e-30))).sum(-1).mean())   # the policy CE's floor
    with torch.no_grad():
        before = expert_loss(net, everything, config)[1]
    for _ in range(80):
        learner.step(replay)
    with torch.no_grad():
        after = expert_loss(net, everything, config)[1]
    print(before, after, entropy)
    assert after["residual"] + after["advantage"] < 0.7 * (before["residual"] + before["advantage"])
    assert after["policy"] - entropy < 0.7 * (before["policy"] - entropy)   # the KL to the target


def test_version_2_config_rules():
    with pytest.raises(ValueError, match="network.version must be one of"):
        MuZeroConfig().with_overrides(["network.version=3"])
    with pytest.raises(ValueError, match="train.teacher_fraction=0.5.*the field was removed .*version-1 trainer"):
        V2.with_overrides(["train.teacher_fraction=0.5"])
    with pytest.raises(ValueError, match="value_mix must be 1"):
        V2.with_overrides(["simulator.value_mix=0.5"])
    with pytest.raises(ValueError, match="generator_buffers"):
        V2.with_overrides(["train.generator_buffers=900,100"])
    with pytest.raises(ValueError, match="generator_buffers"):
        V2.with_overrides(["train.generator_buffers=abc"])
    assert MuZeroConfig().network.version == 2      # issue 31: the only version trained
    scenario = mlp_scenario(4)
    with pytest.raises(ValueError, match="muzero-sim"):
        MuZeroAgent(fresh_net(scenario), V2, mode="learned")
    v1 = MuZeroConfig().with_overrides(["network.version=1"])
    with pytest.raises(ValueError, match="network.version 1"):
        MuZeroNet(ObsSpec.from_env(make_env(scenario, V2)), v1.network).expert({})


def test_version_2_training_run_logs_and_plays(tmp_path):
    scenario = mlp_scenario(4, fraction=HALF)
    config = V2.with_overrides(["train.min_replay=32", "train.batch_size=16", "train.log_every_s=0.5",
                                "train.heldout_fraction=0.5", "simulator.num_simulations=2"])
    summary = train(config, scenarios=[scenario], out_dir=tmp_path / "run", minutes=0.08, seed=0,
                    use_generator=False, progress=False)
    assert summary["train_steps"] > 0 and summary["positions"] > 0 and summary["heldout_positions"] > 0
    assert "train_residual_error" in summary and "heldout_residual_error" in summary
    net, loaded, _ = load_network(tmp_path / "run")
    assert loaded.network.version == 2
    solution = MuZeroAgent(net, loaded, mode="simulator", num_simulations=2).solve(scenario)
    evaluate(scenario.workload, solution.offsets, scenario.hardware)
    # --resume continues the counters with the checkpoint's config and appends to the log
    again = train(MuZeroConfig(), scenarios=[scenario], out_dir=tmp_path / "run", minutes=0.01, seed=0,
                  resume=True, use_generator=False, progress=False)
    assert again["env_steps"] > summary["env_steps"] and again["elapsed_s"] > summary["elapsed_s"]
    events = [json.loads(line)["event"] for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert events[0] == "start" and "resume" in events and events[-1] == "end"


# ------------------------------------------------------------------ the checkpoint's measure
def test_best_child_tally_hand_worked():
    """baselines/muzero/best_child.py's counts. Legal: candidate 0 (XLA-like's move), candidate 1
    and skip (A = 4). Position 1: times 10, 9, 12 -> the best is candidate 1, a gain exists;
    position 2: times 10, 10, 11 -> XLA-like's move is best (ties count as best)."""
    from conftest import baseline_script

    best_child = baseline_script("muzero/best_child.py")
    legal = np.array([True, True, False, True])
    first = np.array([10.0, 9.0, np.inf, 12.0])
    second = np.array([10.0, 10.0, np.inf, 11.0])
    tally = best_child.Tally()
    tally.add(1, legal, first)     # right departure
    tally.add(1, legal, second)    # a departure to an equal move: not wrong, not right
    out = tally.summary()
    assert (out["wrong"], out["departures"], out["departure_precision"]) == (0, 2, 0.5)
    assert (out["positions_with_gain"], out["departure_recall"]) == (1, 1.0)
    tally = best_child.Tally()
    tally.add(0, legal, first)     # stays with XLA-like: wrong by 10 / 9 - 1
    tally.add(3, legal, second)    # skip: wrong by 10 %, a wrong departure
    out = tally.summary()
    assert (out["wrong"], out["departures"], out["departure_precision"], out["departure_recall"]) == (2, 1, 0.0, 0.0)
    assert out["mean_regret_percent_when_wrong"] == pytest.approx((100 / 9 + 10) / 2)
    assert out["wrong_beyond_near_tie_rate"] == 1.0
    names = [s.name for s in best_child.heldout_programs()]
    assert len(names) == len(set(names)) == 60
