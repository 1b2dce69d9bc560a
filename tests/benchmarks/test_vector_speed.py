"""Steps per second of the native batched env (mallocgym.vector) against Gymnasium's
SyncVectorEnv, for 1, 8 and 64 games (not in the default test run):

    .venv/bin/python -m pytest tests/benchmarks/test_vector_speed.py --benchmark-only \
        --benchmark-columns=mean,stddev,rounds --benchmark-sort=name

Each round is ``STEPS`` vector steps with random legal actions, over the bundled suite's train
split (autoreset included); ``extra_info["steps_per_second"]`` is ``num_envs * STEPS / mean``.
Figures are in docs/sb3.md.
"""

import gymnasium as gym
import numpy as np
import pytest

import mallocgym  # noqa: F401

STEPS = 50


def _runner(envs, num_envs):
    rng = np.random.default_rng(0)
    noise = rng.random((64, num_envs, envs.single_action_space.n))
    state = {"obs": envs.reset(seed=0)[0], "t": 0}

    def run():
        obs = state["obs"]
        for _ in range(STEPS):
            u = noise[state["t"] % 64]
            state["t"] += 1
            actions = (obs["action_mask"] * u).argmax(axis=1)  # uniform among legal actions
            obs, *_ = envs.step(actions)
        state["obs"] = obs

    return run


@pytest.mark.parametrize("num_envs", [1, 8, 64])
@pytest.mark.parametrize("mode", ["vector_entry_point", "sync"])
def test_vector_steps_per_second(benchmark, mode, num_envs):
    envs = gym.make_vec("MallocGame-v0", num_envs=num_envs, vectorization_mode=mode)
    run = _runner(envs, num_envs)
    run()  # warm-up: numba kernels loaded, scenarios compiled
    benchmark.pedantic(run, rounds=max(5, 320 // num_envs), iterations=1, warmup_rounds=1)
    sps = num_envs * STEPS / benchmark.stats.stats.mean
    benchmark.extra_info["steps_per_second"] = round(sps)
    envs.close()
    assert sps > 0
