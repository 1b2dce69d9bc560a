"""Reference-count sites left in the xla-msa kernels (a diagnostic for docs/speed.md, "Seventh session").

A numba kernel that takes a named tuple of arrays (the v1 state, ~50 arrays; the scenario, ~20)
increfs every array on entry and decrefs it on exit, unless numba's pruning pass removes the pairs;
it cannot where the tuple stays live across a call to another kernel (the call's error exit leaves
without the decref). Such a kernel pays ~70 atomic updates a call, about 1 us. This lists, per
kernel, the NRT_incref sites in its own LLVM function, so a kernel that pays them shows ~50-140.

    NUMBA_CACHE_DIR=$(mktemp -d) PYTHONPATH=src python tests/benchmarks/refcounts.py

(a fresh cache directory: kernels loaded from the cache have no LLVM to inspect).
"""

import re

from mallocgym.agents.xla_msa import plan_msa
from mallocgym.sim import copy_budget, msa, v1
from mallocgym.speed import program_with_buffers


def incref_sites() -> dict[str, int]:
    plan_msa(program_with_buffers(300))  # compiles every kernel a plan enters
    out = {}
    for mod in (v1, msa, copy_budget):
        for name in dir(mod):
            f = getattr(mod, name)
            if not hasattr(f, "inspect_llvm") or not f.signatures:
                continue
            llvm = f.inspect_llvm()
            if not llvm:
                continue
            ir = next(iter(llvm.values()))
            for body in re.split(r"\n(?=define )", ir):
                m = re.match(r"define [^@]*@\"?([^\"(]+)", body)
                if m and m.group(1).startswith("_ZN9mallocgym") and f"{len(name)}{name}B" in m.group(1)[:80]:
                    out[f"{mod.__name__.rsplit('.', 1)[-1]}.{name}"] = body.count("@NRT_incref")
                    break
    return out


if __name__ == "__main__":
    sites = incref_sites()
    if not sites:
        print("no LLVM to inspect: run with a fresh NUMBA_CACHE_DIR")
    for name, n in sorted(sites.items(), key=lambda kv: -kv[1]):
        print(f"{n:5d}  {name}")
