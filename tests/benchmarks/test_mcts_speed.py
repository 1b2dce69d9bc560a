"""mallocMuZero search throughput (not in the default test run):

    .venv/bin/python -m pytest tests/benchmarks/test_mcts_speed.py --benchmark-only

Simulations per second for 16 games x 32 simulations: with the default network (one batched
network call per simulation) and with an exact toy model (the numba tree bookkeeping alone).
``extra_info`` holds the figure.
"""

from fractions import Fraction

import numpy as np
import pytest
import torch

from mallocgym.agents.muzero.game import make_env
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.mcts import NetworkModel, run_search
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec, stack_obs
from mallocgym.hardware import profile
from mallocgym.scenarios import Scenario, capacity_for
from mallocgym.workloads.synthetic import mlp_training_step

torch.set_num_threads(1)
GAMES, SIMS = 16, 32
CONFIG = MuZeroConfig()


def scenario(seed):
    workload = mlp_training_step(seed)
    hw = profile("tpu-v4-like")
    return Scenario(workload.name, workload, hw.with_capacity(capacity_for(workload, Fraction(1, 2), hw.alignment)))


@pytest.fixture(scope="module")
def positions():
    """16 mid-game positions (a few moves of XLA-like-ish play into 16 seeded programs)."""
    envs, observations = [], []
    for seed in range(GAMES):
        env = make_env(scenario(seed), CONFIG)
        obs, _ = env.reset(seed=seed)
        for _ in range(3):
            obs, *_ = env.unwrapped.step(0 if obs["action_mask"][0] else CONFIG.env.n_candidates)
        envs.append(env)
        observations.append(obs)
    torch.manual_seed(0)
    net = MuZeroNet(ObsSpec.from_env(envs[0]), CONFIG.network).eval()
    return envs, stack_obs(observations), NetworkModel(net)


def record(benchmark, sims):
    benchmark.extra_info["games"] = GAMES
    benchmark.extra_info["simulations"] = SIMS
    benchmark.extra_info["simulations_per_s"] = sims / benchmark.stats.stats.mean


def test_learned_model_search_throughput(benchmark, positions):
    _, obs, model = positions
    values, logits, embedding = model.root(obs)
    legal = np.ones((GAMES, CONFIG.env.n_candidates + 1), bool)

    def search():
        return run_search(model, values=values, logits=logits, embedding=embedding, legal=legal,
                          config=CONFIG.search, num_simulations=SIMS)

    search()
    benchmark.pedantic(search, rounds=10, iterations=1, warmup_rounds=1)
    record(benchmark, GAMES * SIMS)


class _Toy:
    def recurrent(self, embedding, actions):
        (state,) = embedding
        n = len(state)
        return np.ones(n), np.zeros(n), np.zeros((n, CONFIG.env.n_candidates + 1)), (state + 1,)


def test_tree_bookkeeping_throughput(benchmark):
    legal = np.ones((GAMES, CONFIG.env.n_candidates + 1), bool)
    zeros = np.zeros(GAMES)

    def search():
        return run_search(_Toy(), values=zeros, logits=np.zeros(legal.shape), embedding=(np.zeros(GAMES),),
                          legal=legal, config=CONFIG.search, num_simulations=SIMS)

    search()
    benchmark.pedantic(search, rounds=20, iterations=1, warmup_rounds=1)
    record(benchmark, GAMES * SIMS)
