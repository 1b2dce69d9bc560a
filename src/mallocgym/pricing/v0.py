"""``evaluate(workload, offsets, hardware)``: the single source of truth for a mapping's time."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .. import sim
from ..hardware import Hardware, program_time
from ..scenarios import resolve_hardware
from ..workloads import Workload

__all__ = ["evaluate", "Evaluation", "program_time", "validate_mapping"]


@dataclass(frozen=True)
class Evaluation:
    """The cost of one mapping.

    Attributes:
      time: program time in seconds under the roofline cost model.
      time_all_slow: program time with every buffer in slow memory.
      speedup: ``time_all_slow / time`` (>= 1).
      placed_bytes_fraction: bytes of the buffers in fast memory / bytes of all buffers.
      placed_buffers: how many buffers are in fast memory.
      num_buffers: how many buffers the workload has.
      compute_bound_ops: fraction of ops whose compute time is at least their memory time.
      oversized_buffers: how many buffers are larger than the fast memory (always slow).
    """

    time: float
    time_all_slow: float
    speedup: float
    placed_bytes_fraction: float
    placed_buffers: int
    num_buffers: int
    compute_bound_ops: float
    oversized_buffers: int = 0

    @property
    def normalized_return(self) -> float:
        """``1 - time / time_all_slow``: the episode return MallocGame pays for this mapping."""
        return 1.0 - self.time / self.time_all_slow

    def to_dict(self) -> dict:
        return asdict(self)


def validate_mapping(workload: Workload, offsets, hardware: Hardware) -> np.ndarray:
    """Check a mapping and return it as ``int64[N]``; raise ``ValueError`` naming what is wrong.

    Each offset is ``-1`` (slow memory) or a multiple of ``hardware.alignment`` in
    ``[0, fast_capacity - size]``; fast buffers live at a common op must not share a byte.
    """
    raw = np.asarray(offsets)
    if raw.shape != (workload.num_buffers,):
        raise ValueError(f"mapping has shape {raw.shape}, expected ({workload.num_buffers},): one offset per buffer")
    if raw.dtype.kind not in "iu":
        if raw.dtype.kind != "f" or not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw)):
            raise ValueError(f"mapping offsets must be integers, got dtype {raw.dtype}")
    if raw.dtype.kind == "u" and raw.size and raw.max() > np.iinfo(np.int64).max:
        raise ValueError(f"mapping offsets must fit in int64, got {int(raw.max())}")
    offsets = raw.astype(np.int64)
    capacity, align = hardware.fast_capacity, hardware.alignment
    bad = np.flatnonzero(offsets < -1)
    if bad.size:
        b = int(bad[0])
        raise ValueError(f"{workload.buffer_label(b)}: offset {offsets[b]} is negative (use -1 for slow memory)")
    placed = offsets >= 0
    bad = np.flatnonzero(placed & (offsets > capacity - workload.size))  # no int64 overflow
    if bad.size:
        b = int(bad[0])
        raise ValueError(f"{workload.buffer_label(b)}: offset {offsets[b]} + size {workload.size[b]} "
                         f"exceeds the fast memory ({capacity} bytes)")
    bad = np.flatnonzero(placed & (offsets % align != 0))
    if bad.size:
        b = int(bad[0])
        raise ValueError(f"{workload.buffer_label(b)}: offset {offsets[b]} is not a multiple of the alignment {align}")
    st = sim.compile_scenario(workload, hardware, order="start")
    i, j = sim.first_conflict(st, sim.new_state(st), offsets)
    if i >= 0:
        raise ValueError(
            f"{workload.buffer_label(i)} [ops {workload.start[i]}-{workload.end[i]}, bytes {offsets[i]}-"
            f"{offsets[i] + workload.size[i]}) and {workload.buffer_label(j)} [ops {workload.start[j]}-"
            f"{workload.end[j]}, bytes {offsets[j]}-{offsets[j] + workload.size[j]}) overlap in fast memory"
        )
    return offsets


def evaluate(workload: Workload, offsets, hardware: Hardware | str | None = None) -> Evaluation:
    """Validate a mapping (``offsets[b] = -1`` for slow memory) and return its cost.

    ``hardware`` defaults to the default profile; an unset ``fast_capacity`` is resolved as in
    :func:`mallocgym.scenarios.resolve_hardware`.
    """
    hardware = resolve_hardware(workload, hardware)
    offsets = validate_mapping(workload, offsets, hardware)
    placed = offsets >= 0
    time, bound = program_time(workload, placed, hardware)
    time_all_slow, _ = program_time(workload, np.zeros(workload.num_buffers, dtype=bool), hardware)
    return Evaluation(
        time=time,
        time_all_slow=time_all_slow,
        speedup=time_all_slow / time if time > 0 else 1.0,
        placed_bytes_fraction=float(workload.size[placed].sum()) / workload.total_bytes,
        placed_buffers=int(placed.sum()),
        num_buffers=workload.num_buffers,
        compute_bound_ops=bound / workload.num_ops,
        oversized_buffers=int((workload.size > hardware.fast_capacity).sum()),
    )
