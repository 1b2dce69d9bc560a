"""The departure head of the v1 policy (issue 31; ``RULE.md``, amendment of 2026-11-27 06:55 UTC):
its data and its fit.

``data``: the policy at margin 0 (the network alone) on fresh training-distribution programs
(``departures.py --generated``: the trainer's generator, program ``i`` from
``default_rng([7, i])``), every departure scored exactly; one ``p{i}.npz`` per program in
``--out`` (``X``: the head's input rows, ``Y``: each departure's cost alone in % of program time,
positive: worse than xla-msa's move). Programs already there are skipped, so a stopped run
resumes. ``fit``: a head of two ReLU layers of 64 (:class:`mallocgym.agents.muzero.head.DepartureHead`)
fitted on every program in ``--data``, a logistic loss on "the departure loses" weighted by
|cost| + 0.001 (costs clipped to +-2 %), 30 epochs of Adam (lr 1e-3, weight decay 1e-4, batches
of 256, seed 0); written with the checkpoint's network to ``--out/checkpoint.pt`` with margin 0
and ``--threshold``, and ``--out/head.json``: the labels' wall seconds (summed over the ``data``
runs, from the data folder's ``time.json``), the fit's, and the departures (the leaderboard adds
them to the run's training budget).

    python baselines/muzero/v1/head.py data --generated 0,11 --out out/head-data --workers 2
    python baselines/muzero/v1/head.py fit --data out/head-data --out out/v1-head --threshold 0

The published checkpoint (this folder) was written by ``fit --data out/head-data --out
baselines/muzero/v1 --threshold -1`` on programs 0-10 (the threshold chosen on validation with
the check, ``RULE.md``, amendments of 2026-11-27 11:27 and 11:37 UTC; the head before it was
fitted on programs 0-31 and 1000-1027).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import departures  # noqa: E402

from mallocgym._files import atomic_write  # noqa: E402
from mallocgym.agents import make_agent  # noqa: E402
from mallocgym.agents.muzero.checkpoint import load_network, save_checkpoint  # noqa: E402
from mallocgym.agents.muzero.head import prepare  # noqa: E402

HERE = Path(__file__).resolve().parent
_AGENT: dict = {}


def _label(task: tuple[str, int, str]) -> str:
    """One program's departures into ``out/p{i}.npz`` (in a worker process)."""
    checkpoint, i, out = task
    torch.set_num_threads(1)
    if checkpoint not in _AGENT:
        _AGENT[checkpoint] = make_agent(f"muzero-pol:{checkpoint},margin=0")
    agent = _AGENT[checkpoint]
    scenario = departures.generated(i, i + 1, agent.config.train)[0]
    start, inputs = time.perf_counter(), []
    departures.departures(agent, scenario, 0.0, inputs)
    buf = io.BytesIO()
    np.savez(buf, X=np.array([x for x, _ in inputs]).reshape(len(inputs), -1), Y=np.array([y for _, y in inputs]),
             name=scenario.name)
    with atomic_write(Path(out) / f"p{i}.npz", "wb") as handle:
        handle.write(buf.getvalue())
    return f"{i} {scenario.name}: {len(inputs)} departures, {time.perf_counter() - start:.1f} s"


def _label_seconds(path: Path) -> float:
    """The labelling runs' wall seconds so far in ``path`` (a data folder's ``time.json``), 0 if none."""
    return json.loads(path.read_text())["label_s"] if path.is_file() else 0.0


def _add_time(path: Path, label_s: float) -> None:
    """Add a labelling run's wall seconds to ``path`` (the data folder's ``time.json``)."""
    total = _label_seconds(path) + label_s
    with atomic_write(path, "w") as handle:
        json.dump({"label_s": total}, handle)


def load_data(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Every program's rows in ``folder``, in program order."""
    files = sorted(folder.glob("p*.npz"), key=lambda f: int(f.stem[1:]))
    if not files:
        raise ValueError(f"{folder}: no p*.npz files (run `head.py data` first)")
    parts = [np.load(f) for f in files]
    parts = [(d["X"], d["Y"]) for d in parts if len(d["Y"])]
    return np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts])


def head_state(model: torch.nn.Sequential, mean: np.ndarray, scale: np.ndarray) -> dict:
    """The checkpoint entry (``extra["departure_head"]``) of a fitted torch head."""
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    return {"mean": torch.as_tensor(mean), "scale": torch.as_tensor(scale),
            "weights": [m.weight.detach().double().T.contiguous() for m in linears],
            "biases": [m.bias.detach().double().clone() for m in linears]}


def fit(x_raw: np.ndarray, cost: np.ndarray, epochs: int = 30, seed: int = 0) -> dict:
    """The head's checkpoint entry fitted on raw rows and their costs (module docstring)."""
    x = prepare(x_raw)
    mean, scale = x.mean(0), x.std(0) + 1e-6
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), 1e-3, weight_decay=1e-4)
    xt = torch.tensor((x - mean) / scale, dtype=torch.float32)
    yt = torch.tensor(np.clip(cost, -2, 2), dtype=torch.float32)
    for _ in range(epochs):
        perm = torch.randperm(len(yt))
        for s in range(0, len(yt), 256):
            b = perm[s:s + 256]
            w = yt[b].abs() + 1e-3
            loses = (yt[b] > 0).float()   # the score is the logit of "the departure loses"
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(xt[b])[:, 0], loses, reduction="none")
            loss = (loss * w).sum() / w.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return head_state(model, mean, scale)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    d = sub.add_parser("data", help="label departures of fresh training-distribution programs")
    d.add_argument("--generated", required=True, metavar="LO,HI")
    d.add_argument("--out", required=True)
    d.add_argument("--workers", type=int, default=1)
    d.add_argument("--checkpoint", default=str(HERE))
    f = sub.add_parser("fit", help="fit the head and write a checkpoint with it")
    f.add_argument("--data", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--threshold", type=float, default=0.0)
    f.add_argument("--selection", help="how the threshold was chosen (the checkpoint's extra['selection'])")
    f.add_argument("--checkpoint", default=str(HERE))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if args.what == "data":
        try:
            lo, hi = (int(v) for v in args.generated.split(","))
        except ValueError:
            p.error(f"--generated takes LO,HI (two integers), got {args.generated!r}")
        if args.workers < 1:
            p.error(f"--workers must be >= 1, got {args.workers}")
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        tasks = [(args.checkpoint, i, str(out)) for i in range(lo, hi) if not (out / f"p{i}.npz").exists()]
        start = time.perf_counter()
        with ProcessPoolExecutor(args.workers) as pool:
            for line in pool.map(_label, tasks):
                print(line, flush=True)
        _add_time(out / "time.json", label_s=time.perf_counter() - start)
        return 0
    try:
        x, y = load_data(Path(args.data))
        net, config, payload = load_network(args.checkpoint)
        config = config.with_overrides(["simulator.policy_margin=0.0", f"simulator.head_threshold={args.threshold!r}"])
    except ValueError as exc:
        p.error(str(exc))
    start = time.perf_counter()
    state = fit(x, y)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    extra = {**payload.get("extra", {}), "departure_head": state, "head_departures": len(y)}
    if args.selection:
        extra["selection"] = args.selection
    path = save_checkpoint(args.out, net=net, config=config, progress=payload.get("progress"), extra=extra)
    label_s = _label_seconds(Path(args.data) / "time.json")
    with atomic_write(Path(args.out) / "head.json", "w") as handle:   # the leaderboard's training budget reads it
        json.dump({"label_s": label_s, "fit_s": time.perf_counter() - start, "departures": len(y)}, handle, indent=1)
    print(f"{path}: head fitted on {len(y)} departures, threshold {args.threshold:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
