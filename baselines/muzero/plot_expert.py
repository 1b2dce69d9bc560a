"""Curves of a ``network.version = 2`` training log (expert iteration): the residual error on
replay and held-out positions side by side, the loss parts, and the games' return
against XLA-like's (the search's best completion on each game's program, or for a labelled
game, ``train.label_fraction``, the game played, its exploring moves included); for a run with
``train.dynamics_weight > 0`` (issue 18, step 6) a fourth panel: the dynamics loss's reward
error and advantage error along the unroll on train and held-out trajectories, and its value part;
for a run with ``train.label_policy > 0`` (DAgger, issue 31) a panel of the policy's own games
(the latest 20, each on a program it had not trained on): their geomean speedup over `xla-msa`,
the worst, and the share better than `xla-msa`.

    python baselines/muzero/plot_expert.py baselines/muzero/expert/train-log.jsonl --png FILE.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log", help="a train-log.jsonl / log.jsonl of `mallocgym train muzero --set network.version=2`")
    p.add_argument("--png", required=True, help="the PNG file to write")
    args = p.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mallocgym._files import atomic_write

    rows = [json.loads(line) for line in Path(args.log).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("event") in ("progress", "end")]
    if not rows:
        raise SystemExit(f"{args.log}: no progress lines")
    minutes = [r["elapsed_s"] / 60 for r in rows]
    dynamics = [(m, r) for m, r in zip(minutes, rows) if "train_dynamics" in r]
    policy = [(m, r) for m, r in zip(minutes, rows) if "policy_speedup" in r]
    panels = 3 + bool(dynamics) + bool(policy)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4))
    held = [(m, r) for m, r in zip(minutes, rows) if "heldout_residual_error" in r]
    ax = axes[0]
    if held:
        ax.plot([m for m, _ in held], [r["train_residual_error"] for _, r in held], label="replay positions")
        ax.plot([m for m, _ in held], [r["heldout_residual_error"] for _, r in held], label="held-out games' positions")
        ax.legend()
    ax.set(title="mean absolute residual error (units: 0.25 % of program time)", xlabel="minutes")
    ax = axes[1]
    for key in ("policy", "residual", "advantage"):
        pts = [(m, r["losses"][key]) for m, r in zip(minutes, rows) if "losses" in r]
        ax.plot([a for a, _ in pts], [b for _, b in pts], label=key)
    ax.set(title="loss parts (mean since the previous line)", xlabel="minutes")
    ax.legend()
    ax = axes[2]
    pts = [(m, r) for m, r in zip(minutes, rows) if "return_mean" in r]
    ax.plot([m for m, _ in pts], [r["return_mean"] for _, r in pts],
            label="game (search: best completion; labelled: as played)")
    ax.plot([m for m, _ in pts], [r["xla_return_mean"] for _, r in pts], label="XLA-like", linestyle="--")
    ax.set(title="self-play games (last 50): normalised return", xlabel="minutes")
    ax.legend()
    if dynamics:
        ax = axes[3]
        for name, style in (("train", "-"), ("heldout", "--")):
            ms = [m for m, _ in dynamics]
            ax.plot(ms, [r[f"{name}_dynamics"]["dyn_reward_mae"] for _, r in dynamics], style, color="C0",
                    label=f"reward MAE ({name}; % of all-slow time)")
            ax.plot(ms, [r[f"{name}_dynamics"]["dyn_advantage_mae"] for _, r in dynamics], style, color="C1",
                    label=f"advantage MAE ({name}; 0.25 % units)")
            ax.plot(ms, [r[f"{name}_dynamics"]["dyn_value"] for _, r in dynamics], style, color="C2",
                    label=f"value CE per step ({name})")
        ax.set(title="learned dynamics, unrolled steps (256 positions each)", xlabel="minutes")
        ax.legend(fontsize=7)
    if policy:
        ax = axes[-1]
        ms = [m for m, _ in policy]
        ax.plot(ms, [r["policy_speedup"] for _, r in policy], label="geomean speedup over xla-msa")
        ax.plot(ms, [r["policy_worst"] for _, r in policy], label="worst game", linestyle=":")
        ax.plot(ms, [r["policy_beats_xla_fraction"] for _, r in policy], label="share better than xla-msa",
                linestyle="--")
        ax.axhline(1.0, color="0.5", linewidth=0.8)
        ax.set(title="the policy's own games (last 20; unseen programs)", xlabel="minutes")
        ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_write(args.png, "wb") as handle:
        fig.savefig(handle, format="png", dpi=80)
    return 0


if __name__ == "__main__":
    sys.exit(main())
