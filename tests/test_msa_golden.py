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
