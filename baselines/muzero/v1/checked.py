"""The v1 policy's checked games (``RULE.md``, amendments of 2026-11-27 13:37 and 14:07 UTC).

``rows``: per program of an ``equal_time.py`` set and per threshold T, the policy
(``muzero-pol:DIR,head=T``) played move by move, with xla-msa's completion of the game so far at
*every* departure (:class:`mallocgym.agents.muzero.v1.Completions`): one JSON line per program,
``{"scenario", "buffers", "xla-msa": its plan's speedup (``evaluate.py``'s baseline), "<T>":
{"checked": [time at departure 1, 2, ...], "own": its own game's time, "slow": the all-slow
time, "wall_s"}}`` (times in seconds of program time).

``summary``: from those rows, per T and per check, each program's speedup over the all-slow
time against ``xla-msa``'s: the wins, losses and geomean (``equal_time.compare``). The checks: ``first`` (xla-msa's game at the
first departure, the check of 11:01), ``doubling`` (before the k-th departure kept, k in
{0, 1, 2, 4, 8, ...}: the published policy's, :func:`mallocgym.agents.muzero.v1.play_v1`) and
``every`` (at each departure, the check of 13:37, measured and not kept: a completion per
departure).

    python baselines/muzero/v1/checked.py rows --set validation --thresholds=-1,0,1,2,4,8 --out rows.jsonl
    python baselines/muzero/v1/checked.py summary rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # equal_time.py, beside this folder
from equal_time import compare, programs, run, warm_up_program  # noqa: E402

from mallocgym._files import atomic_write  # noqa: E402
from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.agents.muzero.labels import policy_move  # noqa: E402
from mallocgym.agents.muzero.v1 import Completions, branch_mask, make_env_v1, network_advantage  # noqa: E402


def checked_game(agent, scenario) -> dict:
    """One program's row for one policy agent (module docstring)."""
    start = time.perf_counter()
    advantage = network_advantage(agent.model, agent.head)
    margin = agent.config.simulator.policy_margin
    env = make_env_v1(scenario, agent.config).unwrapped
    obs, info = env.reset(seed=0)
    scorer = Completions(env.static)
    checked = []
    done = env.current_segment < 0
    while not done:
        base = env.msa_action()
        legal = branch_mask(obs["action_mask"], base, env.k)
        action = base
        if legal.sum() >= 2:
            action = policy_move(advantage(env, obs, legal, base), legal, margin, base=base)
            if action != base:
                checked.append(scorer.complete(env.sim_state))
        obs, _, done, _, info = env.step(action)
    return {"checked": checked, "own": float(info["time"]), "slow": float(info["time_all_slow"]),
            "wall_s": time.perf_counter() - start}


CHECKS = {"first": lambda k: k == 0, "doubling": lambda k: k & (k - 1) == 0, "every": lambda k: True}
"""Per check (module docstring): whether it finishes the game with xla-msa before the ``k``-th
departure kept (``k = 0``: at the first departure, xla-msa's own game)."""


def check_time(row: dict, check: str) -> float:
    """The program time the policy returns with ``check`` (module docstring)."""
    return min([row["own"], *(t for k, t in enumerate(row["checked"]) if CHECKS[check](k))])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("rows", help="play the policy with a check at every departure")
    r.add_argument("--set", choices=["validation", "table", "test"], required=True)
    r.add_argument("--thresholds", required=True, help="head thresholds T, comma-separated (--thresholds=-1,0,...)")
    r.add_argument("--checkpoint", default="baselines/muzero/v1")
    r.add_argument("--out", required=True)
    s = sub.add_parser("summary", help="wins and geomeans of each check, from rows")
    s.add_argument("rows")
    args = p.parse_args(argv)
    if args.command == "rows":
        torch.set_num_threads(1)
        try:
            ts = [float(t) for t in args.thresholds.split(",")]
        except ValueError:
            p.error(f"--thresholds takes numbers separated by commas, got {args.thresholds!r}")
        agents = {f"{t:g}": make_agent(f"muzero-pol:{args.checkpoint},head={t:g}") for t in ts}
        base = make_agent("xla-msa")
        for agent in agents.values():
            checked_game(agent, warm_up_program())
        with atomic_write(Path(args.out), "w") as handle:
            for scenario in programs(args.set):
                row = {"scenario": scenario.name, "buffers": int(scenario.workload.size.shape[0]),
                       "xla-msa": run(base, scenario, "v1")[0]}
                row.update({t: checked_game(agent, scenario) for t, agent in agents.items()})
                handle.write(json.dumps(row) + "\n")
                print(scenario.name, flush=True)
        return 0
    rows = [json.loads(line) for line in Path(args.rows).read_text().splitlines() if line.strip()]
    if not rows or any("xla-msa" not in row for row in rows):
        p.error(f"{args.rows}: no rows, or a row without xla-msa's speedup (written by checked.py rows)")
    for t in [key for key in rows[0] if key not in ("scenario", "buffers", "xla-msa")]:
        for check in ("first", "doubling", "every"):
            speedups = [row[t]["slow"] / check_time(row[t], check) for row in rows]
            summary = compare(speedups, [row["xla-msa"] for row in rows])
            completions = sum(CHECKS[check](k) for row in rows for k in range(len(row[t]["checked"])))
            print(json.dumps({"T": float(t), "check": check, "wins": summary["wins"], "losses": summary["losses"],
                              "geomean": round(summary["geomean"], 4), "completions": completions}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
