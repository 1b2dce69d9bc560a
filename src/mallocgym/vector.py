"""A native batched MallocGame: N games stepped by one numba loop.

    envs = gym.make_vec("MallocGame-v0", num_envs=64, vectorization_mode="vector_entry_point")

:class:`MallocGameVectorEnv` holds ``N`` ordinary :class:`~mallocgym.env.MallocGameEnv` objects,
but never calls their ``step()``: one ``@njit`` kernel walks the batch and runs the same
per-game kernels (:func:`mallocgym.features.v0.step`) on each game's arrays, in place. Resets go
through each game's own ``reset()`` (they are rare: once an episode), so seeding, scenario
sampling and the ``workload`` option behave exactly as in ``N`` separate envs, and each sub-env
(``envs.envs[i]``) stays a consistent ``MallocGameEnv`` (``action_masks()``, ``clone_state()``,
``render()`` work on it).

Autoreset: both Gymnasium 1.x modes, chosen with ``autoreset_mode`` (default
``AutoresetMode.NEXT_STEP``, Gymnasium's default; also in ``metadata["autoreset_mode"]``):

- ``NEXT_STEP``: the step that ends an episode returns its last observation; the *next*
  ``step()`` resets that game, ignores its action and returns reward 0, not terminated.
- ``SAME_STEP``: the step that ends an episode resets the game at once and returns the new
  episode's first observation; the last observation and info are in ``info["final_obs"]``
  (object array of dicts) and ``info["final_info"]`` (masked like every key).

Info is a dict of arrays, each key ``k`` with a boolean mask ``_k`` (Gymnasium's vector
convention), with the single env's keys. ``offsets`` differs from ``SyncVectorEnv``: it is an
object array holding each finished game's ``int64[N_buffers]`` (games may differ in size).

:class:`mallocgym.agents.sb3.vec_env.SB3VecEnv` adapts it to Stable-Baselines3's ``VecEnv``.
"""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from numba import njit
from numba.typed import List

from . import sim
from ._validate import check_int, clip
from .features import v0 as features
from .env import MallocGameEnv
from .env.base import check_options, check_seed
from .sim import PLACED_BYTES, STEP, TIME, TIME_ALL_SLOW

__all__ = ["MallocGameVectorEnv"]

MAX_ENVS = 4096
"""Most games one vector env steps (each holds its own arrays)."""

_OBS_KEYS = ("buffer", "candidates", "next", "memory", "progress", "action_mask")


# ------------------------------------------------------------------------------------- kernels
@njit(cache=True)
def _step_batch(statics, states, norms, scratches, images, obses, k, actions, active, terminate_invalid,
                rewards, terminated, invalid, counts):
    """Step every active game with its action (masked actions: skip, or end the game when
    ``terminate_invalid``); write rewards, terminations, invalid flags and candidate counts."""
    for i in range(len(statics)):
        if not active[i]:
            continue
        st = statics[i]
        state = states[i]
        obs = obses[i]
        n = st.size.shape[0]
        a = actions[i]
        bad = a < k and obs.action_mask[a] == 0
        invalid[i] = bad
        if bad and terminate_invalid:
            state.counters[STEP] = n
            counts[i] = features.observe(st, state, norms[i], scratches[i], images[i], obs, k)
            delta = 0.0
        else:
            delta, count = features.step(st, state, norms[i], scratches[i], images[i], obs, k, a)
            counts[i] = count
        rewards[i] = -delta / st.params[TIME_ALL_SLOW]
        terminated[i] = state.counters[STEP] >= n


@njit(cache=True)
def _gather(statics, states, obses, rows, o_buffer, o_candidates, o_next, o_memory, o_progress, o_mask,
            time, time_all_slow, placed_bytes, step, buffer):
    """Copy the observations and info scalars of games ``rows`` into the batch arrays."""
    for r in range(rows.shape[0]):
        i = rows[r]
        st = statics[i]
        state = states[i]
        obs = obses[i]
        o_buffer[i, :] = obs.buffer
        o_candidates[i, :, :] = obs.candidates
        o_next[i, :, :] = obs.next
        o_memory[i, :, :, :] = obs.memory
        o_progress[i, :] = obs.progress
        o_mask[i, :] = obs.action_mask
        time[i] = state.totals[TIME]
        time_all_slow[i] = st.params[TIME_ALL_SLOW]
        placed_bytes[i] = state.totals[PLACED_BYTES]
        s = state.counters[STEP]
        step[i] = s
        buffer[i] = st.order[s] if s < st.size.shape[0] else -1


@njit(cache=True)
def _new_list(item, n):
    """A numba typed list of ``n`` references to ``item``. Built inside a cached kernel: typed
    lists made from Python compile their methods anew in every process (seconds)."""
    out = List()
    for _ in range(n):
        out.append(item)
    return out


@njit(cache=True)
def _set_item(items, i, item):
    items[i] = item


def _uniform_static(static: sim.Static) -> sim.Static:
    """The same arrays as C-contiguous read-only views, so every game's ``Static`` has one numba
    type (workloads may come with writeable or read-only arrays)."""
    out = []
    for a in static:
        view = np.ascontiguousarray(a).view()
        view.setflags(write=False)
        out.append(view)
    return sim.Static(*out)


# --------------------------------------------------------------------------------- vector env
class MallocGameVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` MallocGame-v0 games stepped together in numba (see the module docstring).

    Args:
      num_envs: number of games.
      autoreset_mode: ``AutoresetMode.NEXT_STEP`` (default) or ``SAME_STEP`` (or their strings
        ``"NextStep"`` / ``"SameStep"``).
      **env_kwargs: the arguments of :class:`~mallocgym.env.MallocGameEnv` (``workload``,
        ``hardware``, ``n_candidates``, ``invalid_action``, ...), the same for every game.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, *, autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 **env_kwargs):
        try:
            num_envs = check_int(num_envs, "num_envs", low=1, high=MAX_ENVS)
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        try:
            mode = autoreset_mode if isinstance(autoreset_mode, AutoresetMode) else AutoresetMode(autoreset_mode)
        except (ValueError, TypeError):
            raise ValueError(f"autoreset_mode must be one of {[m.value for m in AutoresetMode]}, got "
                             f"{clip(autoreset_mode)}") from None
        if mode == AutoresetMode.DISABLED:
            raise ValueError("autoreset_mode DISABLED is not supported; use NEXT_STEP or SAME_STEP")
        self.num_envs = int(num_envs)
        self.autoreset_mode = mode
        self.metadata = dict(self.metadata, autoreset_mode=mode)
        first = MallocGameEnv(**env_kwargs)
        self.envs: list[MallocGameEnv] = [first]
        for _ in range(1, self.num_envs):
            env = MallocGameEnv(**env_kwargs)
            env.share_compiled(first)  # compile each scenario once for the whole batch
            self.envs.append(env)
        self.render_mode = first.render_mode
        self.k = first.k
        self._terminate_invalid = first.invalid_action == "terminate"
        self._raise_invalid = first.invalid_action == "raise"
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        n = self.num_envs
        arrays = first.kernel_arrays()
        self._statics = _new_list(_uniform_static(arrays.static), n)
        self._states = _new_list(arrays.state, n)
        self._norms = _new_list(arrays.norm, n)
        self._scratches = _new_list(arrays.scratch, n)
        self._images = _new_list(arrays.image, n)
        self._obses = _new_list(arrays.obs, n)
        self._total_bytes = np.zeros(n)
        for i in range(n):
            self._refresh(i)
        self._autoreset = np.zeros(n, dtype=bool)
        self._all_rows = np.arange(n, dtype=np.int64)
        self._everyone = np.ones(n, dtype=bool)
        self._obs = self._empty_obs()
        self._info_arrays = self._empty_info_arrays()

    # ------------------------------------------------------------------ helpers
    def _empty_obs(self) -> dict[str, np.ndarray]:
        """Batch arrays in the per-game kernels' natural shapes (``self._tables``) and the flat
        views of them that observations are made of (``self._obs``, in the space's key order)."""
        self._tables = {key: np.zeros((self.num_envs, *arr.shape), dtype=arr.dtype)
                        for key, arr in self.envs[0].kernel_arrays().obs._asdict().items()}
        return {key: self._tables[key].reshape(self.num_envs, *space.shape)
                for key, space in self.single_observation_space.spaces.items()}

    def _empty_info_arrays(self) -> dict[str, np.ndarray]:
        n = self.num_envs
        return {"time": np.zeros(n), "time_all_slow": np.zeros(n), "placed_bytes": np.zeros(n),
                "step": np.zeros(n, np.int64), "buffer": np.zeros(n, np.int64)}

    def _refresh(self, i: int) -> None:
        """After game ``i``'s reset: point the kernels' lists at its new arrays."""
        e = self.envs[i]
        arrays = e.kernel_arrays()
        _set_item(self._statics, i, _uniform_static(arrays.static))
        _set_item(self._states, i, arrays.state)
        _set_item(self._norms, i, arrays.norm)
        _set_item(self._scratches, i, arrays.scratch)
        _set_item(self._images, i, arrays.image)
        _set_item(self._obses, i, arrays.obs)
        self._total_bytes[i] = float(e.workload.total_bytes)

    def _gather(self, rows: np.ndarray) -> None:
        o, a = self._tables, self._info_arrays
        _gather(self._statics, self._states, self._obses, rows, o["buffer"], o["candidates"], o["next"],
                o["memory"], o["progress"], o["action_mask"], a["time"], a["time_all_slow"], a["placed_bytes"],
                a["step"], a["buffer"])

    def _info(self, invalid: np.ndarray) -> dict[str, Any]:
        a = self._info_arrays
        info = {
            "action_mask": self._obs["action_mask"].copy(),
            "time": a["time"].copy(),
            "time_all_slow": a["time_all_slow"].copy(),
            "speedup": a["time_all_slow"] / a["time"],
            "placed_bytes_fraction": a["placed_bytes"] / self._total_bytes,
            "invalid_action": invalid,
            "buffer": a["buffer"].copy(),
            "step": a["step"].copy(),
        }
        for key in list(info):
            info["_" + key] = self._everyone.copy()
        return info

    def _copy_obs(self, rows: Sequence[int] | None = None) -> dict[str, np.ndarray]:
        if rows is None:
            return {key: value.copy() for key, value in self._obs.items()}
        return {key: value[rows].copy() for key, value in self._obs.items()}

    def _check_actions(self, actions) -> np.ndarray:
        if isinstance(actions, (str, bytes)):
            raise ValueError(f"actions must be {self.num_envs} integers in Discrete({self.k + 1}), got {clip(actions)}")
        a = np.asarray(actions)
        if a.shape not in ((self.num_envs,), (self.num_envs, 1)) or a.dtype.kind not in "iu":
            raise ValueError(f"actions must be {self.num_envs} integers in Discrete({self.k + 1}), got {clip(actions)}")
        a = a.reshape(self.num_envs).astype(np.int64)
        bad = np.flatnonzero((a < 0) | (a > self.k))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"game {i}: action {a[i]} is outside the action space Discrete({self.k + 1})")
        return a

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every game (or those in ``options["reset_mask"]``); ``seed`` an int seeds game
        ``i`` with ``seed + i``, or give a list of seeds."""
        super().reset(seed=None)
        if seed is None:
            seeds = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
            check_seed(seed)
            check_seed(int(seed) + self.num_envs - 1, "seed + num_envs - 1")
            seeds = [int(seed) + i for i in range(self.num_envs)]
        elif isinstance(seed, (list, tuple, np.ndarray)):
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} games")
            for i, s in enumerate(seeds):
                check_seed(s, f"seed[{i}]")
        else:
            raise ValueError(f"seed must be None, an integer or a list of {self.num_envs} integers or None, got "
                             f"{type(seed).__name__} {clip(seed)}")
        options = dict(check_options(options, ("workload", "reset_mask")))
        mask = options.pop("reset_mask", None)
        if mask is None:
            rows = self._all_rows
        else:
            mask = np.asarray(mask)
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_ or not mask.any():
                raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},) "
                                 f"with at least one True, got {mask!r}")
            rows = np.flatnonzero(mask).astype(np.int64)
        self.reset_games(rows, seeds=[seeds[i] for i in rows], options=[options or None] * len(rows))
        info = self._info(np.zeros(self.num_envs, dtype=bool))
        if mask is not None:
            for key in [k for k in info if not k.startswith("_")]:
                info["_" + key] = mask.copy()
        return self._copy_obs(), info

    def reset_games(self, rows: Sequence[int], *, seeds: Sequence[int | None] | None = None,
                    options: Sequence[dict | None] | None = None) -> None:
        """Reset games ``rows`` (each with its seed and options) and refresh the batch arrays."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        for j, i in enumerate(rows):
            self.envs[i].reset(seed=None if seeds is None else seeds[j],
                               options=None if options is None else options[j])
            self._refresh(int(i))
        self._autoreset[rows] = False
        self._gather(rows)

    def step(self, actions):
        """Step every game; see the module docstring for the autoreset mode."""
        a = self._check_actions(actions)
        n = self.num_envs
        resetting = self._autoreset.copy() if self.autoreset_mode == AutoresetMode.NEXT_STEP else np.zeros(n, bool)
        active = ~resetting
        masks = self._obs["action_mask"]
        if self._raise_invalid:
            masked = active & (a < self.k) & (masks[np.arange(n), np.minimum(a, self.k)] == 0)
            if masked.any():
                i = int(np.flatnonzero(masked)[0])
                raise ValueError(f"game {i}: action {a[i]} is masked; legal actions are "
                                 f"{np.flatnonzero(masks[i]).tolist()}")
        rewards = np.zeros(n)
        terminated = np.zeros(n, dtype=bool)
        invalid = np.zeros(n, dtype=bool)
        counts = np.zeros(n, dtype=np.int64)
        _step_batch(self._statics, self._states, self._norms, self._scratches, self._images, self._obses,
                    self.k, a, active, self._terminate_invalid, rewards, terminated, invalid, counts)
        for env, count, done, stepped in zip(self.envs, counts.tolist(), terminated.tolist(), active.tolist()):
            if stepped:
                env.kernel_stepped(count, done)
        if resetting.any():
            self.reset_games(np.flatnonzero(resetting))
        self._gather(self._all_rows)
        info = self._info(invalid)
        if terminated.any():
            done_rows = np.flatnonzero(terminated)
            offsets = np.full(n, None, dtype=object)
            for i in done_rows:
                offsets[i] = self.envs[i].offsets.tolist()
            if self.autoreset_mode == AutoresetMode.NEXT_STEP:
                info["offsets"], info["_offsets"] = offsets, terminated.copy()
            else:
                info = self._same_step_reset(info, done_rows, offsets, terminated)
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._autoreset = terminated.copy()
        return self._copy_obs(), rewards, terminated, np.zeros(n, dtype=bool), info

    def _same_step_reset(self, info, done_rows, offsets, terminated):
        n = self.num_envs
        final_obs = np.full(n, None, dtype=object)
        for i in done_rows:
            final_obs[i] = {key: self._obs[key][i].copy() for key in _OBS_KEYS}  # the single env's order
        final_info = {}
        for key, value in info.items():
            if not key.startswith("_"):
                final_info[key] = value
                final_info["_" + key] = terminated.copy()
        final_info["offsets"], final_info["_offsets"] = offsets, terminated.copy()
        self.reset_games(done_rows)
        fresh = self._info(np.where(terminated, False, info["invalid_action"]))
        fresh.update(final_obs=final_obs, _final_obs=terminated.copy(), final_info=final_info,
                     _final_info=terminated.copy())
        return fresh

    def render(self) -> tuple:
        """Each game's ``render()`` (the ``render_mode`` given at construction)."""
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs) -> None:
        for env in self.envs:
            env.close()

    def action_masks(self) -> np.ndarray:
        """``bool[num_envs, K + 1]``: legal actions of every game (True = legal)."""
        return self._obs["action_mask"].astype(bool)

    def __repr__(self) -> str:
        return f"MallocGameVectorEnv(num_envs={self.num_envs}, autoreset_mode={self.autoreset_mode.value})"
