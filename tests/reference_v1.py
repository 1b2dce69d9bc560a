"""A slow, plain-Python reference of MallocGame-v1's rules (``mallocgym.env.v1``).

Written from the game's specification, not from the numba kernels (``mallocgym.sim.v1``). The
state is only the list of decisions made so far; everything else (chunks of fast memory,
evictions, legality, candidate offsets, program time) is recomputed from scratch from those
decisions every time it is asked for. Plain lists, dicts and tuples throughout.

Vocabulary (see ``MallocGameV1Env``'s docstring):

- buffer ``b``: its *definition* ``d`` is its first write access (the smallest op among its
  writes); with no write it is a program *input* (``d = -1``), in slow memory from op
  ``start - 1`` on;
- *use points*: the distinct ops of its accesses after ``d`` (an input: all its access ops), in op
  order; a defined buffer with no such access has the one use point ``d``;
- *segment* ``k`` runs from ``prev_k`` (``d``, or ``start - 1`` for an input's first segment, else
  the previous use point) to the use point ``u_k``; one decision per segment;
- decision kinds ``"slow"``, ``"fast"`` (segment 0: produce in fast memory at an offset, chunk
  ``[d, u_0]``; later: keep at the previous segment's offset, chunk extended to ``u_k``),
  ``"prefetch"`` (copy issued after op ``p``, chunk ``[p + 1, u_k]``);
- a *chunk* is ``(lo, hi, offset, buffer)``: ops ``lo..hi`` (inclusive) x bytes
  ``[offset, offset + size)``;
- *evictions* are added by the rules for a value produced fast that later needs a slow copy.

The decisions come in the env's order (``static.order``: buffers one after the other, each
buffer's segments in time order), which this reference takes as given. Because a buffer's
decisions are consecutive, the chunks of the buffers decided before ``b`` never change while
``b`` is decided, so ``b``'s eviction (which looks at those chunks) is a pure function of ``b``'s
own decisions and the earlier buffers' chunks: recomputing it from scratch gives the tentative
eviction while ``b``'s initial fast run is going on and the final one afterwards.
"""

from __future__ import annotations

import math
from fractions import Fraction

import reference_runtime


def exact(x) -> Fraction:
    """The number a float stands for, as written (its shortest decimal repr): ``1e-06`` is
    exactly 1/1000000, ``0.8`` exactly 4/5. The ratio tests (``I >= ratio * copy time``) are
    decided in this exact arithmetic, so a tie between round numbers counts as met, whatever the
    rounding of a float computation would say."""
    return Fraction(repr(float(x)))

SLOW, FAST, PREFETCH = "slow", "fast", "prefetch"
NO_START = -2  # no prefetch start (-1 is one: a copy issued before op 0)
KINDS = (SLOW, FAST, PREFETCH)


class IllegalDecision(ValueError):
    """A decision the rules do not allow at this position."""


class ReferenceV1:
    """MallocGame-v1 replayed by hand.

    ``order``: the global segment ids in decision order (the env's ``static.order``); ``None``
    means buffer by buffer in id order. Segment ids are global and buffer-major: buffer 0's
    segments in time order, then buffer 1's, ... (the env's numbering).

    With ``play_forced`` (default) the reference plays the positions where only SLOW is legal
    itself, as the env does, at construction and after every :meth:`decide`.
    """

    def __init__(self, workload, hardware, order=None, *, n_candidates=16, n_starts=4,
                 ratios=(0.8, 1.5, 10.0), play_forced=True, msa=None):
        self.msa = msa  # msa(self, s) -> XLA's picks at segment s now: (produce offset, prefetch start, its offset)
        self.K = int(n_candidates)
        self.J = int(n_starts)
        self.min_ratio, self.pref_ratio, self.max_ratio = (exact(r) for r in ratios)
        self.play_forced = play_forced
        # ---------------------------------------------------------------- workload
        self.T = int(workload.num_ops)
        self.N = int(workload.num_buffers)
        self.size = [int(x) for x in workload.size]
        self.start = [int(x) for x in workload.start]
        self.end = [int(x) for x in workload.end]
        self.accesses = []
        for b in range(self.N):
            lo, hi = int(workload.access_ptr[b]), int(workload.access_ptr[b + 1])
            self.accesses.append([(int(workload.access_op[a]), int(workload.access_bytes[a]),
                                   bool(workload.access_write[a])) for a in range(lo, hi)])
        # ---------------------------------------------------------------- hardware
        self.capacity = int(hardware.fast_capacity)
        self.alignment = int(hardware.alignment)
        self.slow_bw = float(hardware.slow_bw)
        self.fast_bw = float(hardware.fast_bw)
        self.overhead = float(hardware.op_overhead)
        peak_tr = hardware.peak_transcendentals if hardware.peak_transcendentals is not None else hardware.peak_flops
        self.compute = [max(float(workload.flops[t]) / hardware.peak_flops,
                            float(workload.transcendentals[t]) / peak_tr) for t in range(self.T)]
        bytes_at = [0] * self.T
        for b in range(self.N):
            for op, nbytes, _ in self.accesses[b]:
                bytes_at[op] += nbytes
        # all-slow elapsed time of each op: every access slow, no copies
        self.all_slow = [max(self.compute[t], bytes_at[t] / self.slow_bw + self.overhead) for t in range(self.T)]
        self.time_all_slow = math.fsum(self.all_slow)
        # the same, exactly (for the ratio tests of the prefetch picker and the eviction)
        peak_tr_x = exact(peak_tr)
        self.all_slow_exact = [max(max(exact(workload.flops[t]) / exact(hardware.peak_flops),
                                       exact(workload.transcendentals[t]) / peak_tr_x),
                                   Fraction(bytes_at[t]) / exact(self.slow_bw) + exact(self.overhead))
                               for t in range(self.T)]
        # ---------------------------------------------------------------- segments
        self.def_op = []
        outputs = workload.outputs  # None: every buffer live at the last op
        self.is_output = [(b in outputs) if outputs is not None else self.end[b] == self.T - 1 for b in range(self.N)]
        self.segments = []      # global id -> (buffer, index in buffer, prev, use)
        self.seg_ids = []       # buffer -> its global segment ids, in time order
        for b in range(self.N):
            writes = [op for op, _, w in self.accesses[b] if w]
            d = min(writes) if writes else -1
            self.def_op.append(d)
            if d >= 0:
                uses = sorted({op for op, _, _ in self.accesses[b] if op > d}) or [d]
                prev = d
            else:
                uses = sorted({op for op, _, _ in self.accesses[b]})
                prev = self.start[b] - 1
            ids = []
            for k, u in enumerate(uses):
                ids.append(len(self.segments))
                self.segments.append((b, k, prev, u))
                prev = u
            self.seg_ids.append(ids)
        self.S = len(self.segments)
        # ---------------------------------------------------------------- decision order
        self.order = list(range(self.S)) if order is None else [int(s) for s in order]
        if sorted(self.order) != list(range(self.S)):
            raise ValueError("order must list every segment once")
        seen_buffers = []
        for s in self.order:
            b = self.segments[s][0]
            if seen_buffers and seen_buffers[-1] == b:
                continue
            if b in seen_buffers:
                raise ValueError(f"order: buffer {b}'s segments are not consecutive")
            seen_buffers.append(b)
        for b in seen_buffers:
            mine = [s for s in self.order if self.segments[s][0] == b]
            if mine != self.seg_ids[b]:
                raise ValueError(f"order: buffer {b}'s segments are not in time order")
        self.buffer_order = seen_buffers
        # ---------------------------------------------------------------- state: the decisions
        self.decision = [None] * self.S   # (kind, offset, prefetch start) or None (undecided)
        self.pos = 0
        self.forced = 0
        self.chosen = 0
        self.history = []                 # (segment, kind, offset, pstart, forced)
        self.ties = set()                 # ratio tests met with (near) equality, see at_least
        if play_forced:
            self.play_forced_moves()

    # ==================================================================== small helpers
    def interval(self, a, b):
        """All-slow time of the ops strictly between ``a`` and ``b``, exactly (a Fraction)."""
        return sum(self.all_slow_exact[max(a + 1, 0):max(b, 0)], Fraction(0))

    def at_least(self, value, threshold, what):
        """``value >= threshold`` (exact Fractions); a tie, or a near tie within 1e-9 relative,
        is noted in ``self.ties`` (a float computation could decide it either way)."""
        if abs(value - threshold) <= Fraction(1, 10**9) * max(abs(threshold), abs(value)):
            self.ties.add((what, float(value), float(threshold)))
        return value >= threshold

    def copy_time(self, b):
        """Seconds to copy buffer ``b`` at the slow bandwidth, exactly."""
        return Fraction(self.size[b]) / exact(self.slow_bw)

    def kind(self, s):
        return None if self.decision[s] is None else self.decision[s][0]

    def buffer_of(self, s):
        return self.segments[s][0]

    @property
    def done(self):
        return self.pos >= self.S

    @property
    def current(self):
        """The segment to decide now (-1 at the end)."""
        return -1 if self.done else self.order[self.pos]

    def _overlap(self, chunk, lo, hi, off, size):
        c_lo, c_hi, c_off, c_buf = chunk
        return c_lo <= hi and lo <= c_hi and c_off < off + size and off < c_off + self.size[c_buf]

    # ==================================================================== fast memory
    def buffer_layout(self, b, others):
        """Chunks and eviction of buffer ``b`` from its decisions so far, given ``others`` (the
        chunks of the buffers decided before it). Returns ``(chunks, eviction done op or None)``."""
        d = self.def_op[b]
        chunks = []
        current = None
        for s in self.seg_ids[b]:
            _, k, prev, u = self.segments[s]
            dec = self.decision[s]
            kind = None if dec is None else dec[0]
            if kind == FAST and k > 0:
                assert current is not None and current[2] == dec[1], "keep without a chunk at that offset"
                current[1] = u
            elif kind == FAST:
                current = [d, u, dec[1], b]
                chunks.append(current)
            elif kind == PREFETCH:
                current = [dec[2] + 1, u, dec[1], b]
                chunks.append(current)
            else:  # slow or undecided (priced slow)
                current = None
        e = self.eviction(b, others)
        if e is not None:
            produced = chunks[0]            # the chunk opened at the definition
            last_use = produced[1]
            if e - 1 > last_use:
                produced[1] = e - 1         # held until the eviction copy is done
        return [tuple(c) for c in chunks], e

    def eviction(self, b, others):
        """The op before which ``b``'s eviction copy is done (None: no eviction)."""
        ids = self.seg_ids[b]
        d = self.def_op[b]
        if not ids or d < 0 or self.kind(ids[0]) != FAST:
            return None
        j = 0
        while j < len(ids) and self.kind(ids[j]) == FAST:
            j += 1
        last_use = self.segments[ids[j - 1]][3]
        if j < len(ids):
            nxt = ids[j]
            if self.kind(nxt) == PREFETCH:
                needed = self.decision[nxt][2]
            else:  # slow or undecided
                needed = self.segments[nxt][3]
        elif self.is_output[b]:
            needed = self.T
        else:
            return None
        size = self.size[b]
        copy_time = self.copy_time(b)
        e_pref = needed
        for t in range(d + 1, needed + 1):
            if self.at_least(self.interval(d, t), self.pref_ratio * copy_time, f"eviction of buffer {b}, op {t}"):
                e_pref = t
                break
        e = min(max(e_pref, last_use + 1), needed)
        off = self.decision[ids[0]][1]
        for t in range(last_use + 1, e):   # ops last_use+1 .. e-1 the chunk would be held over
            if any(self._overlap(c, t, t, off, size) for c in others):
                e = t
                break
        return e

    def layout(self):
        """All chunks and evictions now: ``(chunks, {buffer: done op})``."""
        chunks, evictions = [], {}
        for b in self.buffer_order:
            if all(self.decision[s] is None for s in self.seg_ids[b]):
                continue
            mine, e = self.buffer_layout(b, list(chunks))
            chunks += mine
            if e is not None:
                evictions[b] = e
        return chunks, evictions

    def chunks_of_others(self, b):
        chunks, _ = self.layout()
        return [c for c in chunks if c[3] != b]

    def is_free(self, b, lo, hi, off):
        """No other buffer's chunk meets ops ``[lo, hi]`` x ``[off, off + size_b)``."""
        return not any(self._overlap(c, lo, hi, off, self.size[b]) for c in self.chunks_of_others(b))

    def candidates(self, b, lo, hi):
        """Candidate offsets for ``b`` over ops ``[lo, hi]``, best fit first, at most K."""
        size = self.size[b]
        if size > self.capacity:
            return []
        used = sorted((c[2], c[2] + self.size[c[3]]) for c in self.chunks_of_others(b)
                      if c[0] <= hi and lo <= c[1])
        # free gaps: the complement of the union of the used address ranges in [0, capacity)
        gaps = []
        cursor = 0
        for a, z in used:
            if a > cursor:
                gaps.append((cursor, a))
            cursor = max(cursor, z)
        if cursor < self.capacity:
            gaps.append((cursor, self.capacity))
        options = []
        al = self.alignment
        for glo, ghi in gaps:
            low = -(-glo // al) * al
            if low + size <= ghi:
                options.append((ghi - glo, low))
                high = (ghi - size) // al * al
                if high != low:
                    options.append((ghi - glo, high))
        options.sort()
        return [o for _, o in options[:self.K]]

    # ==================================================================== legality
    def slow_from(self, s):
        """The first op after which a prefetch for segment ``s`` may be issued."""
        b, k, _, _ = self.segments[s]
        d = self.def_op[b]
        ids = self.seg_ids[b]
        if d < 0:
            return self.start[b] - 1
        if self.kind(ids[0]) != FAST:
            return d
        if all(self.kind(ids[i]) == FAST for i in range(k)):
            return self.segments[ids[k - 1]][3] + 1
        _, evictions = self.layout()
        return evictions[b]

    def prefetch_window(self, s):
        """After the slow copy exists and after the value last left fast memory: back through
        the uses just before ``s`` that read slow memory."""
        b, k, _, u = self.segments[s]
        ids = self.seg_ids[b]
        while k > 0 and self.kind(ids[k - 1]) == SLOW:
            k -= 1
        prev = self.segments[ids[k]][2]
        return max(prev, self.slow_from(s)), u - 1

    def offset_ok(self, b, off):
        return 0 <= off <= self.capacity - self.size[b] and off % self.alignment == 0

    def why_illegal(self, s, kind, off=-1, pstart=-1):
        """None if ``(kind, off, pstart)`` is a legal decision for segment ``s`` now, else a reason."""
        b, k, prev, u = self.segments[s]
        size = self.size[b]
        if kind == SLOW:
            return None
        if kind not in (FAST, PREFETCH):
            return f"unknown kind {kind!r}"
        if size > self.capacity:
            return "larger than fast memory"
        if kind == FAST and k == 0:
            if self.def_op[b] < 0:
                return "a program input cannot be produced in fast memory"
            if not self.offset_ok(b, off):
                return "bad offset"
            if not self.is_free(b, self.def_op[b], u, off):
                return "chunk not free"
            return None
        if kind == FAST:
            before = self.decision[self.seg_ids[b][k - 1]]
            if before is None or before[0] == SLOW:
                return "keep: the previous segment is not in fast memory"
            if before[1] != off:
                return "keep: another offset than the previous segment's"
            if not self.is_free(b, prev + 1, u, off):
                return "chunk not free"
            return None
        lo, hi = self.prefetch_window(s)
        if not lo <= pstart <= hi:
            return f"prefetch start {pstart} outside [{lo}, {hi}]"
        if not self.offset_ok(b, off):
            return "bad offset"
        if not self.is_free(b, pstart + 1, u, off):
            return "chunk not free"
        return None

    def is_legal(self, s, kind, off=-1, pstart=-1):
        return self.why_illegal(s, kind, off, pstart) is None

    # ==================================================================== the env's actions
    def msa_picks(self, s):
        """XLA's own choices the env puts first at segment ``s``: ``(produce offset, prefetch
        start, prefetch offset)`` from the ``msa`` oracle (a port of MSA is not part of the rules;
        each pick is checked legal here, by the rules alone); ``(-1, NO_START, -1)`` without one."""
        if self.msa is None:
            return -1, NO_START, -1
        f, p, o = self.msa(self, s)
        if f >= 0:
            assert self.is_legal(s, FAST, f), (s, f, self.why_illegal(s, FAST, f))
        if p != NO_START:
            assert self.is_legal(s, PREFETCH, o, p), (s, o, p, self.why_illegal(s, PREFETCH, o, p))
        return f, p, o

    def first_then(self, first, rest, limit, none=-1):
        """``first`` (unless ``none``) then ``rest`` without it, at most ``limit``."""
        if first == none:
            return list(rest)[:limit]
        return [first] + [x for x in rest if x != first][:limit - 1]

    def fast_candidates(self, s, msa_fast=-1):
        """The FAST offsets the env offers for segment ``s`` (actions ``1 + i``): on a first
        segment, MSA's offset (``msa_fast``) then the best-fit candidates."""
        b, k, prev, u = self.segments[s]
        if k == 0:
            if self.def_op[b] < 0:
                return []
            return self.first_then(msa_fast, self.candidates(b, self.def_op[b], u), self.K)
        before = self.decision[self.seg_ids[b][k - 1]]
        if before is None or before[0] == SLOW:
            return []
        return [before[1]] if self.is_free(b, prev + 1, u, before[1]) else []

    def prefetch_starts(self, s, msa_p=NO_START):
        """The issue ops for segment ``s``: MSA's (``msa_p``), then the picker's preferred,
        latest, earliest, midpoint (distinct, at most J), each clamped to the allowed window."""
        b, _, _, u = self.segments[s]
        if self.size[b] > self.capacity:
            return []
        lo, hi = self.prefetch_window(s)
        if lo > hi:
            return []
        copy_time = self.copy_time(b)
        cap_time = Fraction(self.capacity) / exact(self.slow_bw)
        ops = range(-1, u)   # every conceivable issue op; I(p) shrinks as p grows

        def clamp(p):
            return min(max(p, lo), hi)

        def largest(threshold, name):
            good = [p for p in ops
                    if self.at_least(self.interval(p, u), threshold, f"{name} start of segment {s}, p={p}")]
            return clamp(max(good)) if good else lo

        latest = largest(self.min_ratio * copy_time, "latest")
        preferred = largest(self.pref_ratio * copy_time, "preferred")
        small = [p for p in ops if self.at_least(self.max_ratio * cap_time, self.interval(p, u),
                                                 f"earliest start of segment {s}, p={p}")]
        earliest = clamp(min(small)) if small else hi
        midpoint = (earliest + latest) // 2
        starts = []
        for p in (preferred, latest, earliest, midpoint):
            if p not in starts:
                starts.append(p)
        return self.first_then(msa_p, starts, self.J, none=NO_START)

    def actions(self, s=None):
        """``{action: (kind, offset, pstart)}`` the env should offer for segment ``s`` (default:
        the current one), action numbering ``0`` SLOW, ``1 + i`` FAST, ``1 + K + j K + i``
        PREFETCH."""
        s = self.current if s is None else s
        table = {0: (SLOW, -1, -1)}
        msa_fast, msa_p, msa_off = self.msa_picks(s)
        for i, off in enumerate(self.fast_candidates(s, msa_fast)):
            table[1 + i] = (FAST, off, -1)
        _, _, _, u = self.segments[s]
        b = self.buffer_of(s)
        for j, p in enumerate(self.prefetch_starts(s, msa_p)):
            offs = self.candidates(b, p + 1, u)
            for i, off in enumerate(self.first_then(msa_off, offs, self.K) if p == msa_p != NO_START else offs):
                table[1 + self.K + j * self.K + i] = (PREFETCH, off, p)
        return table

    # ==================================================================== playing
    def all_legal(self, s=None):
        """Every legal ``(kind, offset, pstart)`` for segment ``s`` now, by brute force over all
        offsets and issue ops (not only the env's candidates and picker starts)."""
        s = self.current if s is None else s
        b, _, _, u = self.segments[s]
        out = [(SLOW, -1, -1)]
        offsets = range(0, max(self.capacity - self.size[b], -1) + 1)
        out += [(FAST, o, -1) for o in offsets if self.is_legal(s, FAST, o)]
        out += [(PREFETCH, o, p) for p in range(-1, u) for o in offsets if self.is_legal(s, PREFETCH, o, p)]
        return out

    def decide(self, kind, off=-1, pstart=-1, *, forced=False):
        """Decide the current segment (checked) and, with ``play_forced``, play the forced
        positions after it. Returns the program time afterwards."""
        if self.done:
            raise IllegalDecision("the game is over")
        s = self.current
        why = self.why_illegal(s, kind, off, pstart)
        if why is not None:
            raise IllegalDecision(f"segment {s} (buffer {self.buffer_of(s)}): {kind} off={off} p={pstart}: {why}")
        if kind == SLOW:
            off, pstart = -1, -1
        elif kind == FAST:
            pstart = -1
        self.decision[s] = (kind, int(off), int(pstart))
        self.history.append((s, kind, int(off), int(pstart), forced))
        self.pos += 1
        if forced:
            self.forced += 1
        else:
            self.chosen += 1
            if self.play_forced:
                self.play_forced_moves()
        return self.time()

    def play_forced_moves(self):
        while not self.done and len(self.actions()) == 1:
            self.decide(SLOW, forced=True)

    def replay(self, allocations):
        """Decide the segments in order from mapping allocations (``[{"buffer", "segment",
        "kind", "offset", "prefetch_after"}]``) up to the first one not listed; each checked."""
        given = {}
        for a in allocations:
            s = self.seg_ids[a["buffer"]][a["segment"]]
            given[s] = (a["kind"], a.get("offset", -1), a.get("prefetch_after", -1))
        while not self.done and self.current in given:
            self.decide(*given[self.current], forced=self.play_forced)
        return self

    def decide_action(self, action):
        """Play an env action number (must be in :meth:`actions`)."""
        kind, off, pstart = self.actions()[action]
        return self.decide(kind, off, pstart)

    # ==================================================================== cost
    def access_is_fast(self, b, op):
        d = self.def_op[b]
        if d >= 0 and op == d:   # the definition group: priced by the production
            return self.kind(self.seg_ids[b][0]) == FAST
        for s in self.seg_ids[b]:
            if self.segments[s][3] == op:
                return self.kind(s) in (FAST, PREFETCH)
        return False             # an access before the definition: slow

    def copies(self):
        """``[(start, done, bytes, kind)]``: prefetches (kind 0) then evictions (kind 1)."""
        out = []
        for s in range(self.S):
            if self.kind(s) == PREFETCH:
                b, _, _, u = self.segments[s]
                out.append((self.decision[s][2], u, self.size[b], 0))
        _, evictions = self.layout()
        for b in sorted(evictions):
            out.append((self.def_op[b], evictions[b], self.size[b], 1))
        return out

    def simulate(self):
        """``(total time, elapsed[T], stall[T + 1])`` under the current decisions."""
        slow = [0] * self.T
        fast = [0] * self.T
        for b in range(self.N):
            for op, nbytes, _ in self.accesses[b]:
                if self.access_is_fast(b, op):
                    fast[op] += nbytes
                else:
                    slow[op] += nbytes
        copies = self.copies()
        elapsed, stall = [0.0] * self.T, [0.0] * (self.T + 1)
        total = reference_runtime.simulate(
            list(self.compute), [x / self.slow_bw for x in slow], [x / self.fast_bw for x in fast], self.overhead,
            self.slow_bw, [c[0] for c in copies], [c[1] for c in copies], [float(c[2]) for c in copies],
            [c[3] for c in copies], elapsed, stall)
        return total, elapsed, stall

    def time(self):
        return self.simulate()[0]

    def stall_time(self):
        return math.fsum(self.simulate()[2])

    def copy_bytes(self):
        return sum(c[2] for c in self.copies())

    # ==================================================================== mapping
    def evictions(self):
        """``[{"buffer", "done_before"}]`` sorted by buffer (the mapping's form)."""
        _, ev = self.layout()
        return [{"buffer": b, "done_before": e} for b, e in sorted(ev.items())]

    def allocations(self):
        """The decided segments in the mapping's form, by buffer then segment."""
        out = []
        for b in range(self.N):
            for s in self.seg_ids[b]:
                dec = self.decision[s]
                if dec is None:
                    continue
                _, k, _, u = self.segments[s]
                entry = {"buffer": b, "segment": k, "use_op": u, "kind": dec[0]}
                if dec[0] != SLOW:
                    entry["offset"] = dec[1]
                if dec[0] == PREFETCH:
                    entry["prefetch_after"] = dec[2]
                out.append(entry)
        return out

    def chunk_segments(self):
        """``[(chunk, [segment ids forming it])]``: which decisions open and keep each chunk."""
        chunks, _ = self.layout()
        out = []
        for b in range(self.N):
            group = None
            for s in self.seg_ids[b]:
                kind = self.kind(s)
                if kind == FAST and self.segments[s][1] > 0 and group is not None:
                    group.append(s)
                elif kind in (FAST, PREFETCH):
                    group = [s]
                    out.append((b, group))
                else:
                    group = None
        mine = {}
        for c in chunks:
            mine.setdefault(c[3], []).append(c)
        result = []
        for b, group in out:
            result.append((mine[b].pop(0), group))
        return result
