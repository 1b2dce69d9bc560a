"""Vectorised MallocGame for Stable-Baselines3: the native numba batch, DummyVecEnv, SubprocVecEnv.

:class:`SB3VecEnv` puts :class:`mallocgym.vector.MallocGameVectorEnv` (``SAME_STEP`` autoreset)
behind SB3's ``VecEnv`` interface: observations are dicts of ``[N, ...]`` arrays, a finished
game's last observation is in ``infos[i]["terminal_observation"]`` (with its ``speedup``,
``placed_bytes_fraction`` and ``offsets``), and ``env_method("action_masks")`` returns the masks
of the current observations, which is what sb3-contrib's MaskablePPO calls every step.
MallocGame-v1 and v0's canonical decision mode (``order="canonical"``) have no native batch:
:func:`make_vec_env` gives them ``DummyVecEnv`` or ``SubprocVecEnv`` of ``MallocGameV1Env`` or
``CanonicalGameEnv``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecMonitor

from ...env import MallocGameEnv
from ...vector import MallocGameVectorEnv

__all__ = ["SB3VecEnv", "make_vec_env"]


class SB3VecEnv(VecEnv):
    """``num_envs`` MallocGame games stepped in one numba loop, as an SB3 ``VecEnv``.

    ``env_kwargs`` are :class:`~mallocgym.env.MallocGameEnv`'s arguments. ``seed(s)`` seeds
    game ``i`` with ``s + i`` at the next ``reset()``, as SB3's own vector envs do.
    """

    def __init__(self, num_envs: int = 1, **env_kwargs):
        self.vec = MallocGameVectorEnv(num_envs, autoreset_mode=AutoresetMode.SAME_STEP, **env_kwargs)
        super().__init__(num_envs, self.vec.single_observation_space, self.vec.single_action_space)
        self.render_mode = self.vec.render_mode
        self._actions: np.ndarray | None = None

    def reset(self):
        self.vec.reset_games(range(self.num_envs), seeds=list(self._seeds),
                             options=[opts or None for opts in self._options])
        self.reset_infos = [{} for _ in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()
        return self.vec._copy_obs()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self):
        obs, rewards, terminated, truncated, info = self.vec.step(self._actions)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if terminated.any():
            final = info["final_info"]
            for i in np.flatnonzero(terminated):
                infos[i] = {"terminal_observation": info["final_obs"][i], "TimeLimit.truncated": False,
                            "speedup": float(final["speedup"][i]),
                            "placed_bytes_fraction": float(final["placed_bytes_fraction"][i]),
                            "offsets": final["offsets"][i]}
        return obs, rewards.astype(np.float32), terminated | truncated, infos

    def close(self) -> None:
        self.vec.close()

    def get_attr(self, attr_name: str, indices=None) -> list:
        return [getattr(self.vec.envs[i], attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value, indices=None) -> None:
        for i in self._get_indices(indices):
            setattr(self.vec.envs[i], attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list:
        rows = list(self._get_indices(indices))
        if method_name == "action_masks" and not method_args and not method_kwargs:
            masks = self.vec.action_masks()
            return [masks[i] for i in rows]
        return [getattr(self.vec.envs[i], method_name)(*method_args, **method_kwargs) for i in rows]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [env.render() for env in self.vec.envs]


def _env_factory(env_kwargs: dict[str, Any], version: str) -> Callable[[], MallocGameEnv]:
    def make():
        if version == "v1":
            from ...env.v1 import MallocGameV1Env

            return MallocGameV1Env(**env_kwargs)
        return MallocGameEnv(**env_kwargs)

    return make


def make_vec_env(kind: str, n_envs: int, env_kwargs: dict[str, Any], *, seed: int | None = None,
                 monitor: bool = True, version: str = "v0") -> VecEnv:
    """``n_envs`` MallocGame games as an SB3 ``VecEnv`` of ``kind`` ``"native"``
    (:class:`SB3VecEnv`, v0's default mode only), ``"dummy"`` or ``"subproc"``, wrapped in
    ``VecMonitor`` (episode returns and lengths for SB3's logs) unless ``monitor=False``; seeded
    with ``seed``. ``version`` picks the game: ``"v0"`` (``MallocGameEnv``, which is a
    ``CanonicalGameEnv`` with ``order="canonical"`` in ``env_kwargs``) or ``"v1"``
    (``MallocGameV1Env``)."""
    if version not in ("v0", "v1"):
        raise ValueError(f"unknown game version {version!r}; expected v0 or v1")
    if kind == "native":
        if version != "v0":
            raise ValueError("the native vector env (mallocgym's numba batch) plays MallocGame-v0 only; "
                             "use dummy or subproc for v1")
        if env_kwargs.get("order") == "canonical":
            raise ValueError("the native vector env (mallocgym's numba batch) does not run v0's canonical "
                             "decision mode (order='canonical'); use dummy or subproc")
        venv: VecEnv = SB3VecEnv(n_envs, **env_kwargs)
    elif kind == "dummy":
        venv = DummyVecEnv([_env_factory(env_kwargs, version) for _ in range(n_envs)])
    elif kind == "subproc":
        venv = SubprocVecEnv([_env_factory(env_kwargs, version) for _ in range(n_envs)])
    else:
        raise ValueError(f"unknown vector env kind {kind!r}; expected native, dummy or subproc")
    if seed is not None:
        venv.seed(seed)
    return VecMonitor(venv) if monitor else venv
