"""The v1 state's copies, linked per issue op (``mallocgym.sim.v1``: ``cp_first``, ``cp_next``,
``_add_copy``, ``_remove_copy``, ``_move_copy``, ``copy_list``; issue 33), against a plain list
sorted in the runtime model's queue order, on random adds, removals and moves; and the
simulation that reads the lists (``runtime.simulate_linked``) against a full run over the sorted
list."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st_

from mallocgym.pricing import runtime
from mallocgym.sim import v1
from mallocgym.speed import program_with_buffers

_SC = program_with_buffers(120)
_ST = v1.compile_v1(_SC.workload, _SC.hardware)


@settings(max_examples=150, deadline=None)
@given(st_.integers(0, 2 ** 32 - 1), st_.integers(0, 400), st_.integers(1, 40))
def test_copy_lists_equal_a_sorted_list(seed, n_steps, n_starts):
    """After any sequence of copies added, removed (listed or not) and moved to another done op
    (few issue ops, so many copies share one and ties in ``done`` are common): ``copy_list`` is
    the reference's copies sorted by ``(start, done, key)``, the count, copy bytes and bytes in
    flight agree, and the program time after a simulation equals a full run's bit for bit."""
    rng = np.random.default_rng(seed)
    st = _ST
    state = v1.new_state(st)
    n_keys, n_ops = state.cp_kind.shape[0], st.compute_time.shape[0]
    ref = {}  # key -> (start, done, bytes, kind)
    for _ in range(n_steps):
        what = int(rng.integers(0, 6))
        key = int(rng.integers(0, n_keys))
        if what <= 2 and key not in ref:  # add
            start = int(rng.integers(-1, min(n_starts, n_ops - 1)))
            done = int(rng.integers(start + 1, min(start + 1 + n_starts // 2 + 2, n_ops + 1)))
            nbytes = float(rng.integers(1, 1 << 20))
            kind = int(rng.integers(0, 2))
            v1._add_copy(st, state, key, start, done, nbytes, kind)
            ref[key] = (start, done, nbytes, kind)
        elif what == 3:  # remove, listed or not
            v1._remove_copy(st, state, key)
            ref.pop(key, None)
        elif ref:  # move a listed copy to another done op
            key = sorted(ref)[int(rng.integers(0, len(ref)))]
            start, done, nbytes, kind = ref[key]
            new_done = int(rng.integers(start + 1, min(start + 1 + n_starts // 2 + 2, n_ops + 1)))
            v1._move_copy(state, key, new_done)
            ref[key] = (start, new_done, nbytes, kind)
        if rng.integers(0, 10) == 0:
            v1.current_time(st, state)
    want = sorted(ref, key=lambda k: (ref[k][0], ref[k][1], k))
    got = v1.copy_list(state).tolist()
    assert got == want
    assert int(state.counters[v1.N_COPIES]) == len(ref)
    assert state.totals[v1.COPY_BYTES] == sum(v[2] for v in ref.values())
    for k in range(n_keys):
        assert (state.cp_kind[k] >= 0) == (k in ref)
        if k in ref:
            assert (int(state.cp_start[k]), int(state.cp_done[k]), float(state.cp_bytes[k]),
                    int(state.cp_kind[k])) == ref[k]
    for p in range(-1, n_ops):
        assert v1.flight_bytes(state.cp_flight, p) == sum(v[2] for v in ref.values() if v[0] <= p < v[1])
    time = v1.current_time(st, state)
    q = np.array(want, np.int64)
    full = runtime.simulate_trusted(st.compute_time, state.slow_time.copy(), state.fast_time.copy(), st.overhead,
                                    st.params[v1.SLOW_BW], state.cp_start[q], state.cp_done[q], state.cp_bytes[q],
                                    state.cp_kind[q], np.zeros(n_ops), np.zeros(n_ops + 1))
    assert float(time).hex() == float(full).hex()
