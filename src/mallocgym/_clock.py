"""A monotonic clock that numba kernels can read, so that a long kernel can stop at a deadline.

numba has no ``time`` module in nopython mode; :func:`clock_ns` is an intrinsic that calls the C
library's ``clock_gettime(CLOCK_MONOTONIC)`` (a few tens of nanoseconds through the vDSO) and is
safe to cache (the symbol is resolved by name when the cached kernel loads). Python code gets
the same clock from :func:`now_ns`; deadlines are absolute nanoseconds on it (:func:`deadline_after`),
:data:`NO_DEADLINE` when there is none.

On a platform without ``clock_gettime`` (Windows) the kernels' clock reads 0, so a kernel never
stops at a deadline by itself there; the searches still check their budget between kernels.
"""

from __future__ import annotations

import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["NATIVE", "NO_DEADLINE", "CHECK_EVERY", "clock_ns", "now_ns", "deadline_after", "past"]

NATIVE = sys.platform.startswith("linux") or sys.platform == "darwin"
"""Whether :func:`clock_ns` reads a real clock here (``clock_gettime``)."""

_CLOCK_MONOTONIC = 6 if sys.platform == "darwin" else 1
NO_DEADLINE = np.iinfo(np.int64).max
"""The deadline of a kernel with no time limit."""

CHECK_EVERY = 8
"""Decisions between two reads of the clock in a completion with a deadline (a read costs well
under a decision)."""


@intrinsic
def clock_ns(typingctx):
    """Nanoseconds on the monotonic clock (0 where :data:`NATIVE` is false)."""

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        if not NATIVE:
            return ir.Constant(i64, 0)
        timespec = ir.LiteralStructType([i64, i64])  # struct timespec on 64-bit Linux and macOS
        ts = cgutils.alloca_once(builder, timespec)
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), timespec.as_pointer()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
        builder.call(fn, [ir.Constant(ir.IntType(32), _CLOCK_MONOTONIC), ts])
        sec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nsec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(sec, ir.Constant(i64, 1_000_000_000)), nsec)

    return types.int64(), codegen


@njit(cache=True)
def _now_ns():
    return clock_ns()


@njit(cache=True, inline="always")
def past(deadline):
    """Whether ``deadline`` (absolute nanoseconds, :func:`clock_ns`'s clock) has passed."""
    return deadline != NO_DEADLINE and clock_ns() >= deadline


def now_ns() -> int:
    """:func:`clock_ns` from Python."""
    return int(_now_ns())


def deadline_after(seconds: float | None) -> int:
    """The absolute deadline ``seconds`` from now (:data:`NO_DEADLINE` for None, or where the
    kernels have no clock)."""
    if seconds is None or not NATIVE:
        return NO_DEADLINE
    return now_ns() + max(0, int(seconds * 1e9))
