"""Where the v1 policy leaves xla-msa's move, and what each departure costs alone.

Plays ``muzero-pol:DIR,margin=M`` on every program of an ``equal_time.py`` set and, at each
departure, scores the policy's move and xla-msa's exactly from that position (each followed by
xla-msa's completion, :class:`mallocgym.agents.muzero.v1.Completions`): the departure's cost in %
of program time (positive: worse than xla-msa's move). Prints one JSON line per program: the
game's cost against in-env xla-msa's game (``final_cost``), the departures, how many lose alone
(``bad_alone``), the worst one, the sum of their costs (``sum_alone``) and that sum by kind of
move (``by_move``: ``"fast->slow"`` is a value xla-msa places fast that the policy leaves slow;
``prefetch`` counts any prefetch start), and every departure in play order (``moves``: its kind,
the network's predicted gain over xla-msa's move in the margin's units, and its exact cost).

    python baselines/muzero/v1/departures.py --set validation --margin 0.25 [--checkpoint DIR]

``--generated LO,HI`` plays fresh programs of the training distribution instead of a set (the
trainer's generator, ``train-config.json``'s preset, families and buffer range, program ``i``
drawn from ``default_rng([7, i])`` for ``LO <= i < HI``: seed 7, which no training run used).
``--summary FILE.jsonl ...`` reads such rows (played at margin 0, so that they list every
departure the policy would make at any margin >= 0) and prints, per margin, what the policy would
score if each departure cost what it costs alone (the game's cost is close to that sum, above):
the geomean speedup over in-env xla-msa, the wins, the programs losing more than 0.5 % and the
worst; and the same for an oracle that keeps only the departures that gain.

    python baselines/muzero/v1/departures.py --generated 0,32 --margin 0 > rows.jsonl
    python baselines/muzero/v1/departures.py --summary rows.jsonl --margins 0,0.25,1,4,8
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from equal_time import programs  # noqa: E402

from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.agents.muzero.labels import predicted_gain  # noqa: E402
from mallocgym.agents.muzero.head import head_inputs  # noqa: E402
from mallocgym.agents.muzero.networks import NumpyAdvantage  # noqa: E402
from mallocgym.agents.muzero.v1 import Completions, adapt_obs, branch_mask, make_env_v1  # noqa: E402


def move_kind(action: int, k: int) -> str:
    """The kind of v1 action ``action`` (``k`` offsets per window): slow, fast or prefetch."""
    return "slow" if action == 0 else ("fast" if action <= k else "prefetch")


def departures(agent, scenario, margin: float, inputs: list | None = None) -> dict:
    """One program's row (module docstring; its ``moves`` round each cost to 1e-5 points); with
    ``inputs``, each departure's ``(departure-head input row, exact cost)`` is appended to it
    (:func:`mallocgym.agents.muzero.head.head_inputs`; the cost not rounded: the head's labels)."""
    net = NumpyAdvantage(agent.model.net)
    env = make_env_v1(scenario, agent.config).unwrapped
    obs, info = env.reset(seed=0)
    scorer = Completions(env.static)
    xla_time = scorer.complete(env.sim_state)
    costs, by_move, moves, done = [], {}, [], env.current_segment < 0
    while not done:
        base = env.msa_action()
        legal = branch_mask(obs["action_mask"], base, env.k)
        action = base
        if legal.sum() >= 2:
            adv, *features = net.features(adapt_obs(obs))
            gain, move = predicted_gain(adv, legal, base)
            if gain > margin:  # the policy's rule (labels.policy_move)
                action = move
                t = scorer.scores(env.sim_state, np.array([base, action]))
                costs.append(100.0 * (t[action] / t[base] - 1.0))
                key = f"{move_kind(base, env.k)}->{move_kind(action, env.k)}"
                by_move[key] = by_move.get(key, 0.0) + costs[-1]
                moves.append([key, round(gain, 4), round(costs[-1], 5)])
                if inputs is not None:
                    inputs.append((head_inputs(adv, features, base, move, env.k, scenario.workload.num_buffers),
                                   costs[-1]))
        obs, _, done, _, info = env.step(action)
    c = np.array(costs)
    return {"name": scenario.name, "buffers": int(scenario.workload.num_buffers),
            "final_cost": 100.0 * (info["time"] / xla_time - 1.0), "departures": len(c),
            "bad_alone": int((c > 1e-9).sum()), "worst_alone": float(c.max()) if len(c) else 0.0,
            "sum_alone": float(c.sum()), "by_move": by_move, "moves": moves}


def generated(lo: int, hi: int, train) -> list:
    """Programs ``lo..hi-1`` of the training distribution of a checkpoint's ``config.train``
    (module docstring)."""
    from mallocgym.agents.muzero.source import make_generator

    gen = make_generator(train.generator_preset, train.generator_families, train.generator_buffers)
    return [gen(np.random.default_rng([7, i])) for i in range(lo, hi)]


def summary(rows: list[dict], margins: list[float]) -> dict:
    """Per margin (and ``"oracle"``): the policy's figures if each departure of ``rows`` with a
    predicted gain above the margin cost what it costs alone (module docstring)."""
    def score(keep) -> dict:
        costs = [sum(cost for _, gain, cost in row["moves"] if keep(gain, cost)) for row in rows]
        log = sum(math.log(1.0 + c / 100.0) for c in costs) / len(costs)
        return {"speedup": math.exp(-log), "wins": sum(c < -1e-9 for c in costs),
                "losses_over_0.5": sum(c > 0.5 for c in costs), "worst": max(costs)}

    out = {f"{m:g}": score(lambda gain, cost, m=m: gain > m) for m in margins}
    out["oracle"] = score(lambda gain, cost: cost < 0)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--set", choices=["validation", "table", "test"])
    what.add_argument("--generated", metavar="LO,HI", help="fresh training-distribution programs LO..HI-1")
    what.add_argument("--summary", nargs="+", metavar="FILE.jsonl", help="summarise rows played at margin 0")
    p.add_argument("--margin", type=float, help="the policy's margin (required to play)")
    p.add_argument("--margins", default="0,0.25,0.5,1,2,4,8", help="with --summary")
    p.add_argument("--checkpoint", default=str(Path(__file__).resolve().parent))
    args = p.parse_args(argv)
    if args.summary:
        rows = [json.loads(line) for f in args.summary for line in Path(f).read_text().splitlines() if line.strip()]
        if not rows or any("moves" not in r for r in rows):
            p.error("--summary needs rows of this script with their 'moves' (played since 2026-11-27)")
        print(json.dumps(summary(rows, [float(m) for m in args.margins.split(",")]), indent=1))
        return 0
    if args.margin is None:
        p.error("--margin is required with --set or --generated")
    if args.generated:
        try:
            lo, hi = (int(x) for x in args.generated.split(","))
        except ValueError:
            p.error(f"--generated takes LO,HI (two integers), got {args.generated!r}")
    agent = make_agent(f"muzero-pol:{args.checkpoint},margin={args.margin:g}")
    scenarios = generated(lo, hi, agent.config.train) if args.generated else programs(args.set)
    for scenario in scenarios:
        print(json.dumps(departures(agent, scenario, args.margin)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
