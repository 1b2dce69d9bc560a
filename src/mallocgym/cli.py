"""The ``mallocgym`` command. ``mallocgym --help`` and ``mallocgym COMMAND --help`` document it.

Bad input (a malformed file, an unknown name) and empty or contradictory requests (``--agents ""``,
a ``--scenario`` outside the ``--suite`` given, ``--speed`` with ``--agents``) print one line
``mallocgym: error: ...`` and exit with status 2. A number out of range (``--capacity``,
``--seed``) is refused by the argument parser, which names the flag, also with status 2.
A command that fails writes nothing: output files are written atomically, and only once the
results are complete.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path
from typing import Callable

from ._args import Parser, one_line

__all__ = ["main", "COMMANDS"]


class UsageError(ValueError):
    """Raised for bad input; printed as one line, exit status 2."""


MAX_SEED = 2**32 - 1  # numpy's legacy seeding (used by Stable-Baselines3) takes seeds below 2**32


def _arg_type(parse: Callable, name: str) -> Callable:
    """``parse`` for argparse's ``type=``: its ``ValueError`` becomes an ``ArgumentTypeError``,
    whose message argparse prints (``argument --capacity: ... bytes is outside [1, ...]``)."""

    def convert(text: str):
        try:
            return parse(text)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


def _parse_bytes(text: str) -> int:
    from ._validate import parse_bytes

    return parse_bytes(text)


def int_in(low: int, high: int, what: str = "value") -> Callable[[str], int]:
    """An argparse ``type=``: a whole number in ``[low, high]``, else a message naming the bounds."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise ValueError(f"{what} {value} is outside [{low}, {high}]")
        return value

    return _arg_type(parse, what)


byte_count = _arg_type(_parse_bytes, "bytes")
seed_type = int_in(0, MAX_SEED, "seed")


def _scenario(name: str, capacity: int | None = None, hardware: str | None = None):
    from .scenarios import resolve

    return resolve(name, hardware, capacity)


def _print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=1)
    sys.stdout.write("\n")


# ---------------------------------------------------------------------------------------- list
def _add_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default="default", help="suite: default (XLA-compiled programs), synthetic, "
                                                      "minimalloc or large (default: %(default)s)")
    p.add_argument("--split", choices=["train", "test"], help="only this split")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON (one object per scenario) instead of a table")
    out.add_argument("--markdown", action="store_true",
                     help="print a Markdown table with one row per workload (the table of docs/suite.md)")


def _suite_info(suite_name: str) -> dict[str, dict]:
    from .scenarios import manifest

    return {row["name"]: row for row in manifest(suite_name)["workloads"]} if suite_name in ("default", "large") else {}


def _run_list(args) -> int:
    from .scenarios import suite

    scenarios = suite(args.suite, args.split)
    if not scenarios:
        raise UsageError(f"suite {args.suite!r} has no {args.split!r} scenarios")
    info = _suite_info(args.suite)
    if args.markdown:
        from .show import suite_table, table_markdown

        print(table_markdown(suite_table(scenarios, info)))
        return 0
    rows = [{
        "name": s.name, "split": s.split, "workload": s.workload.name,
        "family": info.get(s.workload.name, {}).get("family", ""), "ops": s.workload.num_ops,
        "buffers": s.workload.num_buffers, "peak_live_bytes": s.workload.peak_live_bytes,
        "fast_capacity": s.hardware.fast_capacity, "hardware": s.hardware.name,
    } for s in scenarios]
    if args.json:
        _print_json(rows)
        return 0
    print(f"{'scenario':32} {'split':5} {'ops':>6} {'buffers':>7} {'peak live B':>12} {'fast B':>11}")
    for r in rows:
        print(f"{r['name']:32} {r['split']:5} {r['ops']:6d} {r['buffers']:7d} {r['peak_live_bytes']:12d} "
              f"{r['fast_capacity']:11d}")
    return 0


# ---------------------------------------------------------------------------------------- show
def _add_show(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a bundled scenario or workload name, or a workload file")
    p.add_argument("--capacity", type=byte_count, help="fast-memory bytes (default: the scenario's); the "
                                                      "output names the hardware profile and the capacity used")
    p.add_argument("--hardware", help="hardware profile name (default: the scenario's)")
    p.add_argument("--png", help="draw memory pressure to this PNG file (needs the [plot] extra): live bytes "
                                 "against the capacity, the buffers' live ranges, each op's time all-slow "
                                 "against all-fast")
    p.add_argument("--json", action="store_true", help="print JSON")


def _check_png(png: str | None) -> None:
    """Refuse a ``--png`` that cannot be written, and a missing ``[plot]`` extra, before any work."""
    if png is None:
        return
    from ._extras import require_extra

    if Path(png).is_dir():
        raise UsageError(f"--png {png}: is a folder; give a .png file name")
    if Path(png).suffix.lower() != ".png":
        raise UsageError(f"--png {png}: the file name must end in .png")
    require_extra("plot", "--png")


def _run_show(args) -> int:
    from .show import scenario_stats

    _check_png(args.png)
    s = _scenario(args.name, args.capacity, args.hardware)
    stats = scenario_stats(s)
    family = _suite_info("default").get(s.workload.name, {}).get("family") if "@" in s.name else None
    if family:
        stats["family"] = family
    if args.png:
        from .plot import pressure_figure, save_figure

        save_figure(pressure_figure(s), args.png)
    if args.json:
        _print_json(stats)
    else:
        for key, value in stats.items():
            print(f"{key:28} {value:.6g}" if isinstance(value, float) else f"{key:28} {value}")
        if args.png:
            print(f"wrote {args.png}")
    return 0


# ---------------------------------------------------------------------------------------- import
def _add_import(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=["minimalloc", "xla"],
                   help="minimalloc: a MiniMalloc CSV; xla: an XLA dump directory written with XLA_FLAGS="
                        "'--xla_dump_to=DIR --xla_dump_hlo_as_text --xla_dump_buffer_assignment_analysis'")
    p.add_argument("path", help="the file (minimalloc) or dump directory (xla) to import")
    p.add_argument("-o", "--out", required=True, help="output workload (.json or .npz)")
    p.add_argument("--module", help="xla: which module (module_0008.jit_f or jit_f; default: the largest)")
    p.add_argument("--name", help="the workload's name (default: from the file or module)")


def _run_import(args) -> int:
    import dataclasses

    from .workloads import load_minimalloc, save

    suffix = Path(args.out).suffix.lower()
    if suffix not in (".json", ".npz"):
        raise UsageError(f"-o {args.out}: the output must be a .json or .npz file, not {suffix or 'no extension'!r}")
    if Path(args.out).is_dir():
        raise UsageError(f"-o {args.out}: is a folder; give a .json or .npz file name")

    if args.kind == "xla":
        from .workloads.xla import import_xla_dump

        workload = import_xla_dump(args.path, module=args.module, name=args.name)
    else:
        if args.module:
            raise UsageError("--module is only for 'import xla'")
        workload = load_minimalloc(args.path)
        if args.name:
            workload = dataclasses.replace(workload, name=args.name)
    out = save(workload, args.out)
    print(f"wrote {out}: {workload.num_buffers} buffers, {workload.num_ops} ops")
    return 0


# ---------------------------------------------------------------------------------------- solve
def _add_solve(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a bundled scenario name or a workload file (.json, .npz, .csv)")
    p.add_argument("--agent", default="xla", help="agent name or KIND:PATH (default: %(default)s)")
    p.add_argument("--capacity", type=byte_count,
                   help="fast-memory bytes (e.g. for a MiniMalloc CSV; default: the scenario's); the output "
                        "names the scenario (renamed when its capacity is overridden), the hardware profile "
                        "and the capacity used")
    p.add_argument("--hardware", help="hardware profile name (default: the scenario's)")
    p.add_argument("--seed", type=seed_type, default=0, help=f"seed for stochastic agents, 0..{MAX_SEED} "
                                                            "(default: %(default)s)")
    p.add_argument("--env", choices=["v0", "v1"], default="v0",
                   help="game version: v0 (whole-live-range placement) or v1 (per-use decisions with prefetch "
                        "and eviction, MSA's runtime cost model) (default: %(default)s)")
    p.add_argument("--png", help="draw the mapping to this PNG file (needs the [plot] extra): address against op "
                                 "index, the capacity, each op's time against all-slow (on v1: chunks, prefetches "
                                 "in flight and eviction holds hatched)")
    p.add_argument("--json", action="store_true", help="print one JSON object (with offsets; on v1 the v1 mapping)")
    p.add_argument("--minimalloc-out", metavar="FILE",
                   help="write the mapping as a MiniMalloc solution CSV (id,lower,upper,size,offset; "
                        "-1 = not placed); only for a MiniMalloc .csv workload")


def _run_solve(args) -> int:
    from .harness import solve

    minimalloc_out = getattr(args, "minimalloc_out", None)
    if minimalloc_out and Path(args.name).suffix.lower() != ".csv":
        raise UsageError(f"--minimalloc-out needs a workload loaded from a MiniMalloc .csv file, not {args.name!r}")
    if args.env == "v1" and minimalloc_out:
        raise UsageError("--minimalloc-out writes v0 mappings (one offset per buffer); with --env v1 use --json")
    _check_png(args.png)
    s = _scenario(args.name, args.capacity, args.hardware)
    result = solve(s, args.agent, seed=args.seed, env=args.env)
    if minimalloc_out:
        from .workloads.minimalloc import write_minimalloc

        write_minimalloc(minimalloc_out, s.workload, result.offsets)
    if args.png:
        from .plot import memory_map_figure, save_figure

        save_figure(memory_map_figure(s, result), args.png)
    if args.json:
        _print_json(result.to_dict())
    else:
        print(f"{result.scenario}  agent {result.agent}  hardware {result.hardware}, fast memory "
              f"{result.fast_capacity} B: speedup {result.speedup:.4f}, placed bytes "
              f"{result.placed_bytes_fraction:.1%}, time {result.time:.6g}s (all slow {result.time_all_slow:.6g}s), "
              f"wall {result.wall_s:.2f}s" + (f", gap {result.gap:.2%}" if result.gap is not None else "")
              + (f", stall {result.stall_time:.6g}s, copied {result.copy_bytes:.0f} B" if result.env == "v1" else ""))
        if args.png:
            print(f"wrote {args.png}")
        if minimalloc_out:
            print(f"wrote {minimalloc_out}")
    return 0


# ---------------------------------------------------------------------------------------- bench / eval
def split_agents(text: str) -> list[str]:
    """``"xla,muzero-sim:DIR,sims=64,gate=0,mcts"`` -> ``["xla", "muzero-sim:DIR,sims=64,gate=0", "mcts"]``:
    a ``KEY=VALUE`` piece (no ``:``) is an option of the agent before it."""
    agents: list[str] = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        if "=" in piece and ":" not in piece:
            if not agents:
                raise ValueError(f"agent option {piece!r} comes before any agent in --agents {text!r}")
            agents[-1] += "," + piece
        else:
            agents.append(piece)
    return agents


_SELECTION_HELP = ("--scenario NAME picks bundled scenarios (from any suite) or workload files instead of a suite; "
                   "given with it, --suite and --split are checks: each scenario must belong to them, else "
                   "it is an error. A scenario named twice is an error.")


def _add_selection(p: argparse.ArgumentParser, default_split: str | None) -> None:
    p.add_argument("--suite", help="suite name: default, synthetic, minimalloc or large (default: default)")
    split_default = f" (default: {default_split}; any with --scenario)" if default_split else " (default: both)"
    p.add_argument("--split", choices=["train", "test"], help="only this split" + split_default)
    p.add_argument("--scenario", action="append", metavar="NAME",
                   help="only this scenario (repeatable); see below for --suite/--split with it")
    p.add_argument("--seed", type=seed_type, help=f"seed for stochastic agents, 0..{MAX_SEED} (default: 0)")
    p.add_argument("--env", choices=["v0", "v1"], default="v0",
                   help="game version: v0 (whole-live-range placement) or v1 (per-use decisions with prefetch "
                        "and eviction, MSA's runtime cost model) (default: %(default)s)")


def _add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")


def _add_ray(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ray", nargs="?", const=True, metavar="ADDRESS",
                   help="run the scenario x agent runs as Ray tasks (the [ray] extra) on the cluster at ADDRESS: "
                        "auto, HOST:PORT or ray://HOST:PORT; with no ADDRESS on a local Ray started for the run "
                        "(see docs/ray.md); the results are those of a local run")


def _runner(args):
    """The harness runner ``--ray`` asks for (None: the local loop)."""
    if args.ray is None:
        return None
    from .harness import ray_runner

    return ray_runner(None if args.ray is True else args.ray)


def _add_bench(p: argparse.ArgumentParser) -> None:
    p.epilog = _SELECTION_HELP + (" Each run is printed on stderr as it finishes (not with --quiet); the table "
                                  "comes at the end. --speed measures the simulator and env instead and takes none of "
                                  "--suite, --split, --scenario, --agents and --seed.")
    _add_selection(p, None)
    p.add_argument("--agents",
                   help="comma-separated agents; a KEY=VALUE piece is an option of the agent before it, "
                        "as in xla,muzero-sim:DIR,sims=64; each agent once (default: all-slow,random,xla)")
    p.add_argument("--out", help="write results.md, results.csv and results.json into this folder once every "
                                 "run has finished (nothing is written when one fails); a run stopped by Ctrl-C or "
                                 "SIGTERM writes (and prints) the runs that finished, and exits with status 130")
    p.add_argument("--budget-s", type=float, metavar="S",
                   help="the same wall budget in seconds per scenario for every search agent (rollout, beam and "
                        "mcts time_limit, muzero budget_s); an error when no agent given searches")
    p.add_argument("--speed", action="store_true", help="measure simulator and env speed instead")
    p.add_argument("--sizes", metavar="N,N,...",
                   help="with --speed: a size sweep instead of the standard figures, over synthetic programs of "
                        "about these many buffers (as 1000,10000,60000): xla-msa's plan, a v1 completion's cost "
                        "per decision from mid-episode, the mean v1 and v0 steps over a whole episode, with ratios "
                        "to the smallest size")
    p.add_argument("--json", action="store_true", help="print JSON")
    _add_quiet(p)
    _add_ray(p)


def _select(args, default_split: str | None = None):
    """The scenarios ``args`` asks for; an empty or contradictory selection is a ``UsageError``."""
    from .scenarios import SUITES, suite

    if args.scenario:
        pool = None
        if args.suite is not None or args.split is not None:
            suites = [args.suite] if args.suite is not None else list(SUITES)
            pool = {s.name for name in suites for s in suite(name, args.split)}
        picked, seen = [], {}
        for given in args.scenario:
            s = _scenario(given)
            label = repr(given) if s.name == given else f"{given!r} (scenario {s.name!r})"
            if pool is not None and s.name not in pool:
                where = " and ".join(f"--{flag} {value!r}" for flag, value in
                                     (("suite", args.suite), ("split", args.split)) if value is not None)
                raise UsageError(f"--scenario {label} is not in {where}; drop --suite/--split to take "
                                 f"scenarios from any suite")
            if s.name in seen:
                raise UsageError(f"--scenario {label} is given twice (also as {seen[s.name]!r}): give each "
                                 f"scenario once")
            seen[s.name] = given
            picked.append(s)
        return picked
    name = args.suite if args.suite is not None else "default"
    split = args.split if args.split is not None else default_split
    chosen = suite(name, split)
    if not chosen:
        raise UsageError(f"suite {name!r} has no {split!r} scenarios")
    return chosen


def _agents(text: str) -> list[str]:
    agents = split_agents(text)
    if not agents:
        raise UsageError(f"--agents {text!r} names no agent")
    return agents


def _claim_out(out: str | None):
    """``--out``: checked (a folder that can be written, holding result files only) and locked
    against a second run before any work; a no-op context without ``--out``."""
    import contextlib

    from ._files import claim_folder
    from .harness import RESULT_FILES

    return contextlib.nullcontext() if out is None else claim_folder(out, RESULT_FILES)


def _run_bench(args) -> int:
    if args.speed:
        given = [flag for flag, value in (("--suite", args.suite), ("--split", args.split),
                                           ("--scenario", args.scenario), ("--agents", args.agents),
                                           ("--seed", args.seed), ("--budget-s", args.budget_s), ("--ray", args.ray))
                 if value is not None]
        if args.env != "v0":
            given.append("--env")
        if given:
            raise UsageError(f"--speed measures the simulator and env speed; it takes no {', '.join(given)}")
        from ._progress import Progress
        from .speed import format_report, format_sizes, measure, measure_sizes, parse_sizes, size_stages

        sizes = None if args.sizes is None else parse_sizes(args.sizes)
        with _claim_out(args.out):
            if sizes is None:
                report = measure()
            else:
                with Progress(size_stages(len(sizes)), "speed", enabled=not args.quiet) as bar:
                    report = measure_sizes(sizes, progress=lambda text: bar.update(text))
            if args.json:
                _print_json(report)
            else:
                print(format_report(report) if sizes is None else format_sizes(report))
            if args.out:
                from ._files import replace_folder

                replace_folder(args.out, {"speed.json": (json.dumps(report, indent=1) + "\n").encode()})
        return 0
    if args.sizes is not None:
        raise UsageError("--sizes is a setting of --speed (the size sweep): add --speed")
    from ._interrupt import terminate_as_interrupt
    from .harness import BenchInterrupted, bench, to_markdown, write_results

    agents = _agents(args.agents if args.agents is not None else "all-slow,random,xla")
    if args.budget_s is not None and not (math.isfinite(args.budget_s) and args.budget_s > 0):
        raise UsageError(f"--budget-s {args.budget_s}: a number of seconds > 0")
    with _claim_out(args.out):
        note = None
        try:
            with terminate_as_interrupt():  # SIGTERM stops the run as Ctrl-C does
                results = bench(_select(args), agents, seed=args.seed or 0, env=args.env, progress=not args.quiet,
                                budget_s=args.budget_s, runner=_runner(args), rows=True)
        except BenchInterrupted as stop:
            if not stop.results:
                raise
            results = stop.results
            note = f"Interrupted after {len(results)} of {stop.total} runs: the finished ones are below."
        if args.json:
            _print_json([r.to_dict(with_offsets=False) for r in results])
        else:
            print(to_markdown(results), flush=True)
        if args.out:
            command = "mallocgym " + " ".join(shlex.quote(a) for a in sys.argv[1:])
            print(f"wrote {write_results(results, args.out, command=command, note=note)}/results.{{md,csv,json}}",
                  flush=True)
        if note:
            raise KeyboardInterrupt  # exit status 130, "interrupted"
    return 0


def _add_eval(p: argparse.ArgumentParser) -> None:
    p.epilog = _SELECTION_HELP
    p.add_argument("--agent", required=True, help="agent name or KIND:PATH")
    _add_selection(p, "test")
    p.add_argument("--json", action="store_true", help="print a JSON list, one object per scenario")
    _add_quiet(p)
    _add_ray(p)


def _run_eval(args) -> int:
    from .harness import bench, to_markdown

    if not args.agent.strip():
        raise UsageError("--agent is empty")
    results = bench(_select(args, default_split="test"), [args.agent], seed=args.seed or 0, env=args.env,
                    progress=not args.quiet, runner=_runner(args))
    if args.json:
        _print_json([r.to_dict() for r in results])
    else:
        print(to_markdown(results))
    return 0


# ---------------------------------------------------------------------------------------- run
def _add_run(p: argparse.ArgumentParser) -> None:
    from .headline import DEFAULT_BUDGET_S, DEFAULT_POLICY, DEFAULT_SEARCH, HEADLINE_FILE, PICTURE_FILE

    p.epilog = ("MallocGame-v1, the game as XLA's Memory Space Assignment plays it. Writes results.{md,csv,json} and "
                f"mappings.json.gz (as bench --out does), {HEADLINE_FILE} (the table and summary printed) and "
                f"{PICTURE_FILE}: the search agent's memory map of the scenario where it beats xla-msa by the most "
                "(none when it beats it nowhere or without the [plot] extra; the output says so). " + _SELECTION_HELP)
    p.add_argument("--suite", help="suite name: default, synthetic, minimalloc or large (default: default)")
    p.add_argument("--split", choices=["train", "test"], help="only this split (default: test; any with --scenario)")
    p.add_argument("--scenario", action="append", metavar="NAME",
                   help="only this scenario (repeatable); see below for --suite/--split with it")
    p.add_argument("--search", default=DEFAULT_SEARCH,
                   help="the search agent set against xla-msa: rollout, beam or mcts, with options (default: "
                        "%(default)s)")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, metavar="S",
                   help="the search agent's wall budget in seconds per scenario (default: %(default)g)")
    p.add_argument("--policy", default=DEFAULT_POLICY,
                   help="the learned agent, as KIND:PATH with the checkpoint's own settings unless options are "
                        "given; none: leave it out (default: %(default)s, the published mallocMuZero policy "
                        "of a checkout)")
    p.add_argument("--seed", type=seed_type, default=0, help=f"seed for stochastic agents, 0..{MAX_SEED} "
                                                            "(default: %(default)s)")
    p.add_argument("--out", default="out/run", help="the results folder (default: %(default)s)")
    _add_quiet(p)


def _run_run(args) -> int:
    from ._extras import MissingExtraError, require_extra
    from ._files import claim_folder
    from .harness import RESULT_FILES, write_results
    from .headline import (DEFAULT_POLICY, HEADLINE_FILE, PICTURE_FILE, best_gain, headline_text, run_headline,
                           search_agent)

    if not (math.isfinite(args.budget_s) and args.budget_s > 0):
        raise UsageError(f"--budget-s {args.budget_s}: a number of seconds > 0")
    if not args.search.strip():
        raise UsageError("--search is empty")
    policy = args.policy.strip()
    if not policy:
        raise UsageError("--policy is empty; give KIND:PATH, or none to leave the learned agent out")
    policy = None if policy.lower() == "none" else policy
    if policy == DEFAULT_POLICY and not Path(DEFAULT_POLICY.split(":", 1)[1]).is_dir():
        raise UsageError(f"--policy {DEFAULT_POLICY} (the default): the published policy is read from a checkout's "
                         f"baselines/ folder and {Path.cwd()} has none; run from the repository root, or give "
                         "--policy KIND:PATH, or --policy none to leave it out")
    search_agent(args.search, args.budget_s)  # a spec that does not search: refused before any work
    with claim_folder(args.out, RESULT_FILES):
        scenarios = _select(args, default_split="test")
        headline = run_headline(scenarios, search=args.search, budget_s=args.budget_s, policy=policy,
                                seed=args.seed, progress=not args.quiet)
        if args.scenario:
            where = f"{len(scenarios)} chosen scenario" + ("s" if len(scenarios) > 1 else "")
        else:
            where = f"suite `{args.suite or 'default'}`, split {args.split or 'test'}"
        text = headline_text(headline, title=f"MallocGame-v1, {where}")
        searcher = headline.agents[1]
        best = best_gain(headline, searcher)
        png = None
        if best is None:
            note = f"No picture: `{searcher}` beats `xla-msa` on no scenario."
        else:
            try:
                require_extra("plot", "the memory-map picture")
            except MissingExtraError as exc:
                note = f"No picture: {exc}."
            else:
                from .plot import figure_png, memory_map_figure

                scenario = next(s for s in scenarios if s.name == best[0])
                png = figure_png(memory_map_figure(scenario, headline.get(best[0], searcher)))
                note = (f"Picture: `{PICTURE_FILE}`, the memory map of `{searcher}` on {best[0]}, where it beats "
                        f"`xla-msa` by the most ({best[1] - 1:+.1%}).")
        text += "\n" + note + "\n"
        print(text, end="")
        extra = {HEADLINE_FILE: text.encode()}
        if png is not None:
            extra[PICTURE_FILE] = png
        command = "mallocgym " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        out = write_results(headline.results, args.out, command=command, extra=extra)
        print(f"wrote {out}/: results.{{md,csv,json}}, mappings.json.gz, {', '.join(extra)}")
    return 0


# ---------------------------------------------------------------------------------------- evaluate
def _add_evaluate(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a bundled scenario name or a workload file (.json, .npz, .csv)")
    p.add_argument("mapping", help="a MallocGame-v1 mapping JSON file (as `solve --env v1 --json` prints under "
                                   "'mapping', or that whole object)")
    p.add_argument("--capacity", type=byte_count, help="fast-memory bytes (default: the scenario's)")
    p.add_argument("--hardware", help="hardware profile name (default: the scenario's)")
    p.add_argument("--json", action="store_true", help="print the evaluation as JSON")


def _run_evaluate(args) -> int:
    from .pricing.v1 import evaluate_v1, load_mapping

    s = _scenario(args.name, args.capacity, args.hardware)
    doc = load_mapping(args.mapping)
    if isinstance(doc, dict) and "mapping" in doc and "format" not in doc:
        doc = doc["mapping"]  # the whole `solve --env v1 --json` object
    try:
        ev = evaluate_v1(s.workload, doc, s.hardware)
    except ValueError as exc:
        raise UsageError(f"{args.mapping}: {exc}") from None
    if args.json:
        _print_json({"scenario": s.name, "hardware": s.hardware.name, "fast_capacity": s.hardware.fast_capacity,
                     **ev.to_dict()})
    else:
        print(f"{s.name}  hardware {s.hardware.name}, fast memory {s.hardware.fast_capacity} B: valid v1 mapping, "
              f"speedup {ev.speedup:.4f}, time {ev.time:.6g}s (all slow {ev.time_all_slow:.6g}s), stall "
              f"{ev.stall_time:.6g}s, {ev.prefetches} prefetches, {ev.evictions} evictions, copied "
              f"{ev.copy_bytes:.0f} B")
    return 0


# ---------------------------------------------------------------------------------------- train
# KIND -> "module:function"; the function takes the remaining arguments (list of str) and parses
# them itself, so `mallocgym --help` never imports torch.
TRAINERS: dict[str, str] = {
    "sb3": "mallocgym.agents.sb3.train:main",
    "muzero": "mallocgym.agents.muzero.train:main",
}


def _add_train(p: argparse.ArgumentParser) -> None:
    p.epilog = "Both trainers take --quiet: no progress bar on stderr."
    p.add_argument("kind", choices=sorted(TRAINERS), help="which agent family to train")
    p.add_argument("rest", nargs=argparse.REMAINDER,
                   help="the trainer's own arguments (see `mallocgym train KIND --help`)")


def _quiet_trainer_args(kind: str, rest: list[str]) -> tuple[list[str], bool]:
    """``(arguments for the trainer, quiet)``: whether ``--quiet`` is among ``rest`` (both
    trainers parse it themselves; the bar is also turned off through :func:`._progress.command`)."""
    return rest, "--quiet" in rest


def _run_train(args) -> int:
    import importlib

    from ._extras import require_extra
    from ._progress import command

    require_extra(args.kind, f"'mallocgym train {args.kind}'")  # the extras are named like the trainers
    module, _, attr = TRAINERS[args.kind].partition(":")
    try:
        trainer = getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as exc:
        raise ValueError(f"trainer {args.kind!r} is not available ({exc})") from None
    rest, quiet = _quiet_trainer_args(args.kind, list(args.rest))
    with command(f"mallocgym train {args.kind}", quiet=quiet):
        return int(trainer(rest) or 0)


# ---------------------------------------------------------------------------------------- plot
def _add_plot(p: argparse.ArgumentParser) -> None:
    p.epilog = ("sb3 runs: the training return, the evaluations' geomean speedups (with the reference agent's on "
                "the same scenarios, dashed) and the losses; muzero runs: the return against XLA-like's on the same "
                "games, the share of games beating XLA-like and the losses; all against env steps.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder of `mallocgym train sb3` or `mallocgym train muzero` "
                                                  "(their --out)")
    p.add_argument("--png", required=True, help="the PNG file to write (needs the [plot] extra)")
    p.add_argument("--reference", default="auto",
                   help="sb3 runs: agent whose geomean speedup on each evaluation set is drawn as a dashed line "
                        "(auto: xla on v0, xla-msa on v1; none: no line) (default: %(default)s)")


def _run_plot(args) -> int:
    from .plot import plot_run

    _check_png(args.png)
    reference = None if args.reference.strip().lower() in ("none", "") else args.reference.strip()
    print(f"wrote {plot_run(args.run_dir, args.png, reference=reference)}")
    return 0


# name -> (help, add_arguments, run)
COMMANDS: dict[str, tuple[str, Callable, Callable]] = {
    "list": ("list the bundled scenarios", _add_list, _run_list),
    "show": ("statistics of a scenario", _add_show, _run_show),
    "import": ("convert a workload file to mallocgym JSON/NPZ", _add_import, _run_import),
    "solve": ("map one scenario with one agent", _add_solve, _run_solve),
    "run": ("the headline: xla-msa against search and the learned policy on MallocGame-v1", _add_run, _run_run),
    "bench": ("run agents over a suite (or --speed)", _add_bench, _run_bench),
    "eval": ("evaluate one agent on a suite's split", _add_eval, _run_eval),
    "evaluate": ("check and price a MallocGame-v1 mapping file", _add_evaluate, _run_evaluate),
    "train": ("train an agent (sb3 or muzero) under a wall-clock budget", _add_train, _run_train),
    "plot": ("draw a training run's curves to a PNG", _add_plot, _run_plot),
}


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    parser = Parser(prog="mallocgym", description="MallocGame: learned memory mapping for ML compilers.")
    parser.add_argument("--version", action="version", version=f"mallocgym {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, add, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        add(p)
        p.set_defaults(run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ._progress import command

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with command(f"mallocgym {args.command}", quiet=bool(getattr(args, "quiet", False))):
            return int(args.run(args) or 0)
    except BrokenPipeError:  # `mallocgym ... | head`
        sys.stderr.close()
        return 0
    except (ValueError, OSError) as exc:
        print(f"mallocgym: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mallocgym: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
