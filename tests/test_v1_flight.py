"""The v1 state's bytes in flight (``mallocgym.sim.v1.flight_bytes``, a Fenwick tree kept as copies
are added and removed) against a sum over the copies, and the observation's in-flight feature."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st_

from mallocgym.features import v1 as v1_obs
from mallocgym.heuristics.v1 import new_game
from mallocgym.sim import v1

from conftest import mlp_scenario


def _scan(copies, p):
    """Bytes of the copies issued at or before op ``p`` and done after it."""
    return sum(n for start, done, n in copies if start <= p < done)


@settings(max_examples=150, deadline=None)
@given(st_.integers(1, 40).flatmap(lambda t: st_.tuples(st_.just(t), st_.lists(
    st_.tuples(st_.booleans(), st_.integers(-1, t - 1), st_.integers(1, t + 1), st_.integers(0, 10 ** 12)),
    max_size=30))))
def test_fenwick_equals_a_scan_of_the_copies(case):
    """Any sequence of adds and removes (a remove takes back an earlier add): every prefix query
    equals the sum over the live copies."""
    n_ops, ops = case
    tree = np.zeros(n_ops + 3, np.int64)
    live = []
    for remove, start, length, nbytes in ops:
        if remove and live:
            start, done, nbytes = live.pop(start % len(live))
            v1._flight_add(tree, start + 1, -nbytes)
            v1._flight_add(tree, done + 1, nbytes)
        else:
            done = min(start + length, n_ops)
            if done <= start:
                continue
            live.append((start, done, nbytes))
            v1._flight_add(tree, start + 1, nbytes)
            v1._flight_add(tree, done + 1, -nbytes)
        for p in range(-1, n_ops):
            assert v1.flight_bytes(tree, p) == _scan(live, p)


def test_flight_follows_the_copies_over_an_episode():
    """After every step of an episode (prefetches added, evictions placed, dropped and moved), the
    tree equals a sum over the state's copies at every op, and the observation's in-flight feature
    is that sum / capacity at each prefetch start."""
    sc = mlp_scenario(3)
    st, state, table, _ = new_game(sc)
    state = v1.new_state(st, (8, 8))
    obs = v1_obs.make_obs(int(st.iparams[v1.N_CAND]), int(st.iparams[v1.N_STARTS]), 8, 8)
    cap = float(st.iparams[v1.CAPACITY])
    rng = np.random.default_rng(0)
    s = v1_obs.advance(st, state, table, obs, 1.0, 1.0)
    steps = 0
    while s >= 0:
        q = v1.copy_list(state)
        copies = list(zip(state.cp_start[q].tolist(), state.cp_done[q].tolist(), state.cp_bytes[q].tolist()))
        for p in range(-1, st.compute_time.shape[0]):
            assert v1.flight_bytes(state.cp_flight, p) == _scan(copies, p)
        k = table.fast_off.shape[0]
        for j in range(table.starts.shape[0]):
            a = 1 + k + j * k
            if table.kind[a] >= 0:
                want = min(_scan(copies, int(table.starts[j])) / cap, 1.0)
                assert obs.actions[a, 5] == np.float32(want)
        legal = np.flatnonzero(table.kind >= 0)
        a = int(table.msa_action[0]) if steps % 3 else int(rng.choice(legal))
        s = v1_obs.step(st, state, table, obs, s, table.kind[a], table.off[a], table.pstart[a], 1.0, 1.0)
        steps += 1
    assert steps > 10 and state.counters[v1.N_COPIES] > 0
