"""MallocGame-v0 in its canonical decision mode (``order="canonical"``).

``gym.make("MallocGame-v0", order="canonical")`` (or ``MallocGameEnv(..., order="canonical")``)
builds :class:`CanonicalGameEnv`: the same scenarios, cost model, rewards and information as the
default game, but each move chooses *which* undecided buffer goes at its lowest free offset
(or sends one to slow memory), so that every canonical packing, MiniMalloc's included, can be
played. The rules and why they reach every canonical packing: :mod:`mallocgym.sim.canonical`
and ``docs/game.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from numba import njit

from .. import sim
from ..features import v0 as features
from ..features.v0 import NEXT_FEATURES, _unit, buffer_row, next_row, paint
from ..render import ascii_map
from ..sim import canonical as canon
from ..sim import CAPACITY, COMPUTE_BOUND, PLACED, PLACED_BYTES, TIME, TIME_ALL_SLOW
from .base import feature_list
from .v0 import GameState, MallocGameEnv

__all__ = ["CanonicalGameEnv", "CanonicalGameState", "CANONICAL_CANDIDATE_FEATURES"]

CANONICAL_CANDIDATE_FEATURES = (
    "present (1) or padding (0)",
    "offset L / capacity  (the buffer's lowest free offset)",
    "(offset L + size) / capacity",
    "size / capacity",
    "start / T",
    "(end + 1) / T",
    "benefit now / largest single-buffer benefit",
    "boundedness / largest boundedness",
    "(offset L - floor) / capacity",
)


# ------------------------------------------------------------------------------ kernels
@njit(cache=True)
def observe(st, state, cs, rank, norm, scratch, cand, image, obs, k):
    """Fill ``obs`` for the current position; return the number of candidates (all, not
    only the ``k`` shown; 0 when the game is over)."""
    n = st.size.shape[0]
    n_ops = st.compute_time.shape[0]
    cap_f = float(st.iparams[CAPACITY])
    t_f = float(n_ops)
    floor = cs.scal[canon.FLOOR]
    obs.buffer[:] = 0.0
    obs.candidates[:, :] = 0.0
    obs.next[:, :] = 0.0
    obs.action_mask[:] = 0
    obs.action_mask[k] = 1  # sending candidate 0 to slow memory (or passing) is always legal
    obs.memory[0, :, :] = image
    obs.memory[1, :, :] = 0.0
    count = canon.candidates(st, cs, rank, k, cand)
    shown = count if count < k else k
    for i in range(shown):
        b = cand[i]
        lb = cs.low[b]
        c = obs.candidates[i]
        c[0] = 1.0
        c[1] = _unit(lb / cap_f)
        c[2] = _unit((lb + st.size[b]) / cap_f)
        c[3] = _unit(st.size[b] / cap_f)
        c[4] = _unit(st.start[b] / t_f)
        c[5] = _unit((st.end[b] + 1) / t_f)
        c[6] = _unit(sim.marginal_benefit(st, state, b) / norm.scale[0])
        c[7] = _unit(norm.boundedness[b] / norm.scale[1])
        c[8] = _unit((lb - floor) / cap_f)
        obs.action_mask[i] = 1
        obs.action_mask[k + i] = 1
    if shown > 0:  # the "buffer" row: candidate 0, the buffer at the lowest free offset
        b = cand[0]
        n_gaps = sim.free_gaps(st, state, st.start[b], st.end[b], scratch.ids, scratch.gap_lo, scratch.gap_hi)
        max_gap = 0
        free = 0
        for g in range(n_gaps):
            length = scratch.gap_hi[g] - scratch.gap_lo[g]
            free += length
            if length > max_gap:
                max_gap = length
        buffer_row(obs.buffer, st, norm, b, cap_f, t_f, obs.candidates[0, 6], max_gap, free, count / k)
        first = np.zeros(1, np.int64)
        t_bins = obs.memory.shape[2]
        frac = np.zeros(t_bins, np.float64)
        nt = features._bin_overlap(float(st.start[b]), float(st.end[b] + 1), t_bins, t_f, first, frac)
        for j in range(nt):
            obs.memory[1, :, first[0] + j] = 1.0
        row = 0
        for i in range(n):  # "next": undecided buffers not shown, in decision order
            if row >= obs.next.shape[0]:
                break
            q = st.order[i]
            if not cs.undecided[q]:
                continue
            is_shown = False
            for j in range(shown):
                if cand[j] == q:
                    is_shown = True
                    break
            if is_shown:
                continue
            next_row(obs.next[row], st, norm, q, cap_f, t_f)
            row += 1
    p = obs.progress
    p[0] = cs.scal[canon.DECIDED] / n if count > 0 else 1.0
    p[1] = state.counters[PLACED] / n
    p[2] = _unit(state.totals[PLACED_BYTES] / norm.scale[4])
    p[3] = _unit(1.0 - state.totals[TIME] / st.params[TIME_ALL_SLOW])
    p[4] = _unit(cap_f / norm.scale[3])
    p[5] = _unit(state.counters[COMPUTE_BOUND] / t_f)
    return count


@njit(cache=True)
def step(st, state, cs, rank, norm, scratch, cand, image, obs, k, action, count):
    """Play a legal ``action`` (``i < k``: place candidate ``i``; ``k + i``: send it to slow
    memory; ``k`` with no candidate: pass), observe, and end the game when no candidate is
    left. Returns ``(time delta, candidate count)``."""
    before = state.totals[TIME]
    if action < k:
        b = cand[action]
        off = cs.low[b]
        canon.place(st, state, cs, b)
        paint(st, image, b, off)
    elif count > 0:
        canon.send_slow(cs, cand[action - k])
    count = observe(st, state, cs, rank, norm, scratch, cand, image, obs, k) if count > 0 else 0
    if count == 0:
        canon.finish(cs)
        observe(st, state, cs, rank, norm, scratch, cand, image, obs, k)
    return state.totals[TIME] - before, count


# ------------------------------------------------------------------------------ the env
@dataclass
class CanonicalGameState(GameState):
    """A snapshot taken by :meth:`CanonicalGameEnv.clone_state` (array copies)."""

    canon: canon.Canon = None
    cand: np.ndarray = None


class CanonicalGameEnv(MallocGameEnv):
    """## Description

    MallocGame-v0 in its canonical decision mode (``order="canonical"``): the same scenarios,
    cost model, rewards and information as the default game, but each move chooses *which*
    undecided buffer goes at its lowest free offset, or sends one to slow memory, so that every
    canonical packing (MiniMalloc's included) and hence an optimal mapping can be played.

    The env keeps a *floor* ``f``, the offset of the last buffer placed (0 at reset), and for each
    undecided buffer ``L[b]``, the highest top (``offset + size``, rounded up to the alignment)
    of the placed buffers that share an op with it (0 if none). The *candidates* are the
    undecided buffers with ``L[b] >= f`` and ``L[b] + size[b] <= capacity``, sorted by ``L[b]``,
    then by XLA's boundedness order; the first ``K = n_candidates`` are shown. An undecided
    buffer with ``L[b] < f`` waits: a later placement sharing an op with it lifts it. See
    ``docs/game.md`` for why every canonical packing is reachable (with ``K >= N``; with a
    smaller ``K``, the ``K`` lowest candidates are the choices at each step).

    ## Action Space

    ``Discrete(2 * K)``. Action ``i < K`` places candidate ``i`` at its offset ``L`` (the floor
    becomes ``L``); action ``K + i`` sends candidate ``i`` to slow memory. Legal: the actions of
    the candidates shown, and action ``K`` always (with no candidate, only possible at reset when
    no buffer fits in fast memory, it passes and ends the episode). Masks as in the default game:
    ``obs["action_mask"]``, ``info["action_mask"]`` (int8 ``[2K]``, 1 = legal),
    ``action_masks()`` (bool). A masked action with ``invalid_action="skip"`` sends candidate 0
    to slow memory (flagged in ``info["invalid_action"]``).

    ## Observation Space

    The default game's ``Dict`` keys, every entry in ``[0, 1]``:

    - ``"buffer"`` ``(12,)``: candidate 0, the buffer at the lowest free offset, with the
      default game's buffer features (feature 11: all candidates / K, clipped to 1).
    - ``"candidates"`` ``(K * 9,)``, rows ``[K, 9]``: row ``i`` describes candidate ``i``
      (actions ``i`` and ``K + i``), zeros where absent:
      {candidates}
    - ``"next"`` ``(L * 7,)``: the undecided buffers not shown as candidates (waiting ones and
      candidates beyond ``K``), in decision order, with the default game's next features.
    - ``"memory"`` ``(2 * A * B,)``: occupancy, and candidate 0's live range.
    - ``"progress"`` ``(6,)``: as in the default game; "buffers decided" counts the buffers
      placed or sent to slow memory by a move (1 at the end).
    - ``"action_mask"`` ``(2 * K,)`` int8.

    ## Rewards

    As in the default game: ``(time_before - time_after) / time_all_slow`` per move, the return
    is ``1 - time_final / time_all_slow``.

    ## Episode End

    ``terminated`` when no candidate is left (the undecided buffers stay in slow memory), so an
    episode has at most ``N`` moves, usually fewer; or at the first masked action with
    ``invalid_action="terminate"``. Never truncated.

    ## Information

    As in the default game, with ``buffer`` = candidate 0 (-1 at the end), ``step`` = moves
    made, and ``floor`` (bytes). ``offsets`` at the end.

    ## Arguments

    Those of :class:`~mallocgym.env.MallocGameEnv`, with ``order="canonical"``. The native
    vector env (``gym.make_vec``'s default) does not run this mode: use
    ``gym.make_vec(..., vectorization_mode="sync")``.

    ## Version History

    - v0: ``order="canonical"`` added (issue 20); the default game is unchanged.
    """

    _orders = ("canonical",)

    def __init__(self, *args, order: str = "canonical", **kwargs):
        super().__init__(*args, order=order, **kwargs)
        self.action_space = spaces.Discrete(2 * self.k)
        obs_spaces = dict(self.observation_space.spaces)
        obs_spaces["action_mask"] = spaces.MultiBinary(2 * self.k)
        self.observation_space = spaces.Dict(obs_spaces)

    def _decision_order(self) -> str:
        return "boundedness"  # the candidates' tie-break

    def _start(self, compiled) -> None:
        self._compiled = compiled
        st = compiled.static
        self._state = sim.new_state(st)
        self._canon = canon.new_canon(st)
        self._rank = canon.ranks(st)
        self._image = np.zeros(self.memory_bins, dtype=np.float64)
        self._scratch = features.make_scratch(st.size.shape[0], self.k)
        self._cand = np.zeros(self.k, np.int64)
        obs = features.make_obs(self.k, self.n_next, *self.memory_bins)
        self._obs = obs._replace(action_mask=np.zeros(2 * self.k, np.int8))
        self._count = observe(st, self._state, self._canon, self._rank, compiled.norm, self._scratch,
                              self._cand, self._image, self._obs, self.k)
        self._done = False

    # ------------------------------------------------------------------ position
    @property
    def step_index(self) -> int:
        """How many moves have been made (buffers placed or sent to slow memory by a move)."""
        return int(self._canon.scal[canon.DECIDED])

    @property
    def floor(self) -> int:
        """The offset of the last buffer placed (0 at reset)."""
        return int(self._canon.scal[canon.FLOOR])

    @property
    def candidate_buffers(self) -> np.ndarray:
        """Buffer ids of the candidates shown (action ``i`` places ``[i]``, ``K + i`` sends it
        to slow memory)."""
        return self._cand[: min(self._count, self.k)].copy()

    @property
    def candidate_offsets(self) -> np.ndarray:
        """The offsets ``L`` where the candidates shown would go."""
        return self._canon.low[self.candidate_buffers]

    @property
    def current_buffer(self) -> int:
        """Candidate 0, the buffer at the lowest free offset (-1 when there is none)."""
        return int(self._cand[0]) if self._count > 0 and not self._done else -1

    # ------------------------------------------------------------------ Gymnasium API
    def step(self, action):
        k = self.k
        a = self._check_action(action, 2 * k)
        if self._done:
            raise RuntimeError("step() called after the episode ended; call reset()")
        invalid = self._obs.action_mask[a] == 0
        if invalid and self.invalid_action == "raise":
            raise ValueError(f"action {a} is masked: {min(self._count, k)} candidate(s) shown; legal actions are "
                             f"{np.flatnonzero(self._obs.action_mask).tolist()}")
        compiled = self._compiled
        st = compiled.static
        if invalid and self.invalid_action == "terminate":
            canon.finish(self._canon)
            self._count = 0
            observe(st, self._state, self._canon, self._rank, compiled.norm, self._scratch, self._cand,
                    self._image, self._obs, k)
            delta = 0.0
        else:
            delta, self._count = step(st, self._state, self._canon, self._rank, compiled.norm, self._scratch,
                                      self._cand, self._image, self._obs, k, k if invalid else a, self._count)
            self._count = int(self._count)
        reward = -delta / st.params[sim.TIME_ALL_SLOW]
        terminated = self._count == 0
        self._done = terminated
        info = self._info(invalid)
        if terminated:
            info["offsets"] = self._state.offsets.tolist()
        return self._observation(), float(reward), terminated, False, info

    def _table_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"candidates": (self.k, len(CANONICAL_CANDIDATE_FEATURES)), "next": (self.n_next, len(NEXT_FEATURES)),
                "memory": (2, *self.memory_bins)}

    def _info(self, invalid: bool) -> dict[str, Any]:
        info = super()._info(invalid)
        info["step"] = self.step_index
        info["floor"] = self.floor
        return info

    def kernel_arrays(self):
        raise TypeError("the native vector env (mallocgym.vector) does not run order='canonical'; "
                        "use gym.make_vec(..., vectorization_mode='sync') or gymnasium.vector.SyncVectorEnv")

    def kernel_stepped(self, count: int, done: bool) -> None:
        self.kernel_arrays()

    # ------------------------------------------------------------------ search support
    def clone_state(self) -> CanonicalGameState:
        """A snapshot of the game (array copies), for :meth:`restore_state`."""
        base = super().clone_state()
        return CanonicalGameState(**vars(base), canon=canon.copy_canon(self._canon), cand=self._cand.copy())

    def restore_state(self, state: CanonicalGameState) -> None:
        """Return to a snapshot from :meth:`clone_state` (the snapshot stays reusable)."""
        if not isinstance(state, CanonicalGameState):
            raise TypeError(f"restore_state expects a CanonicalGameState from clone_state(), "
                            f"got {type(state).__name__}")
        super().restore_state(state)
        self._canon = canon.copy_canon(state.canon)
        self._cand = state.cand.copy()
        self._rank = canon.ranks(state.compiled.static)

    # ------------------------------------------------------------------ rendering
    def _render_text(self) -> str:
        info = self._info(False)
        w = self.workload
        lines = [
            f"MallocGame-v0 (canonical)  {self.scenario.name}  ({w.num_ops} ops, {w.num_buffers} buffers, "
            f"fast memory {self.hardware.fast_capacity} B)",
            f"moves {info['step']}  floor {info['floor']}  speedup {info['speedup']:.4f}  "
            f"placed bytes {info['placed_bytes_fraction']:.1%}",
        ]
        if not self._done:
            lines.append(f"{self._count} candidate(s), buffer@offset: " + ", ".join(
                f"{b}@{o}" for b, o in zip(self.candidate_buffers.tolist(), self.candidate_offsets.tolist())))
        lines.append(ascii_map(self._image))
        return "\n".join(lines) + "\n"


CanonicalGameEnv.__doc__ = CanonicalGameEnv.__doc__.format(candidates=feature_list(CANONICAL_CANDIDATE_FEATURES))
MallocGameEnv._modes["canonical"] = CanonicalGameEnv  # MallocGameEnv(order="canonical") builds this class
