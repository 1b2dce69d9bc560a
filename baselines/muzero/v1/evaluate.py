"""The v1 entry's tables (issue 31): agents on one of ``equal_time.py``'s program sets, each
given the same wall budget per scenario, against ``xla-msa`` (MSA's plan).

    python baselines/muzero/v1/evaluate.py --set validation --budget-s 2 \\
        --agents "muzero-sim:DIR,gate=1;rollout" --out FILE.json

Agents are separated by ``;`` (a spec holds commas). Per scenario, one agent after the other (a
warm-up program solved first, untimed); each search gets ``budget_s`` on every scenario
(:func:`mallocgym.harness.with_budget`). The summary has, per agent, wins / losses / largest
loss against ``xla-msa``, the geomean and the total wall time (``equal_time.compare``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # equal_time.py, beside this folder
from equal_time import compare, programs, run, warm_up_program  # noqa: E402

from mallocgym._files import atomic_write  # noqa: E402
from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.harness import with_budget  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", choices=["validation", "table", "test"], required=True)
    p.add_argument("--agents", required=True, help="agent specs separated by ';'")
    p.add_argument("--budget-s", type=float, required=True, help="each search's wall budget per scenario")
    p.add_argument("--every", type=int, default=1, help="every N-th program of the set only")
    p.add_argument("--out", help="write the results (JSON) here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    specs = [s.strip() for s in args.agents.split(";") if s.strip()]
    if not specs:
        raise SystemExit("evaluate.py: --agents names no agent")
    base = make_agent("xla-msa")
    agents = {spec: make_agent(spec) for spec in specs}
    for agent in agents.values():
        with_budget(agent, args.budget_s)
    warm = warm_up_program()
    for agent in [base, *agents.values()]:
        run(agent, warm, "v1")
    rows = []
    for scenario in programs(args.set)[::args.every]:
        row = {"scenario": scenario.name, "buffers": int(scenario.workload.size.shape[0])}
        row["xla-msa"], row["xla-msa_wall_s"] = run(base, scenario, "v1")
        for spec, agent in agents.items():
            row[spec], row[f"{spec}_wall_s"] = run(agent, scenario, "v1")
        rows.append(row)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    summary = {spec: {**compare([r[spec] for r in rows], [r["xla-msa"] for r in rows]),
                      "wall_s": sum(r[f"{spec}_wall_s"] for r in rows)} for spec in specs}
    result = {"set": args.set, "budget_s": args.budget_s, "every": args.every, "agents": specs, "rows": rows,
              "summary": summary}
    print(json.dumps(summary, indent=1))
    if args.out:
        with atomic_write(args.out) as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
