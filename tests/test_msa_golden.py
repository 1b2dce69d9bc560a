"""Issue 33: ``xla-msa``'s mappings must not change while it is made faster.

Each case hashes the plan's mapping arrays (segment kinds, offsets, prefetch starts and the
eviction done ops) and records the program time (``float.hex``, bit for bit); the golden values
in ``tests/data/msa_golden.json`` were generated from the code before issue 33's changes. The
large suite and the generated 10,000-buffer program are marked slow (``pytest -m slow``).

Regenerate (only when a change of mapping is intended, and say so in the commit)::

    PYTHONPATH=src python tests/test_msa_golden.py            # every case, slow ones included
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

GOLDEN = Path(__file__).parent / "data" / "msa_golden.json"
FAST_SUITES = ("default", "minimalloc", "synthetic")


def _cases() -> list[tuple[str, str, bool]]:
    """``(case id, scenario, slow)``: each bundled scenario with MSA's cost picker; the default
    suite also with the instruction-count picker and in the spatial order; the large suite and a
    generated 10,000-buffer program (slow)."""
    from mallocgym.scenarios import suite

    cases = []
    for name in FAST_SUITES:
        for s in suite(name):
            cases.append((f"{name}/{s.name}", s.name, False))
    for s in suite("default"):
        cases.append((f"default/{s.name}/count", s.name, False))
        cases.append((f"default/{s.name}/spatial", s.name, False))
    for s in suite("large"):
        cases.append((f"large/{s.name}", s.name, True))
    cases.append(("generated/mlp10000", "mlp10000", True))
    return cases


def _scenario(name: str):
    from mallocgym.scenarios import get
    from mallocgym.speed import program_with_buffers

    if name == "mlp10000":
        return program_with_buffers(10000)
    return get(name)


def fingerprint(case: str, name: str) -> dict:
    """The hash of the plan's mapping arrays and its program time for one case."""
    from mallocgym.agents.xla_msa import MSAConfig, plan_msa
    from mallocgym.sim import v1

    cfg = MSAConfig()
    if case.endswith("/count"):
        cfg = MSAConfig(picker="count")
    elif case.endswith("/spatial"):
        cfg = MSAConfig(order="spatial")
    st, state = plan_msa(_scenario(name), cfg)
    h = hashlib.sha256()
    for a in (state.seg_kind, state.seg_off, state.seg_pstart, state.ev_done):
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    return {"sha256": h.hexdigest(), "time": float(v1.current_time(st, state)).hex(),
            "copies": int(state.counters[v1.N_COPIES])}


def _params():
    return [pytest.param(case, name, id=case, marks=[pytest.mark.slow] if slow else [])
            for case, name, slow in _cases()]


@pytest.mark.parametrize("case, name", _params())
def test_plan_mapping_equals_golden(case, name):
    golden = json.loads(GOLDEN.read_text())
    assert case in golden, f"no golden value for {case}: regenerate tests/data/msa_golden.json"
    assert fingerprint(case, name) == golden[case]


def main() -> None:
    out = {case: fingerprint(case, name) for case, name, _ in _cases()}
    GOLDEN.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(out)} cases to {GOLDEN}", file=sys.stderr)


if __name__ == "__main__":
    main()


def _random_prefix(scenario, fraction: float, seed: int):
    """A v1 game on ``scenario`` played through the action table with random legal moves up to
    ``fraction`` of its decisions: ``(st, state, table)``."""
    from mallocgym.features.v1 import advance_forced, play
    from mallocgym.heuristics.v1 import new_game
    from mallocgym.sim import v1

    rng = np.random.default_rng(seed)
    st, state, table, _ = new_game(scenario)
    n = st.seg_use.shape[0]
    s = advance_forced(st, state, table)
    while s >= 0 and state.counters[v1.POS] < fraction * n:
        legal = np.flatnonzero(table.kind >= 0)
        a = int(table.msa_action[0]) if rng.random() < 0.5 else int(rng.choice(legal))
        s = play(st, state, table, s, table.kind[a], table.off[a], table.pstart[a])
    return st, state, table


@pytest.mark.parametrize("name", ["mlp-train-s1@1/8", "lstm-train@1/2", "moe-layer-train@1/8", "minimalloc-C@1MiB",
                                  "alexnet-infer@1/8"])
@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.7])
def test_complete_msa_equals_playing_msas_action_step_by_step(name, fraction):
    """Issue 33: ``complete_msa`` (MSA's choice and the rules only, one simulation at the end)
    leaves the state the env's step-by-step play of MSA's action leaves, from any state."""
    from mallocgym.heuristics.v1 import complete_msa, complete_msa_env
    from mallocgym.scenarios import get
    from mallocgym.sim import v1
    from mallocgym.features.v1 import copy_table

    st, state, table = _random_prefix(get(name), fraction, seed=len(name))
    a, b = v1.copy_state(state), v1.copy_state(state)
    ta = complete_msa(st, a, copy_table(table))
    tb = complete_msa_env(st, b, copy_table(table))
    assert float(ta).hex() == float(tb).hex()
    for field, x, y in zip(v1.State1._fields, a, b):
        if field == "active":  # the same chunks; how much of the list is merged in offset order varies
            n = int(a.counters[v1.N_CHUNKS])
            assert sorted(x[:n].tolist()) == sorted(y[:n].tolist())
        elif field == "ch_rank":  # a chunk's place in ``active`` once merged (when varies, as above)
            n = int(a.counters[v1.N_CHUNKS])
            ra, rb = x[np.asarray(a.active[:n])], y[np.asarray(b.active[:n])]
            assert all(r in (-1, i) for i, r in enumerate(ra)) and all(r in (-1, i) for i, r in enumerate(rb))
        elif field == "counters":
            keep = [i for i in range(x.shape[0]) if i != v1.ACT_SORTED]
            assert x[keep].tolist() == y[keep].tolist()
        elif field in ("ix_nxt", "ix_cid"):
            n = int(a.counters[v1.IX_USED])
            assert np.array_equal(x[:n], y[:n]), field
        elif field == "touched":  # the changed iterations listed since the last simulation (past them: scratch)
            n = max(int(x[0]), 0)
            assert x[0] == y[0] and np.array_equal(x[1:n + 1], y[1:n + 1]), field
        elif field in ("rs_start", "rs_end", "rs_amount", "rs_next"):
            n = int(a.rs_count[0])
            assert np.array_equal(x[:n], y[:n]), field
        elif field in ("cp_first", "cp_next"):  # the copies in queue order, compared below
            qa, qb = v1.copy_list(a), v1.copy_list(b)
            assert np.array_equal(qa, qb), field
        elif field.startswith("cp_") and field != "cp_flight":  # the listed copies' fields (others: leftovers)
            qa = v1.copy_list(a)
            assert np.array_equal(x[qa], y[qa]), field
        else:
            assert np.array_equal(x, y), field
