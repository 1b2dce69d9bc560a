"""The :class:`Workload`: a scheduled program's ops, buffers and accesses, as flat arrays."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .._validate import MAX_BYTES, MAX_TOTAL_BYTES, check_int, check_int_array

__all__ = ["Workload", "ACCESS_READ", "ACCESS_WRITE", "MAX_ACCESS_REPEAT"]

ACCESS_READ = 0
ACCESS_WRITE = 1
# An access moves at most its buffer once per run of its op; an op in a loop body (an XLA while
# loop with a known trip count) runs up to this many times per program run.
MAX_ACCESS_REPEAT = 65536


def _frozen(array, dtype) -> np.ndarray:
    out = np.ascontiguousarray(np.asarray(array), dtype=dtype).copy()
    out.setflags(write=False)
    return out


def _frozen_ints(array, name: str, where: str) -> np.ndarray:
    """A read-only ``int64`` copy; a fraction, NaN, bool or out-of-bound value is one error."""
    try:
        kind = "access" if name.startswith("access") else "buffer"
        out = np.ascontiguousarray(check_int_array(array, name, lambda i: f"{where}: {kind} {i}"))
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from None
    out.setflags(write=False)
    return out


def _int_fields(name, **fields) -> list[np.ndarray]:
    """The constructors' integer arguments, checked as the constructor checks them."""
    where = f"workload {name!r}"
    return [_frozen_ints(value, key, where) for key, value in fields.items()]


def _frozen_floats(array, name: str, where: str) -> np.ndarray:
    try:
        return _frozen(np.asarray(array, dtype=np.float64), np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{where}: field '{name}' must hold numbers (float64)") from None


@dataclass(frozen=True, eq=False)
class Workload:
    """A program in a fixed schedule: ``T`` ops, ``N`` buffers, ``A`` accesses.

    Op ``t`` runs at step ``t`` (``0 <= t < T``). Buffer ``b`` holds ``size[b]`` bytes and is
    live over the inclusive op interval ``[start[b], end[b]]``. Its accesses are the CSR slice
    ``access_ptr[b]:access_ptr[b + 1]`` of the ``access_*`` arrays: op, bytes moved, write flag.

    Attributes:
      name: a label (the bundled suite uses ``model-variant`` names).
      flops: ``float64[T]`` floating-point operations of each op.
      size: ``int64[N]`` bytes of each buffer (> 0, at most ``2**48``; all sizes sum to at most
        ``2**60``, and so do all access bytes, so no sum the simulator forms overflows ``int64``).
      start: ``int64[N]`` first op at which the buffer is live.
      end: ``int64[N]`` last op at which the buffer is live (inclusive, ``>= start``).
      access_ptr: ``int64[N + 1]`` CSR row pointers into the access arrays.
      access_op: ``int64[A]`` the op of each access, inside its buffer's live range.
      access_bytes: ``int64[A]`` bytes moved by each access (>= 0; at most its buffer's size once
        per run of the op, and an op in a loop body runs at most ``MAX_ACCESS_REPEAT`` = 65,536
        times: more is an error).
      access_write: ``bool[A]`` True for a write, False for a read.
      transcendentals: ``float64[T]`` transcendental ops of each op (zeros by default).
      buffer_names: ``N`` names (empty tuple if unnamed).
      op_names: ``T`` names (empty tuple if unnamed).
      default_capacity: a fast-memory size that comes with the workload (a MiniMalloc file's
        capacity), used when the hardware profile leaves ``fast_capacity`` unset.
      outputs: the program's outputs (buffer indices, each live at the last op), or None: then
        every buffer live at the last op is an output. Only MallocGame-v1 reads it (an output must
        end in slow memory); in XLA only the entry computation's root value is an output, while a
        value the last op merely reads is not.

    Arrays are copied and made read-only on construction, and the whole workload is validated:
    a bad field raises one ``ValueError`` naming the buffer or op and the field. Integer fields
    take integers only (a whole float such as ``262144.0`` is accepted; ``262144.7``, NaN or a
    bool is an error). A program that does no work at all (zero flops, zero access bytes) is
    rejected: its time would be 0, everywhere (``solve``, the env, ``evaluate``).
    """

    name: str
    flops: np.ndarray
    size: np.ndarray
    start: np.ndarray
    end: np.ndarray
    access_ptr: np.ndarray
    access_op: np.ndarray
    access_bytes: np.ndarray
    access_write: np.ndarray
    transcendentals: np.ndarray | None = None
    buffer_names: tuple[str, ...] = field(default=())
    op_names: tuple[str, ...] = field(default=())
    default_capacity: int | None = None
    outputs: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        if not isinstance(self.name, str):
            raise ValueError(f"workload name must be a string, got {type(self.name).__name__} {self.name!r}")
        where = f"workload {self.name!r}"
        set_("flops", _frozen_floats(self.flops, "flops", where))
        for key in ("size", "start", "end", "access_ptr", "access_op", "access_bytes"):
            set_(key, _frozen_ints(getattr(self, key), key, where))
        write = np.asarray(self.access_write)
        if write.dtype.kind not in "biu" or (write.dtype.kind != "b" and np.any((write != 0) & (write != 1))):
            raise ValueError(f"{where}: field 'access_write' must hold booleans (or 0/1)")
        set_("access_write", _frozen(write, np.bool_))
        if self.transcendentals is None:
            set_("transcendentals", _frozen(np.zeros_like(self.flops), np.float64))
        else:
            set_("transcendentals", _frozen_floats(self.transcendentals, "transcendentals", where))
        set_("buffer_names", tuple(str(n) for n in self.buffer_names))
        set_("op_names", tuple(str(n) for n in self.op_names))
        if self.default_capacity is not None:
            try:
                set_("default_capacity", check_int(self.default_capacity, f"{where}: field 'default_capacity'",
                                                   low=1, high=MAX_BYTES))
            except TypeError as exc:
                raise ValueError(str(exc)) from None
        self._validate()
        if self.outputs is not None:
            set_("outputs", self._checked_outputs(self.outputs, where))

    def _checked_outputs(self, outputs, where: str) -> tuple[int, ...]:
        if isinstance(outputs, (str, bytes)) or not hasattr(outputs, "__iter__"):
            raise ValueError(f"{where}: field 'outputs' must be a list of buffer indices, got {outputs!r}")
        out = []
        last = self.num_ops - 1
        for i, value in enumerate(outputs):
            try:
                b = check_int(value, f"{where}: outputs[{i}]", low=0, high=self.num_buffers - 1)
            except TypeError as exc:
                raise ValueError(str(exc)) from None
            if int(self.end[b]) != last:
                raise ValueError(f"{where}: outputs[{i}] = buffer {b} ends at op {int(self.end[b])}, but an output "
                                 f"must be live at the last op ({last})")
            out.append(b)
        if not out:
            raise ValueError(f"{where}: field 'outputs' is empty, but a program has at least one output (XLA's "
                             "root value); leave the field out to make every buffer live at the last op an output")
        if len(set(out)) != len(out):
            raise ValueError(f"{where}: field 'outputs' lists a buffer twice")
        return tuple(sorted(out))

    @property
    def output_mask(self) -> np.ndarray:
        """``bool[N]``: the program's outputs (see ``outputs``)."""
        if self.outputs is None:
            return self.end == self.num_ops - 1
        mask = np.zeros(self.num_buffers, dtype=bool)
        mask[list(self.outputs)] = True
        return mask

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_buffers(
        cls,
        name: str,
        flops: Sequence[float],
        size: Sequence[int],
        start: Sequence[int],
        end: Sequence[int],
        accesses: Sequence[Sequence[tuple[int, int, bool]]] | None = None,
        **kwargs,
    ) -> "Workload":
        """Build a workload from per-buffer lists.

        ``accesses[b]`` is a list of ``(op, bytes, is_write)``. Without ``accesses`` each buffer
        gets the usual pair: a write of ``size`` bytes at ``start`` and a read of ``size`` bytes
        at ``end``.
        """
        size, start, end = _int_fields(name, size=size, start=start, end=end)
        if accesses is None:
            return cls.with_default_accesses(name, flops, size, start, end, **kwargs)
        if len(accesses) != len(size):
            raise ValueError(f"{name}: {len(accesses)} access lists for {len(size)} buffers")
        ptr = np.zeros(len(size) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([len(a) for a in accesses])
        flat = [acc for per_buffer in accesses for acc in per_buffer]
        if any(len(a) != 3 for a in flat):
            raise ValueError(f"workload {name!r}: every access must be (op, bytes, is_write)")
        ops, nbytes = _int_fields(name, access_op=[a[0] for a in flat], access_bytes=[a[1] for a in flat])
        write = np.array([bool(a[2]) for a in flat], dtype=np.bool_)
        return cls(name, flops, size, start, end, ptr, ops, nbytes, write, **kwargs)

    @classmethod
    def with_default_accesses(cls, name, flops, size, start, end, **kwargs) -> "Workload":
        """Each buffer: one write of its size at ``start``, one read of its size at ``end``."""
        size, start, end = _int_fields(name, size=size, start=start, end=end)
        n = len(size)
        ptr = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
        ops = np.empty(2 * n, dtype=np.int64)
        ops[0::2], ops[1::2] = start, end
        nbytes = np.repeat(size, 2)
        write = np.tile(np.array([True, False]), n)
        return cls(name, flops, size, start, end, ptr, ops, nbytes, write, **kwargs)

    # ------------------------------------------------------------------ sizes and statistics
    @property
    def num_ops(self) -> int:
        return int(self.flops.shape[0])

    @property
    def num_buffers(self) -> int:
        return int(self.size.shape[0])

    @property
    def num_accesses(self) -> int:
        return int(self.access_op.shape[0])

    @functools.cached_property
    def total_bytes(self) -> int:
        """Sum of all buffer sizes."""
        return int(self.size.sum())

    @functools.cached_property
    def live_bytes(self) -> np.ndarray:
        """``int64[T]``: bytes live at each op."""
        diff = np.zeros(self.num_ops + 1, dtype=np.int64)
        np.add.at(diff, self.start, self.size)
        np.add.at(diff, self.end + 1, -self.size)
        out = np.cumsum(diff[:-1])
        out.setflags(write=False)
        return out

    @functools.cached_property
    def peak_live_bytes(self) -> int:
        """The most bytes live at any one op."""
        return int(self.live_bytes.max())

    def buffer_label(self, b: int) -> str:
        """``"buffer 3 ('name')"`` for error messages."""
        if self.buffer_names:
            return f"buffer {b} ({self.buffer_names[b]!r})"
        return f"buffer {b}"

    def accesses(self, b: int) -> list[tuple[int, int, bool]]:
        """Buffer ``b``'s accesses as ``(op, bytes, is_write)`` tuples."""
        lo, hi = self.access_ptr[b], self.access_ptr[b + 1]
        return [
            (int(o), int(n), bool(w))
            for o, n, w in zip(self.access_op[lo:hi], self.access_bytes[lo:hi], self.access_write[lo:hi])
        ]

    def __repr__(self) -> str:
        return (
            f"Workload({self.name!r}, ops={self.num_ops}, buffers={self.num_buffers}, "
            f"accesses={self.num_accesses}, peak_live_bytes={self.peak_live_bytes})"
        )

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        where = f"workload {self.name!r}"
        t, n, a = self.flops.shape[0], self.size.shape[0], self.access_op.shape[0]
        for arr_name in ("flops", "size", "start", "end", "access_ptr", "access_op", "access_bytes",
                         "access_write", "transcendentals"):
            if getattr(self, arr_name).ndim != 1:
                raise ValueError(f"{where}: field '{arr_name}' must be one-dimensional")
        if t == 0:
            raise ValueError(f"{where}: it has no ops")
        if n == 0:
            raise ValueError(f"{where}: it has no buffers")
        for arr_name in ("start", "end"):
            if getattr(self, arr_name).shape[0] != n:
                raise ValueError(f"{where}: field '{arr_name}' has {getattr(self, arr_name).shape[0]} entries, size has {n}")
        if self.transcendentals.shape[0] != t:
            raise ValueError(f"{where}: field 'transcendentals' has {self.transcendentals.shape[0]} entries, flops has {t}")
        if self.buffer_names and len(self.buffer_names) != n:
            raise ValueError(f"{where}: {len(self.buffer_names)} buffer_names for {n} buffers")
        if self.op_names and len(self.op_names) != t:
            raise ValueError(f"{where}: {len(self.op_names)} op_names for {t} ops")
        for arr_name in ("flops", "transcendentals"):
            arr = getattr(self, arr_name)
            bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
            if bad.size:
                i = int(bad[0])
                raise ValueError(f"{where}: op {i}: field '{arr_name}' = {float(arr[i])} must be finite and >= 0")
        checks = (
            (self.size <= 0, "size", lambda b: f"= {self.size[b]} must be > 0"),
            (self.start < 0, "start", lambda b: f"= {self.start[b]} must be >= 0"),
            (self.end < self.start, "end", lambda b: f"= {self.end[b]} is before start = {self.start[b]}"),
            (self.end >= t, "end", lambda b: f"= {self.end[b]} is past the last op {t - 1}"),
        )
        for bad_mask, field_name, text in checks:
            bad = np.flatnonzero(bad_mask)
            if bad.size:
                b = int(bad[0])
                raise ValueError(f"{where}: {self.buffer_label(b)}: field '{field_name}' {text(b)}")
        ptr = self.access_ptr
        if ptr.shape[0] != n + 1 or ptr[0] != 0 or ptr[-1] != a or np.any(np.diff(ptr) < 0):
            raise ValueError(f"{where}: field 'access_ptr' must be {n + 1} non-decreasing row pointers from 0 to {a}")
        if self.access_bytes.shape[0] != a or self.access_write.shape[0] != a:
            raise ValueError(f"{where}: access arrays differ in length")
        owner = np.repeat(np.arange(n), np.diff(ptr))
        outside = (self.access_op < self.start[owner]) | (self.access_op > self.end[owner])
        bad = np.flatnonzero(outside)
        if bad.size:
            i = int(bad[0])
            b = int(owner[i])
            raise ValueError(
                f"{where}: {self.buffer_label(b)}: access {i - ptr[b]} at op {self.access_op[i]} is outside "
                f"its live range [{self.start[b]}, {self.end[b]}]"
            )
        bad = np.flatnonzero(self.access_bytes < 0)
        if bad.size:
            i = int(bad[0])
            b = int(owner[i])
            raise ValueError(f"{where}: {self.buffer_label(b)}: access {i - ptr[b]}: field 'bytes' = {self.access_bytes[i]} must be >= 0")
        bad = np.flatnonzero((self.access_bytes + MAX_ACCESS_REPEAT - 1) // MAX_ACCESS_REPEAT > self.size[owner])
        if bad.size:
            i = int(bad[0])
            b = int(owner[i])
            raise ValueError(f"{where}: {self.buffer_label(b)}: access {i - ptr[b]}: field 'bytes' = "
                             f"{self.access_bytes[i]} is more than {MAX_ACCESS_REPEAT} times the buffer's size "
                             f"{self.size[b]} (an access moves at most the buffer once per run of its op)")
        # Summed in float64 so the check itself cannot overflow (exact enough against 2**60).
        for total, field_name in ((self.size.sum(dtype=np.float64), "size"),
                                  (self.access_bytes.sum(dtype=np.float64), "access bytes")):
            if total > MAX_TOTAL_BYTES:
                raise ValueError(f"{where}: the {field_name} fields sum to {total:.4g} bytes, more than the bound "
                                 f"{MAX_TOTAL_BYTES} (2**60) that keeps the simulator's sums inside int64")
        if not (np.any(self.flops > 0) or np.any(self.transcendentals > 0) or np.any(self.access_bytes > 0)):
            raise ValueError(f"{where}: the program does no work (every op has 0 flops and every access 0 bytes), "
                             "so its time is 0 and no mapping can change it")
