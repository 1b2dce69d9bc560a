"""The harness agents: simulator mode on the trap, checkpoints, factory options."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import mallocgym.agents.muzero.agent as agent_module
from mallocgym.agents import make_agent
from mallocgym.agents.muzero.agent import MuZeroAgent, make_env
from mallocgym.agents.muzero.checkpoint import load_network, save_checkpoint
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.mcts import play, xla_move
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec, stack_obs
from mallocgym.pricing.v0 import evaluate
from mallocgym.heuristics import xla_like
from mallocgym.scenarios import resolve

from conftest import FakeClock, baseline_script, mlp_scenario

torch.set_num_threads(1)

SMALL = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16",
                                       "network.memory_hidden=8", "search.eval_simulations=8"])


def fresh_net(scenario, config=SMALL, seed=0):
    torch.manual_seed(seed)
    return MuZeroNet(ObsSpec.from_env(make_env(scenario, config)), config.network)


def test_simulator_mode_finds_the_trap_optimum(trap_scenario):
    agent = MuZeroAgent(fresh_net(trap_scenario), SMALL, mode="simulator")
    solution = agent.solve(trap_scenario)
    ev = evaluate(trap_scenario.workload, solution.offsets, trap_scenario.hardware)
    assert ev.time == pytest.approx(0.68)          # XLA-like: 0.86
    assert solution.offsets[0] == -1 and (solution.offsets[1:] >= 0).all()
    assert solution.info["kept_xla"] is False


def test_simulator_mode_returns_xla_like_when_it_has_no_time_to_search(trap_scenario, monkeypatch):
    clock = FakeClock()
    real = agent_module.SimulatorSearch.__init__

    def slow_setup(self, *args, **kwargs):   # the set-up alone uses up the budget
        real(self, *args, **kwargs)
        clock.now += 1.0

    monkeypatch.setattr(agent_module.SimulatorSearch, "__init__", slow_setup)
    agent = MuZeroAgent(fresh_net(trap_scenario), SMALL, mode="simulator", budget_s=0.5, clock=clock)
    solution = agent.solve(trap_scenario)
    assert solution.info["kept_xla"] is True and solution.info["expansions"] == 0
    assert solution.info["budget_exhausted"] is True
    np.testing.assert_array_equal(solution.offsets, xla_like(trap_scenario))
    assert evaluate(trap_scenario.workload, solution.offsets, trap_scenario.hardware).time == pytest.approx(0.86)


def test_checkpoint_round_trip_gives_identical_actions(tmp_path):
    scenario = mlp_scenario(4)
    net = fresh_net(scenario, seed=3)
    save_checkpoint(tmp_path, net=net, config=SMALL)
    loaded, config, payload = load_network(tmp_path)
    assert config == SMALL and payload["spec"] == net.spec
    for a, b in zip(net.state_dict().values(), loaded.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    first = MuZeroAgent(net, SMALL).solve(scenario, seed=1)
    again = make_agent(f"muzero:{tmp_path}").solve(scenario, seed=1)
    np.testing.assert_array_equal(first.offsets, again.offsets)
    assert first.info["searched_moves"] > 0
    evaluate(scenario.workload, again.offsets, scenario.hardware)   # a valid mapping
    sim = make_agent(f"muzero-sim:{tmp_path},sims=4,lead=0.1,ptemp=2,mix=0.5,budget_s=30")
    assert sim.num_simulations == 4 and sim.mode == "simulator" and sim.budget_s == 30.0
    assert (sim.config.simulator.max_logit_lead, sim.config.simulator.prior_temperature,
            sim.config.simulator.value_mix) == (0.1, 2.0, 0.5)
    assert sim.name == "muzero-sim,sims=4,lead=0.1,ptemp=2,mix=0.5,budget_s=30"
    # a departure margin no root Q difference can pass: the agent plays XLA-like's mapping
    keep = make_agent(f"muzero:{tmp_path},keep=1e9")
    assert keep.config.search.departure_margin == 1e9 and keep.name == "muzero,keep=1e9"
    np.testing.assert_array_equal(keep.solve(scenario, seed=1).offsets, xla_like(scenario))


def test_missing_or_corrupt_checkpoint_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="checkpoint.pt: no mallocMuZero checkpoint"):
        make_agent(f"muzero:{tmp_path}")
    (tmp_path / "checkpoint.pt").write_bytes(b"\x80\x02 not a checkpoint")
    with pytest.raises(ValueError, match=r"checkpoint\.pt: not a readable checkpoint"):
        make_agent(f"muzero:{tmp_path}")
    torch.save({"format": "something-else"}, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match=r"checkpoint\.pt: not a mallocMuZero checkpoint"):
        make_agent(f"muzero:{tmp_path}")


def test_mismatched_weights_are_reported(tmp_path):
    scenario = mlp_scenario(4)
    save_checkpoint(tmp_path, net=fresh_net(scenario), config=SMALL.with_overrides(["network.hidden=64"]))
    with pytest.raises(ValueError, match="weights do not match"):
        load_network(tmp_path)


def test_factory_rejects_bad_specs(tmp_path):
    with pytest.raises(ValueError, match="needs a checkpoint"):
        make_agent("muzero")
    save_checkpoint(tmp_path, net=fresh_net(mlp_scenario(4)), config=SMALL)
    with pytest.raises(ValueError, match="unknown option"):
        make_agent(f"muzero:{tmp_path},simulations=3")
    with pytest.raises(ValueError, match="unknown option"):
        make_agent(f"muzero:{tmp_path},span=wide")
    with pytest.raises(ValueError, match="unknown option"):
        make_agent(f"muzero:{tmp_path},keep=x")
    # options of the other mode are errors, not silently ignored
    for option in ("span=1", "keep=1", "ens=mean"):
        with pytest.raises(ValueError, match="applies to muzero only"):
            make_agent(f"muzero-sim:{tmp_path},{option}")
    for option in ("lead=0", "ptemp=2", "mix=1"):
        with pytest.raises(ValueError, match="applies to muzero-sim only"):
            make_agent(f"muzero:{tmp_path},{option}")
    for option in ("budget_s=0", "budget_s=-1", "budget_s=nan", "budget_s=inf"):
        with pytest.raises(ValueError, match="budget_s"):
            make_agent(f"muzero-sim:{tmp_path},{option}")
    with pytest.raises(ValueError, match="sims must be an integer"):
        make_agent(f"muzero-sim:{tmp_path},sims=0")
    with pytest.raises(ValueError, match="takes a number"):
        make_agent(f"muzero-sim:{tmp_path},lead=big")
    # a lead the Q bonus could not overrule, a temperature of 0, a mix outside [0, 1]
    with pytest.raises(ValueError, match="max_logit_lead .* must be below"):
        make_agent(f"muzero-sim:{tmp_path},lead=0.5")
    with pytest.raises(ValueError, match="prior_temperature"):
        make_agent(f"muzero-sim:{tmp_path},ptemp=0")
    with pytest.raises(ValueError, match="value_mix"):
        make_agent(f"muzero-sim:{tmp_path},mix=2")


def test_departures_score_the_moves_that_leave_xla_like(trap_scenario):
    dep = baseline_script("muzero/departures.py")
    agent = MuZeroAgent(fresh_net(trap_scenario), SMALL, mode="simulator")
    found, info = dep.departures(agent, trap_scenario)
    # the simulator search skips the buffer XLA-like places: 0.68 s instead of XLA-like's 0.86 s
    assert info["offsets"][0] == -1
    assert [d["action"] for d in found] == ["skip"]
    assert found[0]["cost_percent"] == pytest.approx(100 * (0.68 / 0.86 - 1))
    hw = trap_scenario.hardware
    assert found[0]["size_fraction"] == trap_scenario.workload.size[0] / hw.fast_capacity
    keep = MuZeroAgent(fresh_net(trap_scenario), SMALL.with_overrides(["search.departure_margin=1e9"]))
    assert dep.departures(keep, trap_scenario)[0] == []      # plays XLA-like's every move


@pytest.fixture
def two_checkpoints(tmp_path):
    """``(scenario, a, b)``: two checkpoint folders of differently initialised networks."""
    scenario = mlp_scenario(4)
    a, b = tmp_path / "a", tmp_path / "b"
    save_checkpoint(a, net=fresh_net(scenario, seed=3), config=SMALL)
    save_checkpoint(b, net=fresh_net(scenario, seed=4), config=SMALL)
    return scenario, a, b


def test_ensemble_of_checkpoints(two_checkpoints):
    scenario, a, b = two_checkpoints
    single = make_agent(f"muzero:{a}").solve(scenario, seed=1)
    # two copies of one network always agree: the ensemble plays the single agent's mapping
    twice = make_agent(f"muzero:{a}+{a},ens=agree")
    assert twice.name == "muzero-x2,ens=agree" and len(twice.nets) == 2
    same = twice.solve(scenario, seed=1)
    np.testing.assert_array_equal(same.offsets, single.offsets)
    assert same.info["ensemble"] == {"members": 2, "rule": "agree"}
    # two different networks: every move is XLA-like's or both members' own
    pair = make_agent(f"muzero:{a}+{b},ens=agree")
    moves = 0
    for env, legal, action in pair.moves(scenario, seed=1):
        if legal.sum() > 1:
            own = [int(play(m, stack_obs([env.observation()]), config=pair.config.search,
                            num_simulations=pair.num_simulations).action[0]) for m in pair.models]
            assert action == (own[0] if own[0] == own[1] else xla_move(legal))
            moves += 1
    assert moves > 0
    mean = make_agent(f"muzero:{a}+{b}")
    assert mean.config.search.ensemble == "mean"
    evaluate(scenario.workload, mean.solve(scenario, seed=1).offsets, scenario.hardware)   # a valid mapping


def test_ensemble_specs_are_checked(tmp_path):
    scenario = mlp_scenario(4)
    a, b = tmp_path / "a", tmp_path / "b"
    save_checkpoint(a, net=fresh_net(scenario), config=SMALL)
    other_env = SMALL.with_overrides(["env.n_candidates=4"])
    save_checkpoint(b, net=fresh_net(scenario, other_env), config=other_env)
    with pytest.raises(ValueError, match="learned models only"):
        make_agent(f"muzero-sim:{a}+{a}")
    with pytest.raises(ValueError, match="another env config"):
        make_agent(f"muzero:{a}+{b}")
    with pytest.raises(ValueError, match="ens=agree, not ens=mean"):
        make_agent(f"muzero:{a}+{a},keep=1")
    with pytest.raises(ValueError, match="unknown option"):
        make_agent(f"muzero:{a}+{a},ens=vote")
    with pytest.raises(ValueError, match="no mallocMuZero checkpoint"):
        make_agent(f"muzero:{a}+{tmp_path / 'missing'}")
    with pytest.raises(ValueError, match="an empty checkpoint folder"):
        make_agent(f"muzero:{a}+,ens=agree")


def test_bench_keeps_agents_with_clashing_names_apart(two_checkpoints):
    from mallocgym.harness import bench

    scenario, a, b = two_checkpoints
    rows = bench([scenario], ["xla", f"muzero:{a}", f"muzero:{b}"], progress=False)
    # both checkpoints' agents are named "muzero": the bench names them by their specs
    assert [r.agent for r in rows] == ["xla", f"muzero:{a}", f"muzero:{b}"]
    for row, path in zip(rows[1:], (a, b)):
        own = make_agent(f"muzero:{path}").solve(scenario)
        assert row.speedup == pytest.approx(evaluate(scenario.workload, own.offsets, scenario.hardware).speedup)
    with pytest.raises(ValueError, match="two agents are named 'xla'"):
        bench([scenario], ["xla", "xla"], progress=False)


def test_the_published_entry_reproduces_its_leaderboard_mapping():
    """The exported leaderboard ensemble (baselines/muzero) loads and plays exactly the mapping
    its results.json records, on the test scenario it loses most on."""
    root = Path(__file__).resolve().parent.parent
    rows = json.loads((root / "baselines/muzero/default-test/results.json").read_text())
    published = next(r for r in rows if r["agent"] == "muzero-x2" and r["scenario"] == "unet-infer@1/2")
    agent = make_agent(f"muzero:{root}/baselines/muzero/checkpoint+{root}/baselines/muzero/checkpoint-2")
    scenario = resolve("unet-infer@1/2")
    solution = agent.solve(scenario)
    assert solution.offsets.tolist() == published["offsets"]
    assert evaluate(scenario.workload, solution.offsets, scenario.hardware).speedup == pytest.approx(
        published["speedup"], rel=1e-12)
