"""Build the leaderboard from every ``results.json`` under baselines/: ``baselines/README.md``
(one summary table per game and suite, MallocGame-v1 first, that fits a screen), a
``RESULTS.md`` in each entry folder (its per-scenario tables) and the summary block of
``docs/baselines.md``.

    python baselines/make_readme.py            # writes them
    python baselines/make_readme.py --check    # exit 1 if any of them is not up to date

Each entry is a folder holding ``command.txt`` (the exact command that produced it) and the
``results.{md,csv,json}`` that ``mallocgym bench --out`` wrote; ``RESULTS.md`` is generated
beside them (hand-written text goes in a ``README.md``, which this script never touches). An
agent whose mode was removed leaves the tables: the folder's ``retired.json`` (``{"agent":
"why"}``) names it, and the pages list it with that line; its rows stay in the folder's results
as history. Rows are grouped by game and by the suite their scenario belongs to (whatever folder
they sit in), so any new entry, whatever its layout, shows up in the right tables. Each summary
counts wins, ties and losses against the game's XLA baseline (``xla`` on v0, ``xla-msa`` on v1)
with :mod:`mallocgym.scoreboard`, as ``mallocgym run`` does.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections import defaultdict
from pathlib import Path

from mallocgym.scoreboard import XLA_BASELINE, geomean, tally

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs" / "baselines.md"
PREFIX = "\x00"  # where a link to an entry folder starts (README: "", docs: "../baselines/")
PAGE = "RESULTS.md"  # each entry's generated per-scenario page
MAX_COLUMNS = 8  # the summary tables' width at most
BEGIN, END = "<!-- leaderboard:begin (make_readme.py) -->", "<!-- leaderboard:end -->"
# Agents first in this order (prefix match on the agent name), then the rest alphabetically.
AGENT_ORDER = ("all-slow", "random", "first-fit", "best-fit", "xla", "greedy", "xla-msa", "rollout", "beam", "mcts",
               "exact")
SEARCH = ("rollout", "beam", "mcts")  # agents whose headroom over xla-msa the v1 tables state
GAMES = {"v1": "MallocGame-v1 (per-use decisions, XLA's Memory Space Assignment)",
         "v0": "MallocGame-v0 (whole-live-range placement)"}
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


def _markdown_cells(line: str) -> int:
    """The number of cells of a Markdown table row."""
    return line.strip().strip("|").count("|") + 1


def _end_event(log: Path) -> dict:
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    end = [e for e in events if e.get("event") == "end"]
    if not end:
        raise ValueError(f"{log}: no 'end' event (the run did not finish)")
    return end[-1]


def _head_s(folder: Path) -> float:
    """Seconds of a departure head's labels and fit beside a mallocMuZero run (``head.json``,
    written by ``baselines/muzero/v1/head.py fit``), 0 when it has none."""
    record = folder / "head.json"
    if not record.is_file():
        return 0.0
    head = json.loads(record.read_text(encoding="utf-8"))
    return float(head["label_s"]) + float(head["fit_s"])


def _trained(record: Path) -> dict:
    trained = json.loads(record.read_text(encoding="utf-8")).get("trained")
    if not trained:
        raise ValueError(f"{record}: no 'trained' block")
    return trained


def training_budgets(root: Path = HERE) -> list[str]:
    """One line per trained model under ``root``: its wall-clock training budget and what it did
    in it, read from the run's own record (a mallocMuZero ``train-log.jsonl``'s final ``end``
    event, a Stable-Baselines3 ``train.json``'s ``trained`` block)."""
    lines = []
    for log in sorted(root.glob("**/train-log.jsonl")):
        e, folder = _end_event(log), log.parent.relative_to(root).as_posix()
        # a labelled-games run (train.label_fraction = 1) counts one actor step per game
        played = (f"{e['episodes']:,} labelled games ({e['positions']:,} labelled positions to the replay)"
                  if "positions" in e and e["env_steps"] == e["episodes"]
                  else f"{e['env_steps']:,} moves in {e['episodes']:,} games")
        before = (f" after {e['init_elapsed_s'] / 60:.0f} minutes of the run it started from (`--init`)"
                  if e.get("init_elapsed_s") else "")
        head_s = _head_s(log.parent)
        head = (f", then {head_s / 60:.0f} minutes of its departure head's labels and fit (`{folder}/head.json`)"
                if head_s else "")
        lines.append(f"- [`{folder}`]({PREFIX}{folder}/): {e['elapsed_s'] / 60:.0f} minutes of wall-clock training{before}, "
                     f"{played}, {e['train_steps']:,} updates (`{folder}/train-log.jsonl`){head}")
    for record in sorted(root.glob("**/train.json")):
        trained, folder = _trained(record), record.parent.relative_to(root).as_posix()
        lines.append(f"- [`{folder}`]({PREFIX}{folder}/): {trained['minutes']:.0f} minutes of wall-clock training, "
                     f"{trained['steps']:,} env steps (`{folder}/train.json`)")
    return lines


def trained_models(root: Path = HERE) -> dict[str, str]:
    """Model folder (relative to ``root``) -> its training budget in short (``"25 min"``), from the
    same records as :func:`training_budgets`."""
    out = {}
    for log in sorted(root.glob("**/train-log.jsonl")):
        e = _end_event(log)   # with --init, the run it started from counts too, and so does a departure head
        seconds = e["elapsed_s"] + e.get("init_elapsed_s", 0.0) + _head_s(log.parent)
        out[log.parent.relative_to(root).as_posix()] = f"{seconds / 60:.0f} min"
    for record in sorted(root.glob("**/train.json")):
        out[record.parent.relative_to(root).as_posix()] = f"{_trained(record)['minutes']:.0f} min"
    return out


def agent_specs(command: str | None) -> list[str]:
    """Every agent spec of every ``--agents``/``--agent``/``--policy`` in ``command`` (several
    commands may be joined by ``&&``)."""
    if not command:
        return []
    from mallocgym.cli import split_agents

    try:
        words = shlex.split(command)
    except ValueError:
        return []
    specs = []
    for flag, value in zip(words, words[1:]):
        if flag in ("--agents", "--agent", "--policy"):
            specs += split_agents(value)
        elif flag.startswith(("--agents=", "--agent=")):
            specs += split_agents(flag.split("=", 1)[1])
    return specs


def training_of(agent: str, command: str | None, models: dict[str, str]) -> str:
    """The training budget of the model ``agent`` played (``""`` when it is not a trained
    model of ``models``): its spec ``KIND:PATH[,options]`` is looked up in the entry's
    ``command``; the agent is named after the spec, or ``KIND:NAME`` with NAME the model
    folder's name, or ``KIND`` alone."""
    kind, _, rest = agent.partition(":")
    kind = kind.split(",")[0]   # "muzero-sim,budget_s=2": a spec with options and no model name
    for spec in agent_specs(command):
        skind, _, srest = spec.partition(":")
        if skind != kind or not srest:
            continue
        path = srest.split(",")[0]
        folder = path.removeprefix("baselines/").rstrip("/")
        if folder not in models:
            continue
        if agent == spec or not rest or rest.split(",")[0] == Path(folder).name:
            return models[folder]
    return ""


def headroom(scenarios, agents, by) -> list[str]:
    """How much the best search agent beats ``xla-msa`` (XLA's own algorithm) per scenario."""
    search = [a for a in agents if a.split(":")[0] in SEARCH]
    if "xla-msa" not in agents or not search:
        return []
    lines = ["### Headroom: the best search agent over xla-msa", "",
             "| scenario | xla-msa | best search | by | headroom |", "|---|---:|---:|---|---:|"]
    ratios = []
    for s in scenarios:
        if (s, "xla-msa") not in by:
            continue
        base = by[(s, "xla-msa")]["speedup"]
        found = [(by[(s, a)]["speedup"], a) for a in search if (s, a) in by]
        if not found:
            continue
        top, who = max(found)
        ratios.append(top / base)
        lines.append(f"| {s} | {base:.3f} | {top:.3f} | {who} | {top / base - 1:+.1%} |")
    if not ratios:
        return []
    lines += ["", f"Geometric mean headroom: {geomean(ratios) - 1:+.1%} "
              f"(best of {', '.join(search)} per scenario against `xla-msa`'s plan).", ""]
    return lines


class Group:
    """The results of one game (``v0``/``v1``) on one suite: one summary table."""

    def __init__(self, game: str, suite: str, rows: list[dict], where: dict[str, tuple[str, str]]):
        self.game, self.suite, self.rows = game, suite, rows
        self.baseline = XLA_BASELINE[game]
        splits = sorted({where.get(r["scenario"], ("", "?"))[1] for r in rows})
        self.title = SUITE_TITLES.get(suite, suite)
        self.heading = f"suite `{suite}`" + (f", split {', '.join(splits)}" if suite != "other" else "")
        self.by: dict[tuple[str, str], dict] = {}
        # On duplicates (an entry that also ran xla, say) the agent's own folder wins, then the first.
        for r in sorted(rows, key=lambda r: not _own_entry(r)):
            self.by.setdefault((r["scenario"], r["agent"]), r)
        self.agents = sorted({r["agent"] for r in rows}, key=_agent_key)
        scen_order = {name: i for i, name in enumerate(where)}
        self.scenarios = sorted({r["scenario"] for r in rows}, key=lambda s: (scen_order.get(s, len(scen_order)), s))

    def mine(self, agent: str) -> list[dict]:
        return [self.by[(s, agent)] for s in self.scenarios if (s, agent) in self.by]

    def versus_baseline(self, agent: str) -> tuple[int, int, int] | None:
        """Wins, ties and losses of ``agent`` against the game's XLA baseline on the scenarios
        both played (None: the baseline is not in this group)."""
        if self.baseline not in self.agents:
            return None
        return tally((self.by[(s, agent)]["speedup"], self.by[(s, self.baseline)]["speedup"])
                     for s in self.scenarios if (s, agent) in self.by and (s, self.baseline) in self.by)

    def summary(self, models: dict[str, str]) -> list[str]:
        """The summary table: agent, geomean speedup, wins / ties / losses against the XLA
        baseline, total wall time, training budget, entry."""
        lines = [f"| agent | geomean speedup | vs `{self.baseline}`: wins / ties / losses | total wall s | "
                 f"training | entry |", "|---|---:|---:|---:|---:|---|"]
        for a in self.agents:
            mine = self.mine(a)
            geo = f"{geomean(r['speedup'] for r in mine):.3f}"
            if len(mine) < len(self.scenarios):
                geo += f" ({len(mine)} of {len(self.scenarios)})"
            wtl = self.versus_baseline(a)
            versus = "baseline" if a == self.baseline else "" if wtl is None else " / ".join(map(str, wtl))
            entries = sorted({r["entry"] for r in mine})
            trained = sorted({t for r in mine if (t := training_of(a, r.get("command"), models))})
            links = ", ".join(f"[{e}]({PREFIX}{e}/{PAGE})" for e in entries)
            lines.append(f"| {a} | {geo} | {versus} | {sum(r['wall_s'] for r in mine):.1f} | "
                         f"{', '.join(trained)} | {links} |")
        return lines

    def entry_tables(self, entry: str) -> list[str]:
        """The per-scenario tables of ``entry``'s agents in this group, the XLA baseline's column
        first (from whichever entry holds it) for reference."""
        own = sorted({r["agent"] for r in self.rows if r["entry"] == entry}, key=_agent_key)
        agents = ([self.baseline] if self.baseline in self.agents and self.baseline not in own else []) + own
        scenarios = [s for s in self.scenarios if any((s, a) in self.by for a in own)]
        by = self.by

        def best_by(field):
            def best(s):
                vals = {a: by[(s, a)][field] for a in agents if (s, a) in by}
                top = max(vals.values(), default=None)
                return {a for a, v in vals.items() if top is not None and v >= top - 1e-12}
            return best

        def cell(field, fmt):
            def text(s, a):
                r = by.get((s, a))
                if r is None:
                    return ""
                out = format(r[field], fmt)
                if field == "speedup" and r.get("gap") is not None:
                    out += f" (gap {r['gap']:.1%})"
                return out
            return text

        where_base = ""
        if agents and agents[0] == self.baseline and self.baseline not in own:
            src = sorted({by[(s, self.baseline)]["entry"] for s in scenarios if (s, self.baseline) in by})
            where_base = f" (the game's XLA baseline, from {', '.join(f'`{e}`' for e in src)})"
        lines = [f"## {GAMES[self.game].split(' (')[0]}, {self.title}: {self.heading}", "",
                 f"### Speedup (best per scenario in bold; `{self.baseline}`{where_base} for reference)", ""]
        lines += _table(scenarios, agents, cell("speedup", ".3f"), best_by("speedup")) + [""]
        lines += ["### Placed bytes (fraction of all buffer bytes in fast memory)", ""]
        lines += _table(scenarios, agents, cell("placed_bytes_fraction", ".2%"), best_by("placed_bytes_fraction"))
        lines += ["", "### Wall time (s)", ""] + _table(scenarios, agents, cell("wall_s", ".2f")) + [""]
        if self.game == "v1":
            lines += headroom(scenarios, agents, by)
        return lines


def groups_of(rows: list[dict], where: dict[str, tuple[str, str]]) -> list[Group]:
    """The rows by game (v1 first) and suite (the bundled suite first, then MiniMalloc, synthetic,
    the rest by name)."""
    keyed: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:  # MallocGame-v1 results get their own tables: the same names, another game
        keyed[(r.get("env") or "v0", where.get(r["scenario"], ("other", ""))[0])].append(r)
    unknown = sorted({game for game, _ in keyed} - set(GAMES))
    if unknown:
        raise ValueError(f"results of an unknown game {unknown[0]!r} (expected one of {', '.join(GAMES)})")
    suites = list(SUITE_TITLES)
    order = sorted(keyed, key=lambda k: (list(GAMES).index(k[0]), suites.index(k[1]) if k[1] in suites
                                         else len(suites), k[1]))
    return [Group(game, suite, keyed[(game, suite)], where) for game, suite in order]


def entry_pages(rows: list[dict], where: dict[str, tuple[str, str]],
                gone: dict[tuple[str, str], str] | None = None) -> dict[str, str]:
    """Entry folder -> the text of its generated ``RESULTS.md``: its command, its per-scenario
    tables per game and suite, its retired agents."""
    groups = groups_of(rows, where)
    commands: dict[str, str | None] = {}
    for r in rows:
        commands.setdefault(r["entry"], r["command"])
    for entry, _ in (gone or {}):
        commands.setdefault(entry, None)
    pages = {}
    for entry in sorted(commands):
        command = commands[entry]
        lines = [f"# Results: `{entry}`", "",
                 f"Generated by `python baselines/make_readme.py` from this folder's `results.json`; do not edit "
                 f"(the leaderboard: [`baselines/README.md`]({'../' * (entry.count('/') + 1)}README.md)). Speedup is "
                 "`time_all_slow / time`, higher is better; wall times were measured on a shared 2-core machine.",
                 "", "Command: " + (f"`{command}`" if command else "(not recorded)"), ""]
        for g in groups:
            if any(r["entry"] == entry for r in g.rows):
                lines += g.entry_tables(entry)
        mine = sorted((agent, why) for (e, agent), why in (gone or {}).items() if e == entry)
        if mine:
            lines += ["## Retired agents", "", "Their modes were removed; their rows stay in `results.json`, as history.",
                      ""] + [f"- `{agent}`: {why}" for agent, why in mine] + [""]
        pages[entry] = "\n".join(lines)
    return pages


def render(rows: list[dict], where: dict[str, tuple[str, str]], budgets: list[str] = (),
           gone: dict[tuple[str, str], str] | None = None,
           models: dict[str, str] | None = None) -> tuple[str, str]:
    """The README text, and the summary tables again for docs/baselines.md; ``budgets``:
    :func:`training_budgets`' lines, listed under the tables in docs/baselines.md; ``gone``:
    :func:`retired`; ``models``: :func:`trained_models`, for the training column."""
    models = models or {}
    out = [
        "# Leaderboard",
        "",
        "One table per game and suite: each agent's geometric-mean speedup (`time_all_slow / time` under",
        "the game's cost model, higher is better), its wins, ties and losses scenario by scenario against",
        "the game's XLA baseline (`xla-msa`, XLA's Memory Space Assignment, on MallocGame-v1; `xla`, the",
        "XLA-like greedy, on v0; a tie is within a relative 1e-6), its total wall time (on a shared 2-core",
        "machine: an order of magnitude, not a benchmark), the training budget of a learned agent, and",
        "its entry. Each entry folder holds `command.txt` (the exact command), `results.{md,csv,json}`",
        "and a generated `RESULTS.md` with the per-scenario tables (speedup, placed bytes, wall time).",
        "Regenerate everything with `bash baselines/run_all.sh`, or only the pages with",
        "`python baselines/make_readme.py`. The agents: `docs/baselines.md`.",
        "",
    ]
    docs: list[str] = []
    game = None
    for g in groups_of(rows, where):
        if g.game != game:
            game = g.game
            out += [f"## {GAMES[game]}", ""]
        table = g.summary(models)
        out += [f"### {g.title}: {g.heading}", ""] + [line.replace(PREFIX, "") for line in table] + [""]
        docs += [f"**{GAMES[g.game].split(' (')[0]}, {g.title}** ({g.heading})", ""] + table + [""]
    if budgets:
        docs += ["**Training budgets of the learned agents** (on this project's 2-core CPU machine; "
                 "each entry's README has the details)", ""] + list(budgets) + [""]
    if gone:
        out += ["## Retired agents", "", "Their modes were removed; their rows stay in their entry's results, "
                "as history.", ""]
        out += [f"- `{agent}` ([`{entry}`]({entry}/{PAGE})): {why}" for (entry, agent), why in sorted(gone.items())]
        out.append("")
    text = "\n".join(out)
    return text, "\n".join(line.replace(PREFIX, "../baselines/") for line in docs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(HERE), help="the baselines folder (default: this one)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if README.md, an entry's RESULTS.md or docs/baselines.md's block is out of date")
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        rows, where, gone = load_entries(root), suite_of(), retired(root)
        text, summary = render(rows, where, training_budgets(root), gone, trained_models(root))
        pages = entry_pages(rows, where, gone)
    except ValueError as exc:
        print(f"make_readme: error: {exc}", file=sys.stderr)
        return 2
    targets = {root / "README.md": text}
    targets.update({root / entry / PAGE: page for entry, page in pages.items()})
    if DOCS.exists() and root == HERE:
        docs = DOCS.read_text(encoding="utf-8")
        if BEGIN in docs and END in docs:
            head, rest = docs.split(BEGIN, 1)
            targets[DOCS] = head + BEGIN + "\n" + summary + END + rest.split(END, 1)[1]
    orphans = sorted(p for p in root.rglob(PAGE) if p not in targets)
    if args.check:
        stale = [str(p) for p, t in targets.items() if not p.exists() or p.read_text(encoding="utf-8") != t]
        for p in stale:
            print(f"{p} is out of date; run python baselines/make_readme.py", file=sys.stderr)
        for p in orphans:
            print(f"{p} belongs to no entry (no results.json beside it); run python baselines/make_readme.py",
                  file=sys.stderr)
        return 1 if stale or orphans else 0
    for p in orphans:
        p.unlink()
        print(f"removed {p} (no results.json beside it)")
    from mallocgym._files import atomic_write

    for path, content in targets.items():
        with atomic_write(path) as handle:
            handle.write(content)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
