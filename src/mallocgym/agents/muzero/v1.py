"""mallocMuZero's labelled (version-2) agent on MallocGame-v1 (issue 18, step 7).

The same network, targets and rules as on v0 (:mod:`.labels`), with ``xla-msa``'s in-env
policy (:meth:`mallocgym.env.v1.MallocGameV1Env.msa_action`, XLA's Memory Space Assignment
mapped to the nearest env action) where v0 has XLA-like:

- **Observation** (:func:`adapt_obs`, :func:`obs_spec_v1`): v1's ``actions`` rows (one per
  action, ``SLOW`` is row 0) are the network's pointer rows, so every action, ``SLOW``
  included, is scored by the same pointer head and there is no separate skip logit
  (``ObsSpec.game = "v1"``); the buffer vector is v1's ``buffer`` and ``segment`` features
  joined; ``next``, ``memory`` and ``progress`` as they are.
- **Moves** (:func:`branch_mask`): the agent plays, and the labels score, only the moves of the
  v1 search agents' branching (:class:`mallocgym.agents.search.v1.V1Game`): ``SLOW``, ``FAST``
  at the 2 best-fit offsets (on a later segment, the keep), ``PREFETCH`` at each of the picker's
  start times with its best fit, and xla-msa's own move. Other actions are not legal in a
  record.
- **Labelled games** (:func:`label_game_v1`): xla-msa's in-env game; at about
  ``train.label_positions`` positions with a choice drawn at random (each segment with
  probability ``min(1, label_positions / segments)``), every move of the subset scored exactly
  by finishing the game with xla-msa (:class:`Completions`); the targets are
  :func:`.labels.label_targets` with xla-msa's move as the base (advantages and residual over
  xla-msa, in ``network.residual_scale`` units of xla-msa's completion time). With probability
  ``train.label_explore`` the game continues with the best-scoring move. With an
  ``advantage_fn`` (``train.label_policy``, DAgger) the game is the network's policy's instead,
  and its departures from xla-msa's move are labelled too.
- **The policy alone** (:func:`play_v1`, ``muzero-pol:DIR,margin=X`` on a v1 checkpoint):
  xla-msa's move unless the advantage head predicts a move of the subset better by more than
  the margin (:func:`.labels.policy_move` with xla-msa's move as the base). With exact
  advantages and margin 0 this is the rollout algorithm over xla-msa, never worse than it.

Training on v1 is ``mallocgym train muzero --env v1`` with ``network.version=2`` and
``train.label_fraction=1`` (anything else is refused by :class:`.config.MuZeroConfig`).
"""

from __future__ import annotations

import math
import time
from typing import Callable

import gymnasium as gym
import numpy as np

from ..._clock import NO_DEADLINE, deadline_after
from ...features import v1 as v1_obs
from ...pricing.v1 import mapping_from_state
from ...scenarios import Scenario
from ...heuristics.v1 import complete_msa
from ...sim import v1
from ..base import Solution
from .config import MuZeroConfig, SimulatorConfig
from .head import DepartureHead, head_inputs
from .labels import ExpertRecord, label_decision, policy_move, predicted_gain, scored_targets
from .networks import NumpyAdvantage, ObsSpec, obs_spec_v1

__all__ = ["ENV_ID", "FAST_BRANCH", "make_env_v1", "obs_spec_v1", "adapt_obs", "branch_mask", "Completions",
           "label_game_v1", "play_v1", "network_advantage", "check_v1_agent"]

ENV_ID = "MallocGame-v1"
FAST_BRANCH = 2  # FAST moves of the subset: the best-fit offsets (as V1Game's fast_branch)

# advantage_fn(env, obs, legal, base) -> advantage float[A] (the policy reads the legal entries)
AdvantageFn = Callable[[object, dict, np.ndarray, int], np.ndarray]


def make_env_v1(scenario: Scenario, config: MuZeroConfig):
    """A MallocGame-v1 env for ``scenario`` with the config's env settings."""
    return gym.make(ENV_ID, workload=scenario, **config.env.make_kwargs())


def adapt_obs(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A v1 observation under the network's keys (:data:`.networks.OBS_KEYS`): ``buffer`` =
    v1's ``buffer`` then ``segment``; ``candidates`` = v1's ``actions`` (row ``a`` is action
    ``a``); the rest as they are. Arrays are copied."""
    return {"buffer": np.concatenate([obs["buffer"], obs["segment"]]).astype(np.float32),
            "candidates": np.array(obs["actions"], np.float32), "next": np.array(obs["next"], np.float32),
            "memory": np.array(obs["memory"], np.float32), "progress": np.array(obs["progress"], np.float32),
            "action_mask": np.array(obs["action_mask"], np.int8)}


def branch_mask(action_mask: np.ndarray, base: int, k: int, fast_branch: int = FAST_BRANCH) -> np.ndarray:
    """``bool[A]``: the subset of the env's legal actions the agent plays (module docstring):
    ``SLOW`` (0), ``FAST`` at candidates ``0 .. fast_branch - 1`` (actions ``1 ..``), ``PREFETCH``
    at each start's best fit (actions ``1 + K + j K``) and ``base`` (xla-msa's move), each where
    ``action_mask`` says it is legal; ``base`` must be legal."""
    legal = np.asarray(action_mask).astype(bool)
    if not legal[base]:
        raise ValueError(f"the base move {base} is not legal here (legal: {np.flatnonzero(legal).tolist()})")
    out = np.zeros(legal.shape[0], bool)
    out[0] = True
    out[1:1 + min(fast_branch, k)] = True
    out[1 + k::k] = True
    out &= legal
    out[base] = True
    return out


class Completions:
    """Exact ``xla-msa`` completions (:func:`mallocgym.heuristics.v1.complete_msa`, the in-env
    policy) from a v1 simulator state of ``st`` (its own work arrays: the env is not touched).
    The best complete game seen is kept (``best_time``, ``best_state``). :meth:`scores` stops
    a completion at ``deadline_ns`` (:mod:`mallocgym._clock`; the move is then scored ``inf``
    and ``gave_up`` set); :meth:`complete` always finishes."""

    def __init__(self, st: v1.Static1, deadline_ns: int = NO_DEADLINE):
        self.st = st
        self.table = v1_obs.make_table(st)
        self.deadline_ns = deadline_ns
        self.count = 0
        self.gave_up = False   # a completion stopped at the deadline (its move scored inf)
        self.best_time = float("inf")
        self.best_state: v1.State1 | None = None

    def complete(self, state: v1.State1) -> float:
        """xla-msa's final program time from ``state`` (not modified), whatever the deadline."""
        return self._finish(v1.copy_state(state), NO_DEADLINE)

    def _finish(self, work: v1.State1, deadline_ns: int) -> float:
        self.count += 1
        t = float(complete_msa(self.st, work, self.table, deadline_ns))
        if math.isnan(t):
            self.gave_up = True
            return math.inf
        if t < self.best_time:
            self.best_time, self.best_state = t, work
        return t

    def scores(self, state: v1.State1, actions: np.ndarray) -> np.ndarray:
        """``float64[A]``: the final time of playing each env action of ``actions`` at ``state``'s
        current segment then finishing with xla-msa (``inf`` elsewhere)."""
        st, table = self.st, self.table
        s = int(st.order[state.counters[v1.POS]])
        v1_obs.options(st, state, s, table)
        moves = [(int(table.kind[a]), int(table.off[a]), int(table.pstart[a])) for a in actions]
        times = np.full(table.kind.shape[0], np.inf)
        for a, (kind, off, pstart) in zip(actions, moves):
            if kind < 0:
                raise ValueError(f"action {a} is not legal at segment {s}")
            child = v1.copy_state(state)
            v1_obs.play(st, child, table, s, kind, off, pstart)
            times[a] = self._finish(child, self.deadline_ns)
        return times


def label_game_v1(scenario: Scenario, config: MuZeroConfig, rng: np.random.Generator,
                  advantage_fn: AdvantageFn | None = None) -> tuple[list[ExpertRecord], float, float]:
    """One labelled game on MallocGame-v1 (module docstring): ``(records, return, xla-msa's
    return)``, returns normalised (``1 - time / all-slow time``). Draws the env seed, the
    positions labelled and the exploring moves from ``rng``.

    With ``advantage_fn`` (a network's advantage head, :func:`network_advantage`) the game is
    the policy's (DAgger, ``train.label_policy``): at each decision with a choice it plays
    :func:`.labels.policy_move` at ``train.label_policy_margin`` (no exploring), and labels the
    position when the labelling draw passes (probability as above) or when the policy leaves
    xla-msa's move there (the first ``train.label_positions`` departures). The return is then
    the policy's own, on a program it has not trained on."""
    t = config.train
    env = make_env_v1(scenario, config).unwrapped
    obs, info = env.reset(seed=int(rng.integers(2**31)))
    st = env.static
    slow = float(st.params[v1.TIME_ALL_SLOW])
    scorer = Completions(st)
    xla_time = scorer.complete(env.sim_state)
    p = min(1.0, t.label_positions / max(int(st.seg_use.shape[0]), 1))
    records: list[ExpertRecord] = []
    departures = 0
    done = env.current_segment < 0
    while not done:
        base = env.msa_action()
        legal = branch_mask(obs["action_mask"], base, env.k)
        if advantage_fn is None:
            action, targets = label_decision(rng, p, legal, base,
                                             lambda: scorer.scores(env.sim_state, np.flatnonzero(legal)), config)
        else:
            action, targets = base, None
            if legal.sum() >= 2:
                drawn = rng.random() < p
                action = policy_move(advantage_fn(env, obs, legal, base), legal, t.label_policy_margin, base=base)
                departed = action != base and departures < t.label_positions
                departures += int(action != base)
                if drawn or departed:
                    targets = scored_targets(legal, base, lambda: scorer.scores(env.sim_state, np.flatnonzero(legal)),
                                             config)[1]
        if targets is not None:
            records.append(ExpertRecord(adapt_obs(obs), *targets))
        obs, _, done, _, info = env.step(action)
    return records, 1.0 - float(info["time"]) / slow, 1.0 - xla_time / slow


def check_v1_agent(mode: str, config: MuZeroConfig, num_simulations: int | None) -> None:
    """Refuse what a v1 checkpoint cannot play (one ``ValueError``): only the policy
    (``muzero-pol``) and the gated search (``muzero-sim``, ``gate=G``), and none of the tree
    search's settings (``sims=``, ``simulator.value_mix`` and the prior's), which v1's one-step
    search has no use for."""
    if mode not in ("policy", "simulator"):
        raise ValueError("a MallocGame-v1 checkpoint plays the policy alone (muzero-pol:DIR[,margin=X]) or the "
                         "gated search (muzero-sim:DIR[,gate=G])")
    if mode == "simulator":
        sim, default = config.simulator, SimulatorConfig()
        names = ("value_mix", "max_logit_lead", "prior_temperature", "c_visit", "c_scale")
        changed = [name for name in names if getattr(sim, name) != getattr(default, name)]
        if num_simulations is not None or changed:
            raise ValueError("on MallocGame-v1 muzero-sim scores each position the gate passes exactly (one rollout "
                             "step, no tree): sims= and the tree search's settings do not apply")


def network_advantage(model, head: DepartureHead | None = None) -> AdvantageFn:
    """The advantage head of a version-2 network (:class:`.model.NetworkModel`) as an
    ``advantage_fn`` of :func:`play_v1` (one network call per decision), computed in numpy from
    a snapshot of the weights taken now (:class:`.networks.NumpyAdvantage`). With a departure
    ``head`` (:mod:`.head`): where it refuses the network's best other move, every advantage is
    capped at xla-msa's move's (no departure there)."""
    net = NumpyAdvantage(model.net)

    def advantage(env, obs, legal, base):
        if head is None:
            return net(adapt_obs(obs))
        adv, *features = net.features(adapt_obs(obs))
        gain, move = predicted_gain(adv, legal, base)
        if gain > 0 and not head.departs(head_inputs(adv, features, base, move, env.k, env.workload.num_buffers)):
            return np.minimum(adv, adv[base])
        return adv

    return advantage


def play_v1(scenario: Scenario, config: MuZeroConfig, advantage_fn: AdvantageFn | None, *, margin: float = 0.0,
            gate: float | None = None, top: int = 0, spec: ObsSpec | None = None, seed: int = 0,
            deadline: float | None = None, clock: Callable[[], float] = time.perf_counter) -> Solution:
    """One MallocGame-v1 game; returns the v1 mapping. At each decision with at least two moves
    in :func:`branch_mask`:

    - ``gate is None``, the policy alone: ``advantage_fn`` is read and :func:`.labels.policy_move`
      leaves xla-msa's move only where the best other move's advantage exceeds it by more than
      ``margin``;
    - ``gate`` given, the gated search (:func:`_search`): where the predicted gain
      (:func:`.labels.predicted_gain` over xla-msa's move) exceeds ``gate`` (a negative gate:
      everywhere, and ``advantage_fn`` may be None), the moves of the subset other than
      xla-msa's are scored exactly (:class:`Completions`, the rollout step; with ``top > 0``
      only the ``top`` with the highest predicted advantage, the network's order) and the best
      is played where it beats the current game's own completion (xla-msa's move's, known
      without a completion: playing a scored move then xla-msa reproduces its completion),
      else xla-msa's move. So the game ends at the best completion seen, never worse than
      xla-msa's from the start (checked; the best is returned). With a ``deadline`` the search
      then uses the time left in further passes (:func:`_search`).

    Once ``clock() >= deadline`` (or a completion of the search stops at it) the rest is
    xla-msa's, with no step through the env: the search returns the best completion seen (the
    game so far finished by xla-msa), the policy finishes with one completion. ``spec``: the
    network's observation spec, checked against the env's."""
    env = make_env_v1(scenario, config).unwrapped
    if spec is not None and obs_spec_v1(env) != spec:
        raise ValueError(f"the network was trained on observations {spec}, the env gives {obs_spec_v1(env)}")
    if advantage_fn is None and (gate is None or gate >= 0 or top > 0):
        raise ValueError("the policy, a gate >= 0 and top > 0 read an advantage_fn")
    if top < 0:
        raise ValueError(f"top must be >= 0, got {top}")
    if gate is None:
        return _policy(scenario, env, advantage_fn, margin, seed, deadline, clock)
    return _search(scenario, env, advantage_fn, gate, top, seed, deadline, clock)


def _policy(scenario: Scenario, env, advantage_fn: AdvantageFn, margin: float, seed: int, deadline: float | None,
            clock: Callable[[], float]) -> Solution:
    """The policy alone (:func:`play_v1`): one network call per decision. Before its ``k``-th
    departure kept, ``k`` = 0, 1, 2, 4, 8, ..., it finishes the game so far with xla-msa (the
    *check*: ``log2(D) + 2`` completions at most for ``D`` departures; ``k = 0``: xla-msa's game)
    and returns the fastest of those and its own game (``kept_xla``, ``kept_at``: that ``k``)."""
    obs, info = env.reset(seed=seed)
    st = env.static
    done = env.current_segment < 0
    decisions = departures = kept_at = 0
    out_of_time = False
    check = Completions(st)
    while not done:
        base = env.msa_action()
        legal = branch_mask(obs["action_mask"], base, env.k)
        action = base
        if legal.sum() >= 2:
            if deadline is not None and clock() >= deadline:
                out_of_time = True   # the rest is xla-msa's: one completion below, no step through the env
                break
            action = policy_move(advantage_fn(env, obs, legal, base), legal, margin, base=base)
            decisions += 1
            if action != base and departures & (departures - 1) == 0:   # the 0th, 1st, 2nd, 4th, 8th, ...
                best = check.best_time
                kept_at = departures if check.complete(env.sim_state) < best else kept_at
            departures += int(action != base)
        obs, _, done, _, info = env.step(action)
    state = v1.copy_state(env.sim_state) if out_of_time else env.sim_state
    if out_of_time:
        info = {"time": float(complete_msa(st, state, check.table))}
    kept_xla = departures > 0 and check.best_time < info["time"]
    details = {"mode": "policy", "game": "v1", "decisions": decisions, "searched_moves": decisions, "checks": check.count,
               "departures": departures, "kept_xla": bool(kept_xla), "kept_at": kept_at if kept_xla else None}
    if deadline is not None:
        details["budget_exhausted"] = out_of_time
    state = check.best_state if kept_xla else state
    return Solution(None, info=details, mapping=mapping_from_state(scenario.workload, st, state))


def _search(scenario: Scenario, env, advantage_fn: AdvantageFn | None, gate: float, top: int, seed: int,
            deadline: float | None, clock: Callable[[], float]) -> Solution:
    """The gated search of :func:`play_v1`, in passes when it has a ``deadline``.

    Pass 1 is the gated, ``top``-move search of :func:`play_v1`'s docstring. Its game is the best
    complete game found (the *incumbent*, its env actions recorded). While time is left, pass
    ``p >= 2`` replays the incumbent from the start with no gate and the network's ``top * 2**(p-1)``
    best moves (every move when ``top == 0``): at each position it scores, by completion, those
    of them not yet scored at that same position (on the incumbent, every move scored there in an
    earlier pass is known to be no better), and the first move that beats the incumbent's time
    replaces it; from there on the pass is pass 1's rollout step after xla-msa's moves. The
    passes stop at the deadline, or after a pass that had every move of every position scored and
    found nothing better (the incumbent is then a fixed point of the rollout step). Without a
    deadline there is one pass. The best completion seen is returned: never worse than pass 1's."""
    st = env.static
    deadline_ns = NO_DEADLINE if deadline is None else deadline_after(max(0.0, deadline - clock()))
    scorer = Completions(st, deadline_ns)
    incumbent: list[int] | None = None      # env actions of the best game, one per step
    known: list[set[int]] = []             # per step of the incumbent: moves scored there, none better
    decisions = departures = searched = passes = 0
    start_time = None
    while True:
        passes += 1
        width = 0 if top == 0 else top * 2 ** (passes - 1)
        pass_gate = gate if passes == 1 else -math.inf
        obs, info = env.reset(seed=seed)
        if start_time is None:
            start_time = scorer.complete(env.sim_state)
        played: list[int] = []
        scored: list[set[int]] = []
        following = incumbent is not None    # on the incumbent's moves until a move beats it
        improved, exhaustive, out_of_time = False, True, False
        done = env.current_segment < 0
        while not done:
            i = len(played)
            base = env.msa_action()
            own = incumbent[i] if following else base    # the move whose completion is the best seen
            legal = branch_mask(obs["action_mask"], base, env.k)
            tried = set(known[i]) if following else set()
            action = own
            if legal.sum() >= 2:
                if deadline is not None and clock() >= deadline:
                    out_of_time = True
                    break
                decisions += int(passes == 1)
                others = legal.copy()
                others[own] = False
                # a position whose moves were all scored on the incumbent asks nothing of the network
                untried = any(int(a) not in tried for a in np.flatnonzero(others))
                advantage = None if not untried or (pass_gate < 0 and width == 0) else \
                    advantage_fn(env, obs, legal, base)
                gain = math.inf if pass_gate < 0 else predicted_gain(advantage, legal, base)[0]
                if untried and gain > pass_gate:
                    moves = np.flatnonzero(others)
                    if width > 0:   # the network's order: the highest predicted advantages first
                        moves = moves[np.argsort(-np.asarray(advantage, np.float64)[moves], kind="stable")[:width]]
                    moves = np.array([a for a in moves if a not in tried], np.int64)
                    if moves.size:
                        current = scorer.best_time   # the incumbent's (sequential consistency)
                        times = scorer.scores(env.sim_state, moves)
                        searched += 1
                        if scorer.gave_up:   # a completion stopped at the deadline
                            out_of_time = True
                            break
                        tried.update(int(a) for a in moves)
                        if times.min() < current:
                            action = int(np.argmin(times))
                            tried.add(own)
                            following, improved = False, True
                exhaustive &= all(int(a) in tried for a in np.flatnonzero(others) if a != action)
                departures += int(passes == 1 and action != base)
            played.append(action)
            scored.append(tried)
            obs, _, done, _, info = env.step(action)
        if out_of_time:
            break
        incumbent, known = played, scored
        if deadline is None or (not improved and exhaustive):
            break
    details = {"mode": "simulator", "game": "v1", "decisions": decisions, "searched_moves": searched,
               "departures": departures, "passes": passes, "completions": scorer.count, "start_time": start_time,
               "kept_xla": scorer.best_time >= start_time}
    if deadline is not None:
        details["budget_exhausted"] = out_of_time
    if out_of_time:
        # the game so far finished by its incumbent's moves is the best completion seen
        return Solution(None, info=details, mapping=mapping_from_state(scenario.workload, st, scorer.best_state))
    mapping = env.mapping()
    if scorer.best_time < float(env.sim_state.totals[v1.TIME]) * (1 - 1e-12):   # not expected
        details["returned_best_seen"] = True
        mapping = mapping_from_state(scenario.workload, st, scorer.best_state)
    return Solution(None, info=details, mapping=mapping)
