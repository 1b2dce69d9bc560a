"""Issue 18, step 2's checkpoint: how often a mallocMuZero network's best-child pick is wrong.

Fixed before any step-2 run (2026-11-23): the **60 held-out programs** are the workload
generator's ``medium`` preset (300-800 buffers), each of the five families (transformer, cnn,
mlp, unet, rnn) at the six seeds ``2_100_000_000 .. 2_100_000_005`` and at 1/8 and 1/2 of peak
live bytes (5 x 6 x 2 = 60 scenarios; training draws its seeds uniformly from ``[0, 2**31)``,
so it meets none of them in practice, and ``baselines/muzero/choose.py`` uses other seeds).

The positions are those of **XLA-like's own game** on each program (the same positions for every
network), each with at least two legal actions under the search's rule (``effective_legal``,
``search.prune_no_benefit``). At each, every legal action is scored exactly by finishing the
game with XLA-like after it (:class:`mallocgym.agents.search.CompletionScorer`); the best
children are the actions whose completion is within 1e-9 (relative) of the shortest.

Always playing XLA-like's move is scored too, for reference. The network's pick is the legal
action with the highest **advantage-head** output (a ``network.version = 2`` checkpoint) or the
highest **policy logit** (version 1, the published checkpoints; for version 2 the policy's pick
is reported too). It is *wrong* where it is not a best child. A *departure* is a pick other than XLA-like's move (best fit, or skip); it is
*right* where its completion is shorter than XLA-like's move's by more than 1e-9 (relative).
Departure precision = right departures / departures; recall = positions where the pick is
such a better move / positions where one exists. Added after the first measurement, as
secondary statistics (the wrong rate above is the checkpoint's measure): the share of positions
where the pick is wrong by more than 0.01 % of the program time (near-ties excluded), and the
mean one-step regret per position (the pick's completion over the best's, in %).

Added for issue 18, steps 3-5 (the existing measures unchanged): ``--margins 0,0.5,...`` also
scores, for a version-2 network, the policy agent's rule at each margin
(:func:`mallocgym.agents.muzero.labels.policy_move`: XLA-like's move unless the advantage head
predicts another move better by more than the margin, in ``residual_scale`` units), reported
as ``margin=X``. ``--validation`` measures on the 30 validation programs of
``equal_time.py`` (seeds 2_300_000_000..2, same families and fractions) instead of the 60:
the set on which a margin may be chosen.

    python baselines/muzero/best_child.py baselines/muzero/checkpoint [DIR ...] [--margins 0,1] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from fractions import Fraction

import numpy as np
import torch

from mallocgym.agents.muzero.agent import make_env
from mallocgym.agents.muzero.checkpoint import load_network
from mallocgym.agents.muzero.labels import policy_move
from mallocgym.agents.muzero.model import effective_legal, xla_move
from mallocgym.agents.muzero.networks import obs_to_tensors, stack_obs
from mallocgym.agents.search import CompletionScorer
from mallocgym.scenarios import WorkloadGenerator
from mallocgym.workloads.generator import FAMILIES, preset

SEEDS = range(2_100_000_000, 2_100_000_006)
VALIDATION_SEEDS = range(2_300_000_000, 2_300_000_003)   # equal_time.py's validation set
FRACTIONS = (Fraction(1, 8), Fraction(1, 2))
TOL = 1e-9
NEAR_TIE = 1e-4   # secondary statistic, added after the first measurement: wrong by more than 0.01 %


def heldout_programs(seeds=SEEDS) -> list:
    """The 60 held-out scenarios (module docstring), in a fixed order (or those of ``seeds``)."""
    out = []
    for family in FAMILIES:
        gen = WorkloadGenerator(replace(preset("medium"), families=(family,)))
        out.extend(gen.scenario(seed, f) for seed in seeds for f in FRACTIONS)
    return out


def positions(scenario, config):
    """XLA-like's game on ``scenario``: per position with a choice, ``(obs, legal, times)``
    (``times[a]``: the exact completion after action ``a``, ``inf`` if illegal)."""
    env = make_env(scenario, config).unwrapped
    obs, _ = env.reset(seed=0)
    scorer = CompletionScorer(env.static, env.k)
    done = False
    while not done:
        legal = effective_legal(stack_obs([obs]), prune_no_benefit=config.search.prune_no_benefit)[0]
        if legal.sum() >= 2:
            times, _ = scorer(env.sim_state)
            times = np.where(legal, times, np.inf)
            yield obs, legal, times
        obs, _, done, _, _ = env.step(xla_move(legal))


class Tally:
    """Counts of one pick rule over positions."""

    def __init__(self):
        self.n = self.wrong = self.departures = self.right_departures = self.gains = self.found = 0
        self.wrong_big = 0
        self.regret = 0.0

    def add(self, pick: int, legal: np.ndarray, times: np.ndarray) -> None:
        base = xla_move(legal)
        best = times.min()
        self.n += 1
        if times[pick] > best * (1 + TOL):
            self.wrong += 1
            self.wrong_big += times[pick] > best * (1 + NEAR_TIE)
            self.regret += 100.0 * (times[pick] / best - 1.0)
        better = times[pick] < times[base] * (1 - TOL)
        if pick != base:
            self.departures += 1
            self.right_departures += better
        if best < times[base] * (1 - TOL):
            self.gains += 1
            self.found += better

    def summary(self) -> dict:
        return {"positions": self.n, "wrong": self.wrong, "wrong_rate": self.wrong / max(self.n, 1),
                "wrong_beyond_near_tie_rate": self.wrong_big / max(self.n, 1),
                "mean_regret_percent_per_position": self.regret / max(self.n, 1),
                "departures": self.departures,
                "departure_precision": self.right_departures / self.departures if self.departures else None,
                "positions_with_gain": self.gains,
                "departure_recall": self.found / self.gains if self.gains else None,
                "mean_regret_percent_when_wrong": self.regret / self.wrong if self.wrong else 0.0}


@torch.no_grad()
def measure(directories: list[str], scenarios: list, margins: tuple[float, ...] = ()) -> dict:
    """Tallies per checkpoint (its pick rules) and, once, for always playing XLA-like's move; the
    positions and their exact scores are computed once for all checkpoints."""
    loaded = [load_network(d) for d in directories]
    config = loaded[0][1]
    for d, (_, other, _) in zip(directories, loaded):
        if other.env != config.env:
            raise SystemExit(f"{d}: another env config than {directories[0]} ({other.env} vs {config.env})")
    rules = {d: {"policy": Tally()} for d in directories}
    for d, (_, cfg, _) in zip(directories, loaded):
        if cfg.network.version >= 2:
            rules[d]["advantage"] = Tally()
            for m in margins:
                rules[d][f"margin={m:g}"] = Tally()
    xla = Tally()
    for scenario in scenarios:
        for obs, legal, times in positions(scenario, config):
            xla.add(xla_move(legal), legal, times)
            batch = obs_to_tensors(stack_obs([obs]))
            for d, (net, cfg, _) in zip(directories, loaded):
                if cfg.network.version >= 2:
                    logits, _, advantage = net.expert(batch)
                    rules[d]["advantage"].add(int(np.argmax(np.where(legal, advantage[0].numpy(), -np.inf))),
                                              legal, times)
                    for m in margins:
                        rules[d][f"margin={m:g}"].add(policy_move(advantage[0].numpy(), legal, m), legal, times)
                else:
                    logits = net.initial_inference(batch).policy_logits
                rules[d]["policy"].add(int(np.argmax(np.where(legal, logits[0].numpy(), -np.inf))), legal, times)
    out = {"xla_like": xla.summary()}
    for d, (_, cfg, _) in zip(directories, loaded):
        out[d] = {name: t.summary() for name, t in rules[d].items()}
        out[d]["network_pick"] = "advantage" if cfg.network.version >= 2 else "policy"
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoints", nargs="+", help="run folders (or checkpoint.pt files)")
    p.add_argument("--limit", type=int, default=None, help="only the first N programs (a quick look)")
    p.add_argument("--out", help="write the results (JSON) here")
    p.add_argument("--validation", action="store_true",
                   help="the 30 validation programs (seeds 2_300_000_000..2) instead of the 60")
    p.add_argument("--margins", default="", help="comma-separated policy margins to score too (version 2)")
    args = p.parse_args(argv)
    try:
        margins = tuple(float(m) for m in args.margins.split(",") if m.strip())
    except ValueError:
        raise SystemExit(f"--margins must be comma-separated numbers, got {args.margins!r}") from None
    if args.limit is not None and args.limit < 1:
        raise SystemExit(f"--limit must be >= 1, got {args.limit}")
    torch.set_num_threads(1)
    scenarios = heldout_programs(VALIDATION_SEEDS if args.validation else SEEDS)[:args.limit]
    results = measure(args.checkpoints, scenarios, margins)
    print(json.dumps(results, indent=1), flush=True)
    if args.out:
        from mallocgym._files import atomic_write

        with atomic_write(args.out) as handle:
            json.dump({"programs": len(scenarios), "validation": args.validation, "results": results}, handle,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
