"""The simulator mode: AlphaZero-style search on the exact MallocGame simulator.

Instead of the learned dynamics, every tree node is a real game position: expanding an edge
restores its parent's snapshot (``env.unwrapped.clone_state()`` / ``restore_state()``), steps
the env, and keeps the child's snapshot. Rewards are exact, legality comes from the env's mask
at every node, and a finished game is a terminal node. The network supplies priors and a value
at each new node, mixed with the exact return of finishing the game with XLA-like from there
(``SimulatorConfig.value_mix``; the completion runs in :mod:`mallocgym.sim`). The tree
statistics are the same numba arrays as the learned search (:mod:`.tree`); only the snapshots
are kept in a Python list per game.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ... import sim
from . import tree as T
from .config import MuZeroConfig
from .mcts import NetworkModel, SearchResult, effective_legal, finish, prepare_roots, search_params
from .networks import stack_obs

__all__ = ["greedy_return_to_go", "simulator_search"]


def greedy_return_to_go(env, snapshot) -> float:
    """Normalised return XLA-like would still collect from ``snapshot`` (exact, numba)."""
    st = env.unwrapped.static
    state = sim.copy_state(snapshot.sim_state)
    now = float(state.totals[sim.TIME])
    final = sim.run_greedy(st, state, True)
    return (now - final) / float(st.params[sim.TIME_ALL_SLOW])


def _evaluate(model: NetworkModel, envs, snapshots, obs_list, config: MuZeroConfig):
    """Values (network mixed with XLA-like completion, scaled units) and logits of positions."""
    obs = stack_obs(obs_list)
    values, logits, _ = model.root(obs)
    mix = config.simulator.value_mix
    if mix > 0:
        scale = config.network.reward_scale
        rollout = np.array([greedy_return_to_go(env, s) * scale for env, s in zip(envs, snapshots)])
        values = (1.0 - mix) * values + mix * rollout
    legal = effective_legal(obs, prune_no_benefit=config.search.prune_no_benefit)
    return values, logits, legal


def simulator_search(model: NetworkModel, envs: Sequence, *, config: MuZeroConfig, num_simulations: int,
                     rngs: Sequence[np.random.Generator] | None = None) -> SearchResult:
    """Search the current positions of ``envs`` (unwrapped MallocGame envs, one per game) on the
    exact simulator; one network call per simulation for all games. The envs end where they
    started (their snapshots are restored)."""
    batch = len(envs)
    num_actions = int(envs[0].unwrapped.action_space.n)
    scale = config.network.reward_scale
    roots = [env.unwrapped.clone_state() for env in envs]
    values, logits, legal = _evaluate(model, envs, roots, [env.unwrapped.observation() for env in envs], config)
    tree = T.new_tree(batch, num_simulations + 1, num_actions, num_simulations, search_params(config.search))
    prepare_roots(tree, values=values, logits=logits, legal=legal, config=config.search,
                  num_simulations=num_simulations, rngs=rngs)
    snapshots: list[list] = [[r] for r in roots]
    nodes = np.zeros(batch, np.int64)
    actions = np.zeros(batch, np.int64)
    children = np.zeros(batch, np.int64)
    for s in range(num_simulations):
        T.select(tree, s, nodes, actions)
        rewards = np.zeros(batch)
        terminal = np.zeros(batch, np.uint8)
        new_values = np.zeros(batch)
        new_logits = np.zeros((batch, num_actions))
        new_legal = np.zeros((batch, num_actions), np.uint8)
        pending, pending_obs, pending_snaps = [], [], []
        for b, env in enumerate(envs):
            if actions[b] < 0:
                continue
            u = env.unwrapped
            u.restore_state(snapshots[b][nodes[b]])
            obs, reward, done, _, _ = u.step(int(actions[b]))
            snap = u.clone_state()
            snapshots[b].append(snap)
            rewards[b] = reward * scale
            terminal[b] = done
            if done:
                new_legal[b, -1] = 1
            else:
                pending.append(b)
                pending_obs.append(obs)
                pending_snaps.append(snap)
        if pending:
            v, lg, lgl = _evaluate(model, [envs[b] for b in pending], pending_snaps, pending_obs, config)
            new_values[pending] = v
            new_logits[pending] = lg
            new_legal[pending] = lgl
        T.expand(tree, nodes, actions, rewards, new_values, new_logits, new_legal, terminal, children)
    for env, root in zip(envs, roots):
        env.unwrapped.restore_state(root)
    return finish(tree, config=config.search, rngs=rngs)
