"""Pick a mallocMuZero checkpoint without the test split.

Each candidate (an agent spec such as ``muzero-pol:runs/a`` or ``muzero-sim:runs/a,sims=1``) plays the
bundled suite's **train** split and a **validation** set of held-out generated programs, and is
scored by its wins minus losses against XLA-like over both (ties: the higher geometric-mean
speedup). The validation programs come from the workload generator's ``medium`` preset
(300-800 buffers, larger than the ``small`` programs training draws) at fixed seeds that
training never draws in practice (it draws seeds uniformly from ``[0, 2**31)``), at 1/8 and
1/2 of peak live bytes: by default six programs of the preset's own family draw; with
``--families`` ``--per-family`` programs (default 2, at most 6) of each named family.

    python baselines/muzero/choose.py muzero-pol:runs/a muzero-pol:runs/b [--families unet,rnn] [--per-family 6]
        [--out FILE.json]

Prints one line per candidate and the chosen one; ``--out`` also writes every result.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from fractions import Fraction

from mallocgym import scenarios
from mallocgym.agents import make_agent
from mallocgym.harness import bench
from mallocgym.scenarios import WorkloadGenerator
from mallocgym.workloads.generator import parse_families, preset

VALIDATION_SEEDS = range(2_000_000_000, 2_000_000_006)


def validation_set(families: list[str] | None = None, per_family: int = 2) -> list:
    """Held-out generated scenarios at 1/8 and 1/2: six ``medium`` programs of the preset's
    family draw (twelve scenarios) or, with ``families``, ``per_family`` programs of each family
    (the first ``per_family`` validation seeds, so a larger set contains the smaller one)."""
    if not 1 <= per_family <= len(VALIDATION_SEEDS):
        raise ValueError(f"per_family must be in 1..{len(VALIDATION_SEEDS)}, got {per_family}")
    if not families:
        gens = [(WorkloadGenerator("medium"), VALIDATION_SEEDS)]
    else:
        gens = [(WorkloadGenerator(replace(preset("medium"), families=(f,))), VALIDATION_SEEDS[:per_family])
                for f in families]
    return [gen.scenario(seed, f) for gen, seeds in gens for seed in seeds for f in (Fraction(1, 8), Fraction(1, 2))]


def score(rows: list[dict], agent: str) -> dict:
    """Wins, losses and geomean of ``agent`` against ``xla`` over the scenarios in ``rows``."""
    xla = {r["scenario"]: r["speedup"] for r in rows if r["agent"] == "xla"}
    mine = {r["scenario"]: r["speedup"] for r in rows if r["agent"] == agent}
    wins = sum(mine[s] > xla[s] * (1 + 1e-9) for s in mine)
    losses = sum(mine[s] < xla[s] * (1 - 1e-9) for s in mine)
    geo = math.exp(sum(math.log(v) for v in mine.values()) / len(mine))
    return {"wins": wins, "losses": losses, "geomean": geo, "n": len(mine)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("candidates", nargs="+", help="agent specs, e.g. muzero-pol:runs/a or muzero-sim:runs/a,sims=1")
    p.add_argument("--families", default="",
                   help="validate on two medium programs of each of these comma-separated generator families "
                        "(default: six programs of the preset's family draw)")
    p.add_argument("--per-family", type=int, default=2,
                   help=f"programs per family with --families (1-{len(VALIDATION_SEEDS)}, default 2)")
    p.add_argument("--out", help="write all results (JSON) here")
    args = p.parse_args(argv)
    try:
        families = list(parse_families(args.families))
    except ValueError as exc:
        raise SystemExit(f"--families: {exc}") from None
    try:
        validation = validation_set(families, args.per_family)
    except ValueError as exc:
        raise SystemExit(f"--per-family: {exc}") from None
    if len(set(args.candidates)) != len(args.candidates):
        raise SystemExit(f"candidates must be distinct, got {args.candidates}")
    agents = [make_agent("xla")]
    for spec in args.candidates:
        agents.append(make_agent(spec))
        agents[-1].name = spec   # runs in different folders share the agent name "muzero"
    names = list(args.candidates)
    sets = {"train": scenarios.suite("default", "train"), "validation": validation}
    rows = {name: [r.to_dict(with_offsets=False) for r in bench(sc, agents)] for name, sc in sets.items()}
    table = []
    for spec, name in zip(args.candidates, names):
        parts = {k: score(v, name) for k, v in rows.items()}
        total = sum(s["wins"] - s["losses"] for s in parts.values())
        geo = math.exp(sum(math.log(s["geomean"]) * s["n"] for s in parts.values())
                       / sum(s["n"] for s in parts.values()))
        table.append((total, geo, spec, parts))
        print(f"{spec}: score {total:+d} (geomean {geo:.4f}); "
              + "; ".join(f"{k} {s['wins']} wins / {s['losses']} losses, geomean {s['geomean']:.4f}"
                          for k, s in parts.items()))
    xla_geo = {k: score(v, "xla")["geomean"] for k, v in rows.items()}
    print("xla geomean: " + ", ".join(f"{k} {g:.4f}" for k, g in xla_geo.items()))
    best = max(table, key=lambda t: (t[0], t[1]))
    print(f"chosen: {best[2]}")
    if args.out:
        from mallocgym._files import atomic_write

        with atomic_write(args.out) as f:
            json.dump({"rows": rows, "chosen": best[2], "scores": {t[2]: t[3] for t in table}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
