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
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec
from mallocgym.pricing.v0 import evaluate
from mallocgym.heuristics import xla_like
from mallocgym.scenarios import resolve

from conftest import FakeClock, baseline_script, mlp_scenario

torch.set_num_threads(1)

# a version-1 network (MuZero's heads: the published baselines/muzero/checkpoint's kind), small
SMALL = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16",
                                       "network.memory_hidden=8", "network.version=1"])


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
    first = MuZeroAgent(net, SMALL, mode="simulator").solve(scenario, seed=1)
    again = make_agent(f"muzero-sim:{tmp_path}").solve(scenario, seed=1)
    np.testing.assert_array_equal(first.offsets, again.offsets)
    assert first.info["searched_moves"] > 0
    evaluate(scenario.workload, again.offsets, scenario.hardware)   # a valid mapping
    sim = make_agent(f"muzero-sim:{tmp_path},sims=4,budget_s=30")
    assert sim.num_simulations == 4 and sim.mode == "simulator" and sim.budget_s == 30.0
    assert sim.name == "muzero-sim,sims=4,budget_s=30"


def test_settings_come_from_the_checkpoint(tmp_path):
    """Without options each mode plays the settings its checkpoint records."""
    scenario = mlp_scenario(4)
    recorded = SMALL.with_overrides(["simulator.max_logit_lead=0.1", "simulator.prior_temperature=2",
                                     "simulator.value_mix=0.5", "simulator.num_simulations=3"])
    save_checkpoint(tmp_path, net=fresh_net(scenario), config=recorded)
    sim = make_agent(f"muzero-sim:{tmp_path}")
    assert sim.config == recorded and sim.num_simulations == 3
    v2 = SMALL.with_overrides(["network.version=2", "simulator.policy_margin=2", "simulator.gate=0.5"])
    save_checkpoint(tmp_path / "v2", net=fresh_net(scenario, v2), config=v2)
    pol = make_agent(f"muzero-pol:{tmp_path / 'v2'}")
    assert pol.config.simulator.policy_margin == 2.0 and pol.config.simulator.gate == 0.5
    assert make_agent(f"muzero-pol:{tmp_path / 'v2'},margin=1").config.simulator.policy_margin == 1.0


def test_missing_or_corrupt_checkpoint_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="checkpoint.pt: no mallocMuZero checkpoint"):
        make_agent(f"muzero-sim:{tmp_path}")
    (tmp_path / "checkpoint.pt").write_bytes(b"\x80\x02 not a checkpoint")
    with pytest.raises(ValueError, match=r"checkpoint\.pt: not a readable checkpoint"):
        make_agent(f"muzero-pol:{tmp_path}")
    torch.save({"format": "something-else"}, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match=r"checkpoint\.pt: not a mallocMuZero checkpoint"):
        make_agent(f"muzero-sim:{tmp_path}")


def test_mismatched_weights_are_reported(tmp_path):
    scenario = mlp_scenario(4)
    save_checkpoint(tmp_path, net=fresh_net(scenario), config=SMALL.with_overrides(["network.hidden=64"]))
    with pytest.raises(ValueError, match="weights do not match"):
        load_network(tmp_path)


def test_factory_rejects_bad_specs(tmp_path):
    for kind in ("muzero-sim", "muzero-pol"):
        with pytest.raises(ValueError, match="needs a checkpoint"):
            make_agent(kind)
    save_checkpoint(tmp_path, net=fresh_net(mlp_scenario(4)), config=SMALL)
    with pytest.raises(ValueError, match="unknown option"):
        make_agent(f"muzero-sim:{tmp_path},simulations=3")
    with pytest.raises(ValueError, match="unknown option"):
        make_agent(f"muzero-sim:{tmp_path},gate")
    # options of another mode are errors, not silently ignored
    with pytest.raises(ValueError, match="applies to muzero-sim only"):
        make_agent(f"muzero-pol:{tmp_path},gate=0")
    with pytest.raises(ValueError, match="applies to muzero-sim only"):
        make_agent(f"muzero-pol:{tmp_path},top=2")
    with pytest.raises(ValueError, match="applies to muzero-pol only"):
        make_agent(f"muzero-sim:{tmp_path},margin=1")
    with pytest.raises(ValueError, match="applies to muzero-sim only"):
        make_agent(f"muzero-pol:{tmp_path},sims=2")
    for option in ("budget_s=0", "budget_s=-1", "budget_s=nan", "budget_s=inf"):
        with pytest.raises(ValueError, match="budget_s"):
            make_agent(f"muzero-sim:{tmp_path},{option}")
    with pytest.raises(ValueError, match="sims must be an integer"):
        make_agent(f"muzero-sim:{tmp_path},sims=0")
    with pytest.raises(ValueError, match="takes a number"):
        make_agent(f"muzero-sim:{tmp_path},gate=big")
    with pytest.raises(ValueError, match="gate must be finite"):
        make_agent(f"muzero-sim:{tmp_path},gate=inf")


# issue 31: the modes and options issue 18 measured and did not choose are refused, each naming what to use
REMOVED_OPTIONS = {
    "muzero-sim:DIR,tree=uct": "tree=uct .* was removed: level with mcts at equal time; use muzero-sim:DIR or mcts",
    "muzero-sim:DIR,then=uct,budget_s=9": "then= .* was removed: .* use muzero-sim:DIR,budget_s=S or mcts:pace=1",
    "muzero-sim:DIR,share=0.5": "share= .* was removed with then=",
    "muzero-sim:DIR,pace=1": "pace=1 was removed: .* mcts:simulations=1,pace=1,time_limit=S",
    "muzero-sim:DIR,pace_by=length": "pace_by= was removed with pace=",
    "muzero-sim:DIR,width=3": "width= .* was removed: .* use muzero-sim:DIR \\(every legal move\\)",
    "muzero-pol:DIR,ens=agree": "ensembles \\(muzero:A\\+B, ens=\\) were removed: play one checkpoint, muzero-sim:DIR",
    "muzero-sim:A+B": "ensembles .* were removed",
    "muzero-pol:DIR,keep=1": "keep= .* was removed: .* use muzero-pol:DIR,margin=X",
    "muzero-sim:DIR,span=1": "span= .* was removed with muzero:DIR; use muzero-sim:DIR",
    "muzero-sim:DIR,frame=advantage": "frame= .* was removed with muzero:DIR; use muzero-sim:DIR",
    "muzero-sim:DIR,mix=1": "mix= was removed: the checkpoint's simulator.value_mix applies",
    "muzero-sim:DIR,lead=0": "lead= was removed: the checkpoint's simulator.max_logit_lead applies",
    "muzero-sim:DIR,ptemp=2": "ptemp= was removed: the checkpoint's simulator.prior_temperature applies",
    "muzero-sim:DIR,finetune=30": "finetune= .* was removed: it tied mcts at equal wall time; use muzero-sim",
}
REMOVED_MODE = "muzero:DIR \\(MuZero's search over the learned model\\) was removed .* muzero-sim:DIR .* muzero-pol:DIR"


@pytest.mark.parametrize("spec", sorted(REMOVED_OPTIONS))
def test_removed_options_are_refused_naming_the_replacement(spec):
    kind, arg = spec.split(":", 1)
    with pytest.raises(ValueError, match=REMOVED_OPTIONS[spec]):   # before any checkpoint is read
        make_agent(f"{kind}:{arg}")


def test_every_removed_option_has_a_test():
    assert {spec.split(",")[1].split("=")[0] for spec in REMOVED_OPTIONS if "," in spec} == set(agent_module.REMOVED)


@pytest.mark.parametrize("spec", ["muzero", "muzero:DIR", "muzero:DIR,sims=8", "muzero:A+B",
                                  "muzero:baselines/muzero/checkpoint"])
def test_the_learned_search_mode_is_refused_naming_the_replacement(spec):
    with pytest.raises(ValueError, match=REMOVED_MODE):
        make_agent(spec)
    net = fresh_net(mlp_scenario(4))
    with pytest.raises(ValueError, match=REMOVED_MODE):
        MuZeroAgent(net, SMALL, mode="learned")


def test_removed_config_fields_are_refused_and_old_checkpoints_still_load():
    from mallocgym.agents.muzero.config import REMOVED_FIELDS, TRAINING_RECORD

    play_time = {"search.departure_margin", "search.ensemble", "simulator.pace", "simulator.pace_by",
                 "simulator.width", "simulator.tree", "simulator.then", "simulator.then_share", "simulator.keep_xla"}
    assert play_time == set(REMOVED_FIELDS) - TRAINING_RECORD
    assert {"train.teacher_fraction", "train.action_value_weight", "train.dynamics_weight", "search.min_q_span",
            "search.eval_simulations", "search.frame"} <= TRAINING_RECORD
    for field, (recorded, why) in REMOVED_FIELDS.items():
        part, name = field.split(".")
        with pytest.raises(ValueError, match=f"config override '{field}=.*': the field was removed"):
            SMALL.with_overrides([f"{field}=1"])
        # a checkpoint written before issue 31 records the old default: it loads as it was
        data = SMALL.to_dict()
        data[part][name] = recorded
        assert MuZeroConfig.from_dict(data) == SMALL
        assert MuZeroConfig.from_dict(data, saved=True) == SMALL
        other = "something else" if isinstance(recorded, str) else (not recorded if isinstance(recorded, bool)
                                                                    else recorded + 3)
        data[part][name] = other
        with pytest.raises(ValueError, match=f"config field {field} = .* was removed \\(issue 31\\): "):
            MuZeroConfig.from_dict(data)   # a user's config: refused, naming the replacement
        if field in TRAINING_RECORD:   # how a saved checkpoint was trained: it loads
            assert MuZeroConfig.from_dict(data, saved=True) == SMALL
            data[part][name] = [1]   # of another type: refused even so
        with pytest.raises(ValueError, match=f"config field {field} = .* was removed"):
            MuZeroConfig.from_dict(data, saved=True)


def test_training_a_removed_mode_is_refused_naming_the_replacement(tmp_path):
    from mallocgym.agents.muzero.train import main

    for argv, message in ((["--set", "network.version=1"], "version-1 trainer .* was removed .* network.version=2"),
                          (["--set", "train.teacher_fraction=1"], "version-1 trainer .* was removed"),
                          (["--set", "train.dynamics_weight=1"], "learned-dynamics mode .* was removed .* muzero-pol"),
                          (["--ray"], "--ray .* was removed .* train.label_workers=N"),
                          (["--ray-actors", "2"], "--ray .* was removed")):
        with pytest.raises(ValueError, match=message):
            main(["--scenario", "mlp-train-s0@1/8", "--minutes", "1", "--out", str(tmp_path / "run"), *argv])
        assert not (tmp_path / "run").exists()


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
    # a policy margin no predicted gain can pass: the policy plays XLA-like's every move
    v2 = SMALL.with_overrides(["network.version=2", "simulator.policy_margin=1e9"])
    keep = MuZeroAgent(fresh_net(trap_scenario, v2), v2, mode="policy")
    assert dep.departures(keep, trap_scenario)[0] == []


@pytest.fixture
def two_checkpoints(tmp_path):
    """``(scenario, a, b)``: two checkpoint folders of differently initialised networks."""
    scenario = mlp_scenario(4)
    a, b = tmp_path / "a", tmp_path / "b"
    save_checkpoint(a, net=fresh_net(scenario, seed=3), config=SMALL)
    save_checkpoint(b, net=fresh_net(scenario, seed=4), config=SMALL)
    return scenario, a, b


def test_bench_keeps_agents_with_clashing_names_apart(two_checkpoints):
    from mallocgym.harness import bench

    scenario, a, b = two_checkpoints
    rows = bench([scenario], ["xla", f"muzero-sim:{a},sims=2", f"muzero-sim:{b},sims=2"], progress=False)
    # both checkpoints' agents are named "muzero-sim,sims=2": the bench names them by their specs
    assert [r.agent for r in rows] == ["xla", f"muzero-sim:{a},sims=2", f"muzero-sim:{b},sims=2"]
    for row, path in zip(rows[1:], (a, b)):
        own = make_agent(f"muzero-sim:{path},sims=2").solve(scenario)
        assert row.speedup == pytest.approx(evaluate(scenario.workload, own.offsets, scenario.hardware).speedup)
    with pytest.raises(ValueError, match="two agents are named 'xla'"):
        bench([scenario], ["xla", "xla"], progress=False)


PUBLISHED = ("checkpoint", "checkpoint-2", "expert", "labels", "dynamics", "v1")


@pytest.mark.parametrize("name", PUBLISHED)
def test_the_published_checkpoints_load_as_they_were_saved(name):
    """Every checkpoint in baselines/muzero loads (issue 31 removed the trainers of some: their
    training fields are kept as the checkpoint saved them) with the settings it was played with."""
    root = Path(__file__).resolve().parent.parent
    net, config, payload = load_network(root / "baselines/muzero" / name)
    saved = payload["saved_config"]
    assert config.network.version == saved["network"].get("version", 1)
    assert config.train.label_fraction == saved["train"].get("label_fraction", 0.0)
    for part, values in config.to_dict().items():   # every field it records is the value it plays with
        for key, value in values.items():
            if key in saved.get(part, {}):
                recorded = saved[part][key]
                assert (list(recorded) if isinstance(recorded, tuple) else recorded) == \
                    (list(value) if isinstance(value, tuple) else value), (part, key)


def test_the_published_checkpoints_load_and_play():
    """The leaderboard's checkpoint (baselines/muzero/checkpoint, version 1) plays with muzero-sim
    the mapping it played before issue 31 removed the other modes (the number below, from the
    commit before), which is the published entry's row (default-test/, re-run with one agent);
    the retired ensemble entry's rows stay as history and its spec is refused."""
    root = Path(__file__).resolve().parent.parent
    scenario = resolve("strassen2-matmul@1/2")
    solution = make_agent(f"muzero-sim:{root}/baselines/muzero/checkpoint").solve(scenario)
    assert evaluate(scenario.workload, solution.offsets, scenario.hardware).speedup == pytest.approx(
        2.906420068276664, rel=1e-12)
    assert solution.info["simulations"] == 32   # the checkpoint's simulator.num_simulations
    rows = json.loads((root / "baselines/muzero/default-test/results.json").read_text())
    assert any(r["agent"] == "muzero-x2" for r in rows)   # its numbers are kept, as history
    published = [r["speedup"] for r in rows if r["agent"] == "muzero-sim" and r["scenario"] == scenario.name]
    assert published == [pytest.approx(2.906420068276664, rel=1e-12)]
    with pytest.raises(ValueError, match="muzero:DIR .* was removed"):
        make_agent(f"muzero:{root}/baselines/muzero/checkpoint+{root}/baselines/muzero/checkpoint-2")
    with pytest.raises(ValueError, match="ensembles .* were removed"):
        make_agent(f"muzero-sim:{root}/baselines/muzero/checkpoint+{root}/baselines/muzero/checkpoint-2")
