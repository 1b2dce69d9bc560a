"""Where a mallocMuZero agent leaves XLA-like's move, and what each departure costs.

Plays the agent (any ``muzero-pol:DIR[,...]`` or ``muzero-sim:DIR[,...]`` spec) on each scenario and,
at every move where it does not play XLA-like's (the best-fit candidate, or skip), scores both
moves on the exact simulator by finishing the game with XLA-like after each
(:class:`mallocgym.agents.search.CompletionScorer`): the departure's cost in % of program time
(positive: worse than XLA-like's move). A diagnostic, not a decomposition: later departures start
from positions the earlier ones changed, so the costs do not add up to the game's result.

    python baselines/muzero/departures.py muzero-sim:baselines/muzero/checkpoint unet-infer@1/2 [...]
"""

from __future__ import annotations

import argparse
import sys

from mallocgym import evaluate
from mallocgym.agents import make_agent
from mallocgym.agents.muzero.model import xla_move
from mallocgym.agents.search import CompletionScorer
from mallocgym.heuristics import xla_like
from mallocgym.scenarios import resolve


def departures(agent, scenario, *, seed: int = 0) -> tuple[list[dict], dict]:
    """``(departures, info)``: one dict per move that is not XLA-like's (``move`` index,
    ``action``: ``"skip"`` or ``"candidate i"``, ``size_fraction``: the buffer's size over fast
    memory, ``cost_percent``), and the game's final info."""
    out = []
    game = agent.moves(scenario, seed=seed)
    scorer = None
    capacity = scenario.hardware.fast_capacity
    try:
        while True:
            env, legal, action = next(game)
            base = xla_move(legal)
            if action == base:
                continue
            if scorer is None:
                scorer = CompletionScorer(env.static, len(legal) - 1)
            times, _ = scorer(env.sim_state)
            out.append({"move": env.step_index,
                        "action": "skip" if action == len(legal) - 1 else f"candidate {action}",
                        "size_fraction": float(scenario.workload.size[env.current_buffer]) / capacity,
                        "cost_percent": 100.0 * (times[action] / times[base] - 1.0)})
    except StopIteration as end:
        return out, end.value[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("agent", help="a muzero-pol:DIR[,...] or muzero-sim:DIR[,...] spec")
    p.add_argument("scenarios", nargs="+", help="scenario names, e.g. unet-infer@1/2")
    args = p.parse_args(argv)
    agent = make_agent(args.agent)
    if not hasattr(agent, "moves"):
        raise SystemExit(f"{args.agent}: not a mallocMuZero agent")
    for name in args.scenarios:
        scenario = resolve(name)
        found, info = departures(agent, scenario)
        xla = evaluate(scenario.workload, xla_like(scenario), scenario.hardware).speedup
        print(f"{name}: speedup {info['speedup']:.4f} (XLA-like {xla:.4f}), {len(found)} departures")
        for d in found:
            print(f"  move {d['move']}: {d['action']}, buffer {d['size_fraction']:.1%} of fast memory, "
                  f"{d['cost_percent']:+.3f} % program time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
