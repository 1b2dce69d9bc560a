"""MallocGame-v0: the Gymnasium environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np
from gymnasium import spaces

from .. import _jit, sim
from ..features import v0 as features
from ..features.v0 import BUFFER_FEATURES, CANDIDATE_FEATURES, NEXT_FEATURES, PROGRESS_FEATURES
from ..hardware import Hardware
from ..heuristics.v0 import HEURISTICS, ORDER
from ..render import ascii_map, memory_map
from .._validate import MAX_CANDIDATES, check_int
from ..scenarios import Scenario, oversized
from ..workloads import Workload
from .base import INVALID_ACTION_MODES, ScenarioEnv, check_bins, feature_list

__all__ = ["MallocGameEnv", "GameState", "KernelArrays", "INVALID_ACTION_MODES", "heuristic_env", "env_kernels"]

_MAX_CANDIDATES = MAX_CANDIDATES


@dataclass(frozen=True)
class _Compiled:
    scenario: Scenario
    static: sim.Static
    norm: features.Norm
    oversized: int  # buffers larger than the fast memory (always slow)


class KernelArrays(NamedTuple):
    """The live arrays the numba kernels of one episode work on (:meth:`MallocGameEnv.kernel_arrays`):
    the compiled scenario, the simulator state, the feature normalisers, the kernels' scratch,
    the occupancy image and the observation tables. Shared, not copies: a batched driver
    (:mod:`mallocgym.vector`) steps many episodes in one kernel call through them; anything
    else should use ``step``."""

    static: sim.Static
    state: sim.State
    norm: features.Norm
    scratch: features.Scratch
    image: np.ndarray
    obs: features.Obs


@dataclass
class GameState:
    """A snapshot taken by :meth:`MallocGameEnv.clone_state` (array copies)."""

    compiled: _Compiled
    sim_state: sim.State
    image: np.ndarray
    obs: features.Obs
    scratch: features.Scratch
    count: int
    done: bool


class MallocGameEnv(ScenarioEnv):
    """## Description

    mallocGame (Wang et al., "Optimizing Memory Mapping Using Deep Reinforcement Learning",
    arXiv 2305.07440): map the buffers of a compiled ML program into a small fast memory so that
    the program runs as fast as possible under XLA's roofline cost model. Buffers are decided one
    at a time, in XLA Memory Space Assignment's order (memory boundedness, descending); each is
    either placed at a free offset of fast memory for its whole live range, or left in slow
    memory. A placed buffer's accesses then run at ``fast_bw`` instead of ``slow_bw``; an op
    takes ``max(compute time, memory time)``, so placing a buffer only helps the ops it touches
    that are memory-bound. See ``docs/game.md`` and ``docs/cost_model.md``.

    ## Action Space

    ``Discrete(K + 1)``, ``K = n_candidates`` (default 16). Action ``i < K`` places the current
    buffer at candidate ``i``; action ``K`` skips it (slow memory). Candidates: the free address
    gaps of fast memory over the buffer's live range; from each gap that fits, its lowest aligned
    offset and, when different, its highest one; sorted best fit first (gap length, then offset),
    first ``K`` kept. Skip is always legal. Legal actions: ``obs["action_mask"]``,
    ``info["action_mask"]`` (int8, 1 = legal) and ``action_masks()`` (bool, for sb3-contrib).

    With ``order="canonical"`` (the canonical decision mode, :class:`~mallocgym.env.canonical.CanonicalGameEnv`)
    each move instead chooses which undecided buffer goes at its lowest free offset, or sends one
    to slow memory: ``Discrete(2 * K)``, action ``i < K`` places candidate buffer ``i`` at its
    lowest free offset, ``K + i`` sends it to slow memory; every canonical packing (MiniMalloc's
    included) can be played. Its docstring and ``docs/game.md`` give its rules.

    ## Observation Space

    ``Dict`` of flat vectors (so that Gymnasium's and SB3's checkers and ``MultiInputPolicy``
    take it as is), every entry bounded in ``[0, 1]``, float32 unless said. Tables are stored
    row-major; ``env.unwrapped.structured(obs)`` reshapes them (also for batches):

    - ``"buffer"`` ``(12,)``: the buffer being decided:
      {buffer}
    - ``"candidates"`` ``(K * 9,)``, rows ``[K, 9]``: one row per candidate, zeros where absent;
      row ``i`` is action ``i``:
      {candidates}
    - ``"next"`` ``(L * 7,)``, rows ``[L, 7]``: the next ``L = n_next`` buffers in decision order
      (default 8):
      {next}
    - ``"memory"`` ``(2 * A * B,)``, image ``[2, A, B]``: channel 0 is the occupancy of fast memory
      over ``A`` address bins (row 0 = address 0) and ``B`` time bins (fraction of each cell in
      use); channel 1 is 1 over the time bins of the current buffer's live range (default
      ``A = B = 32``).
    - ``"progress"`` ``(6,)``:
      {progress}
    - ``"action_mask"`` ``(K + 1,)`` int8 ``MultiBinary``: 1 = legal.

    ## Rewards

    ``(time_before - time_after) / time_all_slow`` for each decision, so the return is
    ``1 - time_final / time_all_slow`` in ``[0, 1)`` and the speedup is
    ``time_all_slow / time_final``. Skips earn 0.

    ## Episode End

    ``terminated`` when every buffer is decided (after exactly ``N`` steps), or at the first
    masked action with ``invalid_action="terminate"`` (the rest stay in slow memory). Never
    truncated.

    ## Information

    Every step: ``action_mask``, ``time`` and ``time_all_slow`` (seconds), ``speedup``,
    ``placed_bytes_fraction``, ``invalid_action`` (bool: the action was masked),
    ``oversized_buffers`` (how many buffers are larger than the fast memory: they stay slow),
    ``buffer`` (id of the buffer to decide next, -1 at the end), ``step`` (buffers decided). At the end also
    ``offsets``: a list of ``N`` ints in the workload's buffer order, -1 = slow memory; it passes
    ``mallocgym.evaluate`` (a list, not an array, so that vector envs can batch episodes of
    different sizes).

    ## Arguments

    - ``workload``: a :class:`~mallocgym.Workload`, a bundled scenario or workload name, a path
      to a ``.json``/``.npz``/MiniMalloc ``.csv``, or a list of these to sample from at each
      reset; or a generator, a callable ``(numpy.random.Generator) -> Workload | Scenario``
      called at every reset with the env's seeded generator (unlimited training instances).
      ``None``: the bundled suite's ``split`` (default: train).
    - ``hardware``: a :class:`~mallocgym.Hardware` or profile name; ``capacity``: fast-memory
      bytes (an integer in ``[1, 2**48]``). Both apply to every scenario the env plays (the
      suite's, a list's, a generator's, a reset option's): ``hardware`` replaces the profile
      (keeping the scenario's capacity unless the profile sets one), ``capacity`` the size; a
      scenario whose capacity changed is named ``WORKLOAD@CAPACITYB``. Buffers larger than the
      fast memory are legal: only skip is legal on their turn (``info["oversized_buffers"]``).
      Every argument is checked here: a wrong type is a ``TypeError``, a bad value a
      ``ValueError``, each naming the argument.
    - ``n_candidates`` ``K`` (16), ``n_next`` ``L`` (8), ``memory_bins`` ``(A, B)`` ((32, 32)).
    - ``order``: ``"boundedness"`` (XLA's, default), ``"start"``, ``"size"`` or ``"spatial"``;
      ``"canonical"``: the canonical decision mode (see Action Space).
    - ``invalid_action``: what a masked action does: ``"skip"`` (default; treated as skip and
      flagged in ``info["invalid_action"]``), ``"terminate"`` or ``"raise"`` (``ValueError``).
      An action outside the action space always raises ``ValueError``.
    - ``render_mode``: ``"ansi"`` (text summary) or ``"rgb_array"`` (memory map: time on x,
      address on y).

    ``reset(seed=..., options={{"workload": name | Workload | path}})`` picks a workload for that
    episode; otherwise one is sampled with the env's seeded generator. Search agents branch on
    the exact simulator with ``clone_state()`` / ``restore_state()``.

    ## Version History

    - v0: initial release.
    - v0, ``order="canonical"`` added (issue 20): a second decision mode; the default game's
      dynamics, rewards and observations are unchanged.
    """

    _orders = sim.ORDERS + ("canonical",)
    _modes: dict[str, type] = {}
    """``order`` -> the subclass that plays that decision mode. :mod:`mallocgym.env.canonical`
    adds ``"canonical"`` (:class:`~mallocgym.env.canonical.CanonicalGameEnv`) when it is
    imported, which importing :mod:`mallocgym.env` does: this module does not import it."""

    def __new__(cls, *args, **kwargs):
        if cls is MallocGameEnv and kwargs.get("order") in cls._modes:
            cls = cls._modes[kwargs["order"]]
        return super().__new__(cls)

    def __init__(
        self,
        workload: Workload | str | os.PathLike | Sequence[Workload | str | os.PathLike] | None = None,
        hardware: Hardware | str | None = None,
        *,
        capacity: int | None = None,
        n_candidates: int = 16,
        n_next: int = 8,
        memory_bins: tuple[int, int] = (32, 32),
        order: str = "boundedness",
        invalid_action: str = "skip",
        split: str = "train",
        suite_name: str = "default",
        render_mode: str | None = None,
    ):
        self.k = check_int(n_candidates, "n_candidates", low=1, high=_MAX_CANDIDATES)
        self.n_next = check_int(n_next, "n_next", low=1, high=_MAX_CANDIDATES)
        self.memory_bins = check_bins(memory_bins)
        self._setup(workload, hardware, capacity, order, self._orders, invalid_action, split, suite_name, render_mode)

        self.action_space = spaces.Discrete(self.k + 1)
        a_bins, t_bins = self.memory_bins
        unit = dict(low=0.0, high=1.0, dtype=np.float32)
        self.observation_space = spaces.Dict({
            "buffer": spaces.Box(shape=(len(BUFFER_FEATURES),), **unit),
            "candidates": spaces.Box(shape=(self.k * len(CANDIDATE_FEATURES),), **unit),
            "next": spaces.Box(shape=(self.n_next * len(NEXT_FEATURES),), **unit),
            "memory": spaces.Box(shape=(2 * a_bins * t_bins,), **unit),
            "progress": spaces.Box(shape=(len(PROGRESS_FEATURES),), **unit),
            "action_mask": spaces.MultiBinary(self.k + 1),
        })
        _jit.announce_compile(env_kernels())  # one line on stderr when the numba kernels are not cached yet
        self._start(self._compile(self._scenarios[0]))

    # ------------------------------------------------------------------ scenarios
    def _compile(self, scenario: Scenario, cache: bool = True) -> _Compiled:
        def build(scenario: Scenario) -> _Compiled:
            static = sim.compile_scenario(scenario.workload, scenario.hardware, self._decision_order())
            return _Compiled(scenario, static, features.make_norm(static, scenario.workload.peak_live_bytes),
                             oversized(scenario.workload, scenario.hardware))

        return self._compile_cached(scenario, cache, build)

    def _decision_order(self) -> str:
        return self.order

    def _start(self, compiled: _Compiled) -> None:
        self._compiled = compiled
        st = compiled.static
        self._state = sim.new_state(st)
        self._image = np.zeros(self.memory_bins, dtype=np.float64)
        self._scratch = features.make_scratch(st.size.shape[0], self.k)
        self._obs = features.make_obs(self.k, self.n_next, *self.memory_bins)
        self._count = features.observe(st, self._state, compiled.norm, self._scratch, self._image,
                                       self._obs, self.k)
        self._done = False

    @property
    def step_index(self) -> int:
        """How many buffers have been decided."""
        return int(self._state.counters[sim.STEP])

    @property
    def current_buffer(self) -> int:
        """The buffer to decide now (-1 when the episode is over)."""
        step = int(self._state.counters[sim.STEP])
        return int(self._compiled.static.order[step]) if step < self.workload.num_buffers else -1

    @property
    def candidate_offsets(self) -> np.ndarray:
        """Byte offsets of the current candidates (action ``i`` places at ``[i]``)."""
        return self._scratch.cand_off[: self._count].copy()

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        scenario, cache = self._pick(options)
        self._start(self._compile(scenario, cache))
        return self._observation(), self._info(invalid=False)

    def step(self, action):
        a = self._check_action(action, self.k + 1)
        if self._done:
            raise RuntimeError("step() called after the episode ended; call reset()")
        k = self.k
        invalid = a < k and self._obs.action_mask[a] == 0
        if invalid and self.invalid_action == "raise":
            raise ValueError(f"action {a} is masked: buffer {self.current_buffer} has only "
                             f"{self._count} candidate(s); legal actions are {np.flatnonzero(self._obs.action_mask).tolist()}")
        compiled = self._compiled
        st = compiled.static
        if invalid and self.invalid_action == "terminate":
            self._state.counters[sim.STEP] = st.size.shape[0]
            self._count = features.observe(st, self._state, compiled.norm, self._scratch, self._image,
                                           self._obs, k)
            delta = 0.0
        else:
            delta, self._count = features.step(st, self._state, compiled.norm, self._scratch, self._image,
                                               self._obs, k, a)
        reward = -delta / st.params[sim.TIME_ALL_SLOW]
        terminated = bool(self._state.counters[sim.STEP] >= st.size.shape[0])
        self._done = terminated
        info = self._info(invalid)
        if terminated:
            info["offsets"] = self._state.offsets.tolist()
        return self._observation(), float(reward), terminated, False, info

    def _observation(self) -> dict[str, np.ndarray]:
        o = self._obs
        return {"buffer": o.buffer.copy(), "candidates": o.candidates.reshape(-1).copy(),
                "next": o.next.reshape(-1).copy(), "memory": o.memory.reshape(-1).copy(),
                "progress": o.progress.copy(), "action_mask": o.action_mask.copy()}

    def _table_shapes(self) -> dict[str, tuple[int, ...]]:
        """``structured``'s shapes: ``candidates [K, 9]``, ``next [L, 7]``, ``memory [2, A, B]``."""
        return {"candidates": (self.k, len(CANDIDATE_FEATURES)), "next": (self.n_next, len(NEXT_FEATURES)),
                "memory": (2, *self.memory_bins)}

    def _info(self, invalid: bool) -> dict[str, Any]:
        st = self._compiled.static
        time = float(self._state.totals[sim.TIME])
        slow = float(st.params[sim.TIME_ALL_SLOW])
        return {
            "action_mask": self._obs.action_mask.copy(),
            "time": time,
            "time_all_slow": slow,
            "speedup": slow / time,
            "placed_bytes_fraction": float(self._state.totals[sim.PLACED_BYTES]) / self.workload.total_bytes,
            "invalid_action": bool(invalid),
            "oversized_buffers": self._compiled.oversized,
            "buffer": self.current_buffer,
            "step": int(self._state.counters[sim.STEP]),
        }

    def kernel_arrays(self) -> KernelArrays:
        """The current episode's live kernel arrays (valid until the next ``reset`` or
        ``restore_state``)."""
        c = self._compiled
        return KernelArrays(c.static, self._state, c.norm, self._scratch, self._image, self._obs)

    def kernel_stepped(self, count: int, done: bool) -> None:
        """Record a step a batched driver made through :meth:`kernel_arrays`: the new position's
        candidate count and whether the episode ended."""
        self._count, self._done = int(count), bool(done)

    # ------------------------------------------------------------------ search support
    def clone_state(self) -> GameState:
        """A snapshot of the game (array copies), for :meth:`restore_state`."""
        return GameState(self._compiled, sim.copy_state(self._state), self._image.copy(),
                         features.Obs(*(a.copy() for a in self._obs)),
                         features.Scratch(*(a.copy() for a in self._scratch)), self._count, self._done)

    def restore_state(self, state: GameState) -> None:
        """Return to a snapshot from :meth:`clone_state` (the snapshot stays reusable)."""
        if not isinstance(state, GameState):
            raise TypeError(f"restore_state expects a GameState from clone_state(), got {type(state).__name__}")
        self._compiled = state.compiled
        self._state = sim.copy_state(state.sim_state)
        self._image = state.image.copy()
        self._obs = features.Obs(*(a.copy() for a in state.obs))
        self._scratch = features.Scratch(*(a.copy() for a in state.scratch))
        self._count = state.count
        self._done = state.done

    @property
    def offsets(self) -> np.ndarray:
        """The mapping so far (``int64[N]``, -1 = slow memory or undecided)."""
        return self._state.offsets.copy()

    # ------------------------------------------------------------------ rendering
    def _render_rgb(self) -> np.ndarray:
        return memory_map(self.workload, self._state.offsets, self.hardware.fast_capacity,
                          highlight=None if self._done else self.current_buffer)

    def _render_text(self) -> str:
        info = self._info(False)
        w = self.workload
        lines = [
            f"MallocGame-v0  {self.scenario.name}  ({w.num_ops} ops, {w.num_buffers} buffers, "
            f"fast memory {self.hardware.fast_capacity} B)",
            f"step {info['step']}/{w.num_buffers}  speedup {info['speedup']:.4f}  "
            f"placed bytes {info['placed_bytes_fraction']:.1%}",
        ]
        b = info["buffer"]
        if b >= 0:
            lines.append(f"deciding buffer {b}: {w.size[b]} B, ops {w.start[b]}-{w.end[b]}, "
                         f"{self._count} candidate(s) {self.candidate_offsets.tolist()}")
        lines.append(ascii_map(self._image))
        return "\n".join(lines) + "\n"



MallocGameEnv.__doc__ = MallocGameEnv.__doc__.format(
    buffer=feature_list(BUFFER_FEATURES), candidates=feature_list(CANDIDATE_FEATURES),
    next=feature_list(NEXT_FEATURES), progress=feature_list(PROGRESS_FEATURES),
)


def env_kernels() -> tuple:
    """The kernels the env calls directly (their callees are compiled, and cached, with them)."""
    return (features.observe, features.step)


def heuristic_env(scenario: Scenario, name: str, *, n_candidates: int | None = None) -> MallocGameEnv:
    """A MallocGame env on ``scenario`` set up for heuristic ``name`` (a key of
    :data:`mallocgym.heuristics.HEURISTICS`; play it with :func:`mallocgym.heuristics.play`): its
    decision order, and ``n_candidates`` (default 16; ``2 * N`` for first fit, so no candidate is
    dropped)."""
    if name not in ORDER:
        raise ValueError(f"unknown heuristic {name!r}; known: {', '.join(HEURISTICS)}")
    if n_candidates is None:
        n_candidates = max(16, 2 * scenario.workload.num_buffers) if name == "first-fit" else 16
    return MallocGameEnv(scenario, n_candidates=n_candidates, order=ORDER[name], invalid_action="raise")
