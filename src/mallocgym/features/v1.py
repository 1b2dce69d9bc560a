"""MallocGame-v1's observation and action table, as numba kernels over the v1 simulator state.

:func:`options` lists what is legal for the current segment (the action table: kind, offset,
prefetch start of every action) and :func:`observe` writes the observation arrays. Feature
lists (``*_FEATURES``) are documented in the env's docstring; every entry lies in ``[0, 1]``.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from ..sim import msa, v1
from ..sim.v1 import (CAPACITY, COPY_BYTES, FAST, N_CHUNKS, PREFETCH_SEG, SLOW, SLOW_BW, STALL, TIME,
                 TIME_ALL_SLOW, interval_time, segment_options)

__all__ = ["BUFFER_FEATURES", "SEGMENT_FEATURES", "ACTION_FEATURES", "NEXT_FEATURES", "PROGRESS_FEATURES", "Table",
           "Obs",
           "make_table", "copy_table", "make_obs", "options", "observe", "advance_forced", "play", "advance", "step"]

BUFFER_FEATURES = (
    "size / fast-memory capacity (clipped at 1)",
    "size / peak live bytes",
    "live-range start / T",
    "live-range end / T",
    "live-range length / T",
    "1 if a program input (no write: starts in slow memory)",
    "1 if a program output (live at the last op: must end in slow memory)",
    "segments of the buffer / 16 (clipped at 1)",
    "1 if larger than the fast memory (only SLOW is legal)",
    "1 if the value has a slow copy before this segment could be prefetched",
)
SEGMENT_FEATURES = (
    "index of this segment in its buffer / segments",
    "use op / T",
    "op the segment starts after / T",
    "segment length in ops / T",
    "all-slow time of the ops strictly inside the segment / all-slow program time (x 10, clipped)",
    "copy time (size / slow_bw) / all-slow time inside the segment (/ 4, clipped)",
    "1 if the previous segment was SLOW",
    "1 if the previous segment was FAST (kept or produced)",
    "1 if the previous segment was PREFETCH",
)
ACTION_FEATURES = (
    "1 if legal",
    "offset / capacity (FAST, PREFETCH)",
    "first op of the chunk / T (FAST, PREFETCH)",
    "ops the chunk is held / T",
    "all-slow time between the prefetch start and the use / copy time (/ 4, clipped; PREFETCH)",
    "bytes of copies in flight over the prefetch start / capacity (clipped; PREFETCH)",
)
NEXT_FEATURES = (
    "present (1) or padding (0)",
    "size / capacity (clipped at 1)",
    "live-range start / T",
    "live-range end / T",
    "1 if a program input",
    "1 if a program output",
    "segments of the buffer / 16 (clipped at 1)",
)
PROGRESS_FEATURES = (
    "segments decided / segments",
    "program time / all-slow time",
    "stall time / all-slow time (x 10, clipped)",
    "bytes copied / total buffer bytes (clipped)",
    "fast-memory chunks opened / segments",
    "1 - program time / all-slow time (the return so far)",
)

Table = namedtuple("Table", [
    "kind",      # int64[n_actions] SLOW / FAST / PREFETCH_SEG, -1 = illegal
    "off",       # int64[n_actions]
    "pstart",    # int64[n_actions]
    "fast_off",  # int64[K] scratch
    "starts",    # int64[J]
    "pf_count",  # int64[J]
    "pf_off",    # int64[J, K]
    "ids",       # int64[S + 1] scratch
    "msa",       # MsaStatic: XLA's MSA (cost picker, the scenario's ratios), whose choice the table offers
    "msa_out",   # int64[6] MSA's choice and alternatives at the segment (mallocgym.sim.msa.decide)
    "msa_action",  # int64[1] the action that plays MSA's choice: 0 (SLOW), 1 (FAST) or 1 + K (PREFETCH)
    "pick",      # int64[T + 2] scratch: the picker's start times
])

Obs = namedtuple("Obs", ["buffer", "segment", "actions", "next", "memory", "progress", "action_mask"])


def make_table(st: v1.Static1) -> Table:
    """The action table of a game on ``st`` (``K`` offsets and ``J`` starts as compiled)."""
    k, j = int(st.iparams[v1.N_CAND]), int(st.iparams[v1.N_STARTS])
    n_actions = 1 + k + j * k
    return Table(np.full(n_actions, -1, np.int64), np.full(n_actions, -1, np.int64), np.full(n_actions, -1, np.int64),
                 np.zeros(k, np.int64), np.zeros(j, np.int64), np.zeros(j, np.int64), np.zeros((j, k), np.int64),
                 np.zeros(st.seg_use.shape[0] + 1, np.int64), msa.msa_static(st), np.full(6, -1, np.int64),
                 np.zeros(1, np.int64), np.zeros(st.compute_time.shape[0] + 2, np.int64))


def copy_table(table: Table) -> Table:
    """A copy of ``table`` (its arrays; the static MSA settings are shared)."""
    return Table(*(a if name == "msa" else a.copy() for name, a in zip(Table._fields, table)))


def make_obs(k: int, j: int, a_bins: int, t_bins: int, n_next: int = 8) -> Obs:
    n_actions = 1 + k + j * k
    return Obs(np.zeros(len(BUFFER_FEATURES), np.float32), np.zeros(len(SEGMENT_FEATURES), np.float32),
               np.zeros((n_actions, len(ACTION_FEATURES)), np.float32),
               np.zeros((n_next, len(NEXT_FEATURES)), np.float32), np.zeros((2, a_bins, t_bins), np.float32),
               np.zeros(len(PROGRESS_FEATURES), np.float32), np.zeros(n_actions, np.int8))


@njit(cache=True)
def options(st, state, s, table):
    """Fill the action table for segment ``s``; return the number of legal actions besides SLOW.

    XLA's own choice (:func:`mallocgym.sim.msa.decide`) is always one action: ``1`` where MSA
    produces or keeps the value in fast memory, ``1 + K`` (the first start, the first offset)
    where it prefetches, else ``0``; ``table.msa_action[0]`` names it. The first FAST offset and
    the first start and its first offset are MSA's alternatives even where it chooses otherwise.
    """
    k = table.fast_off.shape[0]
    j_max = table.starts.shape[0]
    table.kind[:] = -1
    table.off[:] = -1
    table.pstart[:] = -1
    table.kind[0] = SLOW
    mo = table.msa_out
    msa.decide(st, state, table.msa, table.ids, s, table.pick, mo)
    n_fast, n_starts = segment_options(st, state, s, table.fast_off, table.starts, table.pf_count, table.pf_off,
                                       table.ids, mo[3], mo[4], mo[5])
    table.msa_action[0] = 0 if mo[0] == SLOW else (1 if mo[0] == FAST else 1 + k)
    legal = 0
    for i in range(n_fast):
        table.kind[1 + i] = FAST
        table.off[1 + i] = table.fast_off[i]
        legal += 1
    for j in range(n_starts):
        if j >= j_max:
            break
        for i in range(table.pf_count[j]):
            a = 1 + k + j * k + i
            table.kind[a] = PREFETCH_SEG
            table.off[a] = table.pf_off[j, i]
            table.pstart[a] = table.starts[j]
            legal += 1
    return legal


@njit(cache=True, inline="always")
def _clip(x):
    return 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)


@njit(cache=True)
def _in_flight(st, state, table, k):
    """For each prefetch start ``p`` of the table: the bytes of copies (prefetches and evictions)
    issued at or before op ``p`` and done after it, / capacity (clipped); the state's Fenwick
    tree of copy bytes answers each (:func:`mallocgym.sim.v1.flight_bytes`)."""
    n_st = table.starts.shape[0]
    flight = np.zeros(n_st)
    cap = float(st.iparams[CAPACITY])
    for j in range(n_st):
        if table.kind[1 + k + j * k] >= 0:
            flight[j] = _clip(float(v1.flight_bytes(state.cp_flight, table.starts[j])) / cap)
    return flight


@njit(cache=True)
def _observe_next(st, state, b, out, cap, t_den):
    """The next ``L`` buffers in decision order after ``b`` (rows of ``out``)."""
    n = st.seg_use.shape[0]
    pos = state.counters[0]
    row = 0
    last = b
    while pos < n and row < out.shape[0]:
        nb = st.seg_buf[st.order[pos]]
        pos += 1
        if nb == last:
            continue
        last = nb
        out[row, 0] = 1.0
        out[row, 1] = _clip(st.size[nb] / cap)
        out[row, 2] = st.start[nb] / t_den
        out[row, 3] = st.end[nb] / t_den
        out[row, 4] = 1.0 if st.def_op[nb] < 0 else 0.0
        out[row, 5] = float(st.is_output[nb])
        out[row, 6] = _clip((st.seg_ptr[nb + 1] - st.seg_ptr[nb]) / 16.0)
        row += 1


@njit(cache=True)
def observe(st, state, s, table, obs, peak_live, total_bytes):
    """Write the observation of segment ``s`` (``-1``: the episode is over) into ``obs``."""
    n_ops = st.compute_time.shape[0]
    t_den = float(n_ops)
    cap = float(st.iparams[CAPACITY])
    slow_all = st.params[TIME_ALL_SLOW]
    n_seg = st.seg_use.shape[0]
    obs.buffer[:] = 0.0
    obs.segment[:] = 0.0
    obs.next[:, :] = 0.0
    obs.actions[:, :] = 0.0
    obs.action_mask[:] = 0
    # memory image, channel 0: fast-memory occupancy over (address, time) bins (kept by the rules)
    a_bins, t_bins = obs.memory.shape[1], obs.memory.shape[2]
    if state.image.shape[0] != a_bins or state.image.shape[1] != t_bins:
        raise ValueError("the state keeps no occupancy image of the observation's size (new_state(st, memory_bins))")
    bin_ops = n_ops / t_bins
    inv_full = 1.0 / (float(n_ops) * cap)
    for ab in range(a_bins):
        for tb in range(t_bins):
            obs.memory[0, ab, tb] = min(state.image[ab, tb] * inv_full, 1.0)
    obs.memory[1, :, :] = 0.0
    # progress
    pos = state.counters[0]
    time = state.totals[TIME]
    obs.progress[0] = pos / max(n_seg, 1)
    obs.progress[1] = _clip(time / slow_all)
    obs.progress[2] = _clip(10.0 * state.totals[STALL] / slow_all)
    obs.progress[3] = _clip(state.totals[COPY_BYTES] / total_bytes)
    obs.progress[4] = _clip(state.counters[N_CHUNKS] / max(n_seg, 1))
    obs.progress[5] = _clip(1.0 - time / slow_all)
    if s < 0:
        obs.action_mask[0] = 1
        obs.actions[0, 0] = 1.0
        return
    b = st.seg_buf[s]
    _observe_next(st, state, b, obs.next, cap, t_den)
    size = float(st.size[b])
    first = st.seg_ptr[b]
    n_b = st.seg_ptr[b + 1] - first
    u = st.seg_use[s]
    prev = st.seg_prev[s]
    obs.buffer[0] = _clip(size / cap)
    obs.buffer[1] = _clip(size / peak_live)
    obs.buffer[2] = st.start[b] / t_den
    obs.buffer[3] = st.end[b] / t_den
    obs.buffer[4] = (st.end[b] - st.start[b] + 1) / t_den
    obs.buffer[5] = 1.0 if st.def_op[b] < 0 else 0.0
    obs.buffer[6] = float(st.is_output[b])
    obs.buffer[7] = _clip(n_b / 16.0)
    obs.buffer[8] = 1.0 if st.size[b] > st.iparams[CAPACITY] else 0.0
    has_slow = st.def_op[b] < 0 or state.seg_kind[first] != FAST or state.ev_done[b] >= 0
    obs.buffer[9] = 1.0 if has_slow else 0.0
    inside = interval_time(st, prev, u)
    copy = size / st.params[SLOW_BW]
    obs.segment[0] = (s - first) / n_b
    obs.segment[1] = u / t_den
    obs.segment[2] = max(prev, 0) / t_den
    obs.segment[3] = (u - prev) / t_den
    obs.segment[4] = _clip(10.0 * inside / slow_all)
    obs.segment[5] = _clip(copy / inside / 4.0) if inside > 0 else 1.0
    if s > first:
        pk = state.seg_kind[s - 1]
        obs.segment[6] = 1.0 if pk == SLOW else 0.0
        obs.segment[7] = 1.0 if pk == FAST else 0.0
        obs.segment[8] = 1.0 if pk == PREFETCH_SEG else 0.0
    # channel 1: the current segment's window
    for tb in range(int(max(prev, 0) / bin_ops), min(t_bins, int((u + 1) / bin_ops) + 1)):
        for ab in range(a_bins):
            obs.memory[1, ab, tb] = 1.0
    # actions (copies in flight: once per prefetch start, not per action)
    k = table.fast_off.shape[0]
    flight = _in_flight(st, state, table, k)
    for a in range(table.kind.shape[0]):
        kind = table.kind[a]
        if kind < 0:
            continue
        obs.action_mask[a] = 1
        obs.actions[a, 0] = 1.0
        if kind == SLOW:
            continue
        obs.actions[a, 1] = table.off[a] / cap
        lo = st.def_op[b] if kind == FAST and s == first else (prev + 1 if kind == FAST else table.pstart[a] + 1)
        obs.actions[a, 2] = lo / t_den
        obs.actions[a, 3] = (u - lo + 1) / t_den
        if kind == PREFETCH_SEG:
            p = table.pstart[a]
            obs.actions[a, 4] = _clip(interval_time(st, p, u) / copy / 4.0) if copy > 0 else 1.0
            obs.actions[a, 5] = flight[(a - 1 - k) // k]


@njit(cache=True)
def advance_forced(st, state, table):
    """Play SLOW at every forced position (only SLOW legal) from the current one; return the next
    segment with a real choice (its action table filled), or -1 at the end."""
    n = st.seg_use.shape[0]
    while state.counters[v1.POS] < n:
        s = st.order[state.counters[v1.POS]]
        if options(st, state, s, table) > 0:
            return s
        v1.apply(st, state, s, SLOW, -1, -1)
        state.counters[v1.POS] += 1
        state.counters[v1.FORCED] += 1
    return -1


@njit(cache=True)
def play(st, state, table, s, kind, off, pstart):
    """Allocate segment ``s`` as chosen, then :func:`advance_forced`; return the next segment
    with a choice (-1 at the end)."""
    v1.apply(st, state, s, kind, off, pstart)
    state.counters[v1.POS] += 1
    state.counters[v1.CHOSEN] += 1
    return advance_forced(st, state, table)


@njit(cache=True)
def advance(st, state, table, obs, peak_live, total_bytes):
    """:func:`advance_forced`, then the observation of the next real choice. Returns that
    segment, or -1 at the end."""
    s = advance_forced(st, state, table)
    observe(st, state, s, table, obs, peak_live, total_bytes)
    return s


@njit(cache=True)
def step(st, state, table, obs, s, kind, off, pstart, peak_live, total_bytes):
    """The env's step in one kernel call: :func:`play`, then the observation. Returns the next
    segment with a choice (-1 at the end)."""
    nxt = play(st, state, table, s, kind, off, pstart)
    observe(st, state, nxt, table, obs, peak_live, total_bytes)
    return nxt
