"""Numba kernels that turn a simulator position into MallocGame's observation.

Every feature is scaled into ``[0, 1]``; the tables in the env docstring and in
``docs/game.md`` list them. One kernel call per env step fills every observation array.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from .. import sim
from ..sim import CAPACITY, COMPUTE_BOUND, PLACED, PLACED_BYTES, STEP, TIME, TIME_ALL_SLOW

BUFFER_FEATURES = (
    "size / capacity",
    "log2(size + 1) / log2(capacity + 1)",
    "start / T",
    "(end + 1) / T",
    "duration / T",
    "benefit now / largest single-buffer benefit",
    "benefit alone / largest single-buffer benefit",
    "boundedness (benefit / sqrt(size)) / largest boundedness",
    "accesses / most accesses of any buffer",
    "largest free gap over the live range / capacity",
    "free bytes over the live range / capacity",
    "candidates / K",
)
CANDIDATE_FEATURES = (
    "present (1) or padding (0)",
    "offset / capacity",
    "(offset + size) / capacity",
    "gap length / capacity",
    "(gap length - size) / capacity  (slack)",
    "size / gap length  (fit tightness)",
    "touches the gap's bottom (offset == gap start)",
    "touches the gap's top (offset + size == gap end)",
    "rank / K  (0 = best fit)",
)
NEXT_FEATURES = (
    "present (1) or padding (0)",
    "size / capacity",
    "start / T",
    "(end + 1) / T",
    "duration / T",
    "benefit alone / largest single-buffer benefit",
    "boundedness / largest boundedness",
)
PROGRESS_FEATURES = (
    "buffers decided / N",
    "buffers placed / N",
    "placed bytes / total bytes",
    "return so far: 1 - time / time_all_slow",
    "capacity / peak live bytes (clipped to 1)",
    "compute-bound ops / T",
)

Norm = namedtuple("Norm", [
    "boundedness",   # float64[N] benefit / sqrt(size)
    "n_accesses",    # int64[N]
    "scale",         # float64[5]: largest benefit, largest boundedness, most accesses,
                     #             peak live bytes, total bytes
])

Scratch = namedtuple("Scratch", ["ids", "gap_lo", "gap_hi", "cand_off", "cand_lo", "cand_hi"])

Obs = namedtuple("Obs", ["buffer", "candidates", "next", "memory", "progress", "action_mask"])


def make_norm(st: sim.Static, peak_live_bytes: int) -> Norm:
    boundedness = st.benefit / np.sqrt(st.size)
    n_accesses = np.diff(st.access_ptr)
    scale = np.array([max(st.benefit.max(), 1e-300), max(boundedness.max(), 1e-300),
                      max(n_accesses.max(), 1), max(peak_live_bytes, 1), float(st.size.sum())])
    return Norm(boundedness, n_accesses, scale)


def make_scratch(n: int, k: int) -> Scratch:
    return Scratch(np.empty(n, np.int64), np.empty(n + 1, np.int64), np.empty(n + 1, np.int64),
                   np.zeros(k, np.int64), np.zeros(k, np.int64), np.zeros(k, np.int64))


def make_obs(k: int, n_next: int, address_bins: int, time_bins: int) -> Obs:
    return Obs(
        np.zeros(len(BUFFER_FEATURES), np.float32),
        np.zeros((k, len(CANDIDATE_FEATURES)), np.float32),
        np.zeros((n_next, len(NEXT_FEATURES)), np.float32),
        np.zeros((2, address_bins, time_bins), np.float32),
        np.zeros(len(PROGRESS_FEATURES), np.float32),
        np.zeros(k + 1, np.int8),
    )


@njit(cache=True, inline="always")
def _unit(x):
    return 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)


@njit(cache=True)
def next_row(row, st, norm, q, cap_f, t_f):
    """Fill one ``"next"`` row (:data:`NEXT_FEATURES`) for buffer ``q``."""
    row[0] = 1.0
    row[1] = _unit(st.size[q] / cap_f)
    row[2] = _unit(st.start[q] / t_f)
    row[3] = _unit((st.end[q] + 1) / t_f)
    row[4] = _unit((st.end[q] - st.start[q] + 1) / t_f)
    row[5] = _unit(st.benefit[q] / norm.scale[0])
    row[6] = _unit(norm.boundedness[q] / norm.scale[1])


@njit(cache=True)
def buffer_row(f, st, norm, b, cap_f, t_f, benefit_now, max_gap, free, filled):
    """Fill the ``"buffer"`` row (:data:`BUFFER_FEATURES`) for buffer ``b``: ``benefit_now`` is
    its marginal benefit already scaled, ``max_gap`` and ``free`` the free bytes over its live
    range, ``filled`` the share of the candidate rows in use."""
    size = st.size[b]
    f[0] = _unit(size / cap_f)
    f[1] = _unit(np.log2(size + 1.0) / np.log2(cap_f + 1.0))
    f[2] = _unit(st.start[b] / t_f)
    f[3] = _unit((st.end[b] + 1) / t_f)
    f[4] = _unit((st.end[b] - st.start[b] + 1) / t_f)
    f[5] = benefit_now
    f[6] = _unit(st.benefit[b] / norm.scale[0])
    f[7] = _unit(norm.boundedness[b] / norm.scale[1])
    f[8] = _unit(norm.n_accesses[b] / norm.scale[2])
    f[9] = _unit(max_gap / cap_f)
    f[10] = _unit(free / cap_f)
    f[11] = _unit(filled)


@njit(cache=True)
def _bin_overlap(lo, hi, n_bins, total, out_first, out_frac):
    """Fractions of ``[lo, hi)`` (in units out of ``total``) covering each of ``n_bins`` equal
    bins; writes the first bin index and the per-bin fractions, returns the bin count."""
    width = total / n_bins
    first = int(lo / width)
    last = int(np.ceil(hi / width)) - 1
    if last >= n_bins:
        last = n_bins - 1
    if first > last:
        first = last
    out_first[0] = first
    for k in range(first, last + 1):
        a = max(lo, k * width)
        b = min(hi, (k + 1) * width)
        out_frac[k - first] = max(b - a, 0.0) / width
    return last - first + 1


@njit(cache=True)
def paint(st, image, b, offset):
    """Add buffer ``b`` at ``offset`` to the occupancy image ``[address_bins, time_bins]``."""
    a_bins, t_bins = image.shape
    n_ops = st.compute_time.shape[0]
    capacity = st.iparams[CAPACITY]
    first = np.zeros(1, np.int64)
    t_frac = np.zeros(t_bins, np.float64)
    a_frac = np.zeros(a_bins, np.float64)
    nt = _bin_overlap(float(st.start[b]), float(st.end[b] + 1), t_bins, float(n_ops), first, t_frac)
    t0 = first[0]
    na = _bin_overlap(float(offset), float(offset + st.size[b]), a_bins, float(capacity), first, a_frac)
    a0 = first[0]
    for i in range(na):
        for j in range(nt):
            v = image[a0 + i, t0 + j] + a_frac[i] * t_frac[j]
            image[a0 + i, t0 + j] = v if v < 1.0 else 1.0


@njit(cache=True)
def paint_placed(st, state, image):
    """Set ``image`` to the occupancy image of ``state``: every buffer decided so far and placed
    in fast memory painted at its offset, in decision order (what the env's steps paint)."""
    image[:] = 0.0
    for i in range(state.counters[STEP]):
        b = st.order[i]
        if state.offsets[b] >= 0:
            paint(st, image, b, state.offsets[b])


@njit(cache=True)
def observe(st, state, norm, scratch, image, obs, k):
    """Fill ``obs`` for the buffer about to be decided; return the number of candidates."""
    n = st.size.shape[0]
    n_ops = st.compute_time.shape[0]
    capacity = st.iparams[CAPACITY]
    step = state.counters[STEP]
    cap_f = float(capacity)
    t_f = float(n_ops)
    obs.buffer[:] = 0.0
    obs.candidates[:, :] = 0.0
    obs.next[:, :] = 0.0
    obs.action_mask[:] = 0
    obs.action_mask[k] = 1
    obs.memory[0, :, :] = image
    obs.memory[1, :, :] = 0.0
    count = 0
    if step < n:
        b = st.order[step]
        size = st.size[b]
        count, max_gap, free = sim.find_candidates(st, state, b, k, scratch.ids, scratch.gap_lo,
                                                   scratch.gap_hi, scratch.cand_off, scratch.cand_lo,
                                                   scratch.cand_hi)
        buffer_row(obs.buffer, st, norm, b, cap_f, t_f, _unit(sim.marginal_benefit(st, state, b) / norm.scale[0]),
                   max_gap, free, count / k)
        for i in range(count):
            off = scratch.cand_off[i]
            glo, ghi = scratch.cand_lo[i], scratch.cand_hi[i]
            c = obs.candidates[i]
            c[0] = 1.0
            c[1] = _unit(off / cap_f)
            c[2] = _unit((off + size) / cap_f)
            c[3] = _unit((ghi - glo) / cap_f)
            c[4] = _unit((ghi - glo - size) / cap_f)
            c[5] = _unit(size / (ghi - glo))
            c[6] = 1.0 if off == glo else 0.0
            c[7] = 1.0 if off + size == ghi else 0.0
            c[8] = i / k
            obs.action_mask[i] = 1
        first = np.zeros(1, np.int64)
        t_bins = obs.memory.shape[2]
        frac = np.zeros(t_bins, np.float64)
        nt = _bin_overlap(float(st.start[b]), float(st.end[b] + 1), t_bins, t_f, first, frac)
        for j in range(nt):
            obs.memory[1, :, first[0] + j] = 1.0
        for i in range(obs.next.shape[0]):
            if step + 1 + i >= n:
                break
            next_row(obs.next[i], st, norm, st.order[step + 1 + i], cap_f, t_f)
    time_all_slow = st.params[TIME_ALL_SLOW]
    p = obs.progress
    p[0] = step / n
    p[1] = state.counters[PLACED] / n
    p[2] = _unit(state.totals[PLACED_BYTES] / norm.scale[4])
    p[3] = _unit(1.0 - state.totals[TIME] / time_all_slow)
    p[4] = _unit(cap_f / norm.scale[3])
    p[5] = _unit(state.counters[COMPUTE_BOUND] / t_f)
    return count


@njit(cache=True)
def step(st, state, norm, scratch, image, obs, k, action):
    """Decide the current buffer: ``action < count`` places it at that candidate, anything else
    leaves it in slow memory. Then observe the next buffer. Returns ``(time delta, count)``."""
    b = st.order[state.counters[STEP]]
    before = state.totals[TIME]
    if action < k and obs.action_mask[action] == 1:
        off = scratch.cand_off[action]
        sim.place(st, state, b, off)
        paint(st, image, b, off)
    state.counters[STEP] += 1
    count = observe(st, state, norm, scratch, image, obs, k)
    return state.totals[TIME] - before, count
