"""What every version of the game shares: argument checks, the scenarios an env plays and how it
picks one at reset, the compiled-scenario cache, and action checks."""

from __future__ import annotations

import operator
import os
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

from .._validate import check_int, clip, nearest_hint
from ..scenarios import Scenario, as_hardware, check_capacity, resolve, suite
from ..workloads import Workload

__all__ = ["ScenarioEnv", "INVALID_ACTION_MODES", "check_bins", "feature_list"]

INVALID_ACTION_MODES = ("skip", "terminate", "raise")
_CACHE_SIZE = 128
SPEC_TYPES = (Workload, Scenario, str, os.PathLike)


def feature_list(names: Sequence[str]) -> str:
    """Numbered feature names for an env docstring."""
    return "\n      ".join(f"{i}. {name}" for i, name in enumerate(names))


def check_bins(memory_bins) -> tuple[int, int]:
    """``memory_bins``: two integers in ``[1, 4096]`` (address bins, time bins)."""
    if isinstance(memory_bins, (str, bytes)) or not isinstance(memory_bins, Sequence) or len(memory_bins) != 2:
        raise TypeError(f"memory_bins must be two integers (address bins, time bins), got {memory_bins!r}")
    return tuple(check_int(v, f"memory_bins[{i}]", low=1, high=4096) for i, v in enumerate(memory_bins))


MAX_SEED = 2**63 - 1
"""Largest seed ``reset`` takes (numpy's ``SeedSequence`` takes any non-negative integer; this
bound keeps a seed an ``int64``)."""


def check_seed(seed, name: str = "seed") -> int | None:
    """``seed``: None or an integer in ``[0, MAX_SEED]`` (not a bool, float or string)."""
    if seed is None:
        return None
    try:
        return check_int(seed, name, low=0, high=MAX_SEED)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def check_options(options, allowed: Sequence[str] = ("workload",)) -> dict:
    """``options``: None or a dict whose keys are in ``allowed``; one ``ValueError`` otherwise."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"options must be a dict (e.g. {{'workload': NAME}}) or None, got "
                         f"{type(options).__name__} {clip(options)}")
    unknown = [key for key in options if key not in allowed]
    if unknown:
        raise ValueError(f"unknown reset option {clip(unknown[0])}{nearest_hint(unknown[0], allowed)}; the options "
                         f"are {', '.join(map(repr, allowed))}")
    return options


class ScenarioEnv(gym.Env):
    """The scenario handling of the MallocGame envs (subclasses add the game itself).

    :meth:`_setup` checks the shared arguments and resolves the scenarios; :meth:`_pick` chooses
    the next episode's scenario at reset; :meth:`_compile_cached` caches what a subclass compiles per
    scenario.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Check ``seed`` and ``options`` (one clear error, not Gymnasium's or numpy's), then seed
        ``np_random``; a subclass's ``reset`` calls this through ``super().reset(seed=...)``."""
        check_seed(seed)
        check_options(options)
        return super().reset(seed=seed)

    def _setup(self, workload, hardware, capacity, order: str, orders: Sequence[str], invalid_action: str,
               split: str, suite_name: str, render_mode: str | None) -> None:
        capacity = None if capacity is None else check_capacity(capacity)
        hardware = None if hardware is None else as_hardware(hardware)
        if order not in orders:
            raise ValueError(f"order must be one of {tuple(orders)}, got {order!r}")
        if invalid_action not in INVALID_ACTION_MODES:
            raise ValueError(f"invalid_action must be one of {INVALID_ACTION_MODES}, got {invalid_action!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.order = order
        self.invalid_action = invalid_action
        self.render_mode = render_mode
        self._hardware_arg = hardware
        self._capacity_arg = capacity
        self._generator: Callable | None = None
        if workload is None:
            specs: list = list(suite(suite_name, split))
        elif isinstance(workload, SPEC_TYPES):
            specs = [workload]
        elif callable(workload):
            self._generator = workload
            specs = [workload(np.random.default_rng(0))]
        elif isinstance(workload, Sequence):
            specs = list(workload)
            if not specs:
                raise ValueError("workload list is empty")
        else:
            raise TypeError(f"workload must be a Workload, a Scenario, a bundled name, a file path, a list of "
                            f"these or a generator, got {type(workload).__name__} {workload!r}")
        self._scenarios = [self._resolve(s) for s in specs]
        self._cache: dict[Scenario, Any] = {}

    def _resolve(self, spec) -> Scenario:
        """A scenario with the env's ``hardware`` and ``capacity`` applied (to every scenario:
        the suite's, a list's and a generator's)."""
        if not isinstance(spec, SPEC_TYPES):
            raise TypeError(f"workload must be a Workload, a Scenario, a bundled name or a file path, "
                            f"got {type(spec).__name__} {spec!r}")
        return resolve(spec, self._hardware_arg, self._capacity_arg)

    def _compile_cached(self, scenario: Scenario, cache: bool, build: Callable[[Scenario], Any]):
        """``build(scenario)``, remembered for the last 128 scenarios when ``cache``."""
        compiled = self._cache.get(scenario) if cache else None
        if compiled is None:
            compiled = build(scenario)
            if cache:
                if len(self._cache) >= _CACHE_SIZE:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[scenario] = compiled
        return compiled

    def _pick(self, options: dict[str, Any] | None) -> tuple[Scenario, bool]:
        """The next episode's scenario and whether to cache its compilation: the ``workload``
        reset option, else a generator's draw, else one of the scenarios (sampled with
        ``self.np_random``)."""
        options = check_options(options)
        if options.get("workload") is not None:
            return self._resolve(options["workload"]), True
        if self._generator is not None:
            return self._resolve(self._generator(self.np_random)), False
        if len(self._scenarios) == 1:
            return self._scenarios[0], True
        return self._scenarios[int(self.np_random.integers(len(self._scenarios)))], True

    # A subclass keeps the current episode's compiled scenario in ``_compiled`` (with fields
    # ``scenario`` and ``static``) and its simulator state in ``_state``.
    @property
    def workload(self) -> Workload:
        """The current episode's workload."""
        return self._compiled.scenario.workload

    @property
    def hardware(self):
        """The current episode's hardware (with its fast-memory size)."""
        return self._compiled.scenario.hardware

    @property
    def scenario(self) -> Scenario:
        """The current episode's scenario."""
        return self._compiled.scenario

    @property
    def static(self):
        """The compiled simulator arrays of the current scenario (read-only)."""
        return self._compiled.static

    @property
    def sim_state(self):
        """The live simulator state (read it, do not modify it; ``clone_state`` copies)."""
        return self._state

    @property
    def scenarios(self) -> list[Scenario]:
        """The scenarios this env samples from at reset."""
        return list(self._scenarios)

    def share_compiled(self, other: "ScenarioEnv") -> None:
        """Use ``other``'s cache of compiled scenarios, so that envs stepped together compile
        each scenario once."""
        self._cache = other._cache

    def observation(self) -> dict[str, np.ndarray]:
        """The current observation (a copy), e.g. after :meth:`restore_state`."""
        return self._observation()

    def structured(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Views of an observation (or a batch of them, leading axes kept) with its tables in
        their natural shapes (the subclass's ``_table_shapes``)."""
        out = dict(obs)
        lead = obs["buffer"].shape[:-1]
        for key, shape in self._table_shapes().items():
            out[key] = obs[key].reshape(*lead, *shape)
        return out

    def action_masks(self) -> np.ndarray:
        """Legal actions as bools (True = legal), the method sb3-contrib's MaskablePPO calls."""
        return self._obs.action_mask.astype(bool)

    def render(self):
        """``"ansi"``: a text summary; ``"rgb_array"``: the memory map; no mode: a warning."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='ansi' or 'rgb_array'")
            return None
        return self._render_rgb() if self.render_mode == "rgb_array" else self._render_text()

    def _repr_fields(self) -> str:
        return f"K={self.k}"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(scenarios={len(self._scenarios)}, {self._repr_fields()}, "
                f"order={self.order!r}, invalid_action={self.invalid_action!r})")

    def _check_action(self, action, n: int) -> int:
        """``action`` as an int in ``Discrete(n)``; anything else is a ``ValueError``."""
        if isinstance(action, (bool, np.bool_)) or (isinstance(action, np.ndarray) and action.dtype == np.bool_):
            raise ValueError(f"action {clip(action)} is a bool, not an integer in Discrete({n})")
        if isinstance(action, np.ndarray):
            if action.size != 1 or action.dtype.kind not in "iu":
                raise ValueError(f"action {clip(action)} is not in the action space Discrete({n})")
            action = action.reshape(()).item()
        try:
            a = operator.index(action)
        except TypeError:
            raise ValueError(f"action {clip(action)} is not an integer in Discrete({n})") from None
        if not 0 <= a < n:
            raise ValueError(f"action {a} is outside the action space Discrete({n})")
        return a
