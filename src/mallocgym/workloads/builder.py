"""Build a :class:`Workload` op by op, the way a compiler's schedule reads.

    p = ProgramBuilder("tiny")
    x = p.buffer("x", 4096)
    w = p.buffer("w", 65536, parameter=True)
    y = p.buffer("y", 4096)
    p.op("matmul", flops=2 * 32 * 64 * 64, reads=[x, w], writes=[y])
    workload = p.build()

A buffer is live from the op that first touches it (op 0 for parameters) to the op that last
touches it (the last op for outputs). Each read or write moves the buffer's size in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .core import Workload

__all__ = ["ProgramBuilder"]


@dataclass
class _Buffer:
    name: str
    size: int
    parameter: bool
    output: bool
    accesses: list = field(default_factory=list)


class ProgramBuilder:
    """Records ops in schedule order and the buffers they read and write."""

    def __init__(self, name: str):
        self.name = name
        self._ops: list[tuple[str, float, float]] = []
        self._buffers: list[_Buffer] = []

    def buffer(self, name: str, size: int, *, parameter: bool = False, output: bool = False) -> int:
        """Declare a buffer; ``parameter`` ones are live from op 0, ``output`` ones to the end."""
        if size <= 0:
            raise ValueError(f"{self.name}: buffer {name!r}: size must be > 0, got {size}")
        self._buffers.append(_Buffer(name, int(size), parameter, output))
        return len(self._buffers) - 1

    def op(self, name: str, *, flops: float = 0.0, transcendentals: float = 0.0,
           reads: tuple | list = (), writes: tuple | list = ()) -> int:
        """Append an op that reads and writes whole buffers; return its index."""
        t = len(self._ops)
        self._ops.append((name, float(flops), float(transcendentals)))
        for b in writes:
            self._buffers[b].accesses.append((t, self._buffers[b].size, True))
        for b in reads:
            self._buffers[b].accesses.append((t, self._buffers[b].size, False))
        return t

    def mark_output(self, b: int) -> None:
        """Make buffer ``b`` a program output: live to the last op."""
        self._buffers[b].output = True

    @property
    def num_ops(self) -> int:
        return len(self._ops)

    @property
    def num_buffers(self) -> int:
        """Buffers some op touches so far (those :meth:`build` keeps)."""
        return sum(1 for b in self._buffers if b.accesses)

    def build(self, **kwargs) -> Workload:
        """The workload; buffers no op touches are dropped."""
        last_op = len(self._ops) - 1
        kept = [b for b in self._buffers if b.accesses]
        starts = [0 if b.parameter else min(a[0] for a in b.accesses) for b in kept]
        ends = [last_op if b.output else max(a[0] for a in b.accesses) for b in kept]
        return Workload.from_buffers(
            self.name,
            flops=[o[1] for o in self._ops],
            size=[b.size for b in kept],
            start=starts,
            end=ends,
            accesses=[b.accesses for b in kept],
            transcendentals=[o[2] for o in self._ops],
            buffer_names=tuple(b.name for b in kept),
            op_names=tuple(o[0] for o in self._ops),
            **kwargs,
        )
