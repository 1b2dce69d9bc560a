"""The simulators' fixed records reach the kernels with one numba type however they were built:
from a workload that was unpickled (writable arrays), or pickled and copied themselves. A
writable field would make numba compile every kernel that reads the record once more."""

import copy
import pickle
from collections import namedtuple

import numpy as np
from numba import typeof

from mallocgym import sim
from mallocgym._jit import frozen_record
from mallocgym.scenarios import resolve
from mallocgym.sim import v1


def _variants(build):
    scenario = resolve("alexnet-train@1/8")
    unpickled = pickle.loads(pickle.dumps(scenario))
    assert unpickled.workload.size.flags.writeable   # what a worker process receives
    record = build(scenario)
    return [record, build(unpickled), pickle.loads(pickle.dumps(record)), copy.deepcopy(record)]


def test_v1_static_has_one_type_however_built():
    records = _variants(lambda s: v1.compile_v1(s.workload, s.hardware))
    assert all(not a.flags.writeable for r in records for a in r)
    assert len({typeof(r) for r in records}) == 1
    assert all(isinstance(r, v1.Static1) for r in records)
    for a, b in zip(records[0], records[2]):
        np.testing.assert_array_equal(a, b)


def test_v0_static_has_one_type_however_built():
    records = _variants(lambda s: sim.compile_scenario(s.workload, s.hardware))
    assert all(not a.flags.writeable for r in records for a in r)
    assert len({typeof(r) for r in records}) == 1


def test_frozen_record_leaves_the_callers_arrays_writable():
    Pair = namedtuple("Pair", ["a", "b"])
    a, b = np.arange(3), np.zeros(2)
    pair = frozen_record(Pair(a, b))
    assert a.flags.writeable and b.flags.writeable
    assert not pair.a.flags.writeable and not pair.b.flags.writeable
    a[0] = 7
    assert pair.a[0] == 7   # a view, not a copy
