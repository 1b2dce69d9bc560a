"""MallocGame-v1 in five minutes: play XLA's own choices, then a few other policies.

    python examples/v1_quickstart.py [--scenario unet-infer@1/8] [--seed 0]

What it shows:

1. ``gym.make("MallocGame-v1", workload=NAME)`` on a bundled scenario (a real program compiled
   by XLA, with fast memory set to 1/8 of its peak live bytes);
2. the action table at the first decision: each legal action's meaning,
   ``env.unwrapped.action_meaning(a) -> (kind, offset, prefetch start)``, where ``0`` is SLOW,
   ``1 + i`` FAST at candidate offset ``i`` and ``1 + K + j * K + i`` PREFETCH issued after
   start op ``j`` into candidate ``i`` (docs/game-v1.md);
3. whole episodes under four policies, each ending with the speedup over all-slow (higher is
   better): all SLOW (1.0 by definition), XLA's Memory Space Assignment
   (``env.unwrapped.msa_action()`` at every step: exactly the ``xla-msa`` baseline), a random
   legal action, and "first fast": the lowest legal FAST or PREFETCH action.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import mallocgym  # noqa: F401  (registers MallocGame-v0 and MallocGame-v1)


def play(env: gym.Env, policy, seed: int) -> dict:
    """One episode; ``policy(env, mask, rng) -> action``. Returns the last step's info."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    done = False
    while not done:
        action = policy(env, obs["action_mask"], rng)
        obs, _, done, _, info = env.step(action)
    return info


POLICIES = {
    "all slow": lambda env, mask, rng: 0,
    "xla msa (msa_action)": lambda env, mask, rng: env.unwrapped.msa_action(),
    "random legal": lambda env, mask, rng: int(rng.choice(np.flatnonzero(mask))),
    "first fast": lambda env, mask, rng: int(np.flatnonzero(mask[1:])[0] + 1) if mask[1:].any() else 0,
}


def show_actions(env: gym.Env, limit: int = 8) -> None:
    """The legal actions at the current decision and what each one does."""
    base = env.unwrapped
    mask = base.action_masks()
    print(f"decision on buffer {base.current_buffer}, segment {base.current_segment}: "
          f"{int(mask.sum())} of {env.action_space.n} actions legal, XLA's choice is {base.msa_action()}")
    print("  action  kind      offset  prefetch issued after op")
    for a in np.flatnonzero(mask)[:limit]:
        kind, offset, start = base.action_meaning(int(a))
        print(f"  {a:6d}  {kind:8s}  {offset:6d}  {start if kind == 'prefetch' else '':>4}")
    if mask.sum() > limit:
        print(f"  ... and {int(mask.sum()) - limit} more")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="unet-infer@1/8", help="a bundled scenario (mallocgym list)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    env = gym.make("MallocGame-v1", workload=args.scenario)
    env.reset(seed=args.seed)
    base = env.unwrapped
    print(f"{args.scenario}: {base.workload.num_ops} ops, {base.workload.num_buffers} buffers, "
          f"{base.hardware.fast_capacity / 2**20:.1f} MiB of fast memory ({base.hardware.name})")
    show_actions(env)
    print()
    print(f"{'policy':22s} {'speedup':>8s} {'stall s':>10s} {'copied MB':>10s}")
    for name, policy in POLICIES.items():
        info = play(env, policy, args.seed)
        print(f"{name:22s} {info['speedup']:8.3f} {info['stall_time']:10.2e} {info['copy_bytes'] / 1e6:10.1f}")
    env.close()


if __name__ == "__main__":
    main()
