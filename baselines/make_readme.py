"""Build baselines/README.md, the leaderboard, from every ``results.json`` under baselines/.

    python baselines/make_readme.py            # writes baselines/README.md
    python baselines/make_readme.py --check    # exit 1 if README.md is not up to date

Each entry is a folder holding ``command.txt`` (the exact command that produced it) and the
``results.{md,csv,json}`` that ``mallocgym bench --out`` wrote. An agent whose mode was removed
leaves the tables: the folder's ``retired.json`` (``{"agent": "why"}``) names it, and the page
lists it with that line; its rows stay in the folder's results as history. Rows are grouped by the suite
their scenario belongs to (whatever folder they sit in), so any new entry, whatever its layout,
shows up in the right tables.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs" / "baselines.md"
PREFIX = "\x00"  # where a link to an entry folder starts (README: "", docs: "../baselines/")
BEGIN, END = "<!-- leaderboard:begin (make_readme.py) -->", "<!-- leaderboard:end -->"
# Agents first in this order (prefix match on the agent name), then the rest alphabetically.
AGENT_ORDER = ("all-slow", "random", "first-fit", "best-fit", "xla", "greedy", "xla-msa", "rollout", "beam", "mcts",
               "exact")
SEARCH = ("rollout", "beam", "mcts")  # agents whose headroom over xla-msa the v1 tables state
V1_SUFFIX = "@v1"  # group key suffix of MallocGame-v1 results
SUITE_TITLES = {"default": "Bundled suite (real XLA programs)", "minimalloc": "MiniMalloc A-E (1 MiB)",
                "synthetic": "Synthetic MLP training steps"}


def retired(root: Path = HERE) -> dict[tuple[str, str], str]:
    """``(entry folder, agent) -> why`` from every ``retired.json`` under ``root``."""
    out = {}
    for path in sorted(root.rglob("retired.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        if not (isinstance(data, dict) and all(isinstance(v, str) for v in data.values())):
            raise ValueError(f"{path}: expected an object of agent -> reason")
        for agent, why in data.items():
            out[(path.parent.relative_to(root).as_posix(), agent)] = why
    return out


def load_entries(root: Path = HERE) -> list[dict]:
    """Every result row under ``root``, with ``entry`` (its folder, relative) and ``command``;
    rows of retired agents (:func:`retired`) are left out."""
    gone = retired(root)
    rows = []
    for path in sorted(root.rglob("results.json")):
        folder = path.parent
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a list of results")
        command = _command(folder)
        for i, row in enumerate(data):
            for key in ("scenario", "agent", "speedup", "placed_bytes_fraction", "wall_s"):
                if key not in row:
                    raise ValueError(f"{path}: result {i}: missing field {key!r}")
            entry = folder.relative_to(root).as_posix()
            if (entry, row["agent"]) not in gone:
                rows.append({**row, "entry": entry, "command": command})
    return rows


def _command(folder: Path) -> str | None:
    """The entry's ``command.txt``, else the ``Command: `...` `` line ``mallocgym bench`` writes
    at the top of ``results.md``."""
    path = folder / "command.txt"
    if path.exists():
        return " && ".join(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    md = folder / "results.md"
    if md.exists():
        first = md.read_text(encoding="utf-8").splitlines()[:1]
        if first and first[0].startswith("Command: `") and first[0].endswith("`"):
            return first[0][len("Command: `"):-1]
    return None


def suite_of() -> dict[str, tuple[str, str]]:
    """Scenario name -> (suite, split) for every bundled suite."""
    from mallocgym.scenarios import SUITES, suite

    out = {}
    for name in SUITES:
        try:
            for s in suite(name):
                out.setdefault(s.name, (name, s.split))
        except ValueError:  # a suite whose data is missing: its rows go to "other"
            continue
    return out


def _agent_key(agent: str) -> tuple:
    for i, prefix in enumerate(AGENT_ORDER):
        if agent == prefix or agent.startswith(prefix + ":"):
            return (i, agent)
    return (len(AGENT_ORDER), agent)


def _own_entry(row: dict) -> bool:
    """Whether ``row`` sits in its agent's folder (``xla`` in ``xla/...``, ``exact:60`` in
    ``exact/...``)."""
    kind = row["agent"].split(":")[0]
    return row["entry"].split("/")[0] == kind


def _table(scenarios, agents, cell, best_of=None) -> list[str]:
    lines = ["| scenario | " + " | ".join(agents) + " |", "|---|" + "---:|" * len(agents)]
    for s in scenarios:
        values = [cell(s, a) for a in agents]
        best = best_of(s) if best_of else None
        cells = []
        for a, text in zip(agents, values):
            if text and best is not None and a in best:
                text = f"**{text}**"
            cells.append(text)
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return lines


def training_budgets(root: Path = HERE) -> list[str]:
    """One line per trained model under ``root``: its wall-clock training budget and what it did
    in it, read from the run's own record (a mallocMuZero ``train-log.jsonl``'s final ``end``
    event, a Stable-Baselines3 ``train.json``'s ``trained`` block)."""
    lines = []
    for log in sorted(root.glob("**/train-log.jsonl")):
        events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
        end = [e for e in events if e.get("event") == "end"]
        if not end:
            raise ValueError(f"{log}: no 'end' event (the run did not finish)")
        e, folder = end[-1], log.parent.relative_to(root).as_posix()
        # a labelled-games run (train.label_fraction = 1) counts one actor step per game
        played = (f"{e['episodes']:,} labelled games ({e['positions']:,} labelled positions to the replay)"
                  if "positions" in e and e["env_steps"] == e["episodes"]
                  else f"{e['env_steps']:,} moves in {e['episodes']:,} games")
        lines.append(f"- [`{folder}`]({PREFIX}{folder}/): {e['elapsed_s'] / 60:.0f} minutes of wall-clock training, "
                     f"{played}, {e['train_steps']:,} updates (`{folder}/train-log.jsonl`)")
    for record in sorted(root.glob("**/train.json")):
        trained = json.loads(record.read_text(encoding="utf-8")).get("trained")
        if not trained:
            raise ValueError(f"{record}: no 'trained' block")
        folder = record.parent.relative_to(root).as_posix()
        lines.append(f"- [`{folder}`]({PREFIX}{folder}/): {trained['minutes']:.0f} minutes of wall-clock training, "
                     f"{trained['steps']:,} env steps (`{folder}/train.json`)")
    return lines


def headroom(scenarios, agents, by) -> list[str]:
    """How much the best search agent beats ``xla-msa`` (XLA's own algorithm) per scenario."""
    search = [a for a in agents if a.split(":")[0] in SEARCH]
    if "xla-msa" not in agents or not search:
        return []
    lines = ["### Headroom: the best search agent over xla-msa", "",
             "| scenario | xla-msa | best search | by | headroom |", "|---|---:|---:|---|---:|"]
    logs = []
    for s in scenarios:
        if (s, "xla-msa") not in by:
            continue
        base = by[(s, "xla-msa")]["speedup"]
        found = [(by[(s, a)]["speedup"], a) for a in search if (s, a) in by]
        if not found:
            continue
        top, who = max(found)
        logs.append(math.log(top / base))
        lines.append(f"| {s} | {base:.3f} | {top:.3f} | {who} | {top / base - 1:+.1%} |")
    if not logs:
        return []
    lines += ["", f"Geometric mean headroom: {math.exp(sum(logs) / len(logs)) - 1:+.1%} "
              f"(best of {', '.join(search)} per scenario against `xla-msa`'s plan).", ""]
    return lines


def render(rows: list[dict], where: dict[str, tuple[str, str]], budgets: list[str] = (),
           gone: dict[tuple[str, str], str] | None = None) -> tuple[str, str]:
    """The README text, and the per-suite summary tables (for docs/baselines.md); ``budgets``:
    :func:`training_budgets`' lines, listed under the tables; ``gone``: :func:`retired`."""
    summaries: list[list[str]] = []
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:  # MallocGame-v1 results get their own tables: the same names, another game
        name = where.get(r["scenario"], ("other", ""))[0]
        groups[name + V1_SUFFIX if r.get("env") == "v1" else name].append(r)
    order = list(SUITE_TITLES) + sorted(set(groups) - set(SUITE_TITLES), key=lambda g: (g.endswith(V1_SUFFIX), g))
    out = [
        "# Leaderboard",
        "",
        "Every figure below comes from the entry folders next to this file: each holds `command.txt`,",
        "the exact command that produced it, and its `results.{md,csv,json}` (per-scenario speedup,",
        "placed bytes, gap to a proven bound where the agent gives one, wall time; every mapping",
        "validated by `mallocgym.evaluate`). Regenerate everything with `bash baselines/run_all.sh`,",
        "or only this page with `python baselines/make_readme.py`.",
        "",
        "Speedup is `time_all_slow / time` under the roofline cost model (higher is better; best per",
        "scenario in bold). Wall times were measured on a 2-core machine shared with other jobs: they",
        "give the order of magnitude, not a benchmark. See `docs/baselines.md` for the agents.",
        "",
    ]
    for suite_name in order:
        if suite_name not in groups:
            continue
        g = groups[suite_name]
        splits = sorted({where.get(r["scenario"], ("", "?"))[1] for r in g})
        base = suite_name.removesuffix(V1_SUFFIX)
        title = SUITE_TITLES.get(base, base) + (" on MallocGame-v1" if suite_name.endswith(V1_SUFFIX) else "")
        heading = f"suite `{base}`" + (f", split {', '.join(splits)}" if base != "other" else "")
        out += [f"## {title}: {heading}", ""]
        by = {}
        # On duplicates (an entry that also ran xla, say) the agent's own folder wins, then the first.
        for r in sorted(g, key=lambda r: not _own_entry(r)):
            by.setdefault((r["scenario"], r["agent"]), r)
        agents = sorted({r["agent"] for r in g}, key=_agent_key)
        scen_order = {name: i for i, name in enumerate(where)}
        scenarios = sorted({r["scenario"] for r in g}, key=lambda s: (scen_order.get(s, len(scen_order)), s))

        def best_by(field):
            def best(s):
                vals = {a: by[(s, a)][field] for a in agents if (s, a) in by}
                top = max(vals.values(), default=None)
                return {a for a, v in vals.items() if top is not None and v >= top - 1e-12}
            return best

        def speed_cell(s, a):
            r = by.get((s, a))
            if r is None:
                return ""
            text = f"{r['speedup']:.3f}"
            if r.get("gap") is not None:
                text += f" (gap {r['gap']:.1%})"
            return text

        def bytes_cell(s, a):
            r = by.get((s, a))
            return "" if r is None else f"{r['placed_bytes_fraction']:.2%}"

        def wall_cell(s, a):
            r = by.get((s, a))
            return "" if r is None else f"{r['wall_s']:.2f}"

        out += ["### Speedup", ""] + _table(scenarios, agents, speed_cell, best_by("speedup")) + [""]
        out += ["### Placed bytes (fraction of all buffer bytes in fast memory)", ""]
        out += _table(scenarios, agents, bytes_cell, best_by("placed_bytes_fraction")) + [""]
        out += ["### Wall time (s)", ""] + _table(scenarios, agents, wall_cell) + [""]
        if suite_name.endswith(V1_SUFFIX):
            out += headroom(scenarios, agents, by)
        summary = [f"**{title}** ({heading})", "",
                   "| agent | geomean speedup | mean placed bytes | best speedup on | total wall s | entry |",
                   "|---|---:|---:|---:|---:|---|"]
        best = best_by("speedup")
        for a in agents:
            mine = [by[(s, a)] for s in scenarios if (s, a) in by]
            geo = math.exp(sum(math.log(r["speedup"]) for r in mine) / len(mine))
            placed = sum(r["placed_bytes_fraction"] for r in mine) / len(mine)
            wins = sum(1 for s in scenarios if (s, a) in by and a in best(s))
            entries = sorted({r["entry"] for r in mine})
            links = ", ".join(f"[{e}]({PREFIX}{e}/)" for e in entries)
            summary.append(f"| {a} | {geo:.3f} | {placed:.2%} | {wins}/{len(mine)} | "
                           f"{sum(r['wall_s'] for r in mine):.1f} | {links} |")
        summaries.append(summary + [""])
        out += ["### Summary", ""] + [line.replace(PREFIX, "") for line in summary[2:]] + [""]
    if budgets:
        block = ["**Training budgets of the learned agents** (on this project's 2-core CPU machine; "
                 "each entry's README has the details)", ""] + list(budgets) + [""]
        out += ["## Training budgets", ""] + [line.replace(PREFIX, "") for line in block[2:]]
        summaries.append(block)
    if gone:
        out += ["## Retired agents", "", "Their modes were removed; their rows stay in their entry's results, "
                "as history.", ""]
        out += [f"- `{agent}` ([`{entry}`]({entry}/)): {why}" for (entry, agent), why in sorted(gone.items())]
        out.append("")
    out += ["## Entries and their commands", ""]
    seen = {}
    for r in rows:
        seen.setdefault(r["entry"], r["command"])
    for entry, command in sorted(seen.items()):
        out.append(f"- [`{entry}`]({entry}/): " + (f"`{command}`" if command else "(command not recorded)"))
    out.append("")
    docs = "\n".join(line.replace(PREFIX, "../baselines/") for block in summaries for line in block)
    return "\n".join(out), docs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(HERE), help="the baselines folder (default: this one)")
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md is out of date")
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        text, summary = render(load_entries(root), suite_of(), training_budgets(root), retired(root))
    except ValueError as exc:
        print(f"make_readme: error: {exc}", file=sys.stderr)
        return 2
    targets = {root / "README.md": text}
    if DOCS.exists() and root == HERE:
        docs = DOCS.read_text(encoding="utf-8")
        if BEGIN in docs and END in docs:
            head, rest = docs.split(BEGIN, 1)
            targets[DOCS] = head + BEGIN + "\n" + summary + END + rest.split(END, 1)[1]
    if args.check:
        stale = [str(p) for p, t in targets.items() if not p.exists() or p.read_text(encoding="utf-8") != t]
        for p in stale:
            print(f"{p} is out of date; run python baselines/make_readme.py", file=sys.stderr)
        return 1 if stale else 0
    from mallocgym._files import atomic_write

    for path, content in targets.items():
        with atomic_write(path) as handle:
            handle.write(content)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
