"""The headline run, ``mallocgym run`` (what ``make run`` does): on MallocGame-v1, XLA's Memory
Space Assignment (``xla-msa``) against a search agent at a small fixed budget per scenario and a
published learned policy, on the bundled test split.

It prints a compact table (speedup per scenario; each challenger's gain over ``xla-msa`` in
brackets), one summary line (geometric means; wins / ties / losses against ``xla-msa``, counted
by :mod:`mallocgym.scoreboard`) and one line of wall times, and writes into its folder the
harness's ``results.{md,csv,json}`` and ``mappings.json.gz``, that text as ``headline.md``,
and ``memory-map.png``: the search agent's mapping of the scenario where it beats ``xla-msa``
by the most (none when it beats it nowhere, or without the ``plot`` extra; the text says which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .agents import Agent, make_agent
from .harness import Result, bench, with_budget
from .scenarios import Scenario
from .scoreboard import XLA_BASELINE, geomean, tally

__all__ = ["BASELINE", "DEFAULT_SEARCH", "DEFAULT_BUDGET_S", "DEFAULT_POLICY", "HEADLINE_FILE", "PICTURE_FILE",
           "Headline", "search_agent", "run_headline", "headline_text", "best_gain"]

BASELINE = XLA_BASELINE["v1"]
DEFAULT_SEARCH = "rollout"
DEFAULT_BUDGET_S = 2.0
DEFAULT_POLICY = "muzero-pol:baselines/muzero/v1"
HEADLINE_FILE = "headline.md"
PICTURE_FILE = "memory-map.png"


def search_agent(spec: str, budget_s: float) -> Agent:
    """The search agent ``spec`` with a wall budget of ``budget_s`` seconds per scenario, named
    after both (``rollout:time_limit=2``); a spec that does not search is a ``ValueError``."""
    options = spec.partition(":")[2].split(",")
    given = [o.split("=")[0] for o in options if o.split("=")[0].strip() in ("time_limit", "budget_s")]
    if given:
        raise ValueError(f"--search {spec!r} sets {given[0]}=; the budget is --budget-s (the same for every "
                         "scenario), give it there")
    agent = make_agent(spec)
    if not with_budget(agent, budget_s):
        raise ValueError(f"--search {spec!r} does not search, so a budget means nothing to it: give rollout, beam "
                         "or mcts (with options, e.g. beam:width=4)")
    option = "budget_s" if hasattr(agent, "set_budget") else "time_limit"
    agent.name = f"{spec}{',' if ':' in spec else ':'}{option}={budget_s:g}"
    return agent


@dataclass(frozen=True)
class Headline:
    """The results of a headline run: ``results`` scenario by scenario, ``agents`` the column
    order (``BASELINE`` first)."""

    results: list[Result]
    agents: list[str]

    def get(self, scenario: str, agent: str) -> Result:
        return next(r for r in self.results if r.scenario == scenario and r.agent == agent)

    @property
    def scenarios(self) -> list[str]:
        return list(dict.fromkeys(r.scenario for r in self.results))


def run_headline(scenarios: Sequence[Scenario], *, search: str = DEFAULT_SEARCH,
                 budget_s: float = DEFAULT_BUDGET_S, policy: str | None = DEFAULT_POLICY, seed: int = 0,
                 progress: bool = True) -> Headline:
    """Play ``xla-msa``, ``search`` at ``budget_s`` seconds per scenario and ``policy`` (None: no
    policy) on MallocGame-v1 over ``scenarios``."""
    agents: list[Agent | str] = [BASELINE, search_agent(search, budget_s)]
    if policy is not None:
        agents.append(policy)
    results = bench(scenarios, agents, seed=seed, env="v1", progress=progress)
    return Headline(results, list(dict.fromkeys(r.agent for r in results)))


def best_gain(headline: Headline, agent: str) -> tuple[str, float] | None:
    """``(scenario, speedup / xla-msa's)`` where ``agent`` beats ``xla-msa`` by the most (a win as
    :func:`mallocgym.scoreboard.outcome` counts it); None when it wins nowhere."""
    best = None
    for s in headline.scenarios:
        mine, base = headline.get(s, agent).speedup, headline.get(s, BASELINE).speedup
        if tally([(mine, base)])[0] and (best is None or mine / base > best[1]):
            best = (s, mine / base)
    return best


def _gain(speedup: float, base: float) -> str:
    w, t, _ = tally([(speedup, base)])
    return "=" if t else f"{speedup / base - 1:+.1%}"


def headline_text(headline: Headline, *, title: str) -> str:
    """The table, the summary line and the wall-time line, as Markdown."""
    challengers = [a for a in headline.agents if a != BASELINE]
    lines = [f"{title}: speedup over all-slow; in brackets, against `{BASELINE}` (= a tie)", "",
             "| scenario | " + " | ".join(headline.agents) + " |", "|---|" + "---:|" * len(headline.agents)]
    for s in headline.scenarios:
        base = headline.get(s, BASELINE).speedup
        cells = [f"{base:.3f}"] + [f"{headline.get(s, a).speedup:.3f} ({_gain(headline.get(s, a).speedup, base)})"
                                   for a in challengers]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    parts = []
    for a in headline.agents:
        speedups = [headline.get(s, a).speedup for s in headline.scenarios]
        text = f"`{a}` {geomean(speedups):.3f}"
        if a != BASELINE:
            w, t, l = tally((headline.get(s, a).speedup, headline.get(s, BASELINE).speedup)
                            for s in headline.scenarios)
            text += f" ({w} / {t} / {l})"
        parts.append(text)
    walls = []
    for a in headline.agents:
        rows = [headline.get(s, a) for s in headline.scenarios]
        slow = max(rows, key=lambda r: r.wall_s)
        walls.append(f"`{a}` {sum(r.wall_s for r in rows):.1f} s (slowest: {slow.scenario}, {slow.wall_s:.1f} s)")
    lines += ["", f"Geometric-mean speedup over {len(headline.scenarios)} scenarios (wins / ties / losses against "
              f"`{BASELINE}`): " + "; ".join(parts) + ".",
              "", "Wall time: " + "; ".join(walls) + "."]
    return "\n".join(lines) + "\n"
