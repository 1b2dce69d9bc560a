"""Per-program finetuning (``muzero-sim:DIR,finetune=S``): the first game is the checkpoint's own
search, later games play the trained weights, the result is the best game's, the budget holds
(on a fake clock), the checkpoint on disk is never written, and bad specs are one error."""

import hashlib
import re

import numpy as np
import pytest
import torch

import mallocgym.agents.muzero.finetune as finetune_module
from mallocgym.agents import make_agent
from mallocgym.agents.muzero.agent import MuZeroAgent, make_env
from mallocgym.agents.muzero.checkpoint import save_checkpoint
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.expert import ExpertLearner
from mallocgym.agents.muzero.finetune import FinetuneAgent
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec
from mallocgym.pricing.v0 import evaluate
from mallocgym.harness import solve
from mallocgym.heuristics import xla_like

from conftest import mlp_scenario

torch.set_num_threads(1)

V2 = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16", "network.memory_hidden=8",
                                    "network.version=2", "train.batch_size=16", "train.replay_capacity=4000",
                                    "simulator.num_simulations=4"])


def fresh_net(scenario, config=V2, seed=0):
    torch.manual_seed(seed)
    return MuZeroNet(ObsSpec.from_env(make_env(scenario, config)), config.network).eval()


class TickClock:
    """A clock that moves ``step`` seconds each time it is read: runs are the same on any machine."""

    def __init__(self, step=1.0):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def weights_sum(net):
    return float(sum(p.detach().double().sum() for p in net.parameters()))


@pytest.fixture(scope="module")
def finetuned():
    """One finetuning run of a fresh network on a 43-buffer program, on a tick clock, with what
    each game was played by and when each update started."""
    scenario = mlp_scenario(3)
    net = fresh_net(scenario)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    played_by, updates = [], []
    clock = TickClock()
    original_init = finetune_module.SimulatorSearch.__init__
    original_step = ExpertLearner.step

    def init(self, env, model, config, **kwargs):
        played_by.append((weights_sum(model.net), len(updates)))
        original_init(self, env, model, config, **kwargs)

    def step(self, replay):
        updates.append((clock.now, weights_sum(self.net)))
        return original_step(self, replay)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(finetune_module.SimulatorSearch, "__init__", init)
        mp.setattr(ExpertLearner, "step", step)
        agent = FinetuneAgent(net, V2, seconds=400.0, clock=clock)
        solution = agent.solve(scenario)
        deadline_reads = clock.now
    return scenario, net, before, solution, played_by, updates, deadline_reads


def test_first_game_is_the_checkpoints_own_search(finetuned):
    scenario, net, _, solution, _, _, _ = finetuned
    own = MuZeroAgent(net, V2, mode="simulator").solve(scenario)
    own_time = evaluate(scenario.workload, own.offsets, scenario.hardware).time
    assert solution.info["games"] >= 3 and solution.info["complete_games"] >= 2
    assert solution.info["first_game_time"] == pytest.approx(own_time, rel=1e-12)
    assert solution.info["game_times"][0] == solution.info["first_game_time"]


def test_result_is_the_best_game_and_never_worse_than_the_checkpoint_or_xla_like(finetuned):
    scenario, _, _, solution, _, _, _ = finetuned
    info = solution.info
    time = evaluate(scenario.workload, solution.offsets, scenario.hardware).time
    assert time == pytest.approx(min(info["game_times"]), rel=1e-12) == pytest.approx(info["best_time"], rel=1e-12)
    assert time <= info["first_game_time"] * (1 + 1e-12)
    xla_time = evaluate(scenario.workload, xla_like(scenario), scenario.hardware).time
    assert info["xla_time"] == pytest.approx(xla_time, rel=1e-9) and time <= xla_time * (1 + 1e-12)


def test_later_games_play_the_trained_weights_and_the_given_network_is_untouched(finetuned):
    _, net, before, solution, played_by, updates, _ = finetuned
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert solution.info["train_steps"] == len(updates) > 0 and solution.info["positions"] > 0
    assert len(played_by) == solution.info["games"]
    assert played_by[0] == (weights_sum(net), 0)   # game 1: the checkpoint's weights throughout
    checked = 0
    for weights, done in played_by[1:]:
        # each later game plays the weights the learner had when it began: those the next update starts from
        assert weights != played_by[0][0] and done > 0
        if done < len(updates):
            assert updates[done][1] == weights
            checked += 1
    assert checked >= 1


def test_the_budget_holds_on_the_clock(finetuned):
    *_, updates, reads = finetuned
    assert all(start < 400.0 for start, _ in updates)   # no update starts after the deadline
    # the deadline is read at every expansion and update: past it, only the last game's replay
    # of its incumbent (no clock reads) and the final check remain
    assert 400.0 <= reads <= 400.0 + 3


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    scenario = mlp_scenario(3)
    folder = tmp_path_factory.mktemp("ckpt")
    v2, v1 = folder / "v2", folder / "v1"
    save_checkpoint(v2, net=fresh_net(scenario), config=V2)
    v1_config = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16",
                                               "network.memory_hidden=8"])
    save_checkpoint(v1, net=fresh_net(scenario, v1_config), config=v1_config)
    return scenario, v2, v1


def test_the_checkpoint_on_disk_is_never_written(checkpoints):
    scenario, v2, _ = checkpoints
    file = v2 / "checkpoint.pt"
    digest, mtime = hashlib.sha256(file.read_bytes()).hexdigest(), file.stat().st_mtime_ns
    result = solve(scenario, f"muzero-sim:{v2},finetune=0.5,sims=2")
    assert result.agent == "muzero-sim,finetune=0.5,sims=2" and result.info["finetune_s"] == 0.5
    assert result.info["simulations"] == 2 and result.info["games"] >= 1
    assert hashlib.sha256(file.read_bytes()).hexdigest() == digest and file.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in v2.iterdir()) == ["checkpoint.pt"]


@pytest.mark.parametrize("spec, message", [
    ("muzero:{v2},finetune=5", "option finetune= applies to muzero-sim only"),
    ("muzero-sim:{v2},finetune=0", "finetune must be > 0 seconds"),
    ("muzero-sim:{v2},finetune=inf", "finetune must be finite"),
    ("muzero-sim:{v2},finetune=soon", "finetune takes a number"),
    ("muzero-sim:{v2},finetune=5,budget_s=3",
     "finetune=S is the agent's whole wall budget per scenario; drop budget_s"),
    ("muzero-sim:{v1},finetune=5", "holds a version-1 network"),
])
def test_bad_finetune_specs_are_one_error(checkpoints, spec, message):
    _, v2, v1 = checkpoints
    with pytest.raises(ValueError, match=re.escape(message)):
        make_agent(spec.format(v2=v2, v1=v1))


def test_a_harness_budget_replaces_the_finetuning_seconds(checkpoints):
    _, v2, _ = checkpoints
    agent = make_agent(f"muzero-sim:{v2},finetune=30")
    assert isinstance(agent, FinetuneAgent) and agent.budget_s == 30.0
    agent.set_budget(2.5)
    assert agent.budget_s == 2.5
    with pytest.raises(ValueError, match="budget_s must be a finite number of seconds > 0"):
        agent.set_budget(-1.0)
    assert np.isfinite(agent.seconds)
