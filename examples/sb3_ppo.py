"""PPO (no action masks) on MallocGame-v0 in one file (CleanRL-style: read it top to bottom).

Plain Stable-Baselines3 PPO does not know about masks: when it picks a candidate that does not
exist, MallocGame's ``invalid_action="skip"`` (the default) leaves the buffer in slow memory and
flags ``info["invalid_action"]``. The policy scores each candidate row with one shared network
(``CandidatePolicy``); the games run in SB3's own ``DummyVecEnv`` (``--vec subproc`` for
``SubprocVecEnv``, ``--vec native`` for mallocgym's numba batch).

    python examples/sb3_ppo.py --total-timesteps 50000 --out runs/ppo

Prints the training budget, then one JSON object per test scenario with the speedup of the
trained policy (argmax), random play and XLA-like. ``--out`` writes a run directory that
``mallocgym eval --agent ppo:DIR`` loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass

import numpy as np
import torch
from stable_baselines3 import PPO

from mallocgym import evaluate
from mallocgym.agents.sb3.checkpoint import save_checkpoint
from mallocgym.agents.sb3.config import EnvConfig, PolicyConfig, PPOConfig, config_to_dict
from mallocgym.agents.sb3.extractor import CandidatePolicy, CandidateSetExtractor
from mallocgym.agents.sb3.vec_env import make_vec_env
from mallocgym.env import MallocGameEnv
from mallocgym.heuristics import HEURISTICS
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
    vec: str = "dummy"
    """vector env: dummy (DummyVecEnv), subproc (SubprocVecEnv) or native (numba batch)"""
    n_envs: int = 4
    """games played in parallel"""
    n_steps: int = 256
    """steps per game between PPO updates"""
    batch_size: int = 256
    """minibatch size"""
    n_epochs: int = 4
    """passes over each rollout"""
    learning_rate: float = 3e-4
    """Adam step size"""
    gamma: float = 0.95
    """discount factor"""
    ent_coef: float = 0.01
    """entropy bonus"""
    out: str = ""
    """if set, save the run here (model.zip + train.json)"""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    return Args(**vars(parser.parse_args()))


def play(model: PPO, env: MallocGameEnv, seed: int) -> tuple[np.ndarray, int]:
    """One greedy episode without masks; returns the mapping and how many picks were masked."""
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
    env_config = EnvConfig()  # invalid_action="skip": a masked pick leaves the buffer in slow memory

    # 1. The games: SB3's DummyVecEnv of MallocGameEnv over the train split (plus VecMonitor).
    venv = make_vec_env(args.vec, args.n_envs, dict(env_config.env_kwargs(), suite_name=args.suite, split="train"),
                        seed=args.seed)

    # 2. The agent: one logit per candidate row plus skip.
    policy_kwargs = dict(features_extractor_class=CandidateSetExtractor,
                         features_extractor_kwargs=dict(memory_bins=env_config.memory_bins))
    model = PPO(CandidatePolicy, venv, learning_rate=args.learning_rate, n_steps=args.n_steps,
                batch_size=args.batch_size, n_epochs=args.n_epochs, gamma=args.gamma, ent_coef=args.ent_coef,
                policy_kwargs=policy_kwargs, seed=args.seed, device="cpu")

    # 3. Train.
    begin = time.perf_counter()
    model.learn(total_timesteps=args.total_timesteps)
    minutes = (time.perf_counter() - begin) / 60.0
    venv.close()
    print(json.dumps({"trained_steps": int(model.num_timesteps), "minutes": round(minutes, 3)}))

    # 4. Save in the layout `mallocgym eval --agent ppo:DIR` reads.
    if args.out:
        config = PPOConfig(n_envs=args.n_envs, vec=args.vec, learning_rate=args.learning_rate, n_steps=args.n_steps,
                           batch_size=args.batch_size, n_epochs=args.n_epochs, gamma=args.gamma, ent_coef=args.ent_coef,
                           env=env_config, policy=PolicyConfig())
        save_checkpoint(model, args.out, {"algo": "ppo", "config": config_to_dict(config),
                                          "trained": {"steps": int(model.num_timesteps), "minutes": minutes}})

    # 5. Evaluate on the test split through mallocgym.evaluate.
    for scenario in suite(args.suite, "test"):
        env = MallocGameEnv(scenario, **env_config.env_kwargs())
        offsets, invalid = play(model, env, args.seed)
        row = {"scenario": scenario.name, "masked_picks": int(invalid)}
        for name, mapping in (("ppo", offsets), ("random", HEURISTICS["random"](scenario, args.seed)),
                              ("xla", HEURISTICS["xla"](scenario, args.seed))):
            row[name] = round(evaluate(scenario.workload, mapping, scenario.hardware).speedup, 6)
        print(json.dumps(row))


if __name__ == "__main__":
    main()
