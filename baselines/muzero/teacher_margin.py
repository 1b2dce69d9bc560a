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
from mallocgym.agents.muzero.mcts import effective_legal
from mallocgym.agents.muzero.selfplay import teacher_choice
from mallocgym.agents.search import CompletionScorer


def play_teacher(scenario, margin: float, config: MuZeroConfig) -> tuple[float, int]:
    """The teacher's game on ``scenario``: ``(speedup, departures from XLA-like's move)``."""
    env = make_env(scenario, config)
    obs, _ = env.reset(seed=0)
    u = env.unwrapped
    scorer = CompletionScorer(u.static, u.k)
    departures, done = 0, False
    while not done:
        legal = effective_legal({k: obs[k][None] for k in ("action_mask", "buffer")},
                                prune_no_benefit=config.search.prune_no_benefit)[0]
        base = 0 if legal[0] else len(legal) - 1
        action = base
        if legal.sum() > 1:
            times, _ = scorer(u.sim_state)
            times[~legal] = np.inf
            action = teacher_choice(times, base, margin)
        departures += action != base
        obs, _, done, _, _ = env.step(action)
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
