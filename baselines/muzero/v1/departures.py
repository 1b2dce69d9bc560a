"""Where the v1 policy leaves xla-msa's move, and what each departure costs alone.

Plays ``muzero-pol:DIR,margin=M`` on every program of an ``equal_time.py`` set and, at each
departure, scores the policy's move and xla-msa's exactly from that position (each followed by
xla-msa's completion, :class:`mallocgym.agents.muzero.v1.Completions`): the departure's cost in %
of program time (positive: worse than xla-msa's move). Prints one JSON line per program: the
game's cost against in-env xla-msa's game (``final_cost``), the departures, how many lose alone
(``bad_alone``), the worst one, the sum of their costs (``sum_alone``) and that sum by kind of
move (``by_move``: ``"fast->slow"`` is a value xla-msa places fast that the policy leaves slow;
``prefetch`` counts any prefetch start).

    python baselines/muzero/v1/departures.py --set validation --margin 0.25 [--checkpoint DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from equal_time import programs  # noqa: E402

from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.agents.muzero.labels import policy_move  # noqa: E402
from mallocgym.agents.muzero.v1 import Completions, branch_mask, make_env_v1, network_advantage  # noqa: E402


def move_kind(action: int, k: int) -> str:
    """The kind of v1 action ``action`` (``k`` offsets per window): slow, fast or prefetch."""
    return "slow" if action == 0 else ("fast" if action <= k else "prefetch")


def departures(agent, scenario, margin: float) -> dict:
    """One program's row (module docstring)."""
    advantage = network_advantage(agent.model)
    env = make_env_v1(scenario, agent.config).unwrapped
    obs, info = env.reset(seed=0)
    scorer = Completions(env.static)
    xla_time = scorer.complete(env.sim_state)
    costs, by_move, done = [], {}, env.current_segment < 0
    while not done:
        base = env.msa_action()
        legal = branch_mask(obs["action_mask"], base, env.k)
        action = base
        if legal.sum() >= 2:
            action = policy_move(advantage(env, obs, legal, base), legal, margin, base=base)
            if action != base:
                t = scorer.scores(env.sim_state, np.array([base, action]))
                costs.append(100.0 * (t[action] / t[base] - 1.0))
                key = f"{move_kind(base, env.k)}->{move_kind(action, env.k)}"
                by_move[key] = by_move.get(key, 0.0) + costs[-1]
        obs, _, done, _, info = env.step(action)
    c = np.array(costs)
    return {"name": scenario.name, "buffers": int(scenario.workload.num_buffers),
            "final_cost": 100.0 * (info["time"] / xla_time - 1.0), "departures": len(c),
            "bad_alone": int((c > 1e-9).sum()), "worst_alone": float(c.max()) if len(c) else 0.0,
            "sum_alone": float(c.sum()), "by_move": by_move}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", choices=["validation", "table", "test"], required=True)
    p.add_argument("--margin", type=float, required=True)
    p.add_argument("--checkpoint", default=str(Path(__file__).resolve().parent))
    args = p.parse_args(argv)
    agent = make_agent(f"muzero-pol:{args.checkpoint},margin={args.margin:g}")
    for scenario in programs(args.set):
        print(json.dumps(departures(agent, scenario, args.margin)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
