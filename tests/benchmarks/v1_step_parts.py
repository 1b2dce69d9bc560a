"""Where a MallocGame-v1 step's kernel time goes (docs/speed.md, "MallocGame-v1").

    .venv/bin/python tests/benchmarks/v1_step_parts.py [--buffers 1000] [--steps 1500] [--reps 10]

Plays the fixed cheap policy of ``mallocgym.speed`` through ``gym.make`` on a synthetic MLP
training step (``mallocgym.speed.program_with_buffers``) and, before each step, replays that
step ``--reps`` times inside numba from a copy of the state, cumulatively: the copy alone, then
the rules (``v1.apply_rules``), the cost update (``v1.current_time``), the legal moves of the next
choices with the forced positions between (``v1_obs.advance_forced``) and the observation
(``v1_obs.observe``). Differences of the cumulative times give each part's mean per step, with no
Python or argument unboxing in them. Process CPU time, so other jobs on the machine inflate it
less than wall time.

A script beside the pytest-benchmark targets (pytest does not collect it);
tests/test_examples.py runs it once with a tiny size.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
from numba import njit

from mallocgym.features import v1 as v1_obs
from mallocgym.sim import v1
from mallocgym.speed import _action, program_with_buffers

PARTS = ("copy", "rules", "cost update", "legal moves", "observation")


@njit(cache=True)
def _replay(st, src, dst, s, kind, off, pstart, table, obs, reps, peak_live, total_bytes, parts):
    """Copy ``src`` into ``dst`` and play the first ``parts`` parts of a step, ``reps`` times."""
    for _ in range(reps):
        v1.copy_into(src, dst)
        if parts >= 2:
            v1.apply_rules(st, dst, s, kind, off, pstart)
        if parts >= 3:
            v1.current_time(st, dst)
            dst.counters[v1.POS] += 1
        if parts >= 4:
            nxt = v1_obs.advance_forced(st, dst, table)
            if parts >= 5:
                v1_obs.observe(st, dst, nxt, table, obs, peak_live, total_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buffers", type=int, default=1000, help="about this many buffers")
    parser.add_argument("--steps", type=int, default=1500, help="steps of the episode measured")
    parser.add_argument("--reps", type=int, default=10, help="replays of each step and part")
    args = parser.parse_args()
    scenario = program_with_buffers(args.buffers)
    env = gym.make("MallocGame-v1", workload=scenario.workload, hardware=scenario.hardware)
    env_u = env.unwrapped
    obs, _ = env.reset(seed=0)
    c = env_u._compiled
    st = c.static
    scratch = v1.copy_state(env_u._state)
    table = v1_obs.copy_table(env_u._table)
    scratch_obs = v1_obs.Obs(*(a.copy() for a in env_u._obs))
    _replay(st, env_u._state, scratch, 0, v1.SLOW, -1, -1, table, scratch_obs, 1, c.peak_live, c.total_bytes, 5)
    total = np.zeros(len(PARTS))
    steps = 0
    for _ in range(args.steps):
        a = _action("MallocGame-v1", obs["action_mask"], env_u.k)
        move = (env_u.current_segment, int(env_u._table.kind[a]), int(env_u._table.off[a]), int(env_u._table.pstart[a]))
        for parts in range(1, len(PARTS) + 1):
            begin = time.process_time()
            _replay(st, env_u._state, scratch, *move, table, scratch_obs, args.reps, c.peak_live, c.total_bytes, parts)
            total[parts - 1] += time.process_time() - begin
        obs, _, done, _, _ = env.step(a)
        steps += 1
        if done:
            break
    per_step = total / (steps * args.reps) * 1e6
    print(f"{scenario.workload.num_buffers} buffers, {steps} steps, us per step:")
    print(f"  {PARTS[0]:12s} {per_step[0]:8.2f}")
    for i in range(1, len(PARTS)):
        print(f"  {PARTS[i]:12s} {per_step[i] - per_step[i - 1]:8.2f}")
    print(f"  {'kernel':12s} {per_step[-1] - per_step[0]:8.2f}  (all but the copy)")


if __name__ == "__main__":
    main()
