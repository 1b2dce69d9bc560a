"""Bring your own agent: a class with ``solve_v1``, scored against ``xla-msa`` like a leaderboard entry.

    python examples/my_agent.py [--split test] [--scenarios unet-infer@1/8,...] [--out DIR]

An agent is any object with a ``name`` and ``solve(scenario, *, seed) -> Solution`` for
MallocGame-v0 or ``solve_v1(scenario, *, seed) -> Solution`` for MallocGame-v1
(``mallocgym.agents.base.Agent``); set ``plays_v0 = False`` when it only plays v1. The harness
(``mallocgym.harness.bench``) takes agent objects beside agent names, checks every mapping with
``mallocgym.evaluate_v1`` and tabulates the speedups; ``--out DIR`` writes the same
``results.{md,csv,json}`` (plus the mappings) that a ``baselines/*/`` entry holds.

The agent here plays the public env: at each decision it tries every legal action on a copy of
the state (``clone_state`` / ``restore_state``) and keeps the one with the best immediate reward,
XLA's own choice (``msa_action()``) on a tie. Replace ``choose`` with your policy.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import mallocgym  # noqa: F401  (registers the envs)
from mallocgym import harness, scenarios
from mallocgym.agents import Solution
from mallocgym.scenarios import Scenario


class OneStepAgent:
    """Greedy on the immediate reward; a MallocGame-v1 agent."""

    name = "one-step"
    plays_v0 = False  # no ``solve``: the harness refuses it on v0 with one clear error

    def choose(self, env) -> int:
        base = env.unwrapped
        best, best_reward = base.msa_action(), -np.inf
        saved = base.clone_state()
        for action in [best, *np.flatnonzero(base.action_masks())]:
            _, reward, *_ = env.step(int(action))
            base.restore_state(saved)
            if reward > best_reward + 1e-12:
                best, best_reward = int(action), reward
        return best

    def solve_v1(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        env = gym.make("MallocGame-v1", workload=scenario.workload, hardware=scenario.hardware)
        env.reset(seed=seed)
        done, info = False, {}
        while not done:
            _, _, done, _, info = env.step(self.choose(env))
        return Solution(None, mapping=info["mapping"], info={"decisions": info["agent_decisions"]})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["train", "test"], default="test",
                        help="the default suite's split to play (default: test, as the leaderboard)")
    parser.add_argument("--scenarios", help="comma-separated bundled scenario names instead of --split")
    parser.add_argument("--out", help="write results.{md,csv,json} and the mappings into this folder")
    args = parser.parse_args(argv)

    try:
        chosen = ([scenarios.get(name.strip()) for name in args.scenarios.split(",")] if args.scenarios
                  else scenarios.suite("default", args.split))
    except ValueError as exc:
        parser.error(str(exc))
    results = harness.bench(chosen, [OneStepAgent(), "xla-msa"], env="v1")
    print(harness.to_markdown(results))
    if args.out:
        try:
            print(f"wrote {harness.write_results(results, args.out, command='python examples/my_agent.py')}")
        except ValueError as exc:
            parser.exit(2, f"my_agent.py: error: {exc}\n")


if __name__ == "__main__":
    main()
