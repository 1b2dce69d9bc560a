"""mallocMuZero's UCT mode (``muzero-sim:DIR,tree=uct``): the occupancy image rebuilt from a
state, the network's move order, the ordered game, the agent (plain ``mcts`` when the order is
the game's own), its budget and pace, and the options it refuses."""

from fractions import Fraction

import numpy as np
import pytest
import torch

import mallocgym.agents.muzero.agent as agent_module
from mallocgym.features import v0 as features
from mallocgym.agents.muzero.agent import MuZeroAgent, make_env
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.mcts import NetworkModel
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec
from mallocgym.agents.muzero.ordered import NetworkOrder, OrderedGame
from mallocgym.agents.search import MCTSAgent, MCTSConfig, V0Game
from mallocgym.pricing.v0 import evaluate
from mallocgym.heuristics import xla_like

from conftest import FakeClock, mlp_scenario

torch.set_num_threads(1)

SMALL = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16",
                                       "network.memory_hidden=8"])
UCT = SMALL.with_overrides(["simulator.tree=uct"])
HALF = Fraction(1, 2)


def fresh_net(scenario, config=SMALL, seed=0):
    torch.manual_seed(seed)
    return MuZeroNet(ObsSpec.from_env(make_env(scenario, config)), config.network)


class StubModel:
    """A network whose advantage head (version 2) or logits (version 1) return ``scores``."""

    def __init__(self, scores):
        self.scores = np.asarray(scores, np.float64)

    def expert(self, batch):
        return None, None, self.scores[None]

    def evaluate(self, batch, values=True):
        return None, self.scores[None]


def position_with_choices(scenario, at_least=5):
    """An env at the first position with ``at_least`` candidates or more (reached by XLA-like's
    best-fit moves), and its game's moves."""
    env = make_env(scenario, SMALL)
    env.reset(seed=0)
    u = env.unwrapped
    game = V0Game(u.static, int(u.k))
    while True:
        moves, base = game.legal(u.sim_state)
        if len(moves) - 1 >= at_least:
            return env, game, moves, base
        env.step(0 if len(moves) > 1 else int(u.k))


def test_paint_placed_rebuilds_the_envs_occupancy_image():
    """After a mix of placements and skips the image painted from the state alone equals the one
    the env built step by step (same buffers, same decision order: exactly equal)."""
    scenario = mlp_scenario(1, fraction=HALF)
    env = make_env(scenario, SMALL)
    env.reset(seed=0)
    u = env.unwrapped
    rng = np.random.default_rng(0)
    image = np.zeros(tuple(u.memory_bins))
    placed = 0
    for _ in range(30):
        legal = np.flatnonzero(u.action_masks())
        action = int(rng.choice(legal))
        placed += action < u.k
        _, _, done, _, _ = env.step(action)
        features.paint_placed(u.static, u.sim_state, image)
        np.testing.assert_array_equal(image, u.kernel_arrays().image)
        if done:
            break
    assert placed > 0 and image.sum() > 0


@pytest.mark.parametrize("version2", [True, False])
def test_network_order_puts_xla_likes_move_first_then_the_networks_ranking(version2):
    """Hand-worked on ``count`` candidates and skip (action K): scores 3 for candidate 2, 2 for
    candidate 1 and for skip (a tie: the game's order, candidate 1 first), 0 elsewhere. With
    XLA-like's move at index 0 the order is 0, 2, 1, skip, then 3, 4, ... in the game's order."""
    env, game, moves, base = position_with_choices(mlp_scenario(1, fraction=HALF))
    k, count = int(env.unwrapped.k), len(moves) - 1
    scores = np.zeros(k + 1)
    scores[2], scores[1], scores[k] = 3.0, 2.0, 2.0
    order = NetworkOrder(env, StubModel(scores), version2=version2)
    assert base == 0
    assert order(env.unwrapped.sim_state, moves, base) == [0, 2, 1, count] + list(range(3, count))
    assert order.calls == 1
    # XLA-like's move stays first even when the network ranks it last
    scores[0] = -5.0
    assert order(env.unwrapped.sim_state, moves, base)[0] == 0
    # a forced position (skip only) costs no network call
    assert order(env.unwrapped.sim_state, [-1], 0) == [0] and order.calls == 2


def test_ordered_game_lists_the_moves_in_the_networks_order():
    env, game, moves, base = position_with_choices(mlp_scenario(1, fraction=HALF))
    k = int(env.unwrapped.k)
    scores = np.arange(k + 1, dtype=np.float64)   # the higher the action, the better: skip first
    ordered = OrderedGame(game, NetworkOrder(env, StubModel(scores), version2=True))
    listed, index = ordered.legal(env.unwrapped.sim_state)
    assert index == 0 and listed[0] == moves[base]
    assert listed[1] == -1                        # skip (action K) ranked highest after XLA-like's move
    assert listed[2:] == [moves[i] for i in range(len(moves) - 2, 0, -1)]
    assert sorted(listed) == sorted(moves)
    assert ordered.root is game.root and ordered.done is not None   # the rest is the game's


@pytest.mark.parametrize("sims", [1, 3])
def test_tree_uct_in_the_games_own_order_is_plain_mcts(sims, monkeypatch):
    """With the network's order replaced by the game's own, ``tree=uct`` plays exactly
    ``mcts:simulations=N`` (same search, constants and completions): the same mapping and
    simulation count. The order is the only thing the mode changes."""
    scenario = mlp_scenario(3, fraction=HALF)
    monkeypatch.setattr(NetworkOrder, "__call__", lambda self, state, moves, base: list(range(len(moves))))
    mine = MuZeroAgent(fresh_net(scenario), UCT, mode="simulator", num_simulations=sims).solve(scenario)
    plain = MCTSAgent(MCTSConfig(simulations=sims)).solve(scenario)
    np.testing.assert_array_equal(mine.offsets, plain.offsets)
    assert mine.info["simulations_run"] == plain.info["simulations"]
    assert mine.info["completions"] == plain.info["completions"] and mine.info["tree"] == "uct"


def test_tree_uct_with_a_network_is_never_worse_than_xla_like():
    scenario = mlp_scenario(4, fraction=HALF)
    solution = MuZeroAgent(fresh_net(scenario), UCT, mode="simulator", num_simulations=4).solve(scenario)
    xla = evaluate(scenario.workload, xla_like(scenario), scenario.hardware).time
    assert evaluate(scenario.workload, solution.offsets, scenario.hardware).time <= xla * (1 + 1e-12)
    assert 0 < solution.info["network_calls"] <= solution.info["simulations_run"] + scenario.workload.num_buffers


def tick_per_completion(monkeypatch, clock, step):
    """Make every XLA-like completion the UCT search runs take ``step`` fake seconds."""
    real = V0Game.complete

    def complete(self, state):
        clock.now += step
        return real(self, state)

    monkeypatch.setattr(V0Game, "complete", complete)


@pytest.mark.parametrize("budget", [0.5, 1.0])
def test_tree_uct_pace_spends_the_budget(budget, monkeypatch):
    """Each completion takes 0.001 fake s. One simulation per decision ends the game well inside
    the budget; with pace the same search runs more, ends within the budget plus one
    simulation's time, and returns a mapping no worse than XLA-like's."""
    scenario = mlp_scenario(4, fraction=HALF)
    clock, step = FakeClock(), 0.001
    tick_per_completion(monkeypatch, clock, step)
    fixed = MuZeroAgent(fresh_net(scenario), UCT, mode="simulator", num_simulations=1, budget_s=budget,
                        clock=clock).solve(scenario)
    assert clock.now < budget / 4
    clock.now = 0.0
    paced = MuZeroAgent(fresh_net(scenario), UCT.with_overrides(["simulator.pace=true"]), mode="simulator",
                        num_simulations=1, budget_s=budget, clock=clock).solve(scenario)
    assert paced.info["simulations_run"] > 2 * fixed.info["simulations_run"]
    assert budget / 2 < clock.now <= budget + step + 1e-9
    xla = evaluate(scenario.workload, xla_like(scenario), scenario.hardware).time
    assert evaluate(scenario.workload, paced.offsets, scenario.hardware).time <= xla * (1 + 1e-12)


def test_tree_uct_refusals():
    scenario = mlp_scenario(4, fraction=HALF)
    paced = UCT.with_overrides(["simulator.pace=true"])
    with pytest.raises(ValueError, match="simulator.pace spends a wall budget"):
        MuZeroAgent(fresh_net(scenario), paced, mode="simulator").solve(scenario)
    for option in ("width=3", "gate=0", "mix=0.5", "lead=0", "ptemp=2", "finetune=5"):
        key = option.partition("=")[0]
        with pytest.raises(ValueError, match=f"tree=uct .* takes sims=, pace= and budget_s= only, not {key}=$"):
            agent_module._parse("muzero-sim", f"DIR,tree=uct,{option}")
    with pytest.raises(ValueError, match=r"unknown option 'tree=beam' \(tree is one of gumbel\|uct\)"):
        agent_module._parse("muzero-sim", "DIR,tree=beam")
    with pytest.raises(ValueError, match="applies to muzero-sim only"):
        agent_module._parse("muzero-pol", "DIR,tree=uct")
    assert agent_module._parse("muzero-sim", "DIR,tree=uct,pace=1,sims=2")[1:] == (
        {"num_simulations": 2}, ["simulator.tree=uct", "simulator.pace=true"])
    with pytest.raises(ValueError, match="simulator.tree must be one of gumbel, uct"):
        SMALL.with_overrides(["simulator.tree=beam"])
    with pytest.raises(ValueError, match="has no width or gate"):
        SMALL.with_overrides(["simulator.tree=uct", "simulator.width=3"])
    from mallocgym.agents.muzero.simsearch import SimulatorSearch

    env = make_env(scenario, UCT)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="SimulatorSearch plays simulator.tree = gumbel"):
        SimulatorSearch(env, None, UCT, num_simulations=1)


# ------------------------------------------------------------------ then=: a second search
THEN_UCT = SMALL.with_overrides(["simulator.then=uct"])


def test_then_starts_the_second_search_from_the_first_ones_best_mapping(monkeypatch):
    """The second search's incumbent starts at the Gumbel tree's best mapping, so the answer is
    never worse than the first search's; on a fake clock the first gets half the budget (its
    deadline is start + budget / 2) and the whole game ends within the budget plus one
    simulation."""
    scenario = mlp_scenario(4, fraction=HALF)
    clock, step = FakeClock(), 0.001
    tick_per_completion(monkeypatch, clock, step)
    deadlines = []
    real_moves = MuZeroAgent.moves

    def moves(self, scenario, *, seed=0, start=None, budget_s=None):
        deadlines.append((start, budget_s))
        return real_moves(self, scenario, seed=seed, start=start, budget_s=budget_s)

    monkeypatch.setattr(MuZeroAgent, "moves", moves)
    budget = 0.4
    solution = MuZeroAgent(fresh_net(scenario), THEN_UCT, mode="simulator", num_simulations=1, budget_s=budget,
                           clock=clock).solve(scenario)
    assert deadlines == [(0.0, pytest.approx(budget / 2))]
    then = solution.info["then"]
    assert then["search"] == "uct" and then["share"] == 0.5 and then["simulations_run"] > 0
    assert clock.now <= budget + step + 1e-9
    mine = evaluate(scenario.workload, solution.offsets, scenario.hardware).time
    first = MuZeroAgent(fresh_net(scenario), SMALL, mode="simulator", num_simulations=1).solve(scenario)
    # the first stage alone, run to the same end as in the composite (no budget: 1 sim per move
    # ends well inside budget / 2 here, so it is the same game)
    first_time = evaluate(scenario.workload, first.offsets, scenario.hardware).time
    assert mine <= first_time * (1 + 1e-12)
    assert solution.info["improved_by_then"] == (mine < first_time * (1 - 1e-12))


def test_then_refusals():
    scenario = mlp_scenario(4, fraction=HALF)
    with pytest.raises(ValueError, match="splits a wall budget between two searches"):
        MuZeroAgent(fresh_net(scenario), THEN_UCT, mode="simulator").solve(scenario)
    with pytest.raises(ValueError, match="share= is the second search's share of the budget"):
        agent_module._parse("muzero-sim", "DIR,share=0.3")
    with pytest.raises(ValueError, match="finetune= and then= do not combine"):
        agent_module._parse("muzero-sim", "DIR,then=uct,finetune=5")
    with pytest.raises(ValueError, match=r"unknown option 'then=beam' \(then is one of none\|uct\|mcts\)"):
        agent_module._parse("muzero-sim", "DIR,then=beam")
    assert agent_module._parse("muzero-sim", "DIR,then=mcts,share=0.25")[2] == [
        "simulator.then=mcts", "simulator.then_share=0.25"]
    for bad in ("0.0", "1.0"):
        with pytest.raises(ValueError, match=r"simulator.then_share must be in \(0, 1\)"):
            SMALL.with_overrides(["simulator.then=uct", f"simulator.then_share={bad}"])
    with pytest.raises(ValueError, match="simulator.then follows the Gumbel tree"):
        SMALL.with_overrides(["simulator.then=uct", "simulator.tree=uct"])
    from mallocgym.agents.muzero.simsearch import SimulatorSearch

    env = make_env(scenario, THEN_UCT)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="a harvesting search .* plays this one only"):
        SimulatorSearch(env, NetworkModel(fresh_net(scenario).eval()), THEN_UCT, num_simulations=1, harvest=True)
