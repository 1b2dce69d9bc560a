"""The tuning set of the decision search (docs/pack.md, "How the restarts were chosen"):

    PYTHONPATH=src .venv/bin/python tests/benchmarks/pack_tuning.py [time_limit_s | nodes=N] [hard | n/seed ...] \
        [twins=LETTERS] [layer_share=F]

42 planted instances, ``planted(seed, n_buffers=n)``: seeds 100-111 at 128 and 256 buffers
(zero slack), seeds 100-111 at 200 buffers with 10 % of the buffers removed and seeds 100-105
at 160 buffers with 3 % removed (slack in places; the removed buffers are drawn by
``numpy.random.default_rng(seed + 1_000_000)``). The search's settings and inference are tuned
here only; the targets (seeds 0-4 and MiniMalloc's A-E, tests/benchmarks/test_pack_speed.py)
are measured once afterwards. Prints one row per instance and the totals.

``hard``: 50 more zero-slack instances (issue 33, item 3, once the 42 were all packed in a
few thousand nodes), the seeds 112-299 at 128 and 256 buffers that the search of commit
9c830f0 did not pack within 5,000 nodes (within 2 s: 9 at 128 buffers, 41 at 256).

``nodes=N`` gives each instance a budget of N nodes (those the failed-state table does not
answer) instead of a time limit (600 s), so that the counts do not depend on the machine's load;
``twins=LETTERS`` sets ``mallocgym.sim.pack.TWINS`` (the runs keeping stacked twins in order),
``layer_share=F`` ``mallocgym.sim.pack.LAYER_SHARE`` (the bottom-layer restarts' share; 0: none).
"""

import sys
import time

import numpy as np

from mallocgym.scenarios import planted
from mallocgym.sim import pack as P

SET = ([(128, s, 0.0) for s in range(100, 112)] + [(256, s, 0.0) for s in range(100, 112)]
       + [(200, s, 0.10) for s in range(100, 112)] + [(160, s, 0.03) for s in range(100, 106)])


HARD = ([(128, s, 0.0) for s in (136, 168, 169, 173, 175, 188, 194, 225, 245)]
        + [(256, s, 0.0) for s in (112, 117, 120, 121, 122, 124, 127, 149, 150, 158, 163, 168, 173, 175, 178, 184,
                                   187, 188, 190, 195, 196, 203, 204, 206, 219, 228, 230, 234, 241, 245, 248, 251,
                                   256, 262, 266, 272, 281, 282, 290, 291, 294)])


def instance(n: int, seed: int, removed: float):
    scenario, _ = planted(seed, n_buffers=n)
    w = scenario.workload
    keep = np.arange(n)
    if removed > 0:
        rng = np.random.default_rng(seed + 1_000_000)
        keep = np.sort(rng.choice(n, size=n - int(round(removed * n)), replace=False))
    return w.start[keep], w.end[keep], w.size[keep], int(scenario.hardware.fast_capacity)


def main(argv) -> None:
    for a in [a for a in argv if a.startswith("twins=")]:
        P.TWINS = a.partition("=")[2]
        argv = [b for b in argv if b != a]
    for a in [a for a in argv if a.startswith("layer_share=")]:
        P.LAYER_SHARE = float(a.partition("=")[2])
        argv = [b for b in argv if b != a]
    limit, max_nodes = 4.0, None
    if argv and argv[0].startswith("nodes="):
        limit, max_nodes = 600.0, int(argv[0].partition("=")[2])
    elif argv:
        limit = float(argv[0])
    chosen = SET
    if argv[1:] == ["hard"]:
        chosen = HARD
    elif len(argv) > 1:
        want = {tuple(int(x) for x in a.split("/")) for a in argv[1:]}
        chosen = [t for t in SET + HARD if (t[0], t[1]) in want]
    P.pack(*instance(32, 1, 0.0), time_limit_s=5.0)  # warm-up (numba cache)
    solved, nodes_solved, wall = 0, 0, 0.0
    for n, seed, removed in chosen:
        begin = time.perf_counter()
        r = P.pack(*instance(n, seed, removed), time_limit_s=limit, max_nodes=max_nodes)
        dt = time.perf_counter() - begin
        wall += dt
        ok = r.status == "optimal"
        solved += ok
        nodes_solved += r.nodes if ok else 0
        print(f"{n}/{seed}{'' if not removed else f'-{removed:.0%}'}\t{r.status}\t{r.nodes}\t{dt:.2f}", flush=True)
    print(f"solved {solved}/{len(chosen)}  nodes on solved {nodes_solved:,}  wall {wall:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
