"""MallocGame-v1: per-use decisions with prefetch, eviction and XLA's runtime cost model."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numba
import numpy as np
from gymnasium import spaces

from .. import _jit
from .._validate import check_int
from ..hardware import Hardware
from ..render import ascii_map
from ..scenarios import Scenario, oversized
from ..features import v1 as v1_obs
from ..features.v1 import ACTION_FEATURES, BUFFER_FEATURES, NEXT_FEATURES, PROGRESS_FEATURES, SEGMENT_FEATURES
from ..sim import ORDERS, v1
from ..workloads import Workload
from .base import ScenarioEnv, check_bins, feature_list

__all__ = ["MallocGameV1Env", "GameStateV1", "KIND_NAMES"]

KIND_NAMES = {v1.SLOW: "slow", v1.FAST: "fast", v1.PREFETCH_SEG: "prefetch"}
_MAX_CANDIDATES = 4096


@dataclass(frozen=True)
class _Compiled:
    scenario: Scenario
    static: v1.Static1
    oversized: int
    peak_live: float
    total_bytes: float
    time_all_slow: float


@dataclass
class GameStateV1:
    """A snapshot taken by :meth:`MallocGameV1Env.clone_state` (array copies)."""

    compiled: _Compiled
    sim_state: v1.State1
    table: v1_obs.Table
    obs: v1_obs.Obs
    done: bool


class MallocGameV1Env(ScenarioEnv):
    """## Description

    MallocGame-v1 is the memory-mapping game as XLA's Memory Space Assignment (MSA) plays it:
    decisions are **per use**, and copies between the memories cost bandwidth. A buffer's
    definition is its first write; its uses are its later accesses (one per op, in op order); a
    buffer with no write is a program input, in slow memory from its live-range start; an output
    is a buffer live at the last op and must end in slow memory. A **segment** runs from the
    definition (or the previous use) to a use; each segment is one decision. Buffers come in
    MSA's order (memory boundedness), each buffer's segments in time order. See
    ``docs/game-v1.md``.

    ## Action Space

    ``Discrete(1 + K + J * K)`` (``K = n_candidates``, default 16; ``J = n_starts``, default 4):

    - ``0`` ``SLOW``: this use reads slow memory. Always legal.
    - ``1 + i`` ``FAST``: on a defined buffer's first segment, produce the value in fast memory at
      candidate offset ``i`` (``i = 0``: XLA MSA's own look-ahead best-fit offset; then the free
      gaps over ``[definition, use]``, best fit first as in v0) and keep it to the use; on a later
      segment, ``FAST`` (``i = 0`` only) keeps the value at its previous offset up to this use,
      legal where that chunk stays free.
    - ``1 + K + j * K + i`` ``PREFETCH``: an async copy from slow memory issued after the
      ``j``-th start op ``p`` (``j = 0``: the start MSA would issue this prefetch at, its offset
      first; then the picker's preferred, latest, earliest, midpoint; distinct, at most ``J``)
      and done before the use; the chunk at candidate offset ``i`` (free gaps over ``[p + 1,
      use]``) is held from ``p + 1``. Legal once a slow copy exists.

    XLA's own choice is always one action, :meth:`msa_action` (``0``, ``1`` or ``1 + K``):
    playing it at every decision leaves exactly the ``xla-msa`` baseline's plan.

    Legality is physical feasibility only. A position with only ``SLOW`` legal is played by the
    env itself (``info["forced_decisions"]`` counts them), so an agent sees only real choices.
    Evictions are added by the rules (MSA's ``Evict``) where a value produced fast needs a slow
    copy. Masks: ``obs["action_mask"]``, ``info["action_mask"]`` (int8) and ``action_masks()``.

    ## Observation Space

    ``Dict``, every entry in ``[0, 1]``:

    - ``"buffer"`` ``(10,)``:
      {buffer}
    - ``"segment"`` ``(9,)``:
      {segment}
    - ``"actions"`` ``((1 + K + J * K) * 6,)``, rows ``[n_actions, 6]``, row ``a`` is action ``a``
      (v0's ``"candidates"``, one row per action):
      {actions}
    - ``"next"`` ``(L * 7,)``, rows ``[L, 7]``: the next ``L = n_next`` buffers in decision order
      (default 8):
      {next}
    - ``"memory"`` ``(2 * A * B,)``: fast-memory occupancy by the chunks over ``A`` address and
      ``B`` time bins, and the current segment's window (channel 1).
    - ``"progress"`` ``(6,)``:
      {progress}
    - ``"action_mask"`` ``(n_actions,)`` int8.
    - ``"xla_action"`` ``(n_actions,)`` (only with ``xla_hint=True``): 1 at :meth:`msa_action`,
      XLA's own choice, 0 elsewhere (all 0 at the end): a policy can learn a residual over XLA.

    ## Rewards

    ``(time_before - time_after) / time_all_slow`` per decision (forced ones included in the
    step that triggered them), under MSA's runtime model (``RuntimeSimulator``: per-op roofline,
    two FIFO copy queues draining in slow-memory idle time, stalls for late copies); undecided
    segments are priced slow, so rewards sum to ``1 - time_final / time_all_slow``. A step's
    reward can be negative (a copy that stalls).

    ## Episode End

    ``terminated`` when every segment is decided (or at the first masked action with
    ``invalid_action="terminate"``: the rest slow). Never truncated.

    ## Information

    ``action_mask``, ``time``, ``time_all_slow``, ``speedup``, ``stall_time``, ``copy_bytes``,
    ``forced_decisions``, ``agent_decisions``, ``invalid_action``, ``oversized_buffers``,
    ``buffer``, ``segment`` (-1 at the end). At the end also ``mapping``: the v1 mapping (see
    :func:`mallocgym.evaluate_v1`), which ``evaluate_v1`` prices exactly as the env did.

    ## Arguments

    As v0 (``workload``, ``hardware``, ``capacity``, ``n_candidates``, ``n_next``, ``memory_bins``,
    ``order``, ``invalid_action``, ``split``, ``suite_name``, ``render_mode``), plus ``n_starts``
    ``J`` (4) and ``ratios`` (the prefetch picker's min / preferred / max overlap-to-copy
    ratios, MSA's test values ``(0.8, 1.5, 10)``). ``order``: ``"boundedness"`` (MSA's,
    default), ``"start"`` or ``"size"``. ``xla_hint`` (False): add ``"xla_action"`` to the
    observation.

    ## Version History

    - v1: per-use segments, prefetch and eviction copies, XLA MSA's runtime cost model
      (overhead inside the roofline max, copies and stalls). v0 is unchanged beside it.
    - v0: whole-live-range placement, no copies.
    """

    def __init__(
        self,
        workload: Workload | str | os.PathLike | Sequence[Workload | str | os.PathLike] | None = None,
        hardware: Hardware | str | None = None,
        *,
        capacity: int | None = None,
        n_candidates: int = 16,
        n_starts: int = 4,
        n_next: int = 8,
        memory_bins: tuple[int, int] = (32, 32),
        ratios: tuple[float, float, float] = (0.8, 1.5, 10.0),
        order: str = "boundedness",
        invalid_action: str = "skip",
        split: str = "train",
        suite_name: str = "default",
        render_mode: str | None = None,
        xla_hint: bool = False,
    ):
        if not isinstance(xla_hint, bool):
            raise ValueError(f"xla_hint must be True or False, got {xla_hint!r}")
        self.xla_hint = xla_hint
        self.k = check_int(n_candidates, "n_candidates", low=1, high=_MAX_CANDIDATES)
        self.j = check_int(n_starts, "n_starts", low=1, high=4)
        self.n_next = check_int(n_next, "n_next", low=1, high=_MAX_CANDIDATES)
        self.memory_bins = check_bins(memory_bins)
        if (isinstance(ratios, (str, bytes)) or not isinstance(ratios, Sequence) or len(ratios) != 3
                or not all(isinstance(r, (int, float)) and not isinstance(r, bool) and 0 < r < float("inf")
                           for r in ratios)):
            raise ValueError(f"ratios must be three positive numbers (min, preferred, max), got {ratios!r}")
        if not ratios[0] <= ratios[1] <= ratios[2]:
            raise ValueError(f"ratios must satisfy min <= preferred <= max, got {ratios!r}")
        self.ratios = tuple(float(r) for r in ratios)
        self._setup(workload, hardware, capacity, order, ORDERS, invalid_action, split, suite_name, render_mode)
        self.n_actions = 1 + self.k + self.j * self.k
        self.action_space = spaces.Discrete(self.n_actions)
        a_bins, t_bins = self.memory_bins
        unit = dict(low=0.0, high=1.0, dtype=np.float32)
        entries = {
            "buffer": spaces.Box(shape=(len(BUFFER_FEATURES),), **unit),
            "segment": spaces.Box(shape=(len(SEGMENT_FEATURES),), **unit),
            "actions": spaces.Box(shape=(self.n_actions * len(ACTION_FEATURES),), **unit),
            "next": spaces.Box(shape=(self.n_next * len(NEXT_FEATURES),), **unit),
            "memory": spaces.Box(shape=(2 * a_bins * t_bins,), **unit),
            "progress": spaces.Box(shape=(len(PROGRESS_FEATURES),), **unit),
            "action_mask": spaces.MultiBinary(self.n_actions),
        }
        if xla_hint:
            entries["xla_action"] = spaces.Box(shape=(self.n_actions,), **unit)
        self.observation_space = spaces.Dict(entries)
        _jit.announce_compile((v1.current_time, v1_obs.observe))
        self._start(self._compile(self._scenarios[0]))

    # ------------------------------------------------------------------ scenarios
    def _compile(self, scenario: Scenario, cache: bool = True) -> _Compiled:
        def build(scenario: Scenario) -> _Compiled:
            static = v1.compile_v1(scenario.workload, scenario.hardware, self.order, n_starts=self.j,
                                   n_candidates=self.k, ratios=self.ratios)
            w = scenario.workload
            return _Compiled(scenario, static, oversized(w, scenario.hardware), float(w.peak_live_bytes),
                             float(w.total_bytes), float(static.params[v1.TIME_ALL_SLOW]))

        return self._compile_cached(scenario, cache, build)

    def _start(self, compiled: _Compiled) -> None:
        self._compiled = compiled
        st = compiled.static
        self._state = v1.new_state(st, self.memory_bins)
        self._table = v1_obs.make_table(st)
        self._obs = v1_obs.make_obs(self.k, self.j, *self.memory_bins, n_next=self.n_next)
        self._done = False
        self._advance()
        self._bind_step_kernel()

    def _bind_step_kernel(self) -> None:
        """``v1_obs.step``'s compiled entry point for this episode's argument types: numba's
        dispatcher types every argument at every call (about 10 us for the ~60 arrays of a step),
        the entry point of the overload already chosen does not. Falls back to the dispatcher."""
        c = self._compiled
        args = (c.static, self._state, self._table, self._obs, 0, 0, 0, 0, c.peak_live, c.total_bytes)
        try:
            sig = tuple(numba.typeof(a) for a in args)
            v1_obs.step.compile(sig)
            self._step_kernel = v1_obs.step.overloads[sig].entry_point
        except (AttributeError, KeyError, TypeError):  # another numba: the plain call
            self._step_kernel = v1_obs.step

    def _advance(self) -> None:
        """Play forced positions (only SLOW legal) and observe the next real choice."""
        c = self._compiled
        s = v1_obs.advance(c.static, self._state, self._table, self._obs, c.peak_live, c.total_bytes)
        self._done = s < 0

    @property
    def current_segment(self) -> int:
        """The global id of the segment to decide now (-1 at the end)."""
        pos = int(self._state.counters[v1.POS])
        return int(self._compiled.static.order[pos]) if pos < self._compiled.static.seg_use.shape[0] else -1

    def _position(self) -> tuple[int, int]:
        """``(current segment, its buffer)``, -1s at the end."""
        s = self.current_segment
        return s, (int(self._compiled.static.seg_buf[s]) if s >= 0 else -1)

    @property
    def current_buffer(self) -> int:
        s = self.current_segment
        return int(self._compiled.static.seg_buf[s]) if s >= 0 else -1

    def msa_action(self) -> int:
        """The action that plays XLA's Memory Space Assignment's own choice for the current segment
        (:func:`mallocgym.sim.msa.decide`: cost-analysis picker with the env's ``ratios``, its copy
        budget that of the prefetches made so far): ``1`` where MSA produces or keeps the value in
        fast memory, ``1 + K`` where it prefetches (its start and offset are the first of each),
        else ``0`` (``SLOW``). Played from ``reset`` to the end it leaves exactly ``xla-msa``'s
        plan. 0 at the end."""
        if self._done:
            return 0
        return int(self._table.msa_action[0])

    def action_meaning(self, action: int) -> tuple[str, int, int]:
        """``(kind, offset, prefetch start)`` of ``action`` now (``("illegal", -1, -1)`` if masked)."""
        kind = int(self._table.kind[action])
        return KIND_NAMES.get(kind, "illegal"), int(self._table.off[action]), int(self._table.pstart[action])

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        scenario, cache = self._pick(options)
        self._start(self._compile(scenario, cache))
        return self._observation(), self._info(invalid=False)

    def step(self, action):
        a = self._check_action(action, self.n_actions)
        if self._done:
            raise RuntimeError("step() called after the episode ended; call reset()")
        st, state = self._compiled.static, self._state
        invalid = self._table.kind[a] < 0
        if invalid and self.invalid_action == "raise":
            raise ValueError(f"action {a} is masked at segment {self.current_segment} (buffer {self.current_buffer}); "
                             f"legal actions are {np.flatnonzero(self._obs.action_mask).tolist()}")
        before = float(state.totals[v1.TIME])
        if invalid and self.invalid_action == "terminate":
            while state.counters[v1.POS] < st.seg_use.shape[0]:
                v1.apply(st, state, int(st.order[state.counters[v1.POS]]), v1.SLOW, -1, -1)
                state.counters[v1.POS] += 1
            self._done = True
            v1_obs.observe(st, state, -1, self._table, self._obs, self._compiled.peak_live, self._compiled.total_bytes)
        else:
            s = self.current_segment
            if invalid:
                kind, off, pstart = v1.SLOW, -1, -1
            else:
                kind, off, pstart = int(self._table.kind[a]), int(self._table.off[a]), int(self._table.pstart[a])
            c = self._compiled
            nxt = self._step_kernel(st, state, self._table, self._obs, s, kind, off, pstart, c.peak_live, c.total_bytes)
            self._done = nxt < 0
        reward = (before - float(state.totals[v1.TIME])) / self._compiled.time_all_slow
        info = self._info(invalid)
        if self._done:
            info["mapping"] = self.mapping()
        return self._observation(), float(reward), self._done, False, info

    def _observation(self) -> dict[str, np.ndarray]:
        o = self._obs
        obs = {"buffer": o.buffer.copy(), "segment": o.segment.copy(), "actions": o.actions.reshape(-1).copy(),
               "next": o.next.reshape(-1).copy(), "memory": o.memory.reshape(-1).copy(),
               "progress": o.progress.copy(), "action_mask": o.action_mask.copy()}
        if self.xla_hint:
            obs["xla_action"] = np.zeros(self.n_actions, np.float32)
            if not self._done:
                obs["xla_action"][self.msa_action()] = 1.0
        return obs

    def _table_shapes(self) -> dict[str, tuple[int, ...]]:
        """``structured``'s shapes: ``actions [n_actions, 6]``, ``next [L, 7]``, ``memory [2, A, B]``."""
        return {"actions": (self.n_actions, len(ACTION_FEATURES)), "next": (self.n_next, len(NEXT_FEATURES)),
                "memory": (2, *self.memory_bins)}

    def _info(self, invalid: bool) -> dict[str, Any]:
        state = self._state
        segment, buffer = self._position()
        time = float(state.totals[v1.TIME])
        slow = self._compiled.time_all_slow
        return {
            "action_mask": self._obs.action_mask.copy(), "time": time, "time_all_slow": slow,
            "speedup": slow / time, "stall_time": float(state.totals[v1.STALL]),
            "copy_bytes": float(state.totals[v1.COPY_BYTES]),
            "forced_decisions": int(state.counters[v1.FORCED]), "agent_decisions": int(state.counters[v1.CHOSEN]),
            "invalid_action": bool(invalid), "oversized_buffers": self._compiled.oversized,
            "buffer": buffer, "segment": segment,
        }

    def mapping(self) -> dict:
        """The allocations so far as a v1 mapping (the JSON form :func:`mallocgym.evaluate_v1`
        reads): one entry per decided segment and one per eviction."""
        from ..pricing.v1 import mapping_from_state

        return mapping_from_state(self.workload, self._compiled.static, self._state)

    # ------------------------------------------------------------------ search support
    def clone_state(self) -> GameStateV1:
        """A snapshot of the game (array copies), for :meth:`restore_state`."""
        return GameStateV1(self._compiled, v1.copy_state(self._state), v1_obs.copy_table(self._table),
                           v1_obs.Obs(*(a.copy() for a in self._obs)), self._done)

    def restore_state(self, state: GameStateV1) -> None:
        """Return to a snapshot from :meth:`clone_state` (the snapshot stays reusable)."""
        if not isinstance(state, GameStateV1):
            raise TypeError(f"restore_state expects a GameStateV1 from clone_state(), got {type(state).__name__}")
        self._compiled = state.compiled
        self._state = v1.copy_state(state.sim_state)
        self._table = v1_obs.copy_table(state.table)
        self._obs = v1_obs.Obs(*(a.copy() for a in state.obs))
        self._done = state.done
        self._bind_step_kernel()

    def __getstate__(self) -> dict:
        out = dict(self.__dict__)
        out.pop("_step_kernel", None)  # a compiled entry point does not pickle: bound again on load
        return out

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind_step_kernel()

    # ------------------------------------------------------------------ rendering
    def _render_rgb(self) -> np.ndarray:
        """The observation's occupancy image (red) and current window (blue), address 0 at the bottom."""
        image = self._obs.memory
        rgb = np.zeros((image.shape[1], image.shape[2], 3), dtype=np.uint8)
        rgb[..., 0] = (255 * image[0]).astype(np.uint8)
        rgb[..., 2] = (255 * image[1]).astype(np.uint8)
        return rgb[::-1]

    def _render_text(self) -> str:
        info = self._info(False)
        w = self.workload
        lines = [
            f"MallocGame-v1  {self.scenario.name}  ({w.num_ops} ops, {w.num_buffers} buffers, "
            f"{self._compiled.static.seg_use.shape[0]} segments, fast memory {self.hardware.fast_capacity} B)",
            f"step {int(self._state.counters[v1.POS])}  speedup {info['speedup']:.4f}  "
            f"stall {info['stall_time']:.3g} s  copied {info['copy_bytes']:.0f} B",
        ]
        if not self._done:
            legal = np.flatnonzero(self._obs.action_mask)
            lines.append(f"deciding segment {self.current_segment} of buffer {self.current_buffer}: "
                         f"{len(legal)} legal action(s)")
        lines.append(ascii_map(self._obs.memory[0].astype(np.float64)))
        return "\n".join(lines) + "\n"

    def _repr_fields(self) -> str:
        return f"K={self.k}, J={self.j}" + (", xla_hint=True" if self.xla_hint else "")


MallocGameV1Env.__doc__ = MallocGameV1Env.__doc__.format(
    buffer=feature_list(BUFFER_FEATURES), segment=feature_list(SEGMENT_FEATURES),
    actions=feature_list(ACTION_FEATURES), next=feature_list(NEXT_FEATURES), progress=feature_list(PROGRESS_FEATURES),
)
