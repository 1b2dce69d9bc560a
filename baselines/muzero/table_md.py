"""Markdown tables from ``equal_time.py table --out FILE.json`` (issue 18, "Measure").

    python baselines/muzero/table_md.py out/s36/table_table.json

Prints one row per scenario (XLA-like's baseline, the policy, and at each ``mcts`` simulation
count ``N``: ``mcts``'s speedup and wall seconds, then each search's at that wall time) and the
summary rows (wins / losses against ``mcts`` at each budget and against the baseline, geomeans,
wall seconds in all). The baseline is ``xla`` (v0) or whatever the file names in ``baseline``.
"""

from __future__ import annotations

import argparse
import json
import sys


def _short(spec: str) -> str:
    """A search spec without its checkpoint folder: ``muzero-sim:DIR,sims=8`` -> ``muzero-sim,sims=8``."""
    kind, _, rest = spec.partition(":")
    options = rest.split(",")[1:]
    return ",".join([kind, *options])


def markdown(result: dict) -> str:
    """The tables of one ``equal_time.py table`` result (module docstring)."""
    base = result.get("baseline", "xla")
    sims = result["sims"]
    searches = result["search"]
    has_policy = bool(result.get("policy"))
    head = ["scenario", "buffers", base] + (["policy"] if has_policy else [])
    for n in sims:
        head.append(f"mcts {n} (s)")
        head += [f"{_short(s)} at mcts {n}'s time (s)" for s in searches]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for r in result["rows"]:
        cells = [r["scenario"], str(r["buffers"]), f"{r[base]:.4f}"]
        if has_policy:
            cells.append(f"{r['policy']:.4f}")
        for n in sims:
            cells.append(f"{r[f'mcts{n}']:.4f} ({r[f'mcts{n}_wall_s']:.2f})")
            cells += [f"{r[f'{s}@{n}']:.4f} ({r[f'{s}@{n}_wall_s']:.2f})" for s in searches]
        lines.append("| " + " | ".join(cells) + " |")
    summary = result["summary"]
    out = ["\n".join(lines), ""]
    rows = ["| agent | against | wins / losses / ties | largest loss | geomean (other's) | wall s in all |",
            "|---|---|---|---:|---:|---:|"]

    def row(name: str, other: str, c: dict, wall: float | None) -> str:
        ties = c["n"] - c["wins"] - c["losses"]
        wall_text = f"{wall:.1f}" if wall is not None else "-"
        return (f"| {name} | {other} | {c['wins']} / {c['losses']} / {ties} | {c['max_loss_percent']:.2f} % | "
                f"{c['geomean']:.4f} ({c['other_geomean']:.4f}) | {wall_text} |")

    if has_policy:
        rows.append(row("policy", base, summary["policy_vs_xla"], summary["policy_wall_s"]))
    for n in sims:
        rows.append(row(f"mcts {n}", base, summary[f"mcts{n}_vs_xla"], summary[f"mcts{n}_wall_s"]))
        for s in searches:
            key = f"{s}@{n}"
            rows.append(row(f"{_short(s)} at mcts {n}'s time", f"mcts {n}", summary[f"{key} vs mcts{n}"],
                            summary[f"{key}_wall_s"]))
            rows.append(row(f"{_short(s)} at mcts {n}'s time", base, summary[f"{key} vs xla"], None))
    out.append("\n".join(rows))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("result", help="an equal_time.py table --out JSON file")
    args = p.parse_args(argv)
    try:
        with open(args.result) as handle:
            result = json.load(handle)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{args.result}: cannot read an equal_time.py result: {exc}") from None
    if "rows" not in result or "summary" not in result:
        raise SystemExit(f"{args.result}: not an equal_time.py table result (no rows / summary)")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
