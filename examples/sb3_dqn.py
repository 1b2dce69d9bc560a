"""DQN (no action masks) on MallocGame-v0 in one file (CleanRL-style: read it top to bottom).

DQN learns one Q-value per action; here each candidate's Q-value comes out of its own row of a
shared per-candidate network (``CandidateDQNPolicy``). DQN has no masks: a pick of a missing
candidate follows MallocGame's ``invalid_action="skip"`` (the buffer goes to slow memory).
Epsilon falls linearly over ``--exploration-steps`` env steps.

    python examples/sb3_dqn.py --total-timesteps 50000 --out runs/dqn

Prints the training budget, then one JSON object per test scenario with the speedup of the
greedy policy, random play and XLA-like. ``--out`` writes a run directory that
``mallocgym eval --agent dqn:DIR`` loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass

import numpy as np
import torch
from stable_baselines3 import DQN
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import VecMonitor

from mallocgym import evaluate
from mallocgym.agents.sb3.checkpoint import save_checkpoint
from mallocgym.agents.sb3.config import DQNConfig, EnvConfig, PolicyConfig, config_to_dict
from mallocgym.agents.sb3.extractor import CandidateDQNPolicy, CandidateSetExtractor
from mallocgym.agents.sb3.vec_env import SB3VecEnv
from mallocgym.env import MallocGameEnv
from mallocgym.heuristics import HEURISTICS
from mallocgym.scenarios import suite


@dataclass(frozen=True)
class Args:
    """Every field is a flag: ``total_timesteps`` is ``--total-timesteps``."""

    seed: int = 0
    """seed of the network, the games, exploration and the evaluation"""
    suite: str = "default"
    """bundled suite: train on its train split, evaluate on its test split"""
    total_timesteps: int = 50_000
    """env steps to train for (one step = one buffer decided)"""
    n_envs: int = 4
    """games played in parallel (mallocgym's numba batch)"""
    learning_rate: float = 1e-4
    """Adam step size"""
    gamma: float = 0.95
    """discount factor"""
    buffer_size: int = 50_000
    """replay buffer capacity (transitions)"""
    learning_starts: int = 1_000
    """transitions collected before the first update"""
    batch_size: int = 64
    """minibatch size"""
    train_freq: int = 4
    """env steps per game between updates"""
    target_update_interval: int = 2_000
    """env steps between target-network copies"""
    exploration_steps: int = 20_000
    """env steps over which epsilon falls from 1 to 0.05"""
    out: str = ""
    """if set, save the run here (model.zip + train.json)"""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    return Args(**vars(parser.parse_args()))


def play(model: DQN, env: MallocGameEnv, seed: int) -> tuple[np.ndarray, int]:
    """One greedy episode (argmax Q); returns the mapping and how many picks were masked."""
    obs, _ = env.reset(seed=seed)
    invalid = 0
    while True:
        action, _ = model.predict(obs, deterministic=True)
        obs, _, terminated, _, info = env.step(int(action))
        invalid += info["invalid_action"]
        if terminated:
            return info["offsets"], invalid


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    env_config = EnvConfig()

    # 1. The games: the train split in mallocgym's numba batch, with SB3's episode monitor.
    venv = VecMonitor(SB3VecEnv(args.n_envs, suite_name=args.suite, split="train", **env_config.env_kwargs()))
    venv.seed(args.seed)

    # 2. The agent: Q-values per candidate row plus skip.
    policy_kwargs = dict(features_extractor_class=CandidateSetExtractor,
                         features_extractor_kwargs=dict(memory_bins=env_config.memory_bins))
    model = DQN(CandidateDQNPolicy, venv, learning_rate=args.learning_rate, gamma=args.gamma,
                buffer_size=args.buffer_size, learning_starts=args.learning_starts, batch_size=args.batch_size,
                train_freq=args.train_freq, target_update_interval=args.target_update_interval,
                policy_kwargs=policy_kwargs, seed=args.seed, device="cpu")
    # Epsilon over an absolute number of steps rather than a fraction of the run.
    model.exploration_schedule = LinearSchedule(1.0, 0.05, args.exploration_steps / args.total_timesteps)

    # 3. Train.
    begin = time.perf_counter()
    model.learn(total_timesteps=args.total_timesteps)
    minutes = (time.perf_counter() - begin) / 60.0
    print(json.dumps({"trained_steps": int(model.num_timesteps), "minutes": round(minutes, 3)}))

    # 4. Save in the layout `mallocgym eval --agent dqn:DIR` reads.
    if args.out:
        config = DQNConfig(n_envs=args.n_envs, learning_rate=args.learning_rate, gamma=args.gamma,
                           buffer_size=args.buffer_size, learning_starts=args.learning_starts,
                           batch_size=args.batch_size, train_freq=args.train_freq,
                           target_update_interval=args.target_update_interval,
                           exploration_steps=args.exploration_steps, env=env_config, policy=PolicyConfig())
        save_checkpoint(model, args.out, {"algo": "dqn", "config": config_to_dict(config),
                                          "trained": {"steps": int(model.num_timesteps), "minutes": minutes}})

    # 5. Evaluate on the test split through mallocgym.evaluate.
    for scenario in suite(args.suite, "test"):
        env = MallocGameEnv(scenario, **env_config.env_kwargs())
        offsets, invalid = play(model, env, args.seed)
        row = {"scenario": scenario.name, "masked_picks": int(invalid)}
        for name, mapping in (("dqn", offsets), ("random", HEURISTICS["random"](scenario, args.seed)),
                              ("xla", HEURISTICS["xla"](scenario, args.seed))):
            row[name] = round(evaluate(scenario.workload, mapping, scenario.hardware).speedup, 6)
        print(json.dumps(row))


if __name__ == "__main__":
    main()
