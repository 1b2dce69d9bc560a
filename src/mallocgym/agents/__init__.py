"""Agents: anything that maps a scenario to offsets, behind one interface.

``make_agent("xla")`` or ``make_agent("maskable_ppo:runs/x")`` (``KIND:PATH`` for trained
agents). Agents are imported lazily, so naming a heuristic never imports torch.
"""

from __future__ import annotations

import importlib

from .._extras import require_extra
from .base import Agent, HeuristicAgent, Solution

__all__ = ["Agent", "Solution", "HeuristicAgent", "make_agent", "agent_names", "AGENTS"]

# name -> "module:factory"; the factory takes the text after "KIND:" (or None) and returns an Agent.
AGENTS: dict[str, str] = {
    "all-slow": "mallocgym.agents.base:heuristic_factory",
    "random": "mallocgym.agents.base:heuristic_factory",
    "xla": "mallocgym.agents.base:heuristic_factory",
    "first-fit": "mallocgym.agents.base:heuristic_factory",
    "best-fit": "mallocgym.agents.base:heuristic_factory",
    "greedy": "mallocgym.agents.base:heuristic_factory",  # MallocGame-v1 only
    "xla-msa": "mallocgym.agents.xla_msa:msa_factory",  # MallocGame-v1 only
    "rollout": "mallocgym.agents.search:search_factory",
    "beam": "mallocgym.agents.search:search_factory",
    "mcts": "mallocgym.agents.search:search_factory",
    "exact": "mallocgym.agents.exact:exact_factory",
    "pack": "mallocgym.agents.pack:pack_factory",
    "maskable_ppo": "mallocgym.agents.sb3.agent:sb3_factory",
    "ppo": "mallocgym.agents.sb3.agent:sb3_factory",
    "dqn": "mallocgym.agents.sb3.agent:sb3_factory",
    "muzero": "mallocgym.agents.muzero.agent:muzero_factory",
    "muzero-sim": "mallocgym.agents.muzero.agent:muzero_factory",
    "muzero-pol": "mallocgym.agents.muzero.agent:muzero_factory",
}

# name -> the extra its module needs (checked first, so a missing one is named: pip install 'mallocgym[sb3]').
# `exact` names its extra itself (agents/exact.py).
AGENT_EXTRAS: dict[str, str] = {
    "maskable_ppo": "sb3", "ppo": "sb3", "dqn": "sb3", "muzero": "muzero", "muzero-sim": "muzero",
    "muzero-pol": "muzero",
}


def agent_names() -> list[str]:
    return list(AGENTS)


def make_agent(spec: str) -> Agent:
    """An agent from its name (``xla``) or ``KIND:PATH`` (``muzero-pol:runs/y``)."""
    kind, _, arg = spec.partition(":")
    if kind not in AGENTS:
        from .._validate import clip, nearest_hint

        raise ValueError(f"unknown agent {clip(spec)}{nearest_hint(kind, AGENTS)}; known: {', '.join(AGENTS)} "
                         "(trained ones as KIND:PATH)")
    if kind in AGENT_EXTRAS:
        require_extra(AGENT_EXTRAS[kind], f"the {kind!r} agent")
    module, _, attr = AGENTS[kind].partition(":")
    factory = getattr(importlib.import_module(module), attr)
    return factory(kind, arg or None)
