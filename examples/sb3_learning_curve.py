"""Learning curves of `mallocgym train sb3` runs: test-split speedup against training time.

    python examples/sb3_learning_curve.py RUN [RUN ...] --out docs/img/sb3-learning-curve.png

Each RUN is a run directory trained with ``--eval-test`` (and evaluation on, the default):
its ``logs/eval.csv`` has one row per evaluation with the geometric-mean speedups: ``score``
(over the held-out programs the trainer selects ``model.zip`` by), the held-out generated
programs (``valid_speedup``), the training scenarios (``train_speedup``) and the suite's test
split (``test_speedup``, logged for curves like this one only). The figure has two panels
against minutes of training (wall clock minus the time spent evaluating): the test split (top,
the checkpoint each run kept in ``model.zip`` circled) and, per run, the held-out programs of
the train split (solid, runs that held some out), the held-out generated programs (dashed) and
the training scenarios (dotted) (bottom). Dotted lines mark
other agents' test-split geomeans (``--reference``, played here through the harness).

Needs matplotlib (``pip install 'mallocgym[plot]'``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

COLUMNS = ("steps", "train_s", "valid_speedup", "train_speedup", "test_speedup", "selected")
# newer columns: a log from before they existed selected by the generated programs (score =
# valid_speedup) and held no programs out
OPTIONAL = ("score", "holdout_speedup")


def read_eval(run: Path) -> dict[str, list[float]]:
    """The columns of ``RUN/logs/eval.csv`` as floats; one ``ValueError`` naming the file when
    it is missing, has no test column values (a run without ``--eval-test``) or no rows."""
    path = run / "logs" / "eval.csv"
    if not path.is_file():
        raise ValueError(f"{path}: missing (train with evaluation on, the default, and --eval-test)")
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise ValueError(f"{path}: no evaluations")
    missing = [c for c in COLUMNS if c not in rows[0]]
    if missing:
        raise ValueError(f"{path}: not an eval.csv of mallocgym train sb3 (no column {', '.join(missing)})")
    if any(r["test_speedup"] == "" for r in rows):
        raise ValueError(f"{path}: no test-split speedups (the run was trained without --eval-test)")
    data = {c: [float(r[c]) for r in rows] for c in COLUMNS}
    for c in OPTIONAL:
        if all(r.get(c, "") != "" for r in rows):
            data[c] = [float(r[c]) for r in rows]
    data.setdefault("score", data["valid_speedup"])
    return data


def reference_geomeans(agents: list[str], suite_name: str) -> dict[str, float]:
    """Test-split geometric-mean speedup of each agent, played through the harness."""
    import numpy as np

    from mallocgym.harness import bench
    from mallocgym.scenarios import suite

    results = bench(suite(suite_name, "test"), agents, progress=False)
    return {a: float(np.exp(np.mean(np.log([r.speedup for r in results if r.agent == a])))) for a in agents}


def plot(runs: list[Path], labels: list[str], out: Path, references: dict[str, float], title: str,
         ymin: float | None = None) -> None:
    """Draw the two panels and write ``out`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.5, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    for i, (run, label) in enumerate(zip(runs, labels)):
        data = read_eval(run)
        minutes = [s / 60.0 for s in data["train_s"]]
        color = f"C{i}"
        top.plot(minutes, data["test_speedup"], "-", color=color, lw=1.5, marker=".", ms=4, label=label)
        if "holdout_speedup" in data:
            bottom.plot(minutes, data["holdout_speedup"], "-", color=color, lw=1.5)
        bottom.plot(minutes, data["valid_speedup"], "--", color=color, lw=1.0)
        bottom.plot(minutes, data["train_speedup"], ":", color=color, lw=1.2)
        kept = [k for k, flag in enumerate(data["selected"]) if flag == 1]
        if kept:
            k = kept[-1]
            top.plot([minutes[k]], [data["test_speedup"][k]], "o", ms=10, mfc="none", mew=1.5, color=color)
    for j, (name, value) in enumerate(references.items()):
        top.axhline(value, ls="--", lw=1.0, color=f"C{len(runs) + j}", label=f"{name} ({value:.3f})")
    top.plot([], [], "o", ms=10, mfc="none", color="0.3", label="checkpoint kept in model.zip")
    top.set_ylabel("test split: geomean speedup")
    if ymin is not None:
        top.set_ylim(bottom=ymin)
    top.set_title(title)
    top.grid(alpha=0.3)
    top.legend(fontsize=8, loc="lower right")
    styles = [Line2D([], [], color="0.3", ls="-", label="held-out programs of the train split"),
              Line2D([], [], color="0.3", ls="--", label="held-out generated programs"),
              Line2D([], [], color="0.3", ls=":", label="training scenarios")]
    bottom.legend(handles=styles, fontsize=8, loc="lower right")
    bottom.set_ylabel("geomean speedup")
    bottom.set_xlabel("minutes of training (wall clock, evaluations excluded)")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run directories (trained with --eval-test)")
    p.add_argument("--out", type=Path, required=True, help="the PNG to write")
    p.add_argument("--label", action="append", help="a legend label per run, in order (default: the folder names)")
    p.add_argument("--reference", default="random,xla",
                   help="comma-separated agents whose test-split geomean is drawn as a line ('' for none; "
                        "default: random,xla)")
    p.add_argument("--suite", default="default", help="the suite whose test split the runs logged (default: default)")
    p.add_argument("--title", default="MaskablePPO on MallocGame-v0: learning curves", help="the figure's title")
    p.add_argument("--ymin", type=float, help="lower limit of the test panel (default: automatic)")
    args = p.parse_args(argv)
    labels = args.label or [run.name for run in args.runs]
    if len(labels) != len(args.runs):
        p.error(f"{len(labels)} --label for {len(args.runs)} runs: give one per run or none")
    try:
        for run in args.runs:
            read_eval(run)  # every run checked before anything is drawn
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValueError("this script needs matplotlib: pip install 'mallocgym[plot]'") from None
        agents = [a.strip() for a in args.reference.split(",") if a.strip()]
        references = reference_geomeans(agents, args.suite) if agents else {}
        plot(args.runs, labels, args.out, references, args.title, args.ymin)
    except ValueError as exc:
        print(f"sb3_learning_curve.py: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
