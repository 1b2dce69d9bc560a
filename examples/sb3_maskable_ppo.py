"""MaskablePPO on MallocGame-v0 in one file (CleanRL-style: read it top to bottom).

sb3-contrib's MaskablePPO only gives probability to legal actions: every step it asks the
vector env for ``action_masks()`` (True = legal). The policy scores each candidate offset with
one shared network (``MaskableCandidatePolicy``, see mallocgym/agents/sb3/extractor.py), and
the games run in mallocgym's native numba batch (``SB3VecEnv``).

    python examples/sb3_maskable_ppo.py --total-timesteps 50000 --out runs/mppo

Trains on the bundled suite's train split, then plays each test scenario once (argmax) and
prints its speedup next to random play and XLA-like, one JSON object per line. ``--out``
writes a run directory that ``mallocgym eval --agent maskable_ppo:DIR`` loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import VecMonitor

from mallocgym import evaluate
from mallocgym.heuristics import HEURISTICS
from mallocgym.agents.sb3.checkpoint import save_checkpoint
from mallocgym.agents.sb3.config import EnvConfig, MaskablePPOConfig, PolicyConfig, config_to_dict
from mallocgym.agents.sb3.extractor import CandidateSetExtractor, MaskableCandidatePolicy
from mallocgym.agents.sb3.vec_env import SB3VecEnv
from mallocgym.env import MallocGameEnv
from mallocgym.scenarios import suite


@dataclass(frozen=True)
class Args:
    """Every field is a flag: ``total_timesteps`` is ``--total-timesteps``."""

    seed: int = 0
    """seed of the network, the games and the evaluation"""
    suite: str = "default"
    """bundled suite: train on its train split, evaluate on its test split"""
    total_timesteps: int = 50_000
    """env steps to train for (one step = one buffer decided)"""
    n_envs: int = 8
    """games played in parallel (one numba loop)"""
    n_steps: int = 256
    """steps per game between PPO updates"""
    batch_size: int = 256
    """minibatch size"""
    n_epochs: int = 4
    """passes over each rollout"""
    learning_rate: float = 3e-4
    """Adam step size"""
    gamma: float = 0.95
    """discount factor (0.95 beat 0.99 in docs/sb3.md's runs)"""
    ent_coef: float = 0.01
    """entropy bonus"""
    hidden: int = 64
    """width of the per-candidate and context embeddings"""
    out: str = ""
    """if set, save the run here (model.zip + train.json)"""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    return Args(**vars(parser.parse_args()))


def play(model: MaskablePPO, env: MallocGameEnv, seed: int) -> np.ndarray:
    """One greedy episode with masks; returns the mapping (offsets)."""
    obs, _ = env.reset(seed=seed)
    while True:
        action, _ = model.predict(obs, deterministic=True, action_masks=env.action_masks())
        obs, _, terminated, _, info = env.step(int(action))
        if terminated:
            return info["offsets"]


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)  # two threads on two busy cores run much slower
    env_config = EnvConfig()

    # 1. The games: the train split, args.n_envs at a time, stepped together in numba.
    venv = VecMonitor(SB3VecEnv(args.n_envs, suite_name=args.suite, split="train", **env_config.env_kwargs()))
    venv.seed(args.seed)

    # 2. The agent: per-candidate scores as logits, masks from the env.
    policy_kwargs = dict(features_extractor_class=CandidateSetExtractor,
                         features_extractor_kwargs=dict(hidden=args.hidden, memory_bins=env_config.memory_bins))
    model = MaskablePPO(MaskableCandidatePolicy, venv, learning_rate=args.learning_rate, n_steps=args.n_steps,
                        batch_size=args.batch_size, n_epochs=args.n_epochs, gamma=args.gamma,
                        ent_coef=args.ent_coef, policy_kwargs=policy_kwargs, seed=args.seed, device="cpu")

    # 3. Train.
    begin = time.perf_counter()
    model.learn(total_timesteps=args.total_timesteps)
    minutes = (time.perf_counter() - begin) / 60.0
    print(json.dumps({"trained_steps": int(model.num_timesteps), "minutes": round(minutes, 3)}))

    # 4. Save in the layout `mallocgym eval --agent maskable_ppo:DIR` reads.
    if args.out:
        config = MaskablePPOConfig(n_envs=args.n_envs, learning_rate=args.learning_rate, gamma=args.gamma,
                                   n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.n_epochs,
                                   ent_coef=args.ent_coef, env=env_config, policy=PolicyConfig(hidden=args.hidden))
        save_checkpoint(model, args.out, {"algo": "maskable_ppo", "config": config_to_dict(config),
                                          "trained": {"steps": int(model.num_timesteps), "minutes": minutes}})

    # 5. Evaluate on the test split: every number comes from mallocgym.evaluate.
    for scenario in suite(args.suite, "test"):
        env = MallocGameEnv(scenario, **env_config.env_kwargs())
        row = {"scenario": scenario.name}
        for name, offsets in (("maskable_ppo", play(model, env, args.seed)),
                              ("random", HEURISTICS["random"](scenario, args.seed)),
                              ("xla", HEURISTICS["xla"](scenario, args.seed))):
            row[name] = round(evaluate(scenario.workload, offsets, scenario.hardware).speedup, 6)
        print(json.dumps(row))


if __name__ == "__main__":
    main()
