"""Speed targets of issue 2, checked here (not in the default test run):

    make bench        # or: .venv/bin/python -m pytest tests/benchmarks --benchmark-only

- ``env.step`` through ``gym.make`` on a ~1,000-buffer program costs at most 3x a CartPole-v1 step
  measured in the same process;
- a numba-only greedy episode over a ~10,000-buffer program takes under 100 ms after warm-up;
- an ``xla-msa`` run over the ~10,000-buffer program takes under 1 s after warm-up (issue
  "xla-msa").
"""

import gymnasium as gym
import pytest

import mallocgym
from steppers import v0_stepper
from mallocgym import sim
from mallocgym.speed import cartpole_step_seconds, env_step_seconds, program_with_buffers


@pytest.fixture(scope="module")
def scenario_1k():
    return program_with_buffers(1000)


@pytest.fixture(scope="module")
def scenario_10k():
    return program_with_buffers(10000)


def test_env_step_vs_cartpole(benchmark, scenario_1k):
    env = gym.make("MallocGame-v0", workload=scenario_1k.workload, hardware=scenario_1k.hardware)
    one_step = v0_stepper(env)
    benchmark.pedantic(one_step, rounds=20000, iterations=1, warmup_rounds=100)
    ratio = env_step_seconds(scenario_1k, 20000) / cartpole_step_seconds(20000)
    benchmark.extra_info["step_ratio_to_cartpole"] = ratio
    assert ratio <= 3.0, f"MallocGame step is {ratio:.2f}x a CartPole step (target <= 3x)"


def test_cartpole_step(benchmark):
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    flip = {"a": 0}

    def one_step():
        flip["a"] ^= 1
        _, _, terminated, truncated, _ = env.step(flip["a"])
        if terminated or truncated:
            env.reset()

    benchmark.pedantic(one_step, rounds=20000, iterations=1, warmup_rounds=100)


def test_greedy_episode_10k_buffers(benchmark, scenario_10k):
    st = sim.compile_scenario(scenario_10k.workload, scenario_10k.hardware)
    sim.run_greedy(st, sim.new_state(st), False)  # warm-up (compiled, cached)
    result = benchmark.pedantic(lambda state: sim.run_greedy(st, state, False),
                                setup=lambda: ((sim.new_state(st),), {}), rounds=7, iterations=1)
    assert result > 0
    assert scenario_10k.workload.num_buffers >= 10000
    assert benchmark.stats.stats.min < 0.100, "greedy episode over 10k buffers must take < 100 ms"


def test_v1_step_vs_v0_step(benchmark, scenario_1k):
    """MallocGame-v1's step on the ~1,000-buffer program costs at most 3x v0's (issue "MallocGame-v1")."""
    from mallocgym.speed import _action

    env = gym.make("MallocGame-v1", workload=scenario_1k.workload, hardware=scenario_1k.hardware)
    k = env.unwrapped.k
    state = {"obs": env.reset(seed=0)[0]}

    def one_step():
        obs, _, done, _, _ = env.step(_action("MallocGame-v1", state["obs"]["action_mask"], k))
        state["obs"] = env.reset()[0] if done else obs

    for _ in range(100):
        one_step()
    benchmark.pedantic(one_step, rounds=5000, iterations=1, warmup_rounds=100)
    ratio = env_step_seconds(scenario_1k, 5000, "MallocGame-v1") / env_step_seconds(scenario_1k, 5000)
    benchmark.extra_info["v1_step_ratio_to_v0"] = ratio
    assert ratio <= 3.0, f"MallocGame-v1 step is {ratio:.2f}x a v0 step (target <= 3x)"


def test_xla_msa_run_10k_buffers(benchmark, scenario_10k):
    """A whole xla-msa run (compile the v1 scenario, plan, mapping) over ~10,000 buffers."""
    from mallocgym.agents.xla_msa import MSAAgent

    agent = MSAAgent()
    agent.solve_v1(scenario_10k)  # warm-up (compiled, cached)
    solution = benchmark.pedantic(lambda: agent.solve_v1(scenario_10k), rounds=5, iterations=1)
    assert solution.info["prefetches"] > 0
    assert benchmark.stats.stats.min < 1.0, "an xla-msa run over 10k buffers must take < 1 s"
