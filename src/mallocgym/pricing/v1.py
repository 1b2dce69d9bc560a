"""``evaluate_v1(workload, mapping, hardware)``: validate and price a MallocGame-v1 mapping.

A v1 mapping is a JSON object (``docs/game-v1.md``, "Mapping format")::

    {"format": "mallocgym-v1-mapping", "version": 1,
     "allocations": [{"buffer": 3, "segment": 0, "use_op": 12, "kind": "fast", "offset": 1024},
                     {"buffer": 3, "segment": 1, "use_op": 20, "kind": "prefetch", "offset": 0,
                      "prefetch_after": 15}, ...],
     "evictions": [{"buffer": 3, "done_before": 14}, ...]}

``segment`` is the index of the segment in its buffer (0 = the one ending at the first use);
``use_op`` is optional (checked when given). A segment not listed reads slow memory. Validation
does not replay the env: it checks the allocations as a set (each legal given its buffer's
other allocations, chunks disjoint in time and address, inputs never produced fast, a value
produced fast evicted exactly when a slow copy is needed, outputs ending slow) and raises one
``ValueError`` naming the first bad entry. Time is MSA's runtime model
(:mod:`mallocgym.pricing.runtime`), the same the env uses, so a mapping the env leaves prices
exactly as the env did.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from .._validate import (MAX_BYTES, check_header, check_keys, clip, field_int, field_list, nearest_hint,
                         read_json)
from ..hardware import Hardware
from ..scenarios import resolve_hardware
from ..sim import v1
from ..workloads import Workload
from . import runtime
from .v0 import Evaluation

__all__ = ["evaluate_v1", "chunks_v1", "EvaluationV1", "load_mapping", "save_mapping", "mapping_from_state", "MAPPING_FORMAT"]

MAPPING_FORMAT = "mallocgym-v1-mapping"
_KINDS = {"slow": v1.SLOW, "fast": v1.FAST, "prefetch": v1.PREFETCH_SEG}


@dataclass(frozen=True)
class EvaluationV1(Evaluation):
    """The cost of one v1 mapping: v0's fields (:class:`mallocgym.Evaluation`) plus
    ``stall_time`` (seconds the program waits for late copies), ``copy_bytes`` (bytes moved by
    prefetches and evictions), ``prefetches`` and ``evictions`` (counts).
    ``placed_bytes_fraction`` counts a buffer placed if any of its segments is in fast memory."""

    stall_time: float = 0.0
    copy_bytes: float = 0.0
    prefetches: int = 0
    evictions: int = 0


# ------------------------------------------------------------------------------ mapping <-> state
def mapping_from_state(workload: Workload, st: v1.Static1, state: v1.State1) -> dict:
    """The v1 mapping of a (finished or partial) game: decided segments and evictions."""
    kind = np.asarray(state.seg_kind)
    decided = np.flatnonzero(kind != v1.UNDECIDED)
    buffers = st.seg_buf[decided]
    rows = zip(buffers.tolist(), (decided - st.seg_ptr[buffers]).tolist(), st.seg_use[decided].tolist(),
               kind[decided].tolist(), state.seg_off[decided].tolist(), state.seg_pstart[decided].tolist())
    allocations = [
        {"buffer": b, "segment": k, "use_op": u, "kind": "slow"} if kd == v1.SLOW
        else {"buffer": b, "segment": k, "use_op": u, "kind": "fast", "offset": off} if kd == v1.FAST
        else {"buffer": b, "segment": k, "use_op": u, "kind": "prefetch", "offset": off, "prefetch_after": p}
        for b, k, u, kd, off, p in rows]
    evicted = np.flatnonzero(state.ev_done >= 0)
    evictions = [{"buffer": b, "done_before": e} for b, e in zip(evicted.tolist(), state.ev_done[evicted].tolist())]
    return {"format": MAPPING_FORMAT, "version": 1, "allocations": allocations, "evictions": evictions}


def save_mapping(mapping: dict, path: str | os.PathLike) -> Path:
    """Write a v1 mapping as JSON, atomically."""
    from .._files import atomic_write

    with atomic_write(path, "w") as handle:
        json.dump(mapping, handle, indent=1)
        handle.write("\n")
    return Path(path)


def load_mapping(path: str | os.PathLike) -> dict:
    """Read a v1 mapping JSON file (strict JSON; the structure is checked by :func:`evaluate_v1`)."""
    return read_json(Path(path), what="mapping file")


# ------------------------------------------------------------------------------ validation
_TOP_KEYS = ("format", "version", "allocations", "evictions")
_ALLOCATION_KEYS = ("buffer", "segment", "use_op", "kind", "offset", "prefetch_after")
_EVICTION_KEYS = ("buffer", "done_before")


def _entry(entry, where: str, known) -> dict:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object, got {clip(entry)}")
    check_keys(entry, known, where)
    return entry


def _int_field(entry: dict, key: str, where: str, low: int, high: int) -> int:
    if key not in entry:
        raise ValueError(f"{where}: missing field {key!r}")
    return field_int(entry[key], where, key, low=low, high=high)


def _buffer_of(entry: dict, where: str, n_buffers: int) -> int:
    """The ``buffer`` field of a mapping entry, checked."""
    if "buffer" in entry and type(entry["buffer"]) is int and not 0 <= entry["buffer"] < n_buffers:
        raise ValueError(f"{where}: unknown buffer {clip(entry['buffer'])} (field 'buffer'; the workload has "
                         f"{n_buffers})")
    return _int_field(entry, "buffer", where, 0, n_buffers - 1)


def _parse(mapping, st: v1.Static1, n_buffers: int):
    """Per segment: kind, offset, prefetch start; per buffer: eviction done op (-1: none).

    Strict: unknown fields, wrong JSON types and integers out of range are errors, and no value
    read from the mapping is ever taken for the ``-1`` meaning "none" of these arrays."""
    check_header(mapping, "v1 mapping", MAPPING_FORMAT, 1)
    check_keys(mapping, _TOP_KEYS, "v1 mapping")
    for key in ("allocations", "evictions"):
        field_list(mapping.get(key, []), "v1 mapping", key, "objects")
    n_seg = st.seg_use.shape[0]
    n_ops = st.compute_time.shape[0]
    kind = np.full(n_seg, v1.SLOW, np.int64)
    off = np.full(n_seg, -1, np.int64)
    pstart = np.full(n_seg, -1, np.int64)
    seen = np.zeros(n_seg, bool)
    for i, entry in enumerate(mapping.get("allocations", [])):
        where = f"v1 mapping: allocation {i}"
        entry = _entry(entry, where, _ALLOCATION_KEYS)
        b = _buffer_of(entry, where, n_buffers)
        count = int(st.seg_ptr[b + 1] - st.seg_ptr[b])
        if "segment" in entry and type(entry["segment"]) is int and not 0 <= entry["segment"] < count:
            raise ValueError(f"{where}: buffer {b} has no segment {clip(entry['segment'])} (field 'segment'; it has "
                             f"{count})")
        k = _int_field(entry, "segment", where, 0, count - 1)
        s = int(st.seg_ptr[b]) + k
        where = f"{where} (buffer {b}, segment {k})"
        if seen[s]:
            raise ValueError(f"{where}: the segment is allocated twice")
        seen[s] = True
        if "use_op" in entry and _int_field(entry, "use_op", where, 0, n_ops - 1) != st.seg_use[s]:
            raise ValueError(f"{where}: field 'use_op' = {entry['use_op']} but the segment ends at op {st.seg_use[s]}")
        name = entry.get("kind")
        if type(name) is not str or name not in _KINDS:
            raise ValueError(f"{where}: field 'kind' = {clip(name)} must be 'slow', 'fast' or 'prefetch'"
                             f"{nearest_hint(name, _KINDS)}")
        kind[s] = _KINDS[name]
        for key, kinds in (("offset", ("fast", "prefetch")), ("prefetch_after", ("prefetch",))):
            if name not in kinds and key in entry:
                raise ValueError(f"{where}: field {key!r} is for kind {' or '.join(map(repr, kinds))}, not {name!r}")
        if kind[s] != v1.SLOW:
            off[s] = _int_field(entry, "offset", where, 0, MAX_BYTES)
        if kind[s] == v1.PREFETCH_SEG:  # -1: issued before op 0 (docs/game-v1.md)
            pstart[s] = _int_field(entry, "prefetch_after", where, -1, n_ops - 1)
    ev_done = np.full(n_buffers, -1, np.int64)
    for i, entry in enumerate(mapping.get("evictions", [])):
        where = f"v1 mapping: eviction {i}"
        entry = _entry(entry, where, _EVICTION_KEYS)
        b = _buffer_of(entry, where, n_buffers)
        if ev_done[b] >= 0:
            raise ValueError(f"{where}: buffer {b} is evicted twice (a value is evicted at most once)")
        ev_done[b] = _int_field(entry, "done_before", where, 0, n_ops)  # never -1, the "none" of ev_done
    return kind, off, pstart, ev_done


def _check_buffer(workload: Workload, st: v1.Static1, b: int, kind, off, pstart, ev_done, chunks: list) -> None:
    """Check buffer ``b``'s allocations and append its chunks ``(lo, hi, off, buffer, label,
    produced, evict_from)``: ``produced`` is the definition op for a chunk produced in fast memory
    (-1 for a prefetched one), its first use, and ``evict_from``, the first op it is held only for
    its eviction (-1)."""
    first, last = int(st.seg_ptr[b]), int(st.seg_ptr[b + 1])
    size, capacity, align = int(st.size[b]), int(st.iparams[v1.CAPACITY]), int(st.iparams[v1.ALIGNMENT])
    d = int(st.def_op[b])
    n_ops = st.compute_time.shape[0]
    label = workload.buffer_label(b)
    produced_fast = first < last and kind[first] == v1.FAST
    if produced_fast and d < 0:
        raise ValueError(f"{label}, segment 0: a program input is never produced in fast memory (use 'prefetch')")
    # the initial fast run and where the slow copy is first needed
    j = first
    while produced_fast and j < last and kind[j] == v1.FAST:
        j += 1
    needed = -1
    if produced_fast:
        if j < last:
            needed = int(st.seg_use[j]) if kind[j] == v1.SLOW else int(pstart[j])
        elif st.is_output[b]:
            needed = n_ops
    e = int(ev_done[b])
    if needed < 0 and e >= 0:
        raise ValueError(f"{label}: eviction done before op {e}, but the value never needs a slow copy "
                         "(it is not produced in fast memory, or nothing reads it from slow memory later)")
    if needed >= 0:
        last_fast = int(st.seg_use[j - 1])
        if needed <= last_fast and j < last and kind[j] == v1.PREFETCH_SEG:
            raise ValueError(f"{label}, segment {j - first} (use at op {int(st.seg_use[j])}): prefetch after op "
                             f"{needed} is issued while the value is still in fast memory (its last fast use is op "
                             f"{last_fast}); issue it after op {last_fast} once the value is evicted, or keep the "
                             "segment 'fast' at its offset")
        if e < 0:
            what = "the end of the program (an output)" if needed == n_ops else f"op {needed}"
            raise ValueError(f"{label}: produced in fast memory and needed in slow memory by {what}, but it has "
                             "no eviction")
        if not last_fast + 1 <= e <= needed:
            raise ValueError(f"{label}: eviction done before op {e} must lie in [{last_fast + 1}, {needed}] "
                             f"(after its last fast use at op {last_fast}, by the time a slow copy is needed)")
    slow_from = int(st.start[b]) - 1 if d < 0 else (e if produced_fast else d)
    chunk = None  # [lo, hi, off] of the open chunk
    for s in range(first, last):
        k = s - first
        where = f"{label}, segment {k} (use at op {int(st.seg_use[s])})"
        u = int(st.seg_use[s])
        if kind[s] == v1.SLOW:
            if chunk is not None:
                chunks.append((*chunk[:3], b, where, *chunk[3:], -1))
                chunk = None
            continue
        o = int(off[s])
        if size > capacity:
            raise ValueError(f"{where}: the buffer ({size} bytes) is larger than the fast memory ({capacity} bytes)")
        if o < 0 or o > capacity - size or o % align:
            raise ValueError(f"{where}: offset {o} must be a multiple of {align} in [0, {capacity - size}]")
        if kind[s] == v1.FAST and k > 0:
            if chunk is None or chunk[2] != o:
                raise ValueError(f"{where}: 'fast' on a later segment keeps the value at its previous offset, but the "
                                 "previous segment is not in fast memory at that offset")
            chunk[1] = u
            continue
        if chunk is not None:
            chunks.append((*chunk[:3], b, where, *chunk[3:], -1))
        if kind[s] == v1.FAST:
            chunk = [d, u, o, d, u]  # [first op, last op, offset, definition (-1: prefetched), first use]
        else:
            p = int(pstart[s])
            j = s  # the copy may be issued before earlier uses that read slow memory
            while j > first and kind[j - 1] == v1.SLOW:
                j -= 1
            lo = max(int(st.seg_prev[j]), slow_from)
            if lo > u - 1:
                raise ValueError(f"{where}: no prefetch can be issued for this use: a slow copy of the value exists "
                                 f"only from op {lo} on (after its definition or eviction), after the use at op {u}")
            if not lo <= p <= u - 1:
                raise ValueError(f"{where}: prefetch after op {p} must lie in [{lo}, {u - 1}] (after a slow copy "
                                 "exists and the value last left fast memory, before the use)")
            chunk = [p + 1, u, o, -1, u]  # a prefetched chunk: its copy is in flight up to its first use
    if chunk is not None:
        chunks.append((*chunk[:3], b, f"{label}, segment {last - 1 - first}", *chunk[3:], -1))
    if needed >= 0 and e - 1 > int(st.seg_use[j - 1]):
        # the eviction holds the produced chunk until it is done: extend the first chunk
        for i in range(len(chunks) - 1, -1, -1):
            if chunks[i][3] == b and chunks[i][0] == d:
                lo, hi, o, bb, w, produced, first_use, _ = chunks[i]
                chunks[i] = (lo, max(hi, e - 1), o, bb, w, produced, first_use, hi + 1)  # evicting from hi + 1
                break


@njit(cache=True)
def _first_overlap(lo, hi, off, size):
    """Chunks sorted by ``lo``: the first pair ``(i, j)`` overlapping in time and address."""
    n = lo.shape[0]
    active = np.empty(n, np.int64)
    m = 0
    for j in range(n):
        keep = 0
        for q in range(m):
            i = active[q]
            if hi[i] >= lo[j]:
                active[keep] = i
                keep += 1
        m = keep
        for q in range(m):
            i = active[q]
            if off[i] < off[j] + size[j] and off[j] < off[i] + size[i]:
                return i, j
        active[m] = j
        m += 1
    return -1, -1


def price(st: v1.Static1, kind, off, pstart, ev_done) -> tuple[float, np.ndarray, np.ndarray]:
    """Program time of the allocations (no checks): ``(time, elapsed[T], stall[T + 1])``."""
    n_ops = st.compute_time.shape[0]
    slow = np.zeros(n_ops)
    fast = np.zeros(n_ops)
    owner_seg = st.acc_seg
    fast_acc = np.zeros(owner_seg.shape[0], bool)
    use = owner_seg >= 0
    fast_acc[use] = kind[owner_seg[use]] != v1.SLOW
    owner = np.repeat(np.arange(st.size.shape[0]), np.diff(st.access_ptr))
    first_seg = st.seg_ptr[:-1]
    has_seg = st.seg_ptr[1:] > first_seg
    produced_fast = np.zeros(st.size.shape[0], bool)
    produced_fast[has_seg] = kind[first_seg[has_seg]] == v1.FAST
    defs = owner_seg == v1.DEF_GROUP
    fast_acc[defs] = produced_fast[owner[defs]]
    np.add.at(fast, st.access_op[fast_acc], st.access_bytes[fast_acc])
    np.add.at(slow, st.access_op[~fast_acc], st.access_bytes[~fast_acc])
    pf = np.flatnonzero(kind == v1.PREFETCH_SEG)
    ev = np.flatnonzero(ev_done >= 0)
    c_start = np.concatenate([pstart[pf], st.def_op[ev]]).astype(np.int64)
    c_done = np.concatenate([st.seg_use[pf], ev_done[ev]]).astype(np.int64)
    c_bytes = np.concatenate([st.size[st.seg_buf[pf]], st.size[ev]]).astype(np.float64)
    c_kind = np.concatenate([np.full(pf.size, runtime.PREFETCH), np.full(ev.size, runtime.EVICTION)]).astype(np.int64)
    elapsed = np.zeros(n_ops)
    stall = np.zeros(n_ops + 1)
    total = runtime.simulate(st.compute_time, slow / st.params[v1.SLOW_BW], fast / st.params[v1.FAST_BW],
                             st.params[v1.OVERHEAD], st.params[v1.SLOW_BW], c_start, c_done, c_bytes, c_kind,
                             elapsed, stall)
    return total, elapsed, stall


def _validated(workload: Workload, mapping, hardware):
    """Parse and check ``mapping``: ``(hardware, static, kind, off, pstart, ev_done, chunks)``."""
    if isinstance(mapping, (str, os.PathLike)):
        mapping = load_mapping(mapping)
    hardware = resolve_hardware(workload, hardware)
    st = v1.compile_v1(workload, hardware, "start")  # checking and pricing never read the decision order
    kind, off, pstart, ev_done = _parse(mapping, st, workload.num_buffers)
    chunks: list = []
    for b in range(workload.num_buffers):
        _check_buffer(workload, st, b, kind, off, pstart, ev_done, chunks)
    if chunks:
        chunks.sort(key=lambda c: (c[0], c[1]))
        lo = np.array([c[0] for c in chunks], np.int64)
        hi = np.array([c[1] for c in chunks], np.int64)
        offs = np.array([c[2] for c in chunks], np.int64)
        sizes = np.array([st.size[c[3]] for c in chunks], np.int64)
        i, j = _first_overlap(lo, hi, offs, sizes)
        if i >= 0:
            a, c = chunks[i], chunks[j]
            raise ValueError(f"{c[4]}: its chunk [ops {c[0]}-{c[1]}, bytes {c[2]}-{c[2] + sizes[j]}) overlaps "
                             f"{a[4]}'s [ops {a[0]}-{a[1]}, bytes {a[2]}-{a[2] + sizes[i]}) in fast memory")
    return hardware, st, kind, off, pstart, ev_done, chunks


def chunks_v1(workload: Workload, mapping, hardware: Hardware | str | None = None) -> list[dict]:
    """The fast-memory chunks of a valid v1 mapping (validated as :func:`evaluate_v1` does), for
    pictures: ``{"buffer", "first_op", "last_op", "offset", "size", "prefetched", "first_use",
    "evict_from", "prefetch_after"}`` (``evict_from``: the first op the chunk is held only until its eviction
    completes, or None; ``prefetch_after``: the op its prefetch is issued after, or None)."""
    _, st, kind, _, pstart, _, chunks = _validated(workload, mapping, hardware)
    out = []
    for lo, hi, o, b, _, produced, first_use, evict_from in chunks:
        out.append({"buffer": int(b), "first_op": int(lo), "last_op": int(hi), "offset": int(o),
                    "size": int(st.size[b]), "prefetched": produced < 0, "first_use": int(first_use),
                    "evict_from": None if evict_from < 0 else int(evict_from),
                    "prefetch_after": int(lo) - 1 if produced < 0 else None})
    return out


def evaluate_v1(workload: Workload, mapping: dict | str | os.PathLike,
                hardware: Hardware | str | None = None) -> EvaluationV1:
    """Validate a v1 mapping (a dict, or a JSON file path) and return its cost.

    ``hardware`` defaults as in :func:`mallocgym.evaluate`. Validation does not replay decisions,
    so the result does not depend on the env's decision order.
    """
    hardware, st, kind, off, pstart, ev_done, _ = _validated(workload, mapping, hardware)
    total, elapsed, stall = price(st, kind, off, pstart, ev_done)
    slow_total = float(st.params[v1.TIME_ALL_SLOW])
    placed = np.zeros(workload.num_buffers, bool)
    placed[st.seg_buf[kind != v1.SLOW]] = True
    return EvaluationV1(
        time=float(total), time_all_slow=slow_total, speedup=slow_total / float(total),
        placed_bytes_fraction=float(workload.size[placed].sum()) / workload.total_bytes,
        placed_buffers=int(placed.sum()), num_buffers=workload.num_buffers,
        compute_bound_ops=float(np.count_nonzero(st.compute_time >= elapsed)) / workload.num_ops,
        oversized_buffers=int((workload.size > hardware.fast_capacity).sum()),
        stall_time=float(stall.sum()),
        copy_bytes=float(st.size[st.seg_buf[kind == v1.PREFETCH_SEG]].sum() + st.size[ev_done >= 0].sum()),
        prefetches=int((kind == v1.PREFETCH_SEG).sum()), evictions=int((ev_done >= 0).sum()),
    )
