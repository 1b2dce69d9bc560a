"""How MallocGame-v1's step time grows with program size, against v0 (docs/speed.md).

    .venv/bin/python tests/benchmarks/v1_step_growth.py [--sizes 1000,10000,50000] [--steps 2000]

Synthetic MLP training steps (``mallocgym.speed.program_with_buffers``) at 1/8 of their peak
live bytes; each version plays its fixed cheap policy (``mallocgym.speed._action``) through
``gym.make`` for ``--steps`` steps from the start of an episode (after a warm-up), and the mean
step time is printed. A v1 step re-simulates the whole program (O(ops + copies)) and scans the
fast-memory chunks opened so far, so it grows with the program; a v0 step does not.

A script beside the pytest-benchmark targets (pytest does not collect it);
tests/test_examples.py runs it once with a tiny size.
"""

from __future__ import annotations

import argparse
import time

from mallocgym.speed import env_step_seconds, program_with_buffers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000", help="comma-separated buffer counts")
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per version and size")
    args = parser.parse_args()
    print("| buffers | ops | segments | v0 step us | v1 step us | v1 / v0 |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.sizes.split(",")):
        scenario = program_with_buffers(n)
        begin = time.perf_counter()
        v0 = env_step_seconds(scenario, args.steps, "MallocGame-v0")
        v1 = env_step_seconds(scenario, args.steps, "MallocGame-v1")
        from mallocgym.sim.v1 import segments_of

        segments = len(segments_of(scenario.workload)[3])
        w = scenario.workload
        print(f"| {w.num_buffers} | {w.num_ops} | {segments} | {v0 * 1e6:.1f} | {v1 * 1e6:.1f} | {v1 / v0:.1f}x |"
              f"  ({time.perf_counter() - begin:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
