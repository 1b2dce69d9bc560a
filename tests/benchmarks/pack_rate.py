"""The decision search's node rate, for changes that keep the nodes the same (docs/pack.md,
issue 33, item 3, fourth round):

    PYTHONPATH=src .venv/bin/python tests/benchmarks/pack_rate.py [KERNEL.py,KERNEL.py,...] \
        n/seed/nodes ... [reps=5]

Each instance (``n/seed`` of the tuning sets, tests/benchmarks/pack_tuning.py) is packed with
``pack(..., max_nodes=nodes)`` by each kernel in turn (``mallocgym.sim.pack`` by default, or
copies of ``src/mallocgym/sim/pack.py`` taken from other commits, ``git show
COMMIT:src/mallocgym/sim/pack.py > /tmp/k_COMMIT.py``), ``reps`` times, alternating; it prints
the status, the nodes and the least CPU time (``time.process_time``: less sensitive to other
jobs on the machine than the wall clock) of each, and the totals. The subset-sum answers kept
across calls are cleared before every call, so that no run starts with another's.
"""

import importlib.util
import sys
import time
from pathlib import Path

from pack_tuning import instance


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(argv) -> None:
    reps = 5
    for a in [a for a in argv if a.startswith("reps=")]:
        reps = int(a.partition("=")[2])
        argv = [b for b in argv if b != a]
    if argv and ".py" in argv[0]:
        kernels = {p: _load(p, "_kernel_" + Path(p).stem) for p in argv[0].split(",")}
        argv = argv[1:]
    else:
        from mallocgym.sim import pack
        kernels = {"mallocgym.sim.pack": pack}
    cases = [tuple(int(x) for x in a.split("/")) for a in argv]
    for module in kernels.values():  # warm-up (numba cache)
        module.pack(*instance(32, 1, 0.0), time_limit_s=5.0)
    best = {(k, c): float("inf") for k in kernels for c in cases}
    found = {}
    for _ in range(reps):
        for n, seed, nodes in cases:
            args = instance(n, seed, 0.0)
            for k, module in kernels.items():
                if hasattr(module, "_SUBSET_CACHE"):
                    module._SUBSET_CACHE[:] = 0
                begin = time.process_time()
                r = module.pack(*args, time_limit_s=600.0, max_nodes=nodes)
                best[(k, (n, seed, nodes))] = min(best[(k, (n, seed, nodes))], time.process_time() - begin)
                found[(k, (n, seed, nodes))] = (r.status, r.nodes)
    for c in cases:
        print(f"{c[0]}/{c[1]}/{c[2]}\t" + "\t".join(f"{found[(k, c)][0]} {found[(k, c)][1]} {best[(k, c)]:.3f} s"
                                                for k in kernels))
    print("total\t" + "\t".join(f"{sum(best[(k, c)] for c in cases):.3f} s ({k})" for k in kernels))


if __name__ == "__main__":
    main(sys.argv[1:])
