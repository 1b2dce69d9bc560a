"""Agents on one of ``equal_time.py``'s program sets, without a budget: each agent's speedup,
wall time and (learned mode) searched moves per scenario, and wins / losses against the first
agent (issue 18, step 6: the learned-dynamics mode at its own wall time).

    python baselines/muzero/dynamics/play_set.py --set table xla muzero-pol:DIR --out FILE.json

(The learned-dynamics mode it measured, ``muzero:DIR``, was removed by issue 31: it runs on
commit ``856d3e5`` and before; any other agent spec still plays here.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # baselines/muzero: equal_time

from equal_time import compare, programs, warm_up_program  # noqa: E402

from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.pricing.v0 import evaluate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("agents", nargs="+", help="agent specs; the first is the reference (e.g. xla)")
    p.add_argument("--set", choices=["validation", "table", "test"], required=True)
    p.add_argument("--every", type=int, default=1, help="every N-th program of the set only")
    p.add_argument("--out", help="write the results (JSON) here")
    args = p.parse_args(argv)
    if args.every < 1:
        raise SystemExit(f"--every must be >= 1, got {args.every}")
    torch.set_num_threads(1)
    scenarios = programs(args.set)[::args.every]
    agents = {spec: make_agent(spec) for spec in args.agents}
    warm = warm_up_program()
    for agent in agents.values():
        agent.solve(warm)
    rows = []
    for scenario in scenarios:
        row = {"scenario": scenario.name, "buffers": int(scenario.workload.size.shape[0])}
        for spec, agent in agents.items():
            start = time.perf_counter()
            solution = agent.solve(scenario)
            row[f"{spec}_wall_s"] = time.perf_counter() - start
            row[spec] = evaluate(scenario.workload, solution.offsets, scenario.hardware).speedup
            if "searched_moves" in solution.info:
                row[f"{spec}_searched_moves"] = solution.info["searched_moves"]
        rows.append(row)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    ref = args.agents[0]
    summary = {spec: {**compare([r[spec] for r in rows], [r[ref] for r in rows]),
                      "wall_s": sum(r[f"{spec}_wall_s"] for r in rows)} for spec in args.agents}
    print(json.dumps(summary, indent=1))
    if args.out:
        from mallocgym._files import atomic_write

        with atomic_write(args.out) as handle:
            json.dump({"set": args.set, "every": args.every, "agents": args.agents, "rows": rows,
                       "summary": summary}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
