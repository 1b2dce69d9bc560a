"""Hardware profiles: the roofline parameters of the cost model and the fast-memory size.

A :class:`Hardware` says how fast an op computes and how fast it moves bytes to and from the
slow (HBM) and fast (on-chip) memories, plus how big and how aligned the fast memory is. See
``docs/cost_model.md`` for the formulas.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

import numpy as np

from ._validate import MAX_BYTES

__all__ = ["Hardware", "PROFILES", "DEFAULT_PROFILE", "profile", "program_time"]


def _is_int(value) -> bool:
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class Hardware:
    """Roofline parameters of one accelerator.

    Attributes:
      peak_flops: FLOP/s of the compute units.
      slow_bw: bytes/s between the compute units and slow memory (HBM).
      fast_bw: bytes/s between the compute units and fast memory (on-chip SRAM).
      fast_capacity: bytes of fast memory (an integer in ``[1, 2**48]``), or ``None`` to let the scenario choose it (see
        :func:`mallocgym.scenarios.resolve_hardware`).
      alignment: offsets in fast memory are multiples of this many bytes.
      op_overhead: seconds added to every op (launch cost); 0 by default.
      peak_transcendentals: transcendental ops/s; ``None`` means ``peak_flops``.
      name: a label for tables and file names.
    """

    peak_flops: float = 275e12
    slow_bw: float = 1.2e12
    fast_bw: float = 12e12
    fast_capacity: int | None = None
    alignment: int = 1
    op_overhead: float = 0.0
    peak_transcendentals: float | None = None
    name: str = "custom"

    def __post_init__(self) -> None:
        for field in ("peak_flops", "slow_bw", "fast_bw"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
                raise ValueError(f"Hardware.{field} must be a finite number > 0, got {value!r}")
            object.__setattr__(self, field, float(value))
        if self.peak_transcendentals is not None:
            value = self.peak_transcendentals
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
                raise ValueError(f"Hardware.peak_transcendentals must be > 0 or None, got {value!r}")
        value = self.op_overhead
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value >= 0):
            raise ValueError(f"Hardware.op_overhead must be >= 0, got {value!r}")
        if not _is_int(self.alignment) or not 1 <= self.alignment <= MAX_BYTES:
            raise ValueError(f"Hardware.alignment must be an integer >= 1 (at most {MAX_BYTES}), got {self.alignment!r}")
        object.__setattr__(self, "alignment", int(self.alignment))
        if self.fast_capacity is not None:
            cap = self.fast_capacity
            if not _is_int(cap) or not 1 <= cap <= MAX_BYTES:
                raise ValueError(f"Hardware.fast_capacity must be an integer >= 1 (at most {MAX_BYTES} = 2**48) "
                                 f"or None, got {cap!r}")
            object.__setattr__(self, "fast_capacity", int(cap))

    @property
    def transcendental_rate(self) -> float:
        """Transcendental ops per second (``peak_flops`` unless set)."""
        return self.peak_flops if self.peak_transcendentals is None else self.peak_transcendentals

    def with_capacity(self, fast_capacity: int) -> "Hardware":
        """A copy of this profile with another fast-memory size."""
        return dataclasses.replace(self, fast_capacity=fast_capacity)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# Public figures, rounded; the "-like" profiles leave the fast-memory size to the scenario. tpu-v4-like follows
# DESIGN.md: 275 TFLOP/s bf16, 1.2 TB/s HBM, on-chip memory 10x faster than HBM.
PROFILES: dict[str, Hardware] = {
    "tpu-v4-like": Hardware(275e12, 1.2e12, 12e12, None, 1, 0.0, None, "tpu-v4-like"),
    # A100-like: 312 TFLOP/s bf16 dense, 1.55 TB/s HBM2e, shared memory/L1 ~ 10x HBM.
    "gpu-a100-like": Hardware(312e12, 1.55e12, 15.5e12, None, 128, 0.0, None, "gpu-a100-like"),
    # A small edge NPU: few TOPS, LPDDR at tens of GB/s, SRAM 20x faster.
    "npu-edge-like": Hardware(4e12, 25.6e9, 512e9, None, 64, 0.0, None, "npu-edge-like"),
    # Real chips with their absolute fast-memory sizes (sources in docs/suite.md, "Real chips"):
    # peak bf16 FLOP/s, HBM bytes/s and on-chip capacities from JAX's TPU table
    # (jax/_src/pallas/mosaic/tpu_info.py, docs.jax.dev "TPU Hardware Reference"); the fast
    # memory's bandwidth is not public: estimated as 10x HBM, as tpu-v4-like.
    # TPU v4i (one TensorCore): 16 MiB VMEM, 128 MiB CMEM, 137 TFLOP/s, 614 GB/s HBM.
    "tpu-v4i-vmem": Hardware(137e12, 614e9, 6.14e12, 16 * 2**20, 1, 0.0, None, "tpu-v4i-vmem"),
    "tpu-v4i-cmem": Hardware(137e12, 614e9, 6.14e12, 128 * 2**20, 1, 0.0, None, "tpu-v4i-cmem"),
    # TPU v5e (one TensorCore): 128 MiB VMEM, 197 TFLOP/s, 820 GB/s HBM.
    "tpu-v5e-vmem": Hardware(197e12, 820e9, 8.2e12, 128 * 2**20, 1, 0.0, None, "tpu-v5e-vmem"),
}
DEFAULT_PROFILE = "tpu-v4-like"


def profile(name: str = DEFAULT_PROFILE, fast_capacity: int | None = None) -> Hardware:
    """The named hardware profile, optionally with a fast-memory size."""
    if not isinstance(name, str):
        raise TypeError(f"hardware must be a Hardware or a profile name, got {type(name).__name__} {name!r}")
    try:
        hw = PROFILES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown hardware profile {name!r}; known: {', '.join(PROFILES)}") from None
    return hw if fast_capacity is None else hw.with_capacity(fast_capacity)


def program_time(workload, fast: np.ndarray, hardware: Hardware) -> tuple[float, int]:
    """Program time of ``workload`` (a :class:`~mallocgym.workloads.Workload`) on ``hardware``
    with the buffers flagged in ``fast`` in fast memory, and the number of compute-bound ops:
    the roofline cost model (``docs/cost_model.md``). Vectorised NumPy, independent of the
    incremental simulator; :func:`mallocgym.pricing.v0.evaluate` prices a mapping with it."""
    owner = np.repeat(np.arange(workload.num_buffers), np.diff(workload.access_ptr))
    in_fast = fast[owner]
    t = workload.num_ops
    slow_bytes = np.bincount(workload.access_op[~in_fast], weights=workload.access_bytes[~in_fast], minlength=t)
    fast_bytes = np.bincount(workload.access_op[in_fast], weights=workload.access_bytes[in_fast], minlength=t)
    compute = np.maximum(workload.flops / hardware.peak_flops,
                         workload.transcendentals / hardware.transcendental_rate)
    memory = slow_bytes / hardware.slow_bw + fast_bytes / hardware.fast_bw
    elapsed = np.maximum(compute, memory) + hardware.op_overhead
    return float(elapsed.sum()), int(np.count_nonzero(compute >= memory))
