"""The simulator mode's search (``muzero-sim``): best-completion tracking, the prior's lead
bound, the wall budget (on a fake clock), batched evaluation, subtree reuse and commitment."""

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import mallocgym.agents.muzero.agent as agent_module
from mallocgym import sim
from mallocgym.agents.muzero.agent import MuZeroAgent, make_env
from mallocgym.agents.muzero.config import MuZeroConfig, SimulatorConfig
from mallocgym.agents.muzero.model import NetworkModel
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec
from mallocgym.agents.muzero.simsearch import SimulatorSearch, bounded_logits
from mallocgym.pricing.v0 import evaluate
from mallocgym.heuristics import xla_like

from conftest import FakeClock, mlp_scenario

torch.set_num_threads(1)

# a version-1 network (MuZero's heads, as the published baselines/muzero/checkpoint), small
SMALL = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16",
                                       "network.memory_hidden=8", "network.version=1"])
ZERO_PRIOR = SMALL.with_overrides(["simulator.max_logit_lead=0.0"])
HALF = Fraction(1, 2)


def fresh_net(scenario, config=SMALL, seed=0):
    torch.manual_seed(seed)
    return MuZeroNet(ObsSpec.from_env(make_env(scenario, config)), config.network)


def new_search(scenario, config=SMALL, *, sims=4, model="net", **kwargs):
    env = make_env(scenario, config)
    env.reset(seed=0)
    if model == "net":
        model = NetworkModel(fresh_net(scenario, config).eval())
    return env, SimulatorSearch(env, model, config, num_simulations=sims, **kwargs)


def tick_per_expansion(monkeypatch, clock, step):
    """Make every expansion of a :class:`SimulatorSearch` take ``step`` fake seconds."""
    real = SimulatorSearch.expand

    def expand(self, node, path):
        real(self, node, path)
        clock.now += step

    monkeypatch.setattr(SimulatorSearch, "expand", expand)


# ------------------------------------------------------------------ best-completion tracking
def test_best_completion_seen_is_returned_on_the_trap(trap_scenario, monkeypatch):
    """Hand-worked: XLA-like places buffer 0 (200 B, all of fast memory) for 0.86 s; skipping it
    and letting XLA-like place buffers 1 and 2 gives 0.68 s. The root's expansion runs that
    completion; a budget that ends right after it must still return 0.68 s, the best completion
    seen, not the 0.86 s of the position it stopped in."""
    clock = FakeClock()
    tick_per_expansion(monkeypatch, clock, 1.0)
    agent = MuZeroAgent(fresh_net(trap_scenario), ZERO_PRIOR, mode="simulator", budget_s=0.5, clock=clock)
    solution = agent.solve(trap_scenario)
    assert solution.info["expansions"] == 1 and solution.info["budget_exhausted"] is True
    assert solution.info["completions"] == 2       # XLA-like's own, then the skip's
    assert evaluate(trap_scenario.workload, solution.offsets, trap_scenario.hardware).time == pytest.approx(0.68)
    assert solution.offsets.tolist() == [-1, 0, 100] or solution.offsets.tolist() == [-1, 100, 0]
    assert solution.info["kept_xla"] is False


@pytest.mark.parametrize("config", [ZERO_PRIOR, SMALL])
def test_result_is_at_least_as_good_as_every_completion_run(config, monkeypatch):
    scenario = mlp_scenario(4, fraction=HALF)
    seen = []
    real = SimulatorSearch._complete

    def recording(self, state):
        t = real(self, state)
        seen.append(t)
        return t

    monkeypatch.setattr(SimulatorSearch, "_complete", recording)
    agent = MuZeroAgent(fresh_net(scenario, config), config, mode="simulator", num_simulations=3)
    solution = agent.solve(scenario)
    time = evaluate(scenario.workload, solution.offsets, scenario.hardware).time
    assert len(seen) == solution.info["completions"] > 50
    assert time == pytest.approx(min(seen), rel=1e-12)
    assert time <= evaluate(scenario.workload, xla_like(scenario), scenario.hardware).time * (1 + 1e-12)


# ------------------------------------------------------------------ the prior
def test_bounded_logits_arithmetic():
    logits = np.array([9.7, 0.0, -3.0, 50.0, 1.0])
    legal = np.array([True, True, True, False, True])
    z = bounded_logits(logits, legal, temperature=1.0, max_lead=2.5)
    assert z[3] == -np.inf                              # illegal (its 50 is not the top)
    np.testing.assert_allclose(z[legal], [0.0, -2.5, -2.5, -2.5])
    z = bounded_logits(logits, legal, temperature=4.0, max_lead=2.5)
    np.testing.assert_allclose(z[legal], [0.0, -2.425, -2.5, -2.175])   # 9.7/4 = 2.425 ahead of 0
    z = bounded_logits(logits, legal, temperature=1.0, max_lead=0.0)
    np.testing.assert_array_equal(z[legal], 0.0)        # the prior zeroed
    lead = z[legal].max() - z[legal].min()
    assert lead == 0.0
    rng = np.random.default_rng(0)
    for _ in range(20):
        raw = rng.normal(scale=20, size=17)
        mask = rng.random(17) < 0.6
        mask[-1] = True
        z = bounded_logits(raw, mask, temperature=rng.uniform(0.5, 3), max_lead=0.3)
        assert z[mask].max() == 0.0 and z[mask].min() >= -0.3 - 1e-12
        order = np.argsort(-raw[mask], kind="stable")
        assert np.all(np.diff(z[mask][order]) <= 1e-12)          # the prior's order is kept


def test_q_overrules_the_prior_only_when_the_lead_is_bounded(trap_scenario):
    """Two children, equal visits: ``a`` has the node's best Q (qn 1), ``b`` its worst (qn 0) and
    a logit lead of 9.7 (the trained checkpoint's median). The Q bonus between them is
    ``s = (c_visit + max N) * c_scale = (5 + 2) * 0.1 = 0.7``: below 9.7, so the raw prior wins;
    above the bound 0.25, so Q wins once the lead is bounded."""
    _, search = new_search(trap_scenario, ZERO_PRIOR, model=None)
    children = [SimpleNamespace(count=2, visits=3, total=3 * 10.0),   # a: mean Q 10
                SimpleNamespace(count=2, visits=3, total=3 * 4.0)]    # b: mean Q 4
    raw = np.array([0.0, 9.7])
    node = SimpleNamespace(children=children, prior=raw - raw.max())
    assert search.select_child(node) == 1                  # unbounded: the prior's favourite
    node.prior = bounded_logits(raw, np.ones(2, bool), temperature=1.0, max_lead=0.25)
    assert search.select_child(node) == 0                  # bounded: the best Q
    with pytest.raises(ValueError, match="must be below simulator.c_visit"):
        SimulatorConfig(max_logit_lead=0.5)                 # = c_visit * c_scale: not below
    assert SimulatorConfig(max_logit_lead=2.0, c_visit=50.0).max_logit_lead == 2.0


def test_prior_zeroed_with_exact_values_never_calls_the_network(trap_scenario):
    scenario = mlp_scenario(4)
    _, search = new_search(scenario, ZERO_PRIOR, model=None)
    while not search.root.terminal:
        search.move()
    assert search.network_calls == 0 and search.expansions > 0
    with pytest.raises(ValueError, match="given no model"):
        new_search(scenario, SMALL, model=None)
    _, guided = new_search(scenario, SMALL)
    while not guided.root.terminal:
        guided.move()
    assert guided.network_calls > 0


# ------------------------------------------------------------------ the wall budget
@pytest.mark.parametrize("budget", [0.05, 0.125])
def test_simulator_budget_stops_within_one_expansion(budget, monkeypatch):
    scenario = mlp_scenario(4, fraction=HALF)
    step = 0.01
    free = MuZeroAgent(fresh_net(scenario), SMALL, mode="simulator", num_simulations=4).solve(scenario)
    clock = FakeClock()
    tick_per_expansion(monkeypatch, clock, step)
    agent = MuZeroAgent(fresh_net(scenario), SMALL, mode="simulator", num_simulations=4, budget_s=budget,
                        clock=clock)
    solution = agent.solve(scenario)
    assert free.info["expansions"] > solution.info["expansions"]   # the budget did cut the search
    assert solution.info["budget_exhausted"] is True
    assert budget <= clock.now <= budget + step + 1e-9                 # within the budget plus one step
    assert solution.info["expansions"] == round(clock.now / step)
    evaluate(scenario.workload, solution.offsets, scenario.hardware)     # a valid mapping


def test_policy_budget_plays_xla_like_once_spent(monkeypatch):
    """Each policy decision takes 0.01 fake s; a 0.035 s budget allows four (the clock is read
    before each: 0, 0.01, 0.02, 0.03), then every move is XLA-like's."""
    scenario = mlp_scenario(4)
    v2 = SMALL.with_overrides(["network.version=2"])

    def agent_on(clock):
        real = agent_module.policy_move

        def slow_policy(*args, **kwargs):
            clock.now += 0.01
            return real(*args, **kwargs)

        monkeypatch.setattr(agent_module, "policy_move", slow_policy)
        return MuZeroAgent(fresh_net(scenario, v2), v2, mode="policy", budget_s=0.035, clock=clock)

    clock = FakeClock()
    solution = agent_on(clock).solve(scenario)
    assert solution.info["searched_moves"] == 4 and solution.info["budget_exhausted"] is True
    assert 0.035 <= clock.now <= 0.035 + 0.01
    clock = FakeClock()
    moves = list(agent_on(clock).moves(scenario))
    searched = [i for i, (_, legal, _) in enumerate(moves) if legal.sum() > 1]
    assert len(searched) > 4
    for _, legal, action in moves[searched[4]:]:
        assert action == (0 if legal[0] else len(legal) - 1)


# ------------------------------------------------------------------ batching and observations
@pytest.mark.parametrize("mix", [1.0, 0.5])
def test_batched_children_evaluation_equals_one_by_one(mix):
    scenario = mlp_scenario(4, fraction=HALF)
    config = SMALL.with_overrides([f"simulator.value_mix={mix}"])
    env, search = new_search(scenario, config)
    search.expand(search.root, [])
    children = [c for c in search.root.children if c.raw_logits is not None]
    assert len(children) >= 3
    batched = [(c.raw_logits.copy(), c.value) for c in children]
    calls = search.network_calls
    for c in children:
        c.raw_logits = None
        c.value = c.total = search.exact_value(c.final)
        search.evaluate([c])
    assert search.network_calls == calls + len(children)
    for (logits, value), c in zip(batched, children):
        np.testing.assert_allclose(c.raw_logits, logits, rtol=0, atol=1e-5)
        assert c.value == pytest.approx(value, abs=1e-5)
    if mix == 1.0:
        assert all(c.value == search.exact_value(c.final) for c in children)
    else:
        assert any(abs(c.value - search.exact_value(c.final)) > 1e-6 for c in children)


def test_search_observations_are_the_envs():
    scenario = mlp_scenario(4, fraction=HALF)
    env, search = new_search(scenario)
    u = env.unwrapped
    search.expand(search.root, [])
    for action, child in zip(search.root.actions.tolist(), search.root.children):
        snap = u.clone_state()
        obs, *_ = u.step(action)
        search._observe(child, 0)
        for key, value in obs.items():
            np.testing.assert_array_equal(search.obs_batch[key][0].reshape(-1), value, err_msg=key)
        np.testing.assert_array_equal(u.sim_state.offsets, child.state.offsets)
        u.restore_state(snap)


# ------------------------------------------------------------------ the tree between moves
def test_commit_to_best_child_and_reuse_its_subtree():
    scenario = mlp_scenario(4, fraction=HALF)
    _, search = new_search(scenario, ZERO_PRIOR, model=None, sims=6)
    decisions = 0
    while not search.root.terminal and decisions < 5:
        root = search.root
        before = search.expansions
        action = search.move()
        if len(root.children) <= 1:
            continue
        decisions += 1
        assert search.expansions > before
        chosen = int(np.flatnonzero(root.actions == action)[0])
        assert search.root is root.children[chosen]                       # the subtree is kept
        assert root.children[chosen].best == min(c.best for c in root.children)
        assert root.children[chosen].best == search.best_time            # the incumbent is below the root
        decided = search.st.order[: int(search.root.state.counters[sim.STEP])]
        assert np.array_equal(search.best_offsets[decided], search.root.state.offsets[decided])
    assert decisions == 5
    # a reused root keeps the statistics of the simulations that went through it
    reused = search.root
    assert reused.count > 0 and reused.actions is not None


def test_every_legal_action_is_a_child():
    scenario = mlp_scenario(4, fraction=HALF)
    env, search = new_search(scenario, ZERO_PRIOR, model=None)
    obs = env.unwrapped.observation()
    while not search.root.terminal:
        root = search.root
        legal = np.flatnonzero(obs["action_mask"])
        if obs["buffer"][5] <= 0:        # prune_no_benefit: a buffer that saves nothing stays slow
            legal = legal[-1:]
        action = search.move()
        assert root.actions.tolist() == legal.tolist()
        obs, *_ = env.unwrapped.step(action)
    assert np.array_equal(env.unwrapped.offsets, search.best_offsets)
    assert float(env.unwrapped.sim_state.totals[sim.TIME]) == pytest.approx(search.best_time, rel=1e-12)


def test_bad_budgets_and_settings_are_refused(trap_scenario):
    net = fresh_net(trap_scenario)
    for bad in (0, -1.0, float("nan"), float("inf"), "5"):
        with pytest.raises(ValueError, match="budget_s must be a finite number of seconds > 0"):
            MuZeroAgent(net, SMALL, mode="simulator", budget_s=bad)
    agent = MuZeroAgent(net, SMALL, mode="simulator")
    agent.set_budget(2)
    assert agent.budget_s == 2.0
    agent.set_budget(None)
    assert agent.budget_s is None
    with pytest.raises(ValueError, match="num_simulations must be >= 1"):
        MuZeroAgent(net, SMALL, mode="simulator", num_simulations=0)
    with pytest.raises(ValueError, match="simulator.keep_xla=false': the field was removed"):
        SMALL.with_overrides(["simulator.keep_xla=false"])
    with pytest.raises(ValueError, match="prior_temperature"):
        SimulatorConfig(prior_temperature=float("inf"))
    with pytest.raises(ValueError, match="max_logit_lead"):
        SimulatorConfig(max_logit_lead=-0.1)
