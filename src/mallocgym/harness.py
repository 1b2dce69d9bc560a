"""One harness for every agent: solve scenarios, validate through ``evaluate()``, tabulate.

Results come as :class:`Result` rows and are written as Markdown, CSV and JSON.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ._files import check_result_folder, replace_folder
from ._progress import Progress
from .agents import Agent, Solution, make_agent
from .agents.base import plays_v1
from .pricing.v0 import evaluate
from .scenarios import Scenario

__all__ = ["Result", "solve", "bench", "BenchInterrupted", "Run", "Runner", "local_runner", "ray_runner",
           "solve_spec", "row_line", "to_markdown", "to_csv", "write_results", "load_mappings"]


@dataclass
class Result:
    """One agent on one scenario. ``gap`` is ``time / time_lower_bound - 1`` when a bound is
    known (0 = proven optimal). ``hardware`` and ``fast_capacity`` are the profile name and the
    fast-memory bytes the scenario was played with."""

    scenario: str
    agent: str
    speedup: float
    placed_bytes_fraction: float
    time: float
    time_all_slow: float
    wall_s: float
    offsets: list[int] = field(repr=False)
    time_lower_bound: float | None = None
    gap: float | None = None
    info: dict = field(default_factory=dict, repr=False)
    hardware: str | None = None
    fast_capacity: int | None = None
    env: str = "v0"
    mapping: dict | None = field(default=None, repr=False)  # MallocGame-v1: the v1 mapping (offsets empty)
    stall_time: float | None = None  # v1 only
    copy_bytes: float | None = None  # v1 only

    def to_dict(self, with_offsets: bool = True) -> dict:
        out = {
            "scenario": self.scenario, "agent": self.agent, "env": self.env, "hardware": self.hardware,
            "fast_capacity": self.fast_capacity, "speedup": self.speedup,
            "placed_bytes_fraction": self.placed_bytes_fraction, "time": self.time,
            "time_all_slow": self.time_all_slow, "wall_s": self.wall_s,
            "time_lower_bound": self.time_lower_bound, "gap": self.gap,
        }
        if self.info:
            out["info"] = self.info
        if self.env == "v1":
            out["stall_time"], out["copy_bytes"] = self.stall_time, self.copy_bytes
        if with_offsets:
            if self.env == "v1":
                out["mapping"] = self.mapping
            else:
                out["offsets"] = self.offsets
        return out


ENVS = ("v0", "v1")


def _check_env(env: str) -> None:
    if env not in ENVS:
        raise ValueError(f"unknown game version {env!r}; expected one of {', '.join(ENVS)}")


def _check_plays(agent: Agent, env: str) -> None:
    """An agent that cannot play ``env`` is one clear error, before anything runs."""
    if env == "v0" and not getattr(agent, "plays_v0", True):
        raise ValueError(f"agent {agent.name!r} plays MallocGame-v1 only, not MallocGame-v0; use --env v1")
    if env == "v1" and not plays_v1(agent):
        raise ValueError(f"agent {agent.name!r} plays MallocGame-v0 only; on v1 use all-slow, random, greedy, "
                         "xla-msa, rollout, beam, mcts or an agent trained on v1")


def solve(scenario: Scenario, agent: Agent | str, *, seed: int = 0, env: str = "v0") -> Result:
    """Run ``agent`` on ``scenario`` in game ``env`` (``"v0"`` or ``"v1"``), time it, and check
    its mapping with ``evaluate()`` (v0) or ``evaluate_v1()`` (v1)."""
    _check_env(env)
    from . import _jit, sim

    _jit.announce_compile((sim.run_greedy, sim.first_conflict))  # once per process, when not cached yet
    agent = make_agent(agent) if isinstance(agent, str) else agent
    _check_plays(agent, env)
    begin = time.perf_counter()
    solution = agent.solve_v1(scenario, seed=seed) if env == "v1" else agent.solve(scenario, seed=seed)
    wall = time.perf_counter() - begin
    capacity = None if scenario.hardware.fast_capacity is None else int(scenario.hardware.fast_capacity)
    if env == "v1":
        from .pricing.v1 import evaluate_v1

        ev = evaluate_v1(scenario.workload, solution.mapping, scenario.hardware)
        return Result(scenario.name, agent.name, ev.speedup, ev.placed_bytes_fraction, ev.time, ev.time_all_slow,
                      wall, [], None, None, dict(solution.info), scenario.hardware.name, capacity, "v1",
                      solution.mapping, ev.stall_time, ev.copy_bytes)
    if not isinstance(solution, Solution):
        solution = Solution(np.asarray(solution))
    ev = evaluate(scenario.workload, solution.offsets, scenario.hardware)
    bound = solution.time_lower_bound
    gap = None if bound is None or bound <= 0 else max(ev.time / bound - 1.0, 0.0)
    return Result(scenario.name, agent.name, ev.speedup, ev.placed_bytes_fraction, ev.time,
                  ev.time_all_slow, wall, [int(x) for x in solution.offsets], bound, gap,
                  dict(solution.info), scenario.hardware.name, capacity)


def _warm_up() -> None:
    """Load the compiled simulator kernels once, so the first scenario's ``wall_s`` does not
    include numba's cache loading."""
    from . import _jit, sim
    from .heuristics import xla_like
    from .scenarios import Scenario
    from .workloads import Workload
    from .hardware import profile

    _jit.announce_compile((sim.run_greedy, sim.first_conflict))
    w = Workload.from_buffers("warm-up", flops=[0.0, 1.0], size=[1, 1], start=[0, 0], end=[1, 1])
    evaluate(w, xla_like(Scenario("warm-up", w, profile(fast_capacity=1))), profile(fast_capacity=1))


def _distinct_names(specs: Sequence[Agent | str], agents: list[Agent]) -> list[Agent]:
    """``agents``, those given as specs whose names clash renamed to their specs; a clash left
    after that is a ``ValueError``."""
    counts = Counter(a.name for a in agents)
    for spec, agent in zip(specs, agents):
        if counts[agent.name] > 1 and isinstance(spec, str):
            agent.name = spec
    clash = sorted(name for name, n in Counter(a.name for a in agents).items() if n > 1)
    if clash:
        raise ValueError(f"two agents are named {', '.join(map(repr, clash))}: results are keyed by name, "
                         f"so each agent must appear once with a distinct name")
    return agents


def with_budget(agent: Agent, budget_s: float) -> bool:
    """Give a search agent a wall budget of ``budget_s`` seconds per scenario: ``set_budget``
    where the agent has one (mallocMuZero), else its config's ``time_limit`` (rollout, beam,
    MCTS). Returns False for an agent that runs once with no search to budget (heuristics,
    ``xla-msa``, trained policies), which is left as it is."""
    if not (isinstance(budget_s, (int, float)) and math.isfinite(budget_s) and budget_s > 0):
        raise ValueError(f"budget_s must be a number of seconds > 0, got {budget_s!r}")
    if hasattr(agent, "set_budget"):
        agent.set_budget(float(budget_s))
        return True
    config = getattr(agent, "config", None)
    if dataclasses.is_dataclass(config) and "time_limit" in {f.name for f in dataclasses.fields(config)}:
        agent.config = dataclasses.replace(config, time_limit=float(budget_s))
        return True
    return False


@dataclass(frozen=True)
class Run:
    """One agent on one scenario, as :func:`bench` hands it to a :data:`Runner`.

    ``agent`` is built, named and budgeted in this process; ``spec`` is the string it was built
    from (None when the caller gave an agent object). A runner that solves elsewhere (Ray)
    sends ``scenario`` and ``spec`` and rebuilds the agent there with :func:`solve_spec`, so
    nothing unpicklable (a loaded model, a compiled kernel) travels.
    """

    scenario: Scenario
    agent: Agent
    spec: str | None
    seed: int = 0
    env: str = "v0"
    budget_s: float | None = None


Runner = Callable[[Sequence[Run]], Iterable[tuple[int, Result]]]
"""Solves runs (:class:`Run`) and yields ``(index into the runs, Result)`` as each finishes, in any
order (:func:`bench` puts them back in order and advances its bar on each). An error in a run
is raised as the run raised it."""


def local_runner(runs: Sequence[Run]) -> Iterator[tuple[int, Result]]:
    """The default :data:`Runner`: the runs one after another in this process."""
    _warm_up()  # idempotent and cheap once the kernels are loaded
    for i, run in enumerate(runs):
        yield i, solve(run.scenario, run.agent, seed=run.seed, env=run.env)


def solve_spec(scenario: Scenario, spec: str, *, name: str, seed: int = 0, env: str = "v0",
               budget_s: float | None = None) -> Result:
    """:func:`solve` with the agent built here from ``spec``, named ``name`` and given the
    per-scenario budget ``budget_s`` (None: none): what a remote worker does for one
    :class:`Run`, giving the result the local run gives."""
    agent = make_agent(spec)
    if agent.name != name:
        agent.name = name
    if budget_s is not None:
        with_budget(agent, budget_s)
    _warm_up()
    return solve(scenario, agent, seed=seed, env=env)


def ray_runner(address: str | None = None) -> Runner:
    """A :data:`Runner` that solves each run as a Ray task (the ``[ray]`` extra): on the
    cluster at ``address`` (``"auto"``, ``"HOST:PORT"``, ``"ray://HOST:PORT"``), on the Ray
    already initialised in this process, or on a local Ray it starts (``address=None``).
    See ``docs/ray.md``."""
    from ._ray import RayRunner

    return RayRunner(address, solve=solve_spec)


class BenchInterrupted(KeyboardInterrupt):
    """:func:`bench` was interrupted (Ctrl-C, or SIGTERM where the caller turns it into one):
    ``results`` holds the runs that finished, in the bench's order, and ``total`` the runs asked for."""

    def __init__(self, results: list[Result], total: int):
        super().__init__(f"bench interrupted after {len(results)} of {total} runs")
        self.results = results
        self.total = total


def row_line(result: Result) -> str:
    """One finished run as one line: what :func:`bench` shows as each run ends."""
    line = (f"{result.scenario}  {result.agent}: speedup {result.speedup:.4f}, placed bytes "
            f"{result.placed_bytes_fraction:.1%}, wall {result.wall_s:.2f} s")
    over = result.info.get("over_budget_s") if result.info else None
    if over:
        line += f" ({over:.2f} s over budget)"
    return line


def bench(scenarios: Sequence[Scenario], agents: Sequence[Agent | str], *, seed: int = 0,
          progress: bool = True, env: str = "v0", budget_s: float | None = None,
          runner: Runner | None = None, rows: bool = False) -> list[Result]:
    """Every agent on every scenario of game ``env`` (``"v0"`` or ``"v1"``), with a progress
    bar on stderr. ``budget_s``: the same wall budget per scenario for every search agent
    (:func:`with_budget`; an error when no agent given searches). ``runner`` dispatches the
    runs (default :func:`local_runner`; :func:`ray_runner` spreads them over Ray); the results
    come back in the same order, scenario by scenario, whatever the runner.

    With ``rows`` (and ``progress``) each run is printed as it finishes (:func:`row_line`, on
    stderr above the bar, flushed). A ``KeyboardInterrupt`` while the runs go on becomes a
    :class:`BenchInterrupted` carrying the runs that finished.

    Results are keyed by agent name, so names must differ: agents given as specs whose names
    clash (``muzero-sim:runs/a`` and ``muzero-sim:runs/b`` are both ``muzero-sim``) are renamed to their
    specs; any other clash is a ``ValueError``, as are no scenarios, no agents, or a scenario
    name given twice (results are keyed by scenario name too).
    """
    if not scenarios:
        raise ValueError("bench: no scenarios to play")
    if not agents:
        raise ValueError("bench: no agents to play")
    twice = sorted(name for name, n in Counter(s.name for s in scenarios).items() if n > 1)
    if twice:
        raise ValueError(f"scenario {', '.join(map(repr, twice))} is given twice: results are keyed by scenario "
                         f"name, so give each scenario once")
    _check_env(env)
    specs = [a if isinstance(a, str) else None for a in agents]
    agents = _distinct_names(agents, [make_agent(a) if isinstance(a, str) else a for a in agents])
    for agent in agents:
        _check_plays(agent, env)
    if budget_s is not None and not [a for a in agents if with_budget(a, budget_s)]:
        raise ValueError(f"budget_s={budget_s} applies to search agents (rollout, beam, mcts, muzero, muzero-sim); "
                         f"none of {', '.join(a.name for a in agents)} searches")
    runs = [Run(scenario, agent, spec, seed, env, budget_s) for scenario in scenarios
            for agent, spec in zip(agents, specs)]
    if runner is None:
        _warm_up()  # before the bar, so that a first compile's one-line notice does not cut through it
        runner = local_runner
    results: list[Result | None] = [None] * len(runs)
    try:
        with Progress(len(runs), "bench", enabled=progress) as bar:
            for i, result in runner(runs):
                results[i] = result
                if rows:
                    bar.write(row_line(result))
                bar.update(f"{result.scenario} {result.agent}")
    except KeyboardInterrupt:
        raise BenchInterrupted([r for r in results if r is not None], len(runs)) from None
    missing = sum(r is None for r in results)
    if missing:
        raise ValueError(f"bench: the runner returned no result for {missing} of {len(runs)} runs")
    return results


def _fmt(value, spec: str) -> str:
    return "" if value is None else format(value, spec)


def to_markdown(results: Sequence[Result]) -> str:
    """A table: one row per scenario, one speedup column per agent, best in bold; then a
    per-agent summary (geometric-mean speedup, mean placed bytes, wins, wall time)."""
    agents = list(dict.fromkeys(r.agent for r in results))
    scenarios = list(dict.fromkeys(r.scenario for r in results))
    by_key = {(r.scenario, r.agent): r for r in results}
    lines = ["| scenario | " + " | ".join(agents) + " |", "|---|" + "---:|" * len(agents)]
    for s in scenarios:
        row = [by_key.get((s, a)) for a in agents]
        best = max((r.speedup for r in row if r is not None), default=None)
        cells = []
        for r in row:
            if r is None:
                cells.append("")
                continue
            text = f"{r.speedup:.4f}"
            if r.gap is not None:
                text += f" (gap {r.gap:.1%})"
            cells.append(f"**{text}**" if best is not None and r.speedup >= best - 1e-12 else text)
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines += ["", "| agent | geomean speedup | mean placed bytes | best on | total wall s |",
              "|---|---:|---:|---:|---:|"]
    for a in agents:
        rows = [r for r in results if r.agent == a]
        geo = float(np.exp(np.mean(np.log([r.speedup for r in rows]))))
        wins = sum(1 for r in rows if all(r.speedup >= by_key[(r.scenario, o)].speedup - 1e-12
                                          for o in agents if (r.scenario, o) in by_key))
        lines.append(f"| {a} | {geo:.4f} | {np.mean([r.placed_bytes_fraction for r in rows]):.1%} | "
                     f"{wins}/{len(rows)} | {sum(r.wall_s for r in rows):.2f} |")
    return "\n".join(lines) + "\n"


CSV_COLUMNS = ("scenario", "agent", "speedup", "placed_bytes_fraction", "time", "time_all_slow",
               "wall_s", "time_lower_bound", "gap", "hardware", "fast_capacity", "env", "stall_time", "copy_bytes")


def to_csv(results: Sequence[Result]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in results:
        d = r.to_dict(with_offsets=False)
        writer.writerow(["" if d.get(c) is None else d[c] for c in CSV_COLUMNS])
    return buffer.getvalue()


def write_results(results: Sequence[Result], out_dir: str | Path, *, command: str | None = None,
                  extra: dict[str, bytes] | None = None, note: str | None = None) -> Path:
    """Write ``results.md``, ``results.csv`` and ``results.json`` into ``out_dir`` as one set;
    MallocGame-v1 results keep their mappings in ``mappings.json.gz`` (:func:`load_mappings`)
    instead of ``results.json``, which has v0's offsets. ``extra``: more files of the set (name ->
    bytes), each named in :data:`RESULT_FILES` and none of the above (``mallocgym run``'s
    ``headline.md`` and ``memory-map.png``).

    The files are written into a temporary folder beside ``out_dir`` and renamed into place
    (:func:`mallocgym._files.replace_folder`): the folder holds this set only (an older run's
    ``mappings.json.gz`` goes), and a failure (no results, a value that does not serialise, a
    full disk) leaves ``out_dir`` as it was. A folder holding other files is refused.
    ``note`` (as "interrupted after 3 of 12 runs") goes under the command in ``results.md``.
    """
    if not results:
        raise ValueError("no results to write")
    extra = dict(extra or {})
    for name in extra:
        if name not in RESULT_FILES or name in WRITTEN_FILES or name in KEPT_FILES:
            raise ValueError(f"write_results: extra file {name!r} is not one of "
                             f"{', '.join(sorted(set(RESULT_FILES) - set(WRITTEN_FILES) - set(KEPT_FILES)))}")
    out = check_result_folder(out_dir, RESULT_FILES, flag="folder")
    header = (f"Command: `{command}`\n\n" if command else "") + (f"{note}\n\n" if note else "")
    v1_rows = [r for r in results if r.env == "v1"]
    rows = [r.to_dict(with_offsets=r.env != "v1") for r in results]
    files = {"results.md": header + to_markdown(results), "results.csv": to_csv(results),
             "results.json": json.dumps(rows, indent=1) + "\n"}
    files = {name: text.encode("utf-8") for name, text in files.items()}
    if v1_rows:  # v1 mappings run to megabytes as JSON: one compressed file beside the results
        mappings = {f"{r.scenario}|{r.agent}": r.mapping for r in v1_rows}
        files[MAPPINGS_FILE] = gzip.compress(json.dumps(mappings, separators=(",", ":")).encode(), mtime=0)
    kept = {name: (out / name).read_bytes() for name in KEPT_FILES if (out / name).is_file()}
    return replace_folder(out, {**kept, **files, **extra})


MAPPINGS_FILE = "mappings.json.gz"
WRITTEN_FILES = ("results.md", "results.csv", "results.json", MAPPINGS_FILE)
KEPT_FILES = ("command.txt", "RESULTS.md")
"""A leaderboard entry's own files beside its results (the command that made them,
``baselines/make_readme.py``'s per-scenario page): a new set keeps them as they are."""
RESULT_FILES = WRITTEN_FILES + ("speed.json", "headline.md", "memory-map.png") + KEPT_FILES
"""What a ``bench --out`` or ``run --out`` folder holds (each run replaces the whole set, but
for :data:`KEPT_FILES`)."""


def load_mappings(folder: str | Path) -> dict[tuple[str, str], dict]:
    """The MallocGame-v1 mappings :func:`write_results` stored in ``folder``, keyed by
    ``(scenario, agent)`` (each one :func:`mallocgym.evaluate_v1` checks and prices)."""
    path = Path(folder) / MAPPINGS_FILE
    try:
        data = json.loads(gzip.decompress(path.read_bytes()))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file (only bench --env v1 --out writes it)") from None
    except (OSError, EOFError, ValueError) as exc:
        raise ValueError(f"{path}: not a gzip-compressed JSON file of mappings ({exc})") from None
    return {tuple(key.split("|", 1)): mapping for key, mapping in data.items()}
