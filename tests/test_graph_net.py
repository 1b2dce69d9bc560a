"""A real tensor larger than fast memory: a JAX graph network (tests/data/xla/graph_net, made by
make_fixtures.py; no JAX here) played at 256 KiB, where its node features ``x.1`` (384 x 192 f32 =
294912 bytes) and two per-edge message buffers do not fit and must stay slow."""

import json

import numpy as np
import pytest

from mallocgym import evaluate, save
from mallocgym.cli import main
from mallocgym.env import MallocGameEnv
from mallocgym.harness import solve
from mallocgym.scenarios import resolve
from mallocgym.workloads.xla import import_xla_dump

from conftest import DATA

FOLDER = DATA / "xla" / "graph_net"
CAPACITY = 262144  # 256 KiB


@pytest.fixture(scope="module")
def workload():
    return import_xla_dump(FOLDER)


@pytest.fixture(scope="module")
def oversized(workload):
    """Indices of the buffers larger than the fast memory, counted from the sizes."""
    return [b for b, size in enumerate(workload.size) if int(size) > CAPACITY]


def test_fixture_has_the_oversized_node_features(workload, oversized):
    sizes = dict(zip(workload.buffer_names, (int(s) for s in workload.size)))
    assert sizes["x.1"] == 384 * 192 * 4 == 294912 > CAPACITY
    assert workload.buffer_names.index("x.1") in oversized
    assert len(oversized) >= 1


def test_env_plays_to_the_end_with_oversized_buffers_slow(workload, oversized):
    env = MallocGameEnv(workload, capacity=CAPACITY)
    obs, info = env.reset(seed=0)
    assert info["oversized_buffers"] == len(oversized)
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated):
        action = int(np.flatnonzero(obs["action_mask"])[0])
        if info["buffer"] in oversized:
            assert np.flatnonzero(obs["action_mask"]).tolist() == [env.unwrapped.k]  # only skip
        obs, reward, terminated, truncated, info = env.step(action)
        assert not info["invalid_action"]
        steps += 1
    assert steps == workload.num_buffers and not truncated
    assert info["oversized_buffers"] == len(oversized)
    offsets = info["offsets"]
    assert all(offsets[b] == -1 for b in oversized)
    ev = evaluate(workload, offsets, resolve(workload, capacity=CAPACITY).hardware)
    assert ev.oversized_buffers == len(oversized)
    assert ev.speedup == pytest.approx(info["speedup"])
    assert ev.speedup >= 1.0


def test_cli_solve_xla_at_256_kib(workload, oversized, tmp_path, capsys):
    path = save(workload, tmp_path / "graph_net.npz")
    code = main(["solve", str(path), "--capacity", str(CAPACITY), "--agent", "xla", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["fast_capacity"] == CAPACITY
    assert len(out["offsets"]) == workload.num_buffers
    assert all(out["offsets"][b] == -1 for b in oversized)
    assert any(o >= 0 for o in out["offsets"])
    assert out["speedup"] >= 1.0


@pytest.mark.parametrize("agent", ["xla", "rollout", "exact"])
def test_agents_solve_at_256_kib(workload, oversized, agent):
    if agent == "exact":
        pytest.importorskip("ortools")
    scenario = resolve(workload, capacity=CAPACITY)
    assert scenario.hardware.fast_capacity == CAPACITY
    result = solve(scenario, agent)
    assert result.fast_capacity == CAPACITY
    assert all(result.offsets[b] == -1 for b in oversized)
    assert result.speedup >= 1.0
