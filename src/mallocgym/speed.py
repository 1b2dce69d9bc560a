"""Speed measurements behind ``mallocgym bench --speed`` and ``tests/benchmarks``.

- env step time through ``gym.make`` on a ~1,000-buffer program, as a ratio to a CartPole-v1
  step measured in the same process;
- one numba-only greedy episode (best fit, XLA order) over a ~10,000-buffer program;
- a MallocGame-v1 step on the same ~1,000-buffer program, as a ratio to the v0 step;
- one ``xla-msa`` run (compile, plan, mapping) over the ~10,000-buffer program.
"""

from __future__ import annotations

import platform
import time

import numpy as np

from . import sim
from .hardware import profile
from .scenarios import Scenario, capacity_for
from .workloads.synthetic import mlp_training_step

__all__ = ["program_with_buffers", "env_step_seconds", "cartpole_step_seconds", "greedy_episode_seconds",
           "msa_run_seconds", "measure", "format_report"]


def program_with_buffers(n_buffers: int, seed: int = 0, fraction: float = 0.125) -> Scenario:
    """A synthetic MLP training step with about ``n_buffers`` buffers (7 per layer), at
    ``fraction`` of its peak live bytes."""
    workload = mlp_training_step(seed, layers=max(1, round(n_buffers / 7)))
    hw = profile().with_capacity(capacity_for(workload, fraction))
    return Scenario(f"{workload.name}x{workload.num_buffers}", workload, hw)


def _action(env_id: str, mask, k: int) -> int:
    """A fixed cheap policy: v0 best fit (or skip); v1 ``FAST`` at the best fit, else ``PREFETCH``
    at the preferred start, else ``SLOW`` (so the timed steps issue copies)."""
    if env_id == "MallocGame-v0":
        return 0 if mask[0] else k
    return 1 if mask[1] else (1 + k if mask[1 + k] else 0)


def env_step_seconds(scenario: Scenario, steps: int = 20000, env_id: str = "MallocGame-v0") -> float:
    """Mean seconds per ``env.step`` via ``gym.make`` (fixed policy, resets excluded)."""
    import gymnasium as gym

    env = gym.make(env_id, workload=scenario.workload, hardware=scenario.hardware)
    k = env.unwrapped.k
    obs, _ = env.reset(seed=0)
    for _ in range(200):  # warm-up: compiled kernels, passive checker's first step
        obs, _, done, _, _ = env.step(_action(env_id, obs["action_mask"], k))
        if done:
            obs, _ = env.reset()
    total, count = 0.0, 0
    while count < steps:
        begin = time.perf_counter()
        while True:
            obs, _, done, _, _ = env.step(_action(env_id, obs["action_mask"], k))
            count += 1
            if done or count >= steps:
                break
        total += time.perf_counter() - begin
        if done:
            obs, _ = env.reset()
    return total / count


def cartpole_step_seconds(steps: int = 20000) -> float:
    """Mean seconds per CartPole-v1 ``env.step`` via ``gym.make`` (resets excluded)."""
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    total, count, action = 0.0, 0, 0
    while count < steps:
        begin = time.perf_counter()
        while True:
            action ^= 1
            _, _, terminated, truncated, _ = env.step(action)
            count += 1
            if terminated or truncated or count >= steps:
                break
        total += time.perf_counter() - begin
        env.reset()
    return total / count


def _best_and_median(run, repeats: int, setup=lambda: None) -> tuple[float, float]:
    """Best and median seconds of ``run(setup())`` over ``repeats`` runs (``setup`` untimed),
    after one warm-up run."""
    run(setup())
    times = []
    for _ in range(repeats):
        arg = setup()
        begin = time.perf_counter()
        run(arg)
        times.append(time.perf_counter() - begin)
    return float(np.min(times)), float(np.median(times))


def greedy_episode_seconds(scenario: Scenario, repeats: int = 5) -> tuple[float, float]:
    """Best and median seconds of ``sim.run_greedy`` over a fresh state (after a warm-up run)."""
    st = sim.compile_scenario(scenario.workload, scenario.hardware, "boundedness")
    return _best_and_median(lambda state: sim.run_greedy(st, state, False), repeats, lambda: sim.new_state(st))


def msa_run_seconds(scenario: Scenario, repeats: int = 5) -> tuple[float, float]:
    """Best and median seconds of a whole ``xla-msa`` run (compiling the v1 scenario, MSA's
    plan, the mapping) after a warm-up run."""
    from .agents.xla_msa import MSAAgent

    agent = MSAAgent()
    return _best_and_median(lambda _: agent.solve_v1(scenario), repeats)


def measure(steps: int = 20000) -> dict:
    """All the speed figures as a dict."""
    env_scenario = program_with_buffers(1000)
    big = program_with_buffers(10000)
    cartpole = cartpole_step_seconds(steps)
    step = env_step_seconds(env_scenario, steps)
    best, median = greedy_episode_seconds(big)
    step_v1 = env_step_seconds(env_scenario, max(steps // 4, 1000), "MallocGame-v1")
    msa_best, msa_median = msa_run_seconds(big)
    return {
        "machine": f"{platform.processor() or platform.machine()}, python {platform.python_version()}",
        "env_buffers": env_scenario.workload.num_buffers,
        "env_step_us": step * 1e6,
        "cartpole_step_us": cartpole * 1e6,
        "step_ratio_to_cartpole": step / cartpole,
        "greedy_buffers": big.workload.num_buffers,
        "greedy_episode_ms_best": best * 1e3,
        "greedy_episode_ms_median": median * 1e3,
        "v1_step_us": step_v1 * 1e6,
        "v1_step_ratio_to_v0": step_v1 / step,
        "msa_run_s_best": msa_best,
        "msa_run_s_median": msa_median,
    }


def format_report(r: dict) -> str:
    return (
        f"MallocGame-v0 step ({r['env_buffers']} buffers, via gym.make): {r['env_step_us']:.2f} us\n"
        f"CartPole-v1 step (via gym.make):                 {r['cartpole_step_us']:.2f} us\n"
        f"ratio:                                           {r['step_ratio_to_cartpole']:.2f}x  (target <= 3x)\n"
        f"numba greedy episode, {r['greedy_buffers']} buffers:        best {r['greedy_episode_ms_best']:.1f} ms, "
        f"median {r['greedy_episode_ms_median']:.1f} ms  (target < 100 ms)\n"
        f"MallocGame-v1 step (same program, via gym.make): {r['v1_step_us']:.2f} us, "
        f"{r['v1_step_ratio_to_v0']:.2f}x the v0 step  (target <= 3x)\n"
        f"xla-msa run, {r['greedy_buffers']} buffers (MallocGame-v1):   best {r['msa_run_s_best']:.2f} s, "
        f"median {r['msa_run_s_median']:.2f} s  (target < 1 s)"
    )
