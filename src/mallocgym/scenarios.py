"""Scenarios: a workload plus a hardware profile with a fast-memory size, grouped in suites.

A scenario is named ``WORKLOAD@FRACTION``, the fraction being the fast-memory size relative to
the program's peak live bytes (``alexnet-train@1/8``). Suites:

- ``default``: the bundled suite, real programs compiled by XLA (``examples/model_zoo.py``),
  stored in ``mallocgym/data/suite`` (one NPZ per workload and ``manifest.json``), each at 1/8
  and 1/2 of its peak live bytes, split into train and test (see ``docs/suite.md``);
- ``synthetic``: seeded synthetic MLP training steps (``mlp-train-s0`` ...) at 1/8 and 1/2;
- ``minimalloc``: MiniMalloc's challenging instances A-E at their 1 MiB capacity (split test),
  named ``minimalloc-A@1MiB`` ...;
- ``large``: whole networks of 5,000-50,000 buffers compiled by XLA (``examples/model_zoo.py
  --group large``), stored in ``mallocgym/data/large``, split test, each at 1/8 and 1/2 of its
  peak live bytes and on real chips' fast memories (``WORKLOAD@16MiB`` on ``tpu-v4i-vmem``,
  ``WORKLOAD@128MiB`` on ``tpu-v4i-cmem``; the manifest's ``profiles``).

Suites are loaded on first use and cached.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import json
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ._validate import MAX_BYTES, check_int
from .hardware import DEFAULT_PROFILE, PROFILES, Hardware, profile
from .workloads import Workload, load, load_minimalloc, load_npz
from .workloads.generator import GeneratorConfig, generate, planted_workload, preset
from .workloads.synthetic import mlp_training_step

__all__ = ["Scenario", "WorkloadGenerator", "planted", "suite", "get", "names", "resolve", "override", "as_hardware", "check_capacity",
           "oversized", "resolve_hardware",
           "capacity_for", "capacity_label", "manifest", "DEFAULT_FRACTION", "SUITES", "SPLITS"]

DEFAULT_FRACTION = Fraction(1, 4)
SPLITS = ("train", "test")
SUITE_FORMAT = "mallocgym-suite"


@dataclass(frozen=True)
class Scenario:
    """One game instance: ``workload`` on ``hardware`` (whose ``fast_capacity`` is set)."""

    name: str
    workload: Workload
    hardware: Hardware
    split: str = "train"


def capacity_for(workload: Workload, fraction: Fraction | float, alignment: int = 1) -> int:
    """``fraction`` of the peak live bytes, rounded up to ``alignment``, and at least the
    largest buffer (so that every buffer could fit alone)."""
    raw = math.ceil(workload.peak_live_bytes * Fraction(fraction))
    raw = max(raw, int(workload.size.max()), 1)
    return -(-raw // alignment) * alignment


def resolve_hardware(workload: Workload, hardware: Hardware | str | None = None) -> Hardware:
    """The hardware with its fast-memory size filled in.

    ``None`` is the default profile. An unset ``fast_capacity`` becomes the workload's
    ``default_capacity`` if it has one, else 1/4 of its peak live bytes (at least its largest
    buffer).
    """
    hardware = profile(DEFAULT_PROFILE) if hardware is None else as_hardware(hardware)
    if hardware.fast_capacity is None:
        capacity = workload.default_capacity or capacity_for(workload, DEFAULT_FRACTION, hardware.alignment)
        hardware = hardware.with_capacity(capacity)
    return hardware


def _scenario(workload: Workload, fraction: Fraction, split: str) -> Scenario:
    hw = profile(DEFAULT_PROFILE)
    hw = hw.with_capacity(capacity_for(workload, fraction, hw.alignment))
    return Scenario(f"{workload.name}@{fraction}", workload, hw, split)


# ------------------------------------------------------------------------------------- suites
def _data_dir(*parts: str) -> Path:
    """A folder of the package's ``data`` (a real path: the package is installed unzipped)."""
    return Path(str(importlib.resources.files("mallocgym").joinpath("data", *parts)))


@functools.lru_cache(maxsize=None)
def manifest(suite_name: str = "default") -> dict:
    """A bundled suite's ``manifest.json`` (checked): ``{"workloads": [{"name", "file",
    "family", "split", "fractions", "description", "ops", "buffers", ...}, ...], ...}``.

    ``suite_name`` is ``"default"`` (``data/suite``) or ``"large"`` (``data/large``, whose rows
    also name ``profiles``: hardware profiles with a fixed fast-memory size)."""
    if suite_name not in _MANIFEST_DIRS:
        raise ValueError(f"no manifest for suite {suite_name!r}; suites with one: {', '.join(_MANIFEST_DIRS)}")
    path = _data_dir(_MANIFEST_DIRS[suite_name]) / "manifest.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: the bundled suite's manifest is missing (reinstall mallocgym)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or doc.get("format") != SUITE_FORMAT or doc.get("version") != 1:
        raise ValueError(f"{path}: not a {SUITE_FORMAT} manifest of version 1")
    seen = set()
    for i, row in enumerate(doc.get("workloads", ())):
        for key in ("name", "file", "split", "fractions"):
            if key not in row:
                raise ValueError(f"{path}: workload {i}: missing field {key!r}")
        if row["split"] not in SPLITS:
            raise ValueError(f"{path}: workload {i}: field 'split' = {row['split']!r} is not train or test")
        if row["name"] in seen:
            raise ValueError(f"{path}: workload {i}: name {row['name']!r} is repeated")
        for name in row.get("profiles", ()):
            if name not in PROFILES or PROFILES[name].fast_capacity is None:
                raise ValueError(f"{path}: workload {i}: profile {name!r} is not a hardware profile with a fixed "
                                 f"fast-memory size")
        seen.add(row["name"])
    if not seen:
        raise ValueError(f"{path}: no workloads")
    return doc


_MANIFEST_DIRS = {"default": "suite", "large": "large"}


def capacity_label(capacity: int) -> str:
    """``16MiB``, ``512KiB`` or ``1000B``: a fast-memory size as a scenario name's suffix."""
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if capacity % scale == 0:
            return f"{capacity // scale}{unit}"
    return f"{capacity}B"


def _manifest_suite(suite_name: str) -> tuple[Scenario, ...]:
    """The scenarios of a manifest's workloads: each at its ``fractions`` of its peak live bytes
    on the default profile, then on each of its ``profiles`` (``WORKLOAD@16MiB``)."""
    folder = _data_dir(_MANIFEST_DIRS[suite_name])
    out = []
    for i, row in enumerate(manifest(suite_name)["workloads"]):
        workload = load_npz(folder / row["file"])
        if workload.name != row["name"]:
            raise ValueError(f"{folder / row['file']}: holds workload {workload.name!r}, the manifest says {row['name']!r}")
        for fraction in row["fractions"]:
            try:
                value = Fraction(fraction)
            except (ValueError, ZeroDivisionError):
                raise ValueError(f"{folder / 'manifest.json'}: workload {i}: bad fraction {fraction!r}") from None
            out.append(_scenario(workload, value, row["split"]))
        for name in row.get("profiles", ()):
            hw = PROFILES[name]
            out.append(Scenario(f"{workload.name}@{capacity_label(hw.fast_capacity)}", workload, hw, row["split"]))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _default_suite() -> tuple[Scenario, ...]:
    return _manifest_suite("default")


@functools.lru_cache(maxsize=None)
def _large_suite() -> tuple[Scenario, ...]:
    return _manifest_suite("large")


@functools.lru_cache(maxsize=None)
def _synthetic_suite() -> tuple[Scenario, ...]:
    out = []
    for seed in range(6):
        workload = mlp_training_step(seed)
        split = "test" if seed >= 4 else "train"
        for fraction in (Fraction(1, 8), Fraction(1, 2)):
            out.append(_scenario(workload, fraction, split))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _minimalloc_suite() -> tuple[Scenario, ...]:
    out = []
    for letter in "ABCDE":
        raw = load_minimalloc(_data_dir("minimalloc") / f"{letter}.1048576.csv")
        workload = dataclasses.replace(raw, name=f"minimalloc-{letter}")
        hw = profile(DEFAULT_PROFILE).with_capacity(workload.default_capacity)
        out.append(Scenario(f"{workload.name}@1MiB", workload, hw, "test"))
    return tuple(out)


SUITES = {"default": _default_suite, "synthetic": _synthetic_suite, "minimalloc": _minimalloc_suite,
          "large": _large_suite}


def suite(name: str = "default", split: str | None = None) -> list[Scenario]:
    """The scenarios of a suite, optionally one split (``"train"`` or ``"test"``)."""
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; known: {', '.join(SUITES)}")
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected 'train' or 'test'")
    return [s for s in SUITES[name]() if split is None or s.split == split]


def names(suite_name: str = "default", split: str | None = None) -> list[str]:
    """Scenario names of a suite (optionally one split)."""
    return [s.name for s in suite(suite_name, split)]


def get(name: str) -> Scenario:
    """A bundled scenario by name (``alexnet-train@1/8``, from any suite), or a bundled workload
    by name (its first scenario)."""
    for suite_name in SUITES:
        for scenario in suite(suite_name):
            if name in (scenario.name, scenario.workload.name):
                return scenario
    from ._validate import clip

    raise ValueError(f"unknown scenario {clip(name)}; run `mallocgym list` to see the bundled ones")


def override(scenario: Scenario, hardware: Hardware | str | None = None,
             capacity: int | None = None) -> Scenario:
    """``scenario`` with another hardware profile and/or fast-memory size.

    ``hardware`` (a profile or a name) replaces the scenario's profile; its ``fast_capacity``, if
    set, replaces the scenario's capacity, else the scenario keeps its own. ``capacity`` (bytes,
    an integer in ``[1, 2**48]``) replaces the capacity. A scenario whose capacity changed is
    renamed ``WORKLOAD@CAPACITYB`` (``unet-infer@20000000B``) so that no result is reported
    under the name of a scenario it did not play.
    """
    if hardware is None and capacity is None:
        return scenario
    old_capacity = scenario.hardware.fast_capacity
    hw = scenario.hardware
    if hardware is not None:
        hw = as_hardware(hardware)
        if hw.fast_capacity is None:
            hw = hw.with_capacity(old_capacity)
    if capacity is not None:
        hw = hw.with_capacity(check_capacity(capacity))
    name = scenario.name
    if hw.fast_capacity != old_capacity:
        name = f"{scenario.workload.name}@{hw.fast_capacity}B"
    return Scenario(name, scenario.workload, hw, scenario.split)


def as_hardware(hardware: Hardware | str) -> Hardware:
    """A :class:`Hardware` from itself or a profile name; anything else is a ``TypeError``."""
    if isinstance(hardware, Hardware):
        return hardware
    if isinstance(hardware, str):
        return profile(hardware)
    raise TypeError(f"hardware must be a Hardware or a profile name ({', '.join(PROFILES)}), "
                    f"got {type(hardware).__name__} {hardware!r}")


def check_capacity(capacity) -> int:
    """A fast-memory size in bytes: an integer in ``[1, 2**48]`` (not a bool, float or string)."""
    return check_int(capacity, "capacity", low=1, high=MAX_BYTES)


def oversized(workload: Workload, hardware: Hardware) -> int:
    """How many buffers are larger than the fast memory (they stay in slow memory)."""
    return int((workload.size > hardware.fast_capacity).sum())


def resolve(workload: Workload | Scenario | str | os.PathLike, hardware: Hardware | str | None = None,
            capacity: int | None = None) -> Scenario:
    """A scenario from a :class:`Workload`, a :class:`Scenario`, a bundled name, or a workload
    file path, with ``hardware`` and ``capacity`` applied as :func:`override` does.

    A workload with no capacity of its own gets 1/4 of its peak live bytes
    (:func:`resolve_hardware`). Buffers larger than the fast memory are legal: they stay slow.
    """
    if hardware is not None:
        hardware = as_hardware(hardware)
    if capacity is not None:
        capacity = check_capacity(capacity)
    if isinstance(workload, Scenario):
        return override(workload, hardware, capacity)
    if isinstance(workload, Workload):
        return override(Scenario(workload.name, workload, resolve_hardware(workload, hardware)), None, capacity)
    if not isinstance(workload, (str, os.PathLike)):
        raise TypeError(f"workload must be a Workload, a Scenario, a bundled name or a file path, "
                        f"got {type(workload).__name__} {workload!r}")
    text = os.fspath(workload)
    path = Path(text)
    if path.suffix.lower() in (".json", ".npz", ".csv"):
        loaded = load(path)
        return override(Scenario(loaded.name, loaded, resolve_hardware(loaded, hardware)), None, capacity)
    return override(get(text), hardware, capacity)


# ------------------------------------------------------------------ generated scenarios
def _fraction(value) -> Fraction:
    try:
        if isinstance(value, (int, str, Fraction)):
            f = Fraction(value)
        else:
            f = Fraction(float(value)).limit_denominator(10**6)
    except (TypeError, ValueError, ZeroDivisionError):
        raise ValueError(f"capacity fraction {value!r} is not a number") from None
    if not 0 < f:
        raise ValueError(f"capacity fraction {value!r} must be > 0")
    return f


class WorkloadGenerator:
    """A fresh scenario per call, for unlimited training instances.

    ``generator(rng)`` draws a seed and a capacity fraction with ``rng`` (a
    ``numpy.random.Generator``), generates that workload and returns a
    :class:`Scenario` whose fast memory is that fraction of the program's
    peak live bytes (:func:`capacity_for`). Pass it as the env's
    ``workload``: ``gym.make("MallocGame-v0", workload=WorkloadGenerator(preset("small")))``.
    """

    def __init__(self, config: GeneratorConfig | str = "small", fractions=(Fraction(1, 8), Fraction(1, 2)),
                 hardware="tpu-v4-like"):
        self.config = preset(config) if isinstance(config, str) else config
        if not isinstance(self.config, GeneratorConfig):
            raise ValueError(f"config must be a GeneratorConfig or a preset name, got {type(config).__name__}")
        self.fractions = tuple(_fraction(f) for f in fractions)
        if not self.fractions:
            raise ValueError("fractions must not be empty")
        self.hardware = profile(hardware) if isinstance(hardware, str) else hardware
        if not isinstance(self.hardware, Hardware):
            raise ValueError(f"hardware must be a Hardware or a profile name, got {hardware!r}")

    def scenario(self, seed: int, fraction) -> Scenario:
        """The scenario of one ``seed`` at one capacity ``fraction``."""
        fraction = _fraction(fraction)
        workload = generate(self.config, seed)
        hw = self.hardware.with_capacity(capacity_for(workload, fraction, self.hardware.alignment))
        return Scenario(f"{workload.name}@{fraction}", workload, hw, "train")

    def __call__(self, rng: np.random.Generator):
        seed = int(rng.integers(2**31))
        return self.scenario(seed, self.fractions[int(rng.integers(len(self.fractions)))])

    def __repr__(self) -> str:
        fracs = ", ".join(str(f) for f in self.fractions)
        return (f"WorkloadGenerator({self.config.name!r}, buffers={self.config.buffers}, "
                f"families={','.join(self.config.families)}, fractions=({fracs}), hardware={self.hardware.name!r})")


def planted(seed: int, *, n_buffers: int = 64, n_ops: int | None = None, capacity: int = 1 << 20,
            hardware="tpu-v4-like") -> tuple[Scenario, np.ndarray]:
    """A packing instance with a known optimum: ``(scenario, offsets)``
    (:func:`mallocgym.workloads.generator.planted_workload` at its own capacity)."""
    hw = profile(hardware) if isinstance(hardware, str) else hardware
    workload, offsets = planted_workload(seed, n_buffers=n_buffers, n_ops=n_ops, capacity=capacity, hardware=hw)
    return Scenario(workload.name, workload, hw.with_capacity(workload.default_capacity), "train"), offsets
