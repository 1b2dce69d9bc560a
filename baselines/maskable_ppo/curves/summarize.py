"""Summarise the logs/eval.csv of MaskablePPO runs trained with --eval-test (docs/sb3.md's table).

    python baselines/maskable_ppo/curves/summarize.py baselines/maskable_ppo/curves/*/

For each run: env steps and evaluations; the test-split geomean at the first evaluation after
20,000 steps, of the last checkpoint, and of the checkpoint kept in model.zip (``selected``);
over the evaluations after 100,000 steps: the test-split mean, standard deviation, minimum and
maximum, and the means of the training-scenario, held-out generated and held-out split scores;
the correlation (Pearson, evaluations after 100,000 steps) of each held-out score with the
test-split score. Test-split numbers are for reading only: no run chose anything by them.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np


def _column(rows: list[dict], key: str) -> np.ndarray:
    return np.array([float(r[key]) if r.get(key, "") != "" else np.nan for r in rows])


def summarize(run: Path) -> dict:
    """The numbers of one run (see the module docstring)."""
    with open(run / "logs" / "eval.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    steps = _column(rows, "steps")
    test = _column(rows, "test_speedup")
    late = steps >= 100_000
    kept = [i for i, r in enumerate(rows) if r["selected"] == "1"]
    first = int(np.argmax(steps >= 20_000))
    out = {"run": run.name, "steps": int(steps[-1]), "evaluations": len(rows),
           "test_first": test[first], "first_steps": int(steps[first]), "test_last": test[-1],
           "test_kept": test[kept[-1]] if kept else np.nan, "kept_steps": int(steps[kept[-1]]) if kept else -1,
           "test_mean": test[late].mean(), "test_sd": test[late].std(), "test_min": test[late].min(),
           "test_max": test[late].max()}
    for key in ("train_speedup", "valid_speedup", "holdout_speedup"):
        values = _column(rows, key)
        out[key] = np.nanmean(values[late]) if np.isfinite(values[late]).any() else np.nan
        ok = late & np.isfinite(values)
        out["corr_" + key] = np.corrcoef(values[ok], test[ok])[0, 1] if ok.sum() > 2 else np.nan
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    print("| run | steps | evals | test @~20k | test last | test kept (step) | test after 100k: mean ± sd [min, max] "
          "| train | held-out generated | held-out split | corr gen. / split |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|")
    for run in argv:
        s = summarize(Path(run))
        print(f"| {s['run']} | {s['steps']:,} | {s['evaluations']} | {s['test_first']:.3f} ({s['first_steps']:,}) | "
              f"{s['test_last']:.3f} | {s['test_kept']:.3f} ({s['kept_steps']:,}) | {s['test_mean']:.3f} ± "
              f"{s['test_sd']:.3f} [{s['test_min']:.3f}, {s['test_max']:.3f}] | {s['train_speedup']:.3f} | "
              f"{s['valid_speedup']:.3f} | {s['holdout_speedup']:.3f} | "
              f"{s['corr_valid_speedup']:.2f} / {s['corr_holdout_speedup']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
