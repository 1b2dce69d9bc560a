"""Issue 18, steps 4-5 and the "Measure" table: mallocMuZero's search and policy against `mcts`
at equal wall time, and the choice of their settings on validation programs.

Program sets (fixed before any run of this script; the generator's ``medium`` preset, 300-800
buffers, at 1/8 and 1/2 of peak live bytes; training draws seeds uniformly from ``[0, 2**31)``,
``best_child.py`` uses 2_100_000_000..5 and ``choose.py`` 2_000_000_000..5):

- ``validation``: the five families (transformer, cnn, mlp, unet, rnn) at seeds
  2_300_000_000..2 (30 scenarios): only for choosing margins, gates and simulation counts;
- ``table``: the five families at seeds 2_400_000_000..1 (20 scenarios): the held-out
  programs of the equal-time table, never used for a choice;
- ``test``: the bundled suite's test split (10 scenarios), never used for a choice.

``table`` mode, per scenario (agents alternating scenario by scenario, one warm-up program
solved by every agent first, untimed): XLA-like; the policy (``--policy SPEC``); then for each
``mcts`` simulation count ``N`` (``--sims``), ``mcts:simulations=N`` (its wall time ``w_N``)
and each search (``--search SPEC``, repeatable) given ``budget_s = w_N`` on that scenario: the same wall
time (:func:`mallocgym.harness.with_budget`: a ``mcts:...,pace=1`` control gets it as its
``time_limit``). ``margins`` mode: the policy agent at each margin on a set (cheap: one network call per
decision).

    python baselines/muzero/equal_time.py table --set test --policy muzero-pol:DIR,margin=M \\
        --search muzero-sim:DIR,sims=32,gate=G --sims 8,16,32 --out FILE.json
    python baselines/muzero/equal_time.py margins --set validation --checkpoint DIR --margins 0,1,2 --out FILE.json

``--env v1`` (issue 18 step 7): the same sets on MallocGame-v1 with a v1 checkpoint; the base is
``xla-msa:in_env=1`` (xla-msa's in-env policy, which the v1 agent's labels are taken over) in
place of XLA-like, ``xla-msa`` (MSA's own plan) is reported beside it (``msa_plan``), and
``mcts:simulations=N`` is the registry's ``mcts`` on v1 (xla-msa completions). A table
without ``--search`` times ``mcts`` and the policy only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from fractions import Fraction

import torch

from mallocgym.agents import make_agent
from mallocgym.pricing.v0 import evaluate
from mallocgym.harness import with_budget
from mallocgym.scenarios import WorkloadGenerator, suite
from mallocgym.workloads.generator import FAMILIES, preset

SETS = {"validation": range(2_300_000_000, 2_300_000_003), "table": range(2_400_000_000, 2_400_000_002)}
FRACTIONS = (Fraction(1, 8), Fraction(1, 2))
TOL = 1e-9
WARM_UP_BUDGET_S = 2.0   # the searches' budget on the untimed warm-up program


def programs(name: str) -> list:
    """The scenarios of set ``name`` (module docstring), in a fixed order."""
    if name == "test":
        return list(suite("default", "test"))
    out = []
    for family in FAMILIES:
        gen = WorkloadGenerator(replace(preset("medium"), families=(family,)))
        out.extend(gen.scenario(seed, f) for seed in SETS[name] for f in FRACTIONS)
    return out


def warm_up_program():
    """A small generated program every agent solves once, untimed (numba and torch warm-up)."""
    return WorkloadGenerator(preset("small")).scenario(1, Fraction(1, 2))


def run(agent, scenario, env: str = "v0") -> tuple[float, float]:
    """``(speedup, wall seconds)`` of one solve on MallocGame ``env``."""
    start = time.perf_counter()
    solution = agent.solve_v1(scenario) if env == "v1" else agent.solve(scenario)
    wall = time.perf_counter() - start
    if env == "v1":
        from mallocgym.pricing.v1 import evaluate_v1

        return evaluate_v1(scenario.workload, solution.mapping, scenario.hardware).speedup, wall
    return evaluate(scenario.workload, solution.offsets, scenario.hardware).speedup, wall


def base_agent(env: str):
    """The base the agent's labels are taken over: XLA-like (v0) or xla-msa's in-env policy (v1)."""
    return make_agent("xla" if env == "v0" else "xla-msa:in_env=1")


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def compare(mine: list[float], other: list[float]) -> dict:
    """Wins, losses (relative tolerance 1e-9), the largest loss in % and geomeans."""
    wins = sum(a > b * (1 + TOL) for a, b in zip(mine, other))
    losses = sum(a < b * (1 - TOL) for a, b in zip(mine, other))
    worst = max([100.0 * (1 - a / b) for a, b in zip(mine, other)] + [0.0])
    return {"wins": wins, "losses": losses, "n": len(mine), "max_loss_percent": worst,
            "geomean": geomean(mine), "other_geomean": geomean(other)}


def table(args) -> dict:
    scenarios = programs(args.set)[::args.every]
    sims = [int(n) for n in args.sims.split(",") if n]  # --sims "": no mcts
    env = args.env
    xla = base_agent(env)
    plan = make_agent("xla-msa") if env == "v1" else None
    policy = make_agent(args.policy) if args.policy else None
    searches = {spec: make_agent(spec) for spec in args.search}
    mcts = {n: make_agent(f"mcts:simulations={n}") for n in sims}
    warm = warm_up_program()
    for search in searches.values():   # a paced search (pace=1) needs a budget, even to warm up
        with_budget(search, WARM_UP_BUDGET_S)
    for agent in [xla, plan, policy, *searches.values(), *mcts.values()]:
        if agent is not None:
            run(agent, warm, env)
    rows = []
    for scenario in scenarios:
        row = {"scenario": scenario.name, "buffers": int(scenario.workload.size.shape[0])}
        row["xla"], row["xla_wall_s"] = run(xla, scenario, env)
        if plan is not None:
            row["msa_plan"], _ = run(plan, scenario, env)
        if policy is not None:
            row["policy"], row["policy_wall_s"] = run(policy, scenario, env)
        for n in sims:
            row[f"mcts{n}"], wall = run(mcts[n], scenario, env)
            row[f"mcts{n}_wall_s"] = wall
            for spec, search in searches.items():
                with_budget(search, wall)
                row[f"{spec}@{n}"], row[f"{spec}@{n}_wall_s"] = run(search, scenario, env)
        rows.append(row)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    summary = {"xla_geomean": geomean(r["xla"] for r in rows)}
    if policy is not None:
        summary["policy_vs_xla"] = compare([r["policy"] for r in rows], [r["xla"] for r in rows])
        summary["policy_wall_s"] = sum(r["policy_wall_s"] for r in rows)
        if plan is not None:
            summary["policy_vs_msa_plan"] = compare([r["policy"] for r in rows], [r["msa_plan"] for r in rows])
            summary["xla_wall_s"] = sum(r["xla_wall_s"] for r in rows)
        for n in sims:
            summary[f"policy_vs_mcts{n}"] = compare([r["policy"] for r in rows], [r[f"mcts{n}"] for r in rows])
    for n in sims:
        summary[f"mcts{n}_wall_s"] = sum(r[f"mcts{n}_wall_s"] for r in rows)
        summary[f"mcts{n}_vs_xla"] = compare([r[f"mcts{n}"] for r in rows], [r["xla"] for r in rows])
        for spec in searches:
            key = f"{spec}@{n}"
            summary[f"{key} vs mcts{n}"] = compare([r[key] for r in rows], [r[f"mcts{n}"] for r in rows])
            summary[f"{key}_wall_s"] = sum(r[f"{key}_wall_s"] for r in rows)
            summary[f"{key} vs xla"] = compare([r[key] for r in rows], [r["xla"] for r in rows])
    return {"set": args.set, "env": env, "every": args.every, "policy": args.policy, "search": args.search,
            "sims": sims, "rows": rows, "summary": summary}


def margins(args) -> dict:
    scenarios = programs(args.set)
    values = [float(m) for m in args.margins.split(",")]
    base_solver = base_agent(args.env)
    base = [run(base_solver, s, args.env)[0] for s in scenarios]
    plan_solver = make_agent("xla-msa") if args.env == "v1" else None
    plan = [run(plan_solver, s, args.env)[0] for s in scenarios] if plan_solver is not None else None
    out = {}
    for m in values:
        agent = make_agent(f"muzero-pol:{args.checkpoint},margin={m:g}")
        sp = [run(agent, s, args.env)[0] for s in scenarios]
        out[f"{m:g}"] = compare(sp, base)
        if plan is not None:
            out[f"{m:g}"]["vs_msa_plan"] = compare(sp, plan)
        print(f"margin={m:g}", json.dumps({k: round(v, 4) if isinstance(v, float) else v
                                           for k, v in out[f"{m:g}"].items()}), flush=True)
    return {"set": args.set, "env": args.env, "checkpoint": args.checkpoint, "margins": out}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["table", "margins"])
    p.add_argument("--set", choices=["validation", "table", "test"], required=True)
    p.add_argument("--policy", help="table: the policy agent's spec (muzero-pol:DIR,margin=M)")
    p.add_argument("--search", action="append", default=[],
                   help="table: a search agent's spec, repeatable (its budget_s is set per scenario)")
    p.add_argument("--sims", default="8,16,32", help="table: mcts simulation counts")
    p.add_argument("--checkpoint", help="margins: the version-2 checkpoint folder")
    p.add_argument("--margins", default="0,0.5,1,2,4", help="margins: the policy margins to try")
    p.add_argument("--every", type=int, default=1, help="table: every N-th program of the set only")
    p.add_argument("--out", help="write the results (JSON) here")
    p.add_argument("--env", choices=["v0", "v1"], default="v0", help="the game (module docstring; default v0)")
    args = p.parse_args(argv)
    if args.every < 1:
        raise SystemExit(f"--every must be >= 1, got {args.every}")
    if args.mode == "table" and not args.search and not (args.env == "v1" and args.policy):
        raise SystemExit("table needs --search SPEC (on v1: or --policy SPEC)")
    if args.mode == "margins" and not args.checkpoint:
        raise SystemExit("margins needs --checkpoint DIR")
    torch.set_num_threads(1)
    result = table(args) if args.mode == "table" else margins(args)
    print(json.dumps(result.get("summary", result.get("margins")), indent=1))
    if args.out:
        from mallocgym._files import atomic_write

        with atomic_write(args.out) as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
