"""Issue 18, diagnostic for ``muzero-sim:DIR,tree=uct`` (validation programs only, used for no
choice): the network's move order against the game's own at the same simulation count, wall
time ignored, i.e. what the order would be worth if the network call were free.

    python baselines/muzero/order_quality.py baselines/muzero/labels --sims 8,16 --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import equal_time as E  # noqa: E402

from mallocgym.agents import make_agent  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="a version-2 checkpoint folder")
    p.add_argument("--sims", default="8,16", help="simulation counts per decision")
    p.add_argument("--out", help="write the per-program speedups (JSON) here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for n in (int(x) for x in args.sims.split(",") if x):
        plain = make_agent(f"mcts:simulations={n}")
        ordered = make_agent(f"muzero-sim:{args.checkpoint},tree=uct,sims={n}")
        for agent in (plain, ordered):
            E.run(agent, E.warm_up_program())
        mine, theirs, wall = [], [], [0.0, 0.0]
        for scenario in E.programs("validation"):
            a, ta = E.run(plain, scenario)
            b, tb = E.run(ordered, scenario)
            theirs.append(a), mine.append(b)
            wall[0] += ta
            wall[1] += tb
            rows.append({"sims": n, "scenario": scenario.name, "mcts": a, "ordered": b})
        c = E.compare(mine, theirs)
        print(f"sims={n}: the network's order wins {c['wins']}, loses {c['losses']} of {c['n']}; wall "
              f"{wall[0]:.1f} s (mcts) vs {wall[1]:.1f} s (ordered)", flush=True)
    if args.out:
        from mallocgym._files import atomic_write

        with atomic_write(args.out) as handle:
            json.dump(rows, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
