"""The departure head of the v1 policy (issue 31): its inputs, its score, what it lets the policy
do, the checkpoint option, and its fit (``baselines/muzero/v1/head.py``)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
import torch

from mallocgym.agents import make_agent
from mallocgym.agents.muzero.agent import MuZeroAgent, make_env
from mallocgym.agents.muzero.checkpoint import save_checkpoint
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.head import DepartureHead, head_inputs, prepare
from mallocgym.agents.muzero.networks import MuZeroNet, NumpyAdvantage, ObsSpec
from mallocgym.agents.muzero.v1 import adapt_obs
from mallocgym.pricing.v1 import evaluate_v1

from conftest import baseline_script, mlp_scenario

torch.set_num_threads(1)
SMALL = ["network.hidden=32", "network.candidate_hidden=16", "network.memory_hidden=8"]
V1 = MuZeroConfig().with_overrides(["env.game=v1", "network.version=2", "simulator.policy_margin=0.0", *SMALL])
SCENARIO = mlp_scenario(0, Fraction(1, 8))


def _state(width: int, weight: np.ndarray | None = None, bias: float = 0.0) -> dict:
    """A one-layer head over ``width`` prepared inputs (mean 0, scale 1)."""
    w = np.zeros((width, 1)) if weight is None else weight.reshape(width, 1)
    return {"mean": np.zeros(width), "scale": np.ones(width), "weights": [w], "biases": [np.array([bias])]}


def test_inputs_kinds_and_score_hand_worked():
    """k = 2 offsets: action 0 is slow, 1-2 fast, 3+ prefetch. Leaving slow (0) for a prefetch
    (3) with predicted gain 0.7: the prepared row is the gain, both advantages, log(buffers),
    then slow/fast/prefetch of base and move, then the features."""
    adv = np.array([0.1, 0.0, 0.0, 0.8])
    latent, keyed, rows = np.array([5.0]), np.arange(8.0).reshape(4, 2), np.arange(12.0).reshape(4, 3)
    raw = head_inputs(adv, (latent, keyed, rows), 0, 3, 2, 100)
    assert raw.tolist()[:7] == pytest.approx([0.7, 0.1, 0.8, 0, 3, 2, np.log(100)])
    assert raw.tolist()[7:] == [5.0, 0.0, 1.0, 6.0, 7.0, 0.0, 1.0, 2.0, 9.0, 10.0, 11.0]
    x = prepare(raw)[0]
    assert x.tolist()[:10] == pytest.approx([0.7, 0.1, 0.8, np.log(100), 1, 0, 0, 0, 0, 1])
    assert x.tolist()[10:] == raw.tolist()[7:]
    # score = gain - 0.5: departs below the threshold only
    weight = np.zeros(x.size)
    weight[0] = 1.0
    assert DepartureHead(_state(x.size, weight, -0.5), 0.0).score(raw)[0] == pytest.approx(0.2)
    assert not DepartureHead(_state(x.size, weight, -0.5), 0.0).departs(raw)
    assert DepartureHead(_state(x.size, weight, -0.5), 0.3).departs(raw)


def test_bad_heads_are_refused():
    with pytest.raises(ValueError, match="mean, scale, weights and biases"):
        DepartureHead({"mean": np.zeros(3)}, 0.0)
    with pytest.raises(ValueError, match="end in one output"):
        DepartureHead({**_state(3), "weights": [np.zeros((3, 2))], "biases": [np.zeros(2)]}, 0.0)
    with pytest.raises(ValueError, match="finite"):
        DepartureHead(_state(3), float("nan"))


def _speedup_and_departures(agent):
    solution = agent.solve_v1(SCENARIO)
    return evaluate_v1(SCENARIO.workload, solution.mapping, SCENARIO.hardware).speedup, solution.info["departures"]


def test_the_head_decides_which_departures_the_policy_makes():
    """A head that always lets the policy depart plays the network's policy at margin 0; one that
    never does plays exactly xla-msa's game."""
    torch.manual_seed(3)
    net = MuZeroNet(ObsSpec.from_env(make_env(SCENARIO, V1)), V1.network)
    env = make_env(SCENARIO, V1).unwrapped
    adv, *features = NumpyAdvantage(net).features(adapt_obs(env.reset(seed=0)[0]))
    width = prepare(head_inputs(adv, features, 0, 1, env.k, 43)).shape[1]
    plain = _speedup_and_departures(MuZeroAgent(net, V1, mode="policy"))
    always = _speedup_and_departures(MuZeroAgent(net, V1, mode="policy", head=DepartureHead(_state(width, bias=-1.0), 0.0)))
    never = _speedup_and_departures(MuZeroAgent(net, V1, mode="policy", head=DepartureHead(_state(width, bias=1.0), 0.0)))
    xla = evaluate_v1(SCENARIO.workload, make_agent("xla-msa:in_env=1").solve_v1(SCENARIO).mapping, SCENARIO.hardware)
    assert plain[1] > 0 and always == plain
    assert never == (xla.speedup, 0)


def test_checkpoint_head_and_its_option(tmp_path):
    torch.manual_seed(0)
    net = MuZeroNet(ObsSpec.from_env(make_env(SCENARIO, V1)), V1.network)
    save_checkpoint(tmp_path / "plain", net=net, config=V1, progress={})
    with pytest.raises(ValueError, match="has none"):
        make_agent(f"muzero-pol:{tmp_path / 'plain'},head=-1")
    head = baseline_script("muzero/v1/head.py").head_state(torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1)),
                                  np.zeros(4), np.ones(4))
    save_checkpoint(tmp_path / "head", net=net, config=V1, progress={}, extra={"departure_head": head})
    assert make_agent(f"muzero-pol:{tmp_path / 'head'}").head.threshold == 0.0
    assert make_agent(f"muzero-pol:{tmp_path / 'head'},head=-1.5").head.threshold == -1.5
    with pytest.raises(ValueError, match="applies to muzero-pol only"):
        make_agent(f"muzero-sim:{tmp_path / 'head'},head=-1")
    with pytest.raises(ValueError, match="finite"):
        make_agent(f"muzero-pol:{tmp_path / 'head'},head=inf")


def test_fit_learns_which_departures_lose(tmp_path):
    """Synthetic departures that lose exactly where their first feature is negative: the fitted
    head scores those above 0 and the others below."""
    script = baseline_script("muzero/v1/head.py")
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(2000, 10))
    raw[:, 3], raw[:, 4], raw[:, 5] = 1, 0, 2      # fast -> slow, k = 2
    cost = np.where(raw[:, 7] < 0, 1.0, -1.0)
    head = DepartureHead(script.fit(raw, cost, epochs=10), 0.0)
    assert ((head.score(raw) > 0) == (cost > 0)).mean() > 0.97
    with pytest.raises(SystemExit):
        script.main(["fit", "--data", str(tmp_path), "--out", str(tmp_path / "out")])


def test_fit_writes_the_checkpoint_with_its_head_and_the_time_it_took(tmp_path):
    script = baseline_script("muzero/v1/head.py")
    torch.manual_seed(0)
    net = MuZeroNet(ObsSpec.from_env(make_env(SCENARIO, V1)), V1.network)
    save_checkpoint(tmp_path / "net", net=net, config=V1, progress={"episodes": 3})
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(1)
    for i in (2, 10):
        raw = rng.normal(size=(50, 10))
        raw[:, 3], raw[:, 4], raw[:, 5] = 1, 0, 2
        np.savez(data / f"p{i}.npz", X=raw, Y=np.where(raw[:, 7] < 0, 1.0, -1.0), name=f"p{i}")
    script._add_time(data / "time.json", 100.0)
    script._add_time(data / "time.json", 20.0)      # a second `data` run adds to the first
    assert script.main(["fit", "--data", str(data), "--out", str(tmp_path / "out"), "--checkpoint",
                        str(tmp_path / "net"), "--threshold", "-2", "--selection", "test"]) == 0
    record = json.loads((tmp_path / "out" / "head.json").read_text())
    assert record["label_s"] == 120.0 and record["departures"] == 100 and record["fit_s"] > 0
    agent = make_agent(f"muzero-pol:{tmp_path / 'out'}")
    assert agent.head.threshold == -2.0 and agent.config.simulator.policy_margin == 0.0
    assert agent.head.layers[0][0].shape == (prepare(raw).shape[1], 64)


def test_head_data_keeps_each_departures_exact_cost():
    """``departures.departures(..., inputs)`` hands ``head.py data`` each departure's head row and
    its exact cost; the printed row's ``moves`` round the same costs to 1e-5 points."""
    script = baseline_script("muzero/v1/departures.py")
    torch.manual_seed(0)
    agent = MuZeroAgent(MuZeroNet(ObsSpec.from_env(make_env(SCENARIO, V1)), V1.network), V1, mode="policy")
    inputs: list = []
    row = script.departures(agent, SCENARIO, 0.0, inputs)
    costs = [cost for _, cost in inputs]
    assert len(inputs) == row["departures"] >= 2
    assert [round(c, 5) for c in costs] == [m[2] for m in row["moves"]]
    assert any(c != round(c, 5) for c in costs)                 # not rounded
    assert sum(costs) == pytest.approx(row["sum_alone"], rel=1e-12)
    assert all(x.shape == inputs[0][0].shape for x, _ in inputs)
