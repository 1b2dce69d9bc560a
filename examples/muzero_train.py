"""mallocMuZero on MallocGame-v0: train on labelled games for a few minutes, then compare with XLA-like.

    python examples/muzero_train.py --minutes 10 --out runs/muzero

Trains with the default :class:`MuZeroConfig` (expert iteration on labelled games: XLA-like's
game on a program, every legal move scored exactly at about 48 positions of it) on the bundled
suite's train split plus synthetic programs, then plays every test scenario as the policy alone
(``muzero-pol``) and as the search on the exact simulator (``muzero-sim``) and prints a table
next to XLA-like. The same run folder works with ``mallocgym eval --agent muzero-pol:runs/muzero``.

``--scenario FILE_OR_NAME`` trains and evaluates on that one scenario instead (no generator);
``--set part.field=value`` changes the config (``--set train.label_positions=24``;
``--set train.label_workers=2`` plays the labelled games in two worker processes).
"""

from __future__ import annotations

import argparse

from mallocgym.agents.muzero import MuZeroConfig, train
from mallocgym.harness import bench, to_markdown
from mallocgym.scenarios import resolve, suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="training budget (wall clock)")
    parser.add_argument("--out", default="runs/muzero", help="run folder (checkpoint, config, log)")
    parser.add_argument("--suite", default="default", help="train on its train split, test on its test split")
    parser.add_argument("--scenario", help="train and test on this one scenario instead")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], help="config override part.field=value")
    parser.add_argument("--no-eval", action="store_true", help="train only")
    args = parser.parse_args()

    # 1. The config: frozen dataclasses, validated; every field is documented in config.py.
    config = MuZeroConfig().with_overrides(args.set)

    # 2. What to play: one scenario, or the suite's train split plus generated programs.
    if args.scenario:
        train_on = test_on = [resolve(args.scenario)]
    else:
        train_on, test_on = suite(args.suite, "train"), suite(args.suite, "test")

    # 3. Labelled games and learning under a wall-clock budget; leaves args.out/checkpoint.pt.
    summary = train(config, scenarios=train_on, out_dir=args.out, minutes=args.minutes, seed=args.seed,
                    use_generator=not args.scenario)
    print(f"trained: {summary['env_steps']} moves, {summary['episodes']} games, "
          f"{summary['train_steps']} updates in {summary['elapsed_s']:.0f} s")
    if args.no_eval:
        return

    # 4. Play the test scenarios through the shared harness (validated by evaluate()).
    agents = ["xla", f"muzero-pol:{args.out}", f"muzero-sim:{args.out}"]
    results = bench(test_on, agents, seed=args.seed)
    print(to_markdown(results))


if __name__ == "__main__":
    main()
