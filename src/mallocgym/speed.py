"""Speed measurements behind ``mallocgym bench --speed`` and ``tests/benchmarks``.

- env step time through ``gym.make`` on a ~1,000-buffer program, as a ratio to a CartPole-v1
  step measured in the same process;
- one numba-only greedy episode (best fit, XLA order) over a ~10,000-buffer program;
- a MallocGame-v1 step on the same ~1,000-buffer program, as a ratio to the v0 step;
- one ``xla-msa`` run (compile, plan, mapping) over the ~10,000-buffer program.

:func:`measure_sizes` (``mallocgym bench --speed --sizes 1000,10000,60000``) is the size sweep:
per program size, ``xla-msa``'s plan, a v1 completion's cost per decision from the middle of the
episode (what the search agents and mallocMuZero's labels call), and the mean v1 and v0 steps
over a whole episode, all in one process, with ratios to the smallest size (:func:`format_sizes`).
Every figure of the sweep is the best of :data:`SIZE_REPEATS` runs at every size, in the thread's
CPU time (``time.thread_time``: the process's own work, not the time other processes on the
machine held its core); the wall times of the same runs are reported beside them.
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np

from . import sim
from .hardware import profile
from .scenarios import Scenario, capacity_for
from .workloads.synthetic import mlp_training_step

__all__ = ["program_with_buffers", "env_step_seconds", "cartpole_step_seconds", "greedy_episode_seconds",
           "msa_run_seconds", "measure", "format_report", "episode_step_seconds", "completion_seconds_per_decision",
           "parse_sizes", "measure_sizes", "format_sizes", "size_stages", "MIN_SIZE", "MAX_SIZE",
           "SIZE_REPEATS"]


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


# ---------------------------------------------------------------------------------- size sweep
MIN_SIZE, MAX_SIZE = 100, 1_000_000
"""The program sizes (buffers) :func:`measure_sizes` accepts."""


def parse_sizes(text: str) -> list[int]:
    """``"1000,10000,60000"`` -> ``[1000, 10000, 60000]``; anything else is one ``ValueError``
    naming what is wrong (sizes are whole buffer counts in [MIN_SIZE, MAX_SIZE], each once)."""
    usage = f"a comma-separated list of buffer counts from {MIN_SIZE:,} to {MAX_SIZE:,}, as 1000,10000,60000"
    pieces = [p.strip().replace("_", "") for p in str(text).split(",")]
    if not any(pieces):
        raise ValueError(f"--sizes {text!r}: {usage}")
    sizes = []
    for p in pieces:
        if not p.isdigit():
            raise ValueError(f"--sizes {text!r}: {p!r} is not a whole number; {usage}")
        n = int(p)
        if not MIN_SIZE <= n <= MAX_SIZE:
            raise ValueError(f"--sizes {text!r}: {n} is out of range; {usage}")
        if n in sizes:
            raise ValueError(f"--sizes {text!r}: {n} is given twice; {usage}")
        sizes.append(n)
    return sizes


def episode_step_seconds(scenario: Scenario, env_id: str) -> tuple[float, int, float]:
    """Mean seconds per ``env.step`` via ``gym.make`` over one whole episode (the fixed policy of
    :func:`env_step_seconds`; reset excluded), the episode's steps, and the mean in the thread's
    CPU time. Warm the kernels first."""
    import warnings

    import gymnasium as gym

    with warnings.catch_warnings():  # "MallocGame-v0 is out of date": v0 is timed on purpose
        warnings.simplefilter("ignore", DeprecationWarning)
        env = gym.make(env_id, workload=scenario.workload, hardware=scenario.hardware)
    k = env.unwrapped.k
    obs, _ = env.reset(seed=0)
    steps, done = 0, False
    begin, cpu = time.perf_counter(), time.thread_time()
    while not done:
        obs, _, done, _, _ = env.step(_action(env_id, obs["action_mask"], k))
        steps += 1
    return (time.perf_counter() - begin) / steps, steps, (time.thread_time() - cpu) / steps


def completion_seconds_per_decision(scenario: Scenario, repeats: int = 3,
                                    clock=time.perf_counter) -> tuple[float, int, int]:
    """Seconds per real decision of ``heuristics.v1.complete_msa`` from the position halfway
    through the episode (MSA's own game played to there), best of ``repeats`` on ``clock``; also
    the decisions one completion makes and the game's segments."""
    game = _halfway(scenario)
    runs = [_complete_once(game, clock) for _ in range(repeats)]
    return min(r[0] for r in runs), runs[0][2], int(game[0].seg_use.shape[0])


def _halfway(scenario: Scenario) -> tuple:
    """``(static, state, table)``: MSA's own game on ``scenario`` played to its halfway position."""
    from .features.v1 import advance_forced
    from .heuristics.v1 import new_game, play_action

    st, mid, table, _ = new_game(scenario)
    n = st.seg_use.shape[0]
    s = advance_forced(st, mid, table)
    while s >= 0 and int(mid.counters[sim.v1.POS]) < n // 2:
        s = play_action(st, mid, s, table, table.msa_action[0])
    return st, mid, table


def _complete_once(game: tuple, clock=time.thread_time) -> tuple[float, float, int]:
    """One ``complete_msa`` from a copy of ``game``'s halfway state (:func:`_halfway`): seconds
    per real decision on ``clock`` and in wall time, and the decisions."""
    from .heuristics.v1 import complete_msa

    st, mid, table = game
    state = sim.v1.copy_state(mid)
    begin, wall = clock(), time.perf_counter()
    complete_msa(st, state, table)
    elapsed, wall = clock() - begin, time.perf_counter() - wall
    decisions = max(int(state.counters[sim.v1.CHOSEN] - mid.counters[sim.v1.CHOSEN]), 1)
    return elapsed / decisions, wall / decisions, decisions


SIZE_REPEATS = 3
"""Rounds of :func:`measure_sizes` (each figure is the best of as many runs at every size)."""


def size_stages(n_sizes: int, repeats: int = SIZE_REPEATS) -> int:
    """How many stages :func:`measure_sizes` reports to its ``progress``."""
    return 1 + n_sizes + 4 * repeats


def _warm_sizes() -> None:
    """Compile or load every kernel the sweep times, on a small program."""
    small = program_with_buffers(MIN_SIZE)
    msa_run_seconds(small, repeats=1)
    completion_seconds_per_decision(small, repeats=1)
    for env_id in ("MallocGame-v1", "MallocGame-v0"):
        episode_step_seconds(small, env_id)


def _plan_once(scenario: Scenario) -> tuple[float, float]:
    """Thread CPU seconds and wall seconds of one whole ``xla-msa`` run."""
    from .agents.xla_msa import MSAAgent

    c, w = time.thread_time(), time.perf_counter()
    MSAAgent().solve_v1(scenario)
    return time.thread_time() - c, time.perf_counter() - w


def measure_sizes(sizes: list[int], progress=None, repeats: int = SIZE_REPEATS) -> dict:
    """The size sweep (module docstring) over programs of about ``sizes`` buffers
    (:func:`program_with_buffers`), in one process; ``progress(text)`` is told each stage
    (:func:`size_stages`). Each figure is the best of ``repeats`` runs in the thread's CPU time
    (``*_wall``: the best in wall time), the same number at every size, taken in rounds: each
    round times one figure at every size in turn, so that the sizes a ratio compares are timed
    minutes apart at most, not one after the other's whole series (the other jobs on a shared
    machine come and go)."""
    say = progress or (lambda text: None)
    say("warm-up")
    load = [os.getloadavg()[0]] if hasattr(os, "getloadavg") else []
    _warm_sizes()
    scenarios, games = [], []
    for n in sizes:
        say(f"{n} buffers: building the program and MSA's game to its middle")
        scenarios.append(program_with_buffers(n))
        games.append(_halfway(scenarios[-1]))
    best: dict = {}

    def keep(key, i, value):
        best[key, i] = min(best.get((key, i), float("inf")), value)

    steps = {}
    for r in range(repeats):
        say(f"round {r + 1} of {repeats}: xla-msa plans")
        for i, sc in enumerate(scenarios):
            cpu, wall = _plan_once(sc)
            keep("msa_plan_s", i, cpu)
            keep("msa_plan_wall_s", i, wall)
        say(f"round {r + 1} of {repeats}: v1 completions from mid-episode")
        for i, game in enumerate(games):
            cpu, wall, decisions = _complete_once(game)
            keep("completion_us_per_decision", i, cpu * 1e6)
            keep("completion_wall_us_per_decision", i, wall * 1e6)
            steps["completion_decisions", i] = decisions
        for env_id, tag in (("MallocGame-v1", "v1"), ("MallocGame-v0", "v0")):
            say(f"round {r + 1} of {repeats}: {tag} episodes")
            for i, sc in enumerate(scenarios):
                wall, count, cpu = episode_step_seconds(sc, env_id)
                keep(f"{tag}_step_us", i, cpu * 1e6)
                keep(f"{tag}_step_wall_us", i, wall * 1e6)
                steps[f"{tag}_episode_steps", i] = count
        if load:
            load.append(os.getloadavg()[0])
    rows = []
    for i, (n, sc) in enumerate(zip(sizes, scenarios)):
        row = {"buffers_asked": n, "buffers": sc.workload.num_buffers, "ops": int(sc.workload.num_ops),
               "segments": int(games[i][0].seg_use.shape[0])}
        row.update({key: value for (key, j), value in best.items() if j == i})
        row.update({key: value for (key, j), value in steps.items() if j == i})
        row["v1_to_v0"] = row["v1_step_us"] / row["v0_step_us"]
        rows.append(row)
    return {"machine": f"{platform.processor() or platform.machine()}, python {platform.python_version()}",
            "clock": "thread CPU time (wall time in *_wall)", "repeats": repeats,
            "load_average": load, "sizes": rows}


_SIZE_COLUMNS = (("msa_plan_s", "xla-msa plan s", "{:.3f}"),
                 ("completion_us_per_decision", "v1 completion us/decision", "{:.1f}"),
                 ("v1_step_us", "v1 step us", "{:.1f}"),
                 ("v0_step_us", "v0 step us", "{:.1f}"))


def format_sizes(report: dict) -> str:
    """The sweep as a Markdown table: each figure and its ratio to the smallest program's."""
    rows = report["sizes"]
    base = min(rows, key=lambda r: r["buffers"])
    head = ["buffers", "ops", "segments"]
    for _, title, _ in _SIZE_COLUMNS:
        head += [title, "x"]
    head.append("v1 / v0 step")
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        cells = [f"{r['buffers']:,}", f"{r['ops']:,}", f"{r['segments']:,}"]
        for key, _, fmt in _SIZE_COLUMNS:
            cells += [fmt.format(r[key]), f"{r[key] / base[key]:.2f}"]
        cells.append(f"{r['v1_to_v0']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    load = report.get("load_average") or []
    note = (f"(x: ratio to the {base['buffers']:,}-buffer program; each figure the best of {report.get('repeats', 1)} "
            "runs in the thread's CPU time; completion: heuristics.v1.complete_msa from the position halfway "
            "through the episode, per real decision; steps: mean over one whole episode via gym.make"
            + (f"; load average {min(load):.1f}-{max(load):.1f}" if load else "") + ")")
    return "\n".join(lines) + "\n" + note
