"""Issue 18, steps 3-5: exact labels without the search (hand-worked on the trap), the
predicted gain and the policy's margin, the search's gate and the policy agent."""

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from mallocgym.agents import make_agent
from mallocgym.agents.muzero.agent import MuZeroAgent, make_env
from mallocgym.agents.muzero.checkpoint import save_checkpoint
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.expert import ExpertActor
from mallocgym.agents.muzero.labels import label_decision, label_game, label_targets, policy_move, predicted_gain
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec
from mallocgym.agents.muzero.source import ScenarioSource
from mallocgym.agents.muzero.simsearch import SimulatorSearch
from mallocgym.pricing.v0 import evaluate

from conftest import mlp_scenario

torch.set_num_threads(1)

V2 = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16", "network.memory_hidden=8",
                                    "network.version=2"])
RS = V2.network.residual_scale
K = V2.env.n_candidates


class FirstMoveGain:
    """A version-2 model whose advantage head predicts, at the first position only (progress 0),
    ``gain`` for skipping; zero elsewhere. Counts its calls."""

    def __init__(self, gain):
        self.gain = float(gain)
        self.calls = 0

    def expert(self, obs):
        b = len(obs["buffer"])
        self.calls += 1
        adv = np.zeros((b, K + 1))
        first = np.asarray(obs["progress"])[:, 0] == 0.0
        adv[first, K] = self.gain
        return np.zeros((b, K + 1)), np.zeros(b), adv


# ------------------------------------------------------------------ targets, hand-worked
def test_label_targets_arithmetic():
    """Legal 0, 2 and skip (A = 5, skip = 4); completions 2.0 s (XLA-like's move 0), 1.9 s and
    2.5 s. RS = 400: advantages 0, 400 x 0.1 / 2 = 20, 400 x -0.5 / 2 = -100; residual = the
    best one-step gain = 20; policy = softmax([0, 20, -100] / 10)."""
    legal = np.array([True, False, True, False, True])
    times = np.array([2.0, np.inf, 1.9, np.inf, 2.5])
    legal_out, pi, residual, adv = label_targets(times, legal, residual_scale=400.0, temperature=10.0)
    assert legal_out.tolist() == legal.tolist()
    np.testing.assert_allclose(adv[[0, 2, 4]], [0.0, 20.0, -100.0], rtol=1e-6)
    assert np.isnan(adv[[1, 3]]).all()
    assert residual == pytest.approx(20.0)
    e = np.exp([0.0, 2.0, -10.0])
    np.testing.assert_allclose(pi[[0, 2, 4]], e / e.sum(), rtol=1e-6)
    assert pi[[1, 3]].tolist() == [0.0, 0.0]
    # XLA-like's move the best: residual 0; XLA-like's move is skip when candidate 0 is illegal
    _, _, residual, adv = label_targets(np.array([3.0, 4.0, np.inf, np.inf, 3.5]),
                                        np.array([False, True, False, False, True]),
                                        residual_scale=400.0, temperature=1.0)
    assert residual == 0.0                                       # move 1 (4.0 s) is worse than skip (3.5 s)
    assert adv[4] == 0.0 and adv[1] == pytest.approx(400 * -0.5 / 3.5)
    with pytest.raises(ValueError, match="finite completion"):
        label_targets(np.array([2.0, np.inf]), np.array([True, True]), residual_scale=400.0, temperature=1.0)


def test_label_game_on_the_trap_hand_worked(trap_scenario):
    """The trap (conftest): XLA-like places buffer 0 and ends at 0.86 s (all slow 1.4 s);
    skipping it ends at 0.68 s. Every position labelled: at the first, the skip's advantage
    and the residual are RS x 0.18 / 0.86; exploring always plays it (return 1 - 0.68 / 1.4),
    never exploring plays XLA-like's game (1 - 0.86 / 1.4)."""
    for explore, final in ((1.0, 0.68), (0.0, 0.86)):
        config = V2.with_overrides(["train.label_positions=1000", f"train.label_explore={explore}"])
        records, ret, xla_ret = label_game(trap_scenario, config, np.random.default_rng(0))
        assert ret == pytest.approx(1 - final / 1.4) and xla_ret == pytest.approx(1 - 0.86 / 1.4)
        first = records[0]
        assert first.obs["progress"][0] == 0.0
        assert np.flatnonzero(first.legal).tolist() == [0, K]
        expected = RS * (0.86 - 0.68) / 0.86
        assert first.residual == pytest.approx(expected, rel=1e-9)
        assert first.advantage[0] == 0.0 and first.advantage[K] == pytest.approx(expected, rel=1e-6)
        assert first.policy[K] > 0.99                                   # 70 units over T = 0.25
        assert all(int(r.legal.sum()) >= 2 for r in records)            # no forced position
    # after the skip, buffers 1 and 2 fit side by side: every move of buffer 1 but the skip ends
    # at 0.68 s (advantage 0 over XLA-like's); skipping it too leaves only buffer 2's saving
    # (0.36 s of the 0.72 s): 1.04 s, an advantage of 400 x (0.68 - 1.04) / 0.68
    config = V2.with_overrides(["train.label_positions=1000", "train.label_explore=1.0"])
    records, _, _ = label_game(trap_scenario, config, np.random.default_rng(0))
    second = records[1]
    legal = np.flatnonzero(second.legal)
    assert second.residual == 0.0
    assert second.advantage[K] == pytest.approx(RS * (0.68 - 1.04) / 0.68, rel=1e-6)
    assert np.allclose(second.advantage[legal[legal < K]], 0.0, atol=1e-9)


def test_labelled_games_in_the_actor(trap_scenario):
    config = V2.with_overrides(["train.label_fraction=1.0", "train.label_positions=1000",
                                "train.heldout_fraction=0.5"])
    actor = ExpertActor(config, ScenarioSource([trap_scenario], None, 0.0), np.random.default_rng(0), None)
    held = []
    for _ in range(4):
        records, heldout, game = actor.step()   # a whole labelled game per step
        assert game is not None and game.positions == len(records) >= 1
        held.append(heldout)
    assert held == [False, True, False, True] and actor.labelled_games == 4


# ------------------------------------------------------------------ the gain, the margin
def test_predicted_gain_and_policy_margin():
    legal = np.array([True, True, False, True])           # XLA-like's move: 0; skip = 3
    adv = np.array([0.5, 1.25, 9.0, 0.25])                # the illegal 9.0 is never read
    gain, move = predicted_gain(adv, legal)
    assert (gain, move) == (0.75, 1)                      # relative to XLA-like's own prediction
    assert policy_move(adv, legal, 0.5) == 1
    assert policy_move(adv, legal, 0.75) == 0             # must exceed the margin
    # candidate 0 illegal: XLA-like's move is skip
    legal = np.array([False, True, False, True])
    assert predicted_gain(adv, legal) == (1.0, 1)
    assert policy_move(adv, legal, 2.0) == 3
    # a single legal move: no gain
    assert predicted_gain(adv, np.array([False, False, False, True])) == (-math.inf, 3)


# ------------------------------------------------------------------ the gate (step 4)
def gated_search(scenario, model, gate, sims=4):
    config = V2.with_overrides([f"simulator.gate={gate}"])
    env = make_env(scenario, config)
    env.reset(seed=0)
    search = SimulatorSearch(env, model, config, num_simulations=sims)
    while not search.root.terminal:
        search.move()
    return search


def test_the_gate_searches_only_where_a_gain_is_predicted(trap_scenario):
    """Predicted gain 0 everywhere: the gate passes every position, the game follows XLA-like's
    completion (0.86 s) with no completion beyond the first. Predicted gain 10 at the first
    position: it is searched and the skip found (0.68 s); later positions are passed."""
    flat = gated_search(trap_scenario, FirstMoveGain(0.0), gate=1.0)
    assert flat.best_time == pytest.approx(0.86) and flat.completions == 1
    assert flat.searched_moves == 0 and flat.gated_moves >= 1
    gain = gated_search(trap_scenario, FirstMoveGain(10.0), gate=1.0)
    assert gain.best_time == pytest.approx(0.68)
    assert gain.searched_moves >= 1
    assert evaluate(trap_scenario.workload, gain.best_offsets, trap_scenario.hardware).time == pytest.approx(0.68)
    # a gate above the predicted gain passes it too
    assert gated_search(trap_scenario, FirstMoveGain(10.0), gate=10.0).best_time == pytest.approx(0.86)


class GainAfter(FirstMoveGain):
    """Predicts ``gain`` for skipping at every position past the first ``after`` decisions."""

    def __init__(self, gain, after):
        super().__init__(gain)
        self.after = after

    def expert(self, obs):
        logits, residual, _ = super().expert(obs)
        adv = np.zeros_like(logits)
        adv[np.asarray(obs["progress"])[:, 0] >= self.after, K] = self.gain
        return logits, residual, adv


def test_positions_the_gate_passed_are_searched_from_their_own_completion():
    """On a 43-buffer MLP the gate passes the first fifth of the game (no gain predicted) and
    searches the rest: a position reached without a completion gets its own XLA-like completion
    when searched, so the game still ends at its best mapping, as good as XLA-like's at least;
    with a gain predicted everywhere the gated search is the ungated one."""
    scenario = mlp_scenario(0, Fraction(1, 2))
    half = gated_search(scenario, GainAfter(10.0, 0.2), gate=1.0)
    assert half.searched_moves >= 1 and half.gated_moves >= 1
    assert evaluate(scenario.workload, half.best_offsets, scenario.hardware).time == pytest.approx(half.best_time)
    assert half.best_time <= half.start_time
    everywhere = gated_search(scenario, GainAfter(10.0, 0.0), gate=1.0)
    config = V2.with_overrides(["simulator.max_logit_lead=0.0"])
    env = make_env(scenario, config)
    env.reset(seed=0)
    plain = SimulatorSearch(env, GainAfter(10.0, 0.0), config, num_simulations=4)
    while not plain.root.terminal:
        plain.move()
    assert everywhere.gated_moves == 0 and everywhere.searched_moves == plain.searched_moves
    assert everywhere.best_time == plain.best_time


def test_the_gate_needs_a_version_2_network(trap_scenario):
    config = MuZeroConfig().with_overrides(["simulator.gate=0.5", "network.version=1"])
    env = make_env(trap_scenario, config)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="version-2"):
        SimulatorSearch(env, FirstMoveGain(0.0), config, num_simulations=2)
    with pytest.raises(ValueError, match="policy_margin"):
        MuZeroConfig().with_overrides(["simulator.policy_margin=-1"])


# ------------------------------------------------------------------ the policy agent (step 5)
def test_policy_agent_departs_only_above_its_margin(trap_scenario, tmp_path):
    torch.manual_seed(0)
    net = MuZeroNet(ObsSpec.from_env(make_env(trap_scenario, V2)), V2.network).eval()
    for margin, final in ((5.0, 0.68), (20.0, 0.86)):
        agent = MuZeroAgent(net, V2.with_overrides([f"simulator.policy_margin={margin}"]), mode="policy")
        agent.model = FirstMoveGain(10.0)
        sol = agent.solve(trap_scenario)
        assert evaluate(trap_scenario.workload, sol.offsets, trap_scenario.hardware).time == pytest.approx(final)
        assert agent.model.calls == sol.info["searched_moves"] >= 1   # one call per decision with a choice
    # the spec: muzero-pol:DIR,margin=X; a version-1 checkpoint is refused
    save_checkpoint(tmp_path / "v2", net=net, config=V2, progress={})
    agent = make_agent(f"muzero-pol:{tmp_path / 'v2'},margin=0.5")
    assert agent.mode == "policy" and agent.config.simulator.policy_margin == 0.5
    with pytest.raises(ValueError, match="gate= applies to muzero-sim"):
        make_agent(f"muzero-pol:{tmp_path / 'v2'},gate=1")
    v1 = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16",
                                        "network.memory_hidden=8", "network.version=1"])
    save_checkpoint(tmp_path / "v1", net=MuZeroNet(net.spec, v1.network), config=v1, progress={})
    with pytest.raises(ValueError, match="version-2"):
        make_agent(f"muzero-pol:{tmp_path / 'v1'}")


class ScriptedRng:
    """An ``rng`` whose ``random()`` returns the given draws in order (and fails past them)."""

    def __init__(self, *draws):
        self.draws = list(draws)

    def random(self):
        return self.draws.pop(0)


def test_label_decision_hand_worked():
    """Moves 0, 1, 3 legal of 4; base 1. Completion times 12, 10, -, 8: move 3 is 2 s faster than
    the base, so its advantage is residual_scale x 2 / 10 and the residual the same. Labelling
    draw 0.2 < p = 0.5; exploring draw 0.1 < 0.5 plays move 3, 0.9 keeps the base."""
    config = MuZeroConfig().with_overrides(["train.label_explore=0.5"])
    scale = config.network.residual_scale
    legal = np.array([True, True, False, True])
    times = np.array([12.0, 10.0, 1.0, 8.0])   # move 2 is illegal: its (faster) time is never read
    calls = []

    def score():
        calls.append(1)
        return times

    action, targets = label_decision(ScriptedRng(0.2, 0.1), 0.5, legal, 1, score, config)
    assert action == 3 and len(calls) == 1
    _, policy, residual, advantage = targets
    assert residual == pytest.approx(scale * 0.2)
    np.testing.assert_allclose(advantage[[0, 1, 3]], [scale * -0.2, 0.0, scale * 0.2], rtol=1e-6)
    assert math.isnan(advantage[2]) and policy[2] == 0 and np.argmax(policy) == 3 and policy[1] >= policy[0]
    assert policy.sum() == pytest.approx(1.0)
    assert label_decision(ScriptedRng(0.2, 0.9), 0.5, legal, 1, score, config)[0] == 1   # no exploring
    # the labelling draw fails: the base, nothing scored, the exploring draw not taken
    assert label_decision(ScriptedRng(0.7), 0.5, legal, 1, score, config) == (1, None) and len(calls) == 2
    # a forced position: no draw at all
    assert label_decision(ScriptedRng(), 0.5, np.array([False, True, False, False]), 1, score, config) == (1, None)
    # exploring where no move beats the base keeps it
    assert label_decision(ScriptedRng(0.2, 0.1), 0.5, legal, 3, score, config)[0] == 3
