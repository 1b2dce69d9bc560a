"""How the learned dynamics rank moves (issue 18, step 6; the diagnostic of issue 18's finding 4):
on XLA-like's own game of each program (``best_child.py``'s positions: every position with a
choice, every legal move scored exactly by its XLA-like completion), the legal move picked by

- ``advantage head``: the root's advantage head (no dynamics; ``best_child.py``'s pick);
- ``one-step Q, advantage frame``: ``advantage(s, a) + residual(dynamics(s, a))``, the learned
  search's child value in ``search.frame = "advantage"`` after one simulation per move;
- ``one-step Q, return frame``: ``reward(s, a) + value(dynamics(s, a))``, MuZero's;

each scored by ``best_child.Tally`` (wrong = not a best child; precision and recall of departures
from XLA-like's move; mean one-step regret). Diagnostic only: no setting is chosen by it.

    python baselines/muzero/dynamics/one_step.py DIR [--set validation|heldout60] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # baselines/muzero: best_child

from best_child import SEEDS, VALIDATION_SEEDS, Tally, heldout_programs, positions  # noqa: E402

from mallocgym.agents.muzero.checkpoint import load_network  # noqa: E402
from mallocgym.agents.muzero.networks import obs_to_tensors, stack_obs  # noqa: E402


@torch.no_grad()
def picks(net, obs, legal: np.ndarray) -> dict[str, int]:
    """The three picks of the module docstring at one position."""
    out = net.initial_inference(obs_to_tensors(stack_obs([obs])))
    advantage, _ = net.heads(out.latent, out.cands)
    actions = np.flatnonzero(legal)
    n = len(actions)
    a = torch.from_numpy(actions.astype(np.int64))
    step = net.recurrent_inference(out.latent.expand(n, -1), out.cands.expand(n, -1, -1), a)
    _, residual = net.heads(step.latent, step.cands)
    q_adv = advantage[0, a] + residual
    q_ret = net.reward_support.decode(step.reward_logits) + net.value_support.decode(step.value_logits)
    adv = np.where(legal, advantage[0].double().numpy(), -np.inf)
    return {"advantage head": int(np.argmax(adv)),
            "one-step Q, advantage frame": int(actions[int(torch.argmax(q_adv))]),
            "one-step Q, return frame": int(actions[int(torch.argmax(q_ret))])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="a version-2 checkpoint trained with train.dynamics_weight > 0")
    p.add_argument("--set", choices=["validation", "heldout60"], default="validation")
    p.add_argument("--out", help="write the results (JSON) here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    net, config, _ = load_network(args.checkpoint)
    if config.network.version != 2 or config.train.dynamics_weight <= 0:
        raise SystemExit(f"{args.checkpoint}: not a version-2 checkpoint with trained dynamics")
    net.eval()
    tallies: dict[str, Tally] = {}
    for scenario in heldout_programs(VALIDATION_SEEDS if args.set == "validation" else SEEDS):
        for obs, legal, times in positions(scenario, config):
            for name, pick in picks(net, obs, legal).items():
                tallies.setdefault(name, Tally()).add(pick, legal, times)
    result = {name: t.summary() for name, t in tallies.items()}
    print(json.dumps(result, indent=1))
    if args.out:
        from mallocgym._files import atomic_write

        with atomic_write(args.out) as handle:
            json.dump({"checkpoint": args.checkpoint, "set": args.set, "picks": result}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
