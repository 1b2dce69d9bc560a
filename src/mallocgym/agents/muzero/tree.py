"""Batched search-tree bookkeeping in numba: ``B`` trees in preallocated arrays.

Node ``0`` of every tree is its root; node ids grow as simulations expand leaves. Edge
statistics live on the child node (``visits``, ``value_sum``, the transition's ``reward``), so
``Q(s, a) = reward[c] + discount * value_sum[c] / visits[c]`` for the child ``c`` of ``(s, a)``.

Selection rules (``params[ALGORITHM]``):

- pUCT (MuZero, Schrittwieser et al. 2020): ``argmax_a  Qn(s, a) + P(s, a) * sqrt(N(s)) /
  (1 + N(s, a)) * (c_init + log((N(s) + c_base + 1) / c_base))`` where ``Qn`` is ``Q``
  min-max normalised over the tree; an unvisited edge takes its parent's normalised value.
- Gumbel MuZero (Danihelka et al. 2022): at the root, sequential halving among ``m`` actions
  sampled without replacement by Gumbel-top-k (``considered``), the action to visit at
  simulation ``i`` being the best-scoring (``g + logits + sigma(q)``) considered action with
  exactly ``seq[i]`` visits; inside the tree, the deterministic rule
  ``argmax_a pi'(a) - N(a) / (1 + sum_b N(b))`` with ``pi' = softmax(logits + sigma(q))``.
  ``sigma(q) = (c_visit + max_b N(b)) * c_scale * qn`` with the node's completed Q-values
  (unvisited actions take the mixed value estimate) min-max normalised within the node.

Min-max normalisation divides by ``max(max - min, params[MIN_SPAN])``: Q differences smaller
than that span count proportionally less instead of being stretched to the full ``[0, 1]``.

Masks: ``legal[b, node, a]``; the learned model fills interior nodes with all ones.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

__all__ = ["Tree", "new_tree", "init_roots", "select", "expand", "root_results", "PUCT", "GUMBEL"]

PUCT, GUMBEL = 0, 1
# params slots
DISCOUNT, PB_C_INIT, PB_C_BASE, C_VISIT, C_SCALE, ALGORITHM, MIN_SPAN = 0, 1, 2, 3, 4, 5, 6

Tree = namedtuple("Tree", [
    "children",       # int64[B, M, A] child node of each edge, -1 if not expanded
    "logits",         # float64[B, M, A] prior logits (illegal entries unused)
    "prior",          # float64[B, M, A] softmax of the legal logits
    "legal",          # uint8[B, M, A]
    "visits",         # int64[B, M]
    "value_sum",      # float64[B, M]
    "raw_value",      # float64[B, M] the evaluation the node was expanded with
    "reward",         # float64[B, M] reward of the transition into the node
    "parent",         # int64[B, M]
    "terminal",       # uint8[B, M] 1: an end of the game (value 0, never expanded)
    "n_nodes",        # int64[B]
    "minmax",         # float64[B, 2] smallest and largest Q seen in each tree
    "gumbel",         # float64[B, A] root Gumbel noise (Gumbel MuZero)
    "considered",     # uint8[B, A] root actions in the sequential halving
    "seq",            # int64[B, S] root visit count targeted at each simulation
    "params",         # float64[7] discount, pb_c_init, pb_c_base, c_visit, c_scale, algorithm, min span
])


def new_tree(batch: int, max_nodes: int, num_actions: int, num_simulations: int, params: np.ndarray) -> Tree:
    """Empty trees for ``batch`` searches of up to ``max_nodes`` nodes each."""
    shape = (batch, max_nodes)
    return Tree(
        children=np.full(shape + (num_actions,), -1, np.int64),
        logits=np.zeros(shape + (num_actions,)), prior=np.zeros(shape + (num_actions,)),
        legal=np.zeros(shape + (num_actions,), np.uint8),
        visits=np.zeros(shape, np.int64), value_sum=np.zeros(shape), raw_value=np.zeros(shape),
        reward=np.zeros(shape), parent=np.full(shape, -1, np.int64), terminal=np.zeros(shape, np.uint8),
        n_nodes=np.zeros(batch, np.int64),
        minmax=np.tile(np.array([np.inf, -np.inf]), (batch, 1)),
        gumbel=np.zeros((batch, num_actions)), considered=np.zeros((batch, num_actions), np.uint8),
        seq=np.zeros((batch, max(num_simulations, 1)), np.int64), params=np.asarray(params, np.float64),
    )


# ------------------------------------------------------------------------------ small kernels
@njit(cache=True)
def _masked_softmax(x, legal, out):
    m = -np.inf
    for a in range(x.shape[0]):
        if legal[a] and x[a] > m:
            m = x[a]
    s = 0.0
    for a in range(x.shape[0]):
        if legal[a]:
            out[a] = np.exp(x[a] - m)
            s += out[a]
        else:
            out[a] = 0.0
    for a in range(x.shape[0]):
        out[a] /= s


@njit(cache=True)
def _set_node(tree, b, node, value, logits, legal, terminal):
    tree.raw_value[b, node] = value
    tree.terminal[b, node] = terminal
    for a in range(logits.shape[0]):
        tree.logits[b, node, a] = logits[a]
        tree.legal[b, node, a] = legal[a]
    _masked_softmax(tree.logits[b, node], tree.legal[b, node], tree.prior[b, node])


@njit(cache=True)
def _update_minmax(tree, b, q):
    if q < tree.minmax[b, 0]:
        tree.minmax[b, 0] = q
    if q > tree.minmax[b, 1]:
        tree.minmax[b, 1] = q


@njit(cache=True)
def _normalise(tree, b, q):
    lo, hi = tree.minmax[b, 0], tree.minmax[b, 1]
    if hi > lo:
        return (q - lo) / max(hi - lo, tree.params[MIN_SPAN])
    return 0.5


@njit(cache=True)
def _child_q(tree, b, node, a):
    """``(visits, Q)`` of edge ``(node, a)``; ``Q`` is 0 when unvisited."""
    c = tree.children[b, node, a]
    if c < 0 or tree.visits[b, c] == 0:
        return 0, 0.0
    n = tree.visits[b, c]
    return n, tree.reward[b, c] + tree.params[DISCOUNT] * tree.value_sum[b, c] / n


@njit(cache=True)
def _sigma(tree, b, node, out):
    """``sigma(completed Q)`` of every legal action of ``node`` into ``out``."""
    num_actions = out.shape[0]
    sum_n = 0
    max_n = 0
    sum_p = 0.0
    sum_pq = 0.0
    for a in range(num_actions):
        if not tree.legal[b, node, a]:
            continue
        n, q = _child_q(tree, b, node, a)
        if n > 0:
            sum_n += n
            sum_p += tree.prior[b, node, a]
            sum_pq += tree.prior[b, node, a] * q
            if n > max_n:
                max_n = n
    raw = tree.raw_value[b, node]
    mixed = raw
    if sum_n > 0 and sum_p > 0.0:
        mixed = (raw + sum_n * sum_pq / sum_p) / (1.0 + sum_n)
    lo = np.inf
    hi = -np.inf
    for a in range(num_actions):
        if not tree.legal[b, node, a]:
            out[a] = 0.0
            continue
        n, q = _child_q(tree, b, node, a)
        v = q if n > 0 else mixed
        out[a] = v
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    span = hi - lo
    if span < tree.params[MIN_SPAN]:
        span = tree.params[MIN_SPAN]
    if span < 1e-8:
        span = 1e-8
    scale = (tree.params[C_VISIT] + max_n) * tree.params[C_SCALE]
    for a in range(num_actions):
        if tree.legal[b, node, a]:
            out[a] = scale * (out[a] - lo) / span


@njit(cache=True)
def _puct_action(tree, b, node):
    num_actions = tree.children.shape[2]
    n_s = tree.visits[b, node]
    pb = (np.log((n_s + tree.params[PB_C_BASE] + 1.0) / tree.params[PB_C_BASE]) + tree.params[PB_C_INIT])
    pb *= np.sqrt(n_s)
    parent_q = _normalise(tree, b, tree.value_sum[b, node] / max(n_s, 1))
    best = -1
    best_score = -np.inf
    for a in range(num_actions):
        if not tree.legal[b, node, a]:
            continue
        n, q = _child_q(tree, b, node, a)
        qn = _normalise(tree, b, q) if n > 0 else parent_q
        score = qn + tree.prior[b, node, a] * pb / (1.0 + n)
        if score > best_score:
            best_score = score
            best = a
    return best


@njit(cache=True)
def _gumbel_interior_action(tree, b, node, scratch, pi):
    num_actions = scratch.shape[0]
    _sigma(tree, b, node, scratch)
    total = 0
    for a in range(num_actions):
        scratch[a] += tree.logits[b, node, a]
        if tree.legal[b, node, a]:
            total += _child_q(tree, b, node, a)[0]
    _masked_softmax(scratch, tree.legal[b, node], pi)
    best = -1
    best_score = -np.inf
    for a in range(num_actions):
        if not tree.legal[b, node, a]:
            continue
        score = pi[a] - _child_q(tree, b, node, a)[0] / (1.0 + total)
        if score > best_score:
            best_score = score
            best = a
    return best


@njit(cache=True)
def _gumbel_root_action(tree, b, sim, scratch):
    num_actions = scratch.shape[0]
    _sigma(tree, b, 0, scratch)
    target = tree.seq[b, sim] if sim < tree.seq.shape[1] else tree.seq[b, tree.seq.shape[1] - 1]
    best = -1
    best_score = -np.inf
    fallback = -1
    fallback_n = 1 << 62
    fallback_score = -np.inf
    for a in range(num_actions):
        if not tree.considered[b, a]:
            continue
        n = _child_q(tree, b, 0, a)[0]
        score = tree.gumbel[b, a] + tree.logits[b, 0, a] + scratch[a]
        if n == target and score > best_score:
            best_score = score
            best = a
        if n < fallback_n or (n == fallback_n and score > fallback_score):
            fallback_n = n
            fallback_score = score
            fallback = a
    return best if best >= 0 else fallback


# ------------------------------------------------------------------------------ the search steps
@njit(cache=True)
def init_roots(tree, values, logits, legal):
    """Set every tree's root (node 0) from its evaluation; the root counts as one visit."""
    for b in range(values.shape[0]):
        _set_node(tree, b, 0, values[b], logits[b], legal[b], 0)
        tree.visits[b, 0] = 1
        tree.value_sum[b, 0] = values[b]
        tree.n_nodes[b] = 1
        _update_minmax(tree, b, values[b])


@njit(cache=True)
def select(tree, sim, out_node, out_action):
    """Walk every tree from its root to an unexpanded edge: ``out_node[b]``, ``out_action[b]``.

    ``out_action[b] = -1`` when the walk ends on a terminal node (``out_node[b]``).
    """
    num_actions = tree.children.shape[2]
    scratch = np.empty(num_actions)
    pi = np.empty(num_actions)
    gumbel = tree.params[ALGORITHM] == GUMBEL
    for b in range(out_node.shape[0]):
        node = 0
        while True:
            if tree.terminal[b, node]:
                out_node[b] = node
                out_action[b] = -1
                break
            if not gumbel:
                a = _puct_action(tree, b, node)
            elif node == 0:
                a = _gumbel_root_action(tree, b, sim, scratch)
            else:
                a = _gumbel_interior_action(tree, b, node, scratch, pi)
            child = tree.children[b, node, a]
            if child < 0:
                out_node[b] = node
                out_action[b] = a
                break
            node = child


@njit(cache=True)
def _backup(tree, b, node, value):
    g = value
    discount = tree.params[DISCOUNT]
    while True:
        tree.value_sum[b, node] += g
        tree.visits[b, node] += 1
        _update_minmax(tree, b, tree.reward[b, node] + discount * tree.value_sum[b, node] / tree.visits[b, node])
        if node == 0:
            break
        g = tree.reward[b, node] + discount * g
        node = tree.parent[b, node]


@njit(cache=True)
def expand(tree, nodes, actions, rewards, values, logits, legal, terminal, out_child):
    """Add the child of ``(nodes[b], actions[b])`` with its evaluation and back it up.

    A terminal child's value is 0. Where ``actions[b] == -1`` (a terminal node was reached)
    nothing is added and 0 is backed up from ``nodes[b]``. ``out_child[b]`` gets the new
    node id (or -1).
    """
    for b in range(nodes.shape[0]):
        parent = nodes[b]
        a = actions[b]
        if a < 0:
            out_child[b] = -1
            _backup(tree, b, parent, 0.0)
            continue
        c = tree.n_nodes[b]
        tree.n_nodes[b] = c + 1
        tree.children[b, parent, a] = c
        tree.parent[b, c] = parent
        tree.reward[b, c] = rewards[b]
        value = 0.0 if terminal[b] else values[b]
        _set_node(tree, b, c, value, logits[b], legal[b], terminal[b])
        out_child[b] = c
        _backup(tree, b, c, value)


@njit(cache=True)
def root_results(tree, visits_out, policy_out, q_out, action_out):
    """Per tree: root visit counts, the policy target, root Q-values and (Gumbel) the action.

    The Gumbel policy target is ``softmax(logits + sigma(completed Q))`` over legal actions and
    the action the considered one with the most visits and the best ``g + logits + sigma``;
    pUCT's target is the visit distribution (the action is chosen by the caller).
    """
    num_actions = visits_out.shape[1]
    scratch = np.empty(num_actions)
    gumbel = tree.params[ALGORITHM] == GUMBEL
    for b in range(visits_out.shape[0]):
        total = 0
        for a in range(num_actions):
            n, q = _child_q(tree, b, 0, a)
            visits_out[b, a] = n
            q_out[b, a] = q
            total += n
        if gumbel:
            _sigma(tree, b, 0, scratch)
            for a in range(num_actions):
                scratch[a] += tree.logits[b, 0, a]
            _masked_softmax(scratch, tree.legal[b, 0], policy_out[b])
            most = -1
            for a in range(num_actions):
                if tree.considered[b, a] and visits_out[b, a] > most:
                    most = visits_out[b, a]
            best = -1
            best_score = -np.inf
            for a in range(num_actions):
                if tree.considered[b, a] and visits_out[b, a] == most:
                    score = tree.gumbel[b, a] + scratch[a]
                    if score > best_score:
                        best_score = score
                        best = a
            action_out[b] = best
        else:
            for a in range(num_actions):
                policy_out[b, a] = visits_out[b, a] / total if total > 0 else 0.0
            action_out[b] = -1
