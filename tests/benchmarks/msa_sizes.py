"""Issue 33: ``xla-msa``, its completion from a mid-episode state and the v1 step at real sizes.

Programs (``--kind``):

- ``mlp``: ``mallocgym.speed.program_with_buffers(n)`` (synthetic MLP training step, 7 buffers
  per layer, fast memory 1/8 of the peak live bytes);
- ``trace``: a MiniMalloc-format trace of ``n`` buffers (one write and one read per buffer),
  written as a CSV and read back with ``mallocgym.load``: the five bundled MiniMalloc
  challenging instances (tests/data/minimalloc) laid one after another in time, each copy
  starting halfway through the previous one so neighbouring copies overlap, on the files' own
  1 MiB of fast memory.

What (``--what``, comma-separated):

- ``plan``: one whole ``xla-msa`` run (``MSAAgent().solve_v1``: compile, plan, mapping), after a
  warm-up run on a 1,000-buffer program of the same kind;
- ``complete``: ``heuristics.v1.complete_msa`` from the state halfway through the episode (the
  first half played with MSA's own actions), per real decision;
- ``step``: the mean ``env.step`` of MallocGame-v1 (``gym.make``, MSA's action at each step)
  over a whole episode, and of MallocGame-v0 (best fit, else skip) over the same number of steps.

Usage::

    PYTHONPATH=src python tests/benchmarks/msa_sizes.py --sizes 1000,10000,30000,60000 --what plan,complete
    PYTHONPATH=src python tests/benchmarks/msa_sizes.py --sizes 1000,50000 --what step --kind mlp
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data" / "minimalloc"


def trace_scenario(n_buffers: int):
    """A MiniMalloc-format trace of ``n_buffers`` buffers (see the module docstring)."""
    from mallocgym.scenarios import resolve
    from mallocgym.workloads.io import read_minimalloc_rows

    tiles = [read_minimalloc_rows(DATA / f"{c}.1048576.csv")[0] for c in "ABCDE"]
    lines = ["id,lower,upper,size"]
    t0, i, n = 0, 0, 0
    while n < n_buffers:
        rows = tiles[i % len(tiles)]
        lo = min(r["lower"] for r in rows)
        hi = max(r["upper"] for r in rows)
        for r in rows:
            if n >= n_buffers:
                break
            lines.append(f"{n},{r['lower'] - lo + t0},{r['upper'] - lo + t0},{r['size']}")
            n += 1
        t0 += (hi - lo) // 2
        i += 1
    path = Path(tempfile.mkdtemp()) / f"trace{n_buffers}.1048576.csv"
    path.write_text("\n".join(lines) + "\n")
    return resolve(path)


def scenario(kind: str, n: int):
    from mallocgym.speed import program_with_buffers

    return program_with_buffers(n) if kind == "mlp" else trace_scenario(n)


def time_plan(sc) -> tuple[float, dict]:
    from mallocgym.agents.xla_msa import MSAAgent

    begin = time.perf_counter()
    sol = MSAAgent().solve_v1(sc)
    return time.perf_counter() - begin, sol.info


def time_complete(sc, repeats: int = 1) -> tuple[float, int]:
    """Seconds of ``complete_msa`` from the halfway state (best of ``repeats``) and the real
    decisions it made: ``mallocgym.speed.completion_seconds_per_decision``, as ``bench --speed``."""
    from mallocgym.speed import completion_seconds_per_decision

    per_decision, decisions, _ = completion_seconds_per_decision(sc, repeats)
    return per_decision * max(decisions, 1), decisions


def time_steps(sc, env_id: str, max_steps: int | None = None) -> tuple[float, int]:
    """Mean seconds per ``env.step`` over a whole episode (or ``max_steps``)."""
    import gymnasium as gym

    import mallocgym  # noqa: F401 (registers the envs)

    env = gym.make(env_id, workload=sc.workload, hardware=sc.hardware)
    k = env.unwrapped.k
    obs, _ = env.reset(seed=0)
    total, count, done = 0.0, 0, False
    while not done and (max_steps is None or count < max_steps):
        if env_id == "MallocGame-v1":
            a = env.unwrapped.msa_action()
        else:
            mask = obs["action_mask"]
            a = 0 if mask[0] else k
        begin = time.perf_counter()
        obs, _, done, _, _ = env.step(a)
        total += time.perf_counter() - begin
        count += 1
    return total / max(count, 1), count


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,30000,60000")
    parser.add_argument("--what", default="plan,complete")
    parser.add_argument("--kind", default="mlp,trace")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    what = args.what.split(",")
    for kind in args.kind.split(","):
        warm = scenario(kind, 1000)
        if "plan" in what:
            time_plan(warm)
        if "complete" in what:
            time_complete(warm)
        if "step" in what:
            time_steps(warm, "MallocGame-v1", 300)
            time_steps(warm, "MallocGame-v0", 300)
        for n in sizes:
            sc = scenario(kind, n)
            w = sc.workload
            head = f"{kind:5s} {w.num_buffers:6d} buffers {w.num_ops:6d} ops"
            if "plan" in what:
                ts = [time_plan(sc) for _ in range(args.repeats)]
                t = min(x[0] for x in ts)
                print(f"{head}  plan {t:8.3f} s  {ts[0][1]}", flush=True)
            if "complete" in what:
                t, d = time_complete(sc, args.repeats)
                print(f"{head}  complete-from-half {t:8.3f} s  {d} decisions  {1e6 * t / max(d, 1):8.1f} us/decision",
                      flush=True)
            if "step" in what:
                t1, n1 = time_steps(sc, "MallocGame-v1")
                t0, _ = time_steps(sc, "MallocGame-v0", n1)
                print(f"{head}  v1 step {1e6 * t1:7.1f} us ({n1} steps)  v0 step {1e6 * t0:7.1f} us  "
                      f"ratio {t1 / t0:5.2f}x", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
