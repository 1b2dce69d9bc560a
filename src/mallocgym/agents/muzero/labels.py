"""Exact labels without the tree search, and the rules that read them (issue 18, steps 3-5).

Step 2's expert iteration harvested its positions from the simulator search's tree: exact and
rich, but slow (about 33 programs in 30 minutes), and the network learned the programs it saw.
A **labelled game** (:func:`label_game`) costs about as much as one search move: it plays
XLA-like's game on a program and, at about ``train.label_positions`` positions of it drawn at
random, scores every legal move exactly by finishing the game with XLA-like after it (the
rollout algorithm's step, :class:`mallocgym.agents.search.CompletionScorer`). Those scores are
the version-2 targets of the position (:func:`label_targets`):

- **advantage** ``a(m) = residual_scale x (T_xla - T(m)) / T_xla`` for every legal move ``m``,
  ``T(m)`` its exact completion, ``T_xla`` XLA-like's (0 for XLA-like's own move): exact, as
  in step 2 (there the expansion computed the same numbers);
- **residual** ``max(0, max_m a(m))``: the best completion one step below the position (the
  search's best-value backup with a search of depth one);
- **policy** ``softmax(a / label_temperature)`` over the legal moves.

With probability ``train.label_explore`` the game continues from a labelled position with its
best-scoring move instead of XLA-like's, so that positions after a departure (those the policy
and the search reach) are labelled too.

The rules that use the network's advantage head:

- :func:`predicted_gain`: the best predicted advantage of a legal move over XLA-like's move;
- :func:`policy_move`: the policy alone (step 5): leave XLA-like's move only where that gain
  exceeds a margin (one network call per decision with a choice). With exact advantages and
  margin 0 this is the rollout algorithm, which is never worse than XLA-like (Bertsekas'
  cost-improvement property of rollout over a sequentially consistent base heuristic);
- the simulator search's gate (step 4, ``simulator.gate``): search a position only where the
  predicted gain exceeds the gate (:class:`~.simsearch.SimulatorSearch`).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ... import sim
from ...heuristics import complete
from ...scenarios import Scenario
from ..search import CompletionScorer
from .config import MuZeroConfig
from .model import effective_legal, xla_move
from .game import make_env
from .networks import OBS_KEYS, stack_obs

__all__ = ["ExpertRecord", "expert_targets", "base_move", "label_targets", "scored_targets", "label_game", "predicted_gain",
           "policy_move", "LabelledTrajectory"]


class ExpertRecord(NamedTuple):
    """One version-2 training position (:func:`expert_targets`): the observation (one row per
    key of :data:`~.networks.OBS_KEYS`), the legal actions ``bool[A]``, the improved policy
    ``float32[A]``, the residual (a float) and the advantages ``float32[A]`` (NaN: illegal)."""

    obs: dict
    legal: np.ndarray
    policy: np.ndarray
    residual: float
    advantage: np.ndarray


def expert_targets(*, num_actions: int, actions: np.ndarray, base: int, final: float, best: float,
                   child_finals: np.ndarray, policy: np.ndarray,
                   residual_scale: float) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Version-2 targets of an expanded position: ``(legal bool[A], policy float32[A], residual,
    advantage float32[A])``.

    Args:
      actions: the legal env actions (the node's children, in order); ``base``: XLA-like's one.
      final: XLA-like's completion time from the position; ``best``: the best completion time
        found below it (the search's best-value backup; ``best <= final``).
      child_finals: XLA-like's completion time after each legal action (``child_finals`` of
        ``base`` is ``final``).
      policy: the improved policy over ``actions`` (:func:`.simsearch.improved_policy`).

    ``residual = residual_scale * (final - best) / final >= 0`` and ``advantage[a] =
    residual_scale * (final - child_finals[a]) / final`` (0 for ``base``; the residual is at
    least every advantage).
    """
    actions = np.asarray(actions, np.int64)
    child_finals = np.asarray(child_finals, np.float64)
    if not (final > 0 and best <= final * (1 + 1e-12)):
        raise ValueError(f"expert targets need 0 < best <= final, got best {best!r}, final {final!r}")
    if len(actions) != len(child_finals) or len(actions) != len(policy):
        raise ValueError("actions, child_finals and policy must have one entry per legal action")
    legal = np.zeros(num_actions, bool)
    legal[actions] = True
    pi = np.zeros(num_actions, np.float32)
    pi[actions] = policy
    advantage = np.full(num_actions, np.nan, np.float32)
    advantage[actions] = residual_scale * (final - child_finals) / final
    base_index = np.flatnonzero(actions == base)
    if base_index.size:
        advantage[base] = 0.0
    residual = max(0.0, residual_scale * (final - best) / final)
    return legal, pi, residual, advantage


def base_move(legal: np.ndarray, base: int | None = None) -> int:
    """The move the labels and the policy measure against: ``base`` when given (MallocGame-v1:
    xla-msa's move), else XLA-like's, :func:`~.model.xla_move` of ``legal``."""
    return xla_move(legal) if base is None else int(base)


def label_targets(times: np.ndarray, legal: np.ndarray, *, residual_scale: float,
                  temperature: float, base: int | None = None) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Version-2 targets ``(legal bool[A], policy float32[A], residual, advantage float32[A])``
    of a position from every move's exact completion time ``times[a]`` (seconds; only the
    ``legal`` entries are read). The base move is ``base`` (MallocGame-v1: xla-msa's move), by
    default XLA-like's, :func:`~.model.xla_move` of ``legal``. See the module docstring for the
    formulas."""
    legal = np.asarray(legal, bool)
    times = np.asarray(times, np.float64)
    if legal.sum() < 1:
        raise ValueError("a labelled position needs at least one legal move")
    actions = np.flatnonzero(legal)
    child = times[actions]
    if not np.all(np.isfinite(child) & (child > 0)):
        raise ValueError(f"every legal move needs a finite completion time > 0, got {child.tolist()}")
    base = base_move(legal, base)
    if not legal[base]:
        raise ValueError(f"the base move {base} is not among the legal moves {actions.tolist()}")
    final = float(times[base])
    advantage = residual_scale * (final - child) / final
    z = advantage / temperature
    pi = np.exp(z - z.max())
    pi /= pi.sum()
    return expert_targets(num_actions=len(legal), actions=actions, base=base, final=final,
                          best=min(final, float(child.min())), child_finals=child, policy=pi,
                          residual_scale=residual_scale)


def scored_targets(legal: np.ndarray, base: int, score: Callable[[], np.ndarray],
                   config: MuZeroConfig) -> tuple[np.ndarray, tuple]:
    """``(times, targets)`` of a labelled position: ``score()``'s completion times (``inf`` off
    ``legal``) and :func:`label_targets` over the ``base`` move with the config's scale and
    temperature."""
    times = np.where(legal, score(), np.inf)
    return times, label_targets(times, legal, base=base, residual_scale=config.network.residual_scale,
                                temperature=config.train.label_temperature)


def label_decision(rng: np.random.Generator, p: float, legal: np.ndarray, base: int,
                   score: Callable[[], np.ndarray], config: MuZeroConfig) -> tuple[int, tuple | None]:
    """One decision of a labelled game (MallocGame-v0 or -v1): ``(action, targets or None)``.
    With at least two ``legal`` moves and probability ``p`` the position is labelled:
    ``score()`` gives every move's exact completion time (only the legal entries are read) and
    :func:`label_targets` the targets over the ``base`` move; then with probability
    ``train.label_explore`` the game plays the best-scoring move when it is faster than
    ``base``'s (``base`` on ties). Elsewhere the game plays ``base``. Draws from ``rng`` in that
    order: the labelling draw (positions with a choice only), then the exploring draw."""
    if legal.sum() < 2 or not rng.random() < p:
        return base, None
    times, targets = scored_targets(legal, base, score, config)
    if rng.random() < config.train.label_explore and times.min() < times[base]:
        return int(np.argmin(times)), targets
    return base, targets


def label_game(scenario: Scenario, config: MuZeroConfig, rng: np.random.Generator) -> tuple[list[ExpertRecord], float, float]:
    """One labelled game (module docstring): ``(records, return, XLA-like's return)``, returns
    normalised (``1 - time / all-slow time``). Draws the env seed, the positions labelled and
    the exploring moves from ``rng``. MallocGame-v0 only (v1: :func:`.v1.label_game_v1`)."""
    if config.env.game != "v0":
        raise ValueError("label_game plays MallocGame-v0; a MallocGame-v1 config is labelled by "
                         "mallocgym.agents.muzero.v1.label_game_v1")
    t = config.train
    env = make_env(scenario, config).unwrapped
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    st = env.static
    slow = float(st.params[sim.TIME_ALL_SLOW])
    xla_time = float(complete(st, sim.copy_state(env.sim_state), sim.new_state(st)))
    scorer = CompletionScorer(st, env.k)
    p = min(1.0, t.label_positions / max(int(st.size.shape[0]), 1))
    records: list[ExpertRecord] = []
    done = False
    info: dict = {}
    while not done:
        legal = effective_legal(stack_obs([obs]), prune_no_benefit=config.search.prune_no_benefit)[0]
        action, targets = label_decision(rng, p, legal, xla_move(legal), lambda: scorer(env.sim_state)[0], config)
        if targets is not None:
            records.append(ExpertRecord({key: np.array(obs[key]) for key in OBS_KEYS}, *targets))
        obs, _, done, _, info = env.step(action)
    return records, 1.0 - float(info["time"]) / slow, 1.0 - xla_time / slow


def predicted_gain(advantage: np.ndarray, legal: np.ndarray, base: int | None = None) -> tuple[float, int]:
    """``(gain, move)``: the legal move other than XLA-like's with the highest predicted
    advantage, and its advantage minus XLA-like's move's (``-inf`` and XLA-like's move when it
    is the only legal one). ``base``: the base move instead of XLA-like's (v1: xla-msa's)."""
    legal = np.asarray(legal, bool)
    base = base_move(legal, base)
    others = legal.copy()
    others[base] = False
    if not others.any():
        return -np.inf, base
    adv = np.where(others, np.asarray(advantage, np.float64), -np.inf)
    move = int(np.argmax(adv))
    return float(adv[move] - advantage[base]), move


def policy_move(advantage: np.ndarray, legal: np.ndarray, margin: float, base: int | None = None) -> int:
    """The policy's move (step 5): the move of :func:`predicted_gain` when its gain exceeds
    ``margin``, else XLA-like's move (or ``base``, v1: xla-msa's)."""
    gain, move = predicted_gain(advantage, legal, base)
    return move if gain > margin else base_move(legal, base)
