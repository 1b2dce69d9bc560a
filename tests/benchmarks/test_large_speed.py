"""Speed on the large suite (5k-50k-buffer programs) against the bundled ~1k-buffer ones, not in
the default test run (docs/speed.md, "Large programs"):

    .venv/bin/python -m pytest tests/benchmarks/test_large_speed.py --benchmark-only

- ``env.step`` of MallocGame-v0 through ``gym.make`` (best fit, else skip; resets excluded);
- one numba greedy (XLA-like) episode, after a warm-up run.

Rollout and MCTS wall times come from ``mallocgym bench --suite large --agents ...`` (the
commands are in docs/speed.md).
"""

import gymnasium as gym
import pytest

import mallocgym  # noqa: F401  (registers the envs)
from steppers import v0_stepper
from mallocgym import scenarios, sim

BUNDLED = ["lstm-train@1/8", "moe-layer-train@1/8"]


def _names() -> list[str]:
    return BUNDLED + [n for n in scenarios.names("large") if n.endswith(("@1/8", "@16MiB", "@128MiB"))]


@pytest.mark.parametrize("name", _names())
def test_env_step(benchmark, name):
    scenario = scenarios.get(name)
    env = gym.make("MallocGame-v0", workload=scenario.workload, hardware=scenario.hardware)
    one_step = v0_stepper(env)
    benchmark.extra_info["buffers"] = scenario.workload.num_buffers
    benchmark.pedantic(one_step, rounds=5000, iterations=1, warmup_rounds=100)


@pytest.mark.parametrize("name", _names())
def test_greedy_episode(benchmark, name):
    scenario = scenarios.get(name)
    st = sim.compile_scenario(scenario.workload, scenario.hardware)
    sim.run_greedy(st, sim.new_state(st), False)  # warm-up (compiled, cached)
    benchmark.extra_info["buffers"] = scenario.workload.num_buffers
    result = benchmark.pedantic(lambda state: sim.run_greedy(st, state, False),
                                setup=lambda: ((sim.new_state(st),), {}), rounds=5, iterations=1)
    assert result > 0
