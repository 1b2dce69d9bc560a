"""The simulator mode (``muzero-sim``): search on the exact MallocGame simulator, guided by the
network.

:class:`SimulatorSearch` plays one game. Every tree node is a real position (a
:mod:`mallocgym.sim` state); the network only supplies prior logits (and, with
``simulator.value_mix < 1``, a value). What makes it a fair rival of the plain ``mcts`` agent
(:mod:`mallocgym.agents.search`), which has the same exact simulator and no network:

- **Every legal action is considered, and a node's children are evaluated together.**
  Expanding a node creates all its children at once: each is played on the simulator and scored
  by its exact XLA-like completion (the completion policy's own move reuses the parent's
  completion, which is the same game), and the children that will need a prior get it from one
  batched network call (:meth:`SimulatorSearch.evaluate`). One *simulation* is one walk from
  the root to an unexpanded node and that node's expansion: up to ``K`` completions and one
  network call. (Plain ``mcts`` adds one child and runs one completion per simulation: compare
  the two by completions or by wall time, not by simulations.)
- **Exact leaf values.** A child's value is
  ``(1 - value_mix) * network estimate + value_mix * exact``, in value units
  (``network.reward_scale`` x the normalised return of the whole game, so 1 = 1 % of the
  all-slow time): ``exact = scale * (1 - completion time / all-slow time)``, the network
  estimate the return so far plus the network's value. ``value_mix = 1`` (the default) is
  exact values only.
- **The best completion seen is kept and returned**: every completion that beats the incumbent
  (at first XLA-like's own completion of the whole game) replaces it, so the result is never
  worse than XLA-like nor than any completion the search ran.
- **Commit to the best child below, reuse the subtree.** After its simulations a decision moves
  the root to the child with the best completion found below it (ties: the child the incumbent
  mapping goes through, then the most evaluations, XLA-like's move, the lowest action) and keeps
  that child's subtree for the next decision.
  The incumbent is therefore always below the root, so the game the agent plays ends at a
  mapping as good as the incumbent.
- **Selection** is Gumbel MuZero's deterministic rule (Danihelka et al. 2022) at every node,
  root included (there is no Gumbel noise when evaluating, and every legal action already has a
  completed Q): ``argmax_a pi'(a) - N(a) / (1 + sum_b N(b))`` with
  ``pi' = softmax(z + sigma(q))``, ``sigma(q) = (c_visit + max_b N(b)) * c_scale * qn``, ``N``
  the simulations through each child, ``qn`` the children's mean values (over every evaluation
  in their subtrees) min-max normalised within the node, ``z`` the prior logits after
  :func:`bounded_logits`. The constants are ``simulator.c_visit`` and ``simulator.c_scale``
  (the learned search's ``c_visit = 50`` is greedy here: it kept to the child with the best
  one-step completion); the values being exact, no ``min_q_span`` damps Q.
- **A prior temperature and a bound on the logit lead** (:func:`bounded_logits`), so that Q can
  always overrule the prior. With ``max_logit_lead = 0`` (the prior zeroed) and
  ``value_mix = 1`` the network is never called: nothing it returns could change the search.
- **A per-game wall budget** (``deadline``): the clock is read before every expansion; once the
  deadline has passed the search stops and the rest of the game follows the incumbent. The game
  thus ends within the budget plus one expansion's time.
- **Version-2 networks** (``network.version = 2``, expert iteration: :mod:`.expert`): a new
  position's value is its exact XLA-like completion plus the network's predicted residual (the
  time the best completion below it saves, in ``network.residual_scale`` units), and with
  ``harvest=True`` every expanded position with a choice becomes a training record
  (:meth:`SimulatorSearch.harvest`, :func:`~.labels.expert_targets`) once the game leaves its subtree.
- **The gate** (``simulator.gate >= 0``, version 2; issue 18, step 4: search where it pays):
  before an unexpanded root is searched, the network's predicted gain there
  (:func:`~.labels.predicted_gain`: its best predicted advantage over XLA-like's move) is read
  (one network call unless the position was already evaluated as a child); at most the gate,
  the game follows the incumbent's move without expanding or completing anything (the new
  root's own XLA-like completion is computed only if it is searched later). Forced positions
  are followed too. The incumbent stays below the root, so the game still ends at it.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import numpy as np

from ... import sim
from ...features import v0 as features
from ...heuristics import complete, decide
from .config import MuZeroConfig, SimulatorConfig
from .labels import ExpertRecord, expert_targets, predicted_gain
from .model import NetworkModel
from .networks import OBS_KEYS

__all__ = ["bounded_logits", "improved_policy", "SimulatorSearch"]


def bounded_logits(logits: np.ndarray, legal: np.ndarray, *, temperature: float, max_lead: float) -> np.ndarray:
    """The prior logits the simulator search uses: ``z = logits / temperature`` over the legal
    actions, then raised to at least ``max(z) - max_lead`` and shifted so that ``max(z) = 0``
    (illegal actions: ``-inf``). ``max_lead = 0`` zeroes the prior (uniform).

    Why a bound (Q must be able to overrule the prior): the selection scores an action by
    ``z(a) + sigma(a)``, ``sigma(a) = s * qn(a)`` with ``s = (c_visit + max_b N(b)) * c_scale``
    and ``qn`` the node's Q-values min-max normalised to ``[0, 1]`` (the best child 1, the worst
    0). For two actions ``a`` and ``b``::

        score(a) - score(b) = (z(a) - z(b)) + s * (qn(a) - qn(b)) >= -L + s * (qn(a) - qn(b))

    where ``L`` is the largest logit lead. So ``a`` outranks ``b`` whatever the prior as soon as
    ``qn(a) - qn(b) > L / s``. At the simulator's defaults (``c_visit = 5``, ``c_scale = 0.1``)
    ``s >= 0.5`` and grows by 0.1 per simulation through the most visited child (``s = 1.3``
    after 8, ``3.7`` after 32). With ``L = 0.25`` (``simulator.max_logit_lead``'s default) a Q
    gap over half the node's Q range overrules the prior at once (``0.25 / 0.5``), over 0.19 of
    it after 8 simulations, over 0.07 after 32. The configuration requires
    ``L < c_visit * c_scale``, so the best-Q action always outranks the worst-Q one. Unbounded,
    the trained checkpoint's logits put XLA-like's move a median 9.7 ahead of the next action
    (issue 18): more than ``s`` ever reaches in a search of that size, so no Q gap (at most 1)
    could overturn it; with the learned search's ``c_visit = 50`` (``s = 8.2`` at 32) neither.
    The temperature divides the logits before the bound (``temperature > 1`` keeps more of the
    prior's ordering among the actions within the bound).
    """
    legal = np.asarray(legal, bool)
    out = np.full(np.shape(logits), -np.inf)
    if not legal.any():
        return out
    if max_lead == 0:
        out[legal] = 0.0
        return out
    z = np.asarray(logits, np.float64)[legal] / temperature
    top = z.max()
    out[legal] = np.maximum(z, top - max_lead) - top
    return out


def improved_policy(prior: np.ndarray, counts: np.ndarray, q: np.ndarray, *, c_visit: float,
                    c_scale: float) -> np.ndarray:
    """Gumbel MuZero's improved policy over a node's children: ``softmax(prior + sigma(q))`` with
    ``sigma(q) = (c_visit + max N) * c_scale * (q - min q) / max(max q - min q, 1e-12)``
    (``prior``: the bounded logits, ``counts``: simulations through each child, ``q``: the
    children's mean values). The selection rule and the version-2 policy target share it."""
    q = np.asarray(q, np.float64)
    counts = np.asarray(counts, np.float64)
    lo, hi = q.min(), q.max()
    score = np.asarray(prior, np.float64) + (c_visit + counts.max()) * c_scale * (q - lo) / max(hi - lo, 1e-12)
    score -= score.max()
    pi = np.exp(score)
    return pi / pi.sum()


# ------------------------------------------------------------------------------ the game search
class _Node:
    """A position of the game: its simulator state, occupancy image (when the network reads
    observations), exact completion time ``final``, evaluation ``value`` (value units), the best
    completion time found in its subtree, evaluation statistics, and, once expanded, its legal
    actions and children. ``raw_logits`` is the network's output for this position (``None``
    until evaluated or when the prior is not used)."""

    __slots__ = ("state", "image", "final", "value", "best", "visits", "total", "count", "actions", "children",
                 "raw_logits", "prior", "terminal", "predicted", "advantage")

    def __init__(self, state, image, final: float, value: float, terminal: bool):
        self.state = state
        self.image = image
        self.final = final
        self.value = value
        self.best = final
        self.visits = 1
        self.count = 0
        self.total = value
        self.actions: np.ndarray | None = None   # legal env actions once expanded
        self.children: list[_Node] = []
        self.raw_logits: np.ndarray | None = None
        self.prior: np.ndarray | None = None      # bounded logits over ``actions``
        self.terminal = terminal
        self.predicted: float | None = None        # version 2: the network's residual estimate
        self.advantage: np.ndarray | None = None   # version 2: the network's advantages [A]


class SimulatorSearch:
    """One game of the simulator mode, from the position of ``env`` (an unwrapped or wrapped
    MallocGame-v0 env made with ``config.env``; the env is only read). See the module docstring.

    :meth:`move` searches the current root (``num_simulations`` simulations when it has more
    than one legal action and time is left), commits, and returns the action;
    :attr:`best_offsets` / :attr:`best_time` are the best complete mapping seen. ``model`` may be
    ``None`` only when the search does not call the network (``max_logit_lead = 0`` and
    ``value_mix = 1``). ``deadline`` is a ``clock()`` reading after which the search stops
    (:attr:`exhausted`) and :meth:`move` follows the incumbent. With ``harvest`` each
    :meth:`move` appends to :attr:`records` the training positions it leaves behind
    (:meth:`harvest`; version-2 training).
    """

    def __init__(self, env, model: NetworkModel | None, config: MuZeroConfig, *, num_simulations: int,
                 deadline: float | None = None, clock: Callable[[], float] = time.perf_counter,
                 harvest: bool = False):
        if num_simulations < 1:
            raise ValueError(f"num_simulations must be >= 1, got {num_simulations}")
        u = env.unwrapped
        self.st = st = u.static
        self.k = int(u.k)
        self.n = int(st.size.shape[0])
        sc: SimulatorConfig = config.simulator
        self.num_simulations = int(num_simulations)
        self.prune = config.search.prune_no_benefit
        self.mix = sc.value_mix
        self.temperature, self.max_lead = sc.prior_temperature, sc.max_logit_lead
        self.c_visit, self.c_scale = sc.c_visit, sc.c_scale
        self.scale = config.network.reward_scale
        self.slow = float(st.params[sim.TIME_ALL_SLOW])
        self.residual = config.network.version >= 2
        self.residual_scale = config.network.residual_scale
        self.uses_network = self.max_lead > 0 or self.mix < 1 or self.residual
        self.gate = sc.gate if sc.gate >= 0 else None
        if self.gate is not None and not self.residual:
            raise ValueError("simulator.gate needs a version-2 network (its advantage head predicts the gain)")
        self.records: list[ExpertRecord] | None = [] if harvest else None
        if harvest and not self.uses_network:
            raise ValueError("harvesting training positions needs the network's observations (a version-2 "
                             "network, or max_logit_lead > 0)")
        if self.uses_network and model is None:
            raise ValueError("the simulator search calls the network (max_logit_lead > 0 or value_mix < 1) "
                             "but was given no model")
        self.model = model if self.uses_network else None
        self.deadline, self.clock = deadline, clock
        self.exhausted = False
        # counters (reported in the solution's info)
        self.simulations = 0
        self.expansions = 0
        self.completions = 0
        self.network_calls = 0
        self.searched_moves = 0
        self.gated_moves = 0   # moves with a choice that the gate left unsearched
        # scratch
        self.work = sim.copy_state(u.sim_state)
        self.scratch = features.make_scratch(self.n, self.k)
        if self.uses_network:
            self.norm = features.make_norm(st, u.workload.peak_live_bytes)
            self.obs_scratch = features.make_obs(self.k, int(u.n_next), *u.memory_bins)
            self.obs_batch = {key: np.zeros((self.k + 1,) + np.shape(arr), arr.dtype)
                              for key, arr in zip(features.Obs._fields, self.obs_scratch)}
        # the root and the incumbent (XLA-like's own completion of the game)
        state = sim.copy_state(u.sim_state)
        self.best_time = math.inf
        self.best_offsets = state.offsets.copy()
        final = self._complete(state)
        self.start_time = final   # XLA-like's own completion from the starting position
        image = u.kernel_arrays().image.copy() if self.uses_network else None
        self.root = _Node(state, image, final, self.exact_value(final), self._done(state))

    # -------------------------------------------------------------- values and the incumbent
    def exact_value(self, final_time: float) -> float:
        """Value units of a game that ends at ``final_time`` seconds (higher is better)."""
        return self.scale * (1.0 - final_time / self.slow)

    def _done(self, state) -> bool:
        return int(state.counters[sim.STEP]) >= self.n

    def _complete(self, state) -> float:
        """XLA-like's completion time from ``state``; updates the incumbent on improvement."""
        t = float(complete(self.st, state, self.work))
        self.completions += 1
        if t < self.best_time:
            self.best_time = t
            self.best_offsets = self.work.offsets.copy()
        return t

    # -------------------------------------------------------------- the network
    def _observe(self, node: _Node, row: int) -> None:
        """Write ``node``'s observation into row ``row`` of the batch arrays."""
        o = self.obs_scratch
        features.observe(self.st, node.state, self.norm, self.scratch, node.image, o, self.k)
        for key, arr in zip(features.Obs._fields, o):
            self.obs_batch[key][row] = arr

    def evaluate(self, nodes: Sequence[_Node], *, values: bool = True) -> None:
        """One network call for ``nodes`` (non-terminal): sets each node's ``raw_logits`` and, with
        ``values`` and ``value_mix < 1``, mixes the network's value estimate into its ``value``
        (only for nodes not yet backed up: fresh children)."""
        m = len(nodes)
        if m == 0:
            return
        if m > self.k + 1:
            raise ValueError(f"at most {self.k + 1} positions per call, got {m}")
        for i, node in enumerate(nodes):
            self._observe(node, i)
        batch = {key: arr[:m].reshape(m, -1) for key, arr in self.obs_batch.items()}
        if self.residual:
            logits, residual, advantage = self.model.expert(batch)
            self.network_calls += 1
            for i, node in enumerate(nodes):
                node.raw_logits = logits[i]
                node.predicted = float(residual[i])
                node.advantage = advantage[i]
                if values:
                    # leaf value = XLA-like's exact completion + the predicted residual over it
                    r = min(max(float(residual[i]), 0.0), 0.5 * self.residual_scale)
                    node.value = self.exact_value(node.final * (1.0 - r / self.residual_scale))
                    node.total = node.value * node.visits
            return
        net_values, logits = self.model.evaluate(batch, values=values and self.mix < 1)
        self.network_calls += 1
        for i, node in enumerate(nodes):
            node.raw_logits = logits[i]
            if values and self.mix < 1:
                so_far = self.scale * (1.0 - float(node.state.totals[sim.TIME]) / self.slow)
                node.value = ((1.0 - self.mix) * (so_far + float(net_values[i]))
                              + self.mix * self.exact_value(node.final))
                node.total = node.value * node.visits

    # -------------------------------------------------------------- the tree
    def legal_actions(self, state) -> tuple[np.ndarray, int, np.ndarray]:
        """``(actions, base, offsets)`` at ``state``: the legal env actions (candidates ``0..count-1``
        and skip ``K``; only skip where the buffer would save nothing now and
        ``search.prune_no_benefit``), XLA-like's action (best fit, or skip) and every action's offset."""
        st, k, sc = self.st, self.k, self.scratch
        b = st.order[state.counters[sim.STEP]]
        count, _, _ = sim.find_candidates(st, state, b, k, sc.ids, sc.gap_lo, sc.gap_hi, sc.cand_off,
                                          sc.cand_lo, sc.cand_hi)
        useless = sim.marginal_benefit(st, state, b) <= 0.0
        base = k if (count == 0 or useless) else 0
        if useless and self.prune:
            count = 0
        actions = np.append(np.arange(count), k)
        offsets = np.append(sc.cand_off[:count], -1)
        return actions, base, offsets

    def expand(self, node: _Node, path: Sequence[_Node]) -> None:
        """Create every child of ``node`` (each scored by its exact completion), evaluate those that
        will need a prior in one network call, and back the new evaluations up ``path`` (the nodes
        from the root to ``node``'s parent) and ``node``."""
        st = self.st
        if math.isnan(node.final):   # a position the gate passed by: its own completion first
            node.final = node.best = self._complete(node.state)
            node.value = self.exact_value(node.final)
            node.total = node.value * node.visits
        actions, base, offsets = self.legal_actions(node.state)
        if self.uses_network and node.raw_logits is None and len(actions) > 1:
            self.evaluate([node], values=False)   # a root, or a child created without a prior
        b = st.order[node.state.counters[sim.STEP]]
        children = []
        for a, off in zip(actions.tolist(), offsets.tolist()):
            state = sim.copy_state(node.state)
            decide(st, state, off)
            final = node.final if a == base else self._complete(state)
            image = None
            if node.image is not None:
                image = node.image.copy()
                if off >= 0:
                    features.paint(st, image, b, off)
            children.append(_Node(state, image, final, self.exact_value(final), self._done(state)))
        node.actions, node.children = actions, children
        if self.uses_network:
            # the children that will need a prior (a forced position has one action) or a value
            self.evaluate([c for c in children if not c.terminal
                           and (self.mix < 1 or self.residual or len(self.legal_actions(c.state)[0]) > 1)])
        if node.raw_logits is None or not self.uses_network:
            node.prior = np.zeros(len(actions))
        else:
            legal = np.zeros(self.k + 1, bool)
            legal[actions] = True
            node.prior = bounded_logits(node.raw_logits, legal, temperature=self.temperature,
                                        max_lead=self.max_lead)[actions]
        self.expansions += 1
        added = len(children)
        total = sum(c.value for c in children)
        best = min(c.best for c in children)
        for p in list(path) + [node]:
            p.count += 1
            p.visits += added
            p.total += total
            if best < p.best:
                p.best = best

    def select_child(self, node: _Node) -> int:
        """The index of the child to descend into (the module docstring's rule)."""
        n = np.array([c.count for c in node.children], np.float64)
        pi = self.improved_policy(node)
        return int(np.argmax(pi - n / (1.0 + n.sum())))

    def improved_policy(self, node: _Node) -> np.ndarray:
        """:func:`improved_policy` over an expanded ``node``'s children."""
        n = np.array([c.count for c in node.children], np.float64)
        q = np.array([c.total / c.visits for c in node.children])
        return improved_policy(node.prior, n, q, c_visit=self.c_visit, c_scale=self.c_scale)

    # -------------------------------------------------------------- version-2 training positions
    def observation(self, node: _Node) -> dict[str, np.ndarray]:
        """``node``'s observation, one flat row per key (a copy)."""
        self._observe(node, 0)
        return {key: self.obs_batch[key][0].reshape(-1).copy() for key in OBS_KEYS}

    def record(self, node: _Node) -> ExpertRecord:
        """The training position of an expanded ``node`` (:func:`expert_targets`)."""
        _, base, _ = self.legal_actions(node.state)
        legal, policy, residual, advantage = expert_targets(
            num_actions=self.k + 1, actions=node.actions, base=base, final=node.final, best=node.best,
            child_finals=np.array([c.final for c in node.children]), policy=self.improved_policy(node),
            residual_scale=self.residual_scale)
        return ExpertRecord(self.observation(node), legal, policy, residual, advantage)

    def harvest(self, root: _Node, keep: int | None) -> None:
        """Append to :attr:`records` every expanded position with a choice (two legal actions or
        more; forced positions are left out) in ``root``'s subtree, except below its child
        ``keep`` (the one the game moves to, harvested later). Every position harvested is
        final: the search never returns to it."""
        stack = [root]
        while stack:
            node = stack.pop()
            if node.actions is None:
                continue
            if len(node.actions) >= 2:
                self.records.append(self.record(node))
            stack.extend(c for i, c in enumerate(node.children) if not (node is root and i == keep))

    def _out_of_time(self) -> bool:
        if self.exhausted:
            return True
        if self.deadline is not None and self.clock() >= self.deadline:
            self.exhausted = True
        return self.exhausted

    def simulate(self) -> bool:
        """One simulation from the root: walk down by :meth:`select_child` to an unexpanded node and
        expand it (a terminal node reached instead only adds one to the simulation counts along
        the path: its value is exact and already backed up). False when out of time."""
        node, path = self.root, []
        while node.actions is not None and not node.terminal:
            path.append(node)
            node = node.children[self.select_child(node)]
        if node.terminal:
            for p in path + [node]:
                p.count += 1
            self.simulations += 1
            return True
        if self._out_of_time():
            return False
        self.expand(node, path)
        self.simulations += 1
        return True

    def best_child(self, node: _Node) -> int:
        """The child with the best completion below it; on ties the one the incumbent mapping goes
        through (so that the incumbent stays below the root), then the most evaluated, then
        XLA-like's move, then the lowest action."""
        actions, base, offsets = self.legal_actions(node.state)
        chosen = self.best_offsets[self.st.order[node.state.counters[sim.STEP]]]
        key = [(c.best, offsets[i] != chosen, -c.visits, node.actions[i] != base, i)
               for i, c in enumerate(node.children)]
        return min(range(len(key)), key=key.__getitem__)

    def incumbent_action(self) -> int:
        """The action the incumbent mapping takes at the root (the incumbent passes through it)."""
        actions, _, offsets = self.legal_actions(self.root.state)
        b = self.st.order[self.root.state.counters[sim.STEP]]
        hit = np.flatnonzero(offsets == self.best_offsets[b])
        if hit.size == 0:
            raise RuntimeError(f"the incumbent places buffer {b} at {self.best_offsets[b]}, which is not "
                               f"a legal action here (offsets {offsets.tolist()})")
        return int(actions[hit[0]])

    def move(self) -> int:
        """Search the root (when it has a choice and time is left), commit, and return the action."""
        root = self.root
        if root.terminal:
            raise RuntimeError("the game is over: no move to make")
        if self.gate is not None and not self.exhausted and root.actions is None and self.passes_gate(root):
            return self.follow_incumbent()
        if not self.exhausted and root.actions is None and not self._out_of_time():
            self.expand(root, [])
        if self.exhausted:
            action = self.incumbent_action()
            if root.actions is not None:
                index = int(np.flatnonzero(root.actions == action)[0])
                if self.records is not None:
                    self.harvest(root, index)
                self.root = root.children[index]
            else:
                actions, _, offsets = self.legal_actions(root.state)
                state = sim.copy_state(root.state)
                decide(self.st, state, int(offsets[np.flatnonzero(actions == action)[0]]))
                self.root = _Node(state, None, self.best_time, self.exact_value(self.best_time), self._done(state))
            return action
        if len(root.children) > 1:
            self.searched_moves += 1
            for _ in range(self.num_simulations):
                if not self.simulate():
                    break
        index = self.best_child(root)
        if self.records is not None:
            self.harvest(root, index)
        self.root = root.children[index]
        return int(root.actions[index])

    def passes_gate(self, root: _Node) -> bool:
        """Whether the gate (``simulator.gate``) leaves the unexpanded ``root`` unsearched: a forced
        position, or one where the network's predicted gain (:func:`~.labels.predicted_gain`, one
        network call unless ``root`` was already evaluated) is at most the gate."""
        actions, base, _ = self.legal_actions(root.state)
        if len(actions) < 2:
            return True
        if root.advantage is None:
            self.evaluate([root], values=False)
        legal = np.zeros(self.k + 1, bool)
        legal[actions] = True
        gain, _ = predicted_gain(root.advantage, legal)
        if gain <= self.gate:
            self.gated_moves += 1
            return True
        return False

    def follow_incumbent(self) -> int:
        """Play the incumbent's move at the unexpanded root without searching or completing: the
        new root's own completion (``final``) is left unknown (NaN) until it is expanded."""
        root = self.root
        action = self.incumbent_action()
        actions, _, offsets = self.legal_actions(root.state)
        offset = int(offsets[np.flatnonzero(actions == action)[0]])
        state = sim.copy_state(root.state)
        decide(self.st, state, offset)
        image = None
        if root.image is not None:
            image = root.image.copy()
            if offset >= 0:
                features.paint(self.st, image, self.st.order[root.state.counters[sim.STEP]], offset)
        self.root = _Node(state, image, math.nan, math.nan, self._done(state))
        return action

    def info(self) -> dict:
        """Counters for the solution's info (``simulations_run``: over the whole game)."""
        return {"simulations_run": self.simulations, "expansions": self.expansions, "completions": self.completions,
                "network_calls": self.network_calls, "searched_moves": self.searched_moves,
                "gated_moves": self.gated_moves, "budget_exhausted": self.exhausted}
