"""How often the rollout teacher leaves XLA-like's move, and what a margin keeps of its gain.

For every scenario of a split of the bundled suite, plays the teacher of mallocMuZero's training
(``train.teacher_fraction``: each action scored by an XLA-like completion on the exact
simulator, the search's no-benefit pruning, ``selfplay.teacher_choice`` with each margin) and
prints XLA-like's speedup, then ``speedup/departures`` per margin (departures: moves that are not
XLA-like's).

    python baselines/muzero/teacher_margin.py train 0,1e-4,1e-3,3e-3,1e-2
"""

from __future__ import annotations

import sys

import numpy as np

from mallocgym import scenarios, sim
from mallocgym.agents.muzero.agent import make_env
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.mcts import effective_legal, xla_move
from mallocgym.agents.muzero.selfplay import Actor, ScenarioSource


def play_teacher(scenario, margin: float, config: MuZeroConfig) -> tuple[float, int]:
    """The teacher's game on ``scenario`` (``Actor.teacher_move``, as in training):
    ``(speedup, departures from XLA-like's move)``."""
    config = config.with_overrides([f"train.teacher_margin={margin!r}", "train.teacher_fraction=1.0"])
    actor = Actor(make_env(scenario, config), np.random.default_rng(0))
    actor.start(ScenarioSource([scenario], None, 0.0), 1.0)
    u = actor.env.unwrapped
    prune = config.search.prune_no_benefit
    departures, done = 0, False
    while not done:
        legal = effective_legal({k: actor.obs[k][None] for k in ("action_mask", "buffer")},
                                prune_no_benefit=prune)[0]
        action, _, _ = actor.teacher_move(config, prune)
        departures += action != xla_move(legal)
        actor.obs, _, done, _, _ = u.step(action)
    return float(u.static.params[sim.TIME_ALL_SLOW] / u.sim_state.totals[sim.TIME]), departures


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("train", "test"):
        print(__doc__, file=sys.stderr)
        return 2
    margins = [float(m) for m in argv[1].split(",")]
    config = MuZeroConfig()
    print("| scenario | xla | " + " | ".join(f"margin {m:g}" for m in margins) + " |")
    print("|---|---:|" + "---:|" * len(margins))
    for scenario in scenarios.suite("default", argv[0]):
        st = sim.compile_scenario(scenario.workload, scenario.hardware, config.env.order)
        xla = float(st.params[sim.TIME_ALL_SLOW] / sim.run_greedy(st, sim.new_state(st), True))
        cells = [f"{s:.4f}/{d}" for s, d in (play_teacher(scenario, m, config) for m in margins)]
        print(f"| {scenario.name} | {xla:.4f} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
