"""One validation path: every route into a workload, every hardware and env argument, checked
up front with one clear error naming the field; buffers larger than fast memory are legal."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import mallocgym
from mallocgym import Hardware, Workload, evaluate
from mallocgym.env import MallocGameEnv
from mallocgym.scenarios import Scenario, override, resolve
from mallocgym.workloads import load, save
from mallocgym.scenarios import WorkloadGenerator
from mallocgym.workloads.io import load_minimalloc, workload_to_dict

from strategies import scenarios as scenario_strategy

KIB = 1024


def _doc(**buffer_fields) -> dict:
    """A valid two-buffer JSON workload document, with buffer 1's fields replaced."""
    doc = {"format": "mallocgym-workload", "version": 1, "name": "w", "flops": [1e6, 1e6],
           "buffers": [{"size": 64, "start": 0, "end": 1}, {"size": 64, "start": 0, "end": 1}]}
    doc["buffers"][1].update(buffer_fields)
    return doc


def _write_json(tmp_path, doc):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    return path


def _write_npz(tmp_path, **arrays):
    """A mallocgym NPZ of a valid two-buffer workload with some arrays replaced."""
    good = save(Workload.with_default_accesses("w", [1e6, 1e6], [64, 64], [0, 0], [1, 1]), tmp_path / "good.npz")
    path = tmp_path / "w.npz"
    with np.load(good) as data:
        content = {key: data[key] for key in data.files}
    content.update(arrays)
    np.savez(path, **content)
    return path


# ------------------------------------------------------------------------------ workloads
@pytest.mark.parametrize("size", [2**62, 2**63 - 1, 2**70])
def test_huge_sizes_are_one_error_in_every_route(tmp_path, size):
    with pytest.raises(ValueError, match=r"buffer 1: field 'size' = \d+ must be (at most|<=) 281474976710656"):
        Workload.with_default_accesses("w", [1.0, 1.0], [64, size], [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"w.json: buffer 1: field 'size' = \d+ must be <= 281474976710656"):
        load(_write_json(tmp_path, _doc(size=size)))
    csv = tmp_path / "t.csv"
    csv.write_text(f"id,lower,upper,size\na,0,2,64\nb,0,2,{size}\n")
    with pytest.raises(ValueError, match=r"t.csv: line 3: field 'size' = \d+ must be at most 281474976710656"):
        load_minimalloc(csv)


def test_sizes_summing_past_the_bound_are_rejected():
    n = 2**13 + 1  # 2**13 + 1 buffers of 2**47 bytes: each legal, together 2**60 + 2**47
    with pytest.raises(ValueError, match=r"the size fields sum to .* more than the bound 1152921504606846976"):
        Workload.with_default_accesses("w", [1.0, 1.0], [2**47] * n, [0] * n, [1] * n)


@pytest.mark.parametrize("value, text", [(262144.7, "262144.7"), (float("nan"), "nan"), (float("inf"), "inf")])
def test_npz_sizes_must_be_whole_numbers(tmp_path, value, text):
    path = _write_npz(tmp_path, size=np.array([64.0, value]))
    with pytest.raises(ValueError, match=rf"w.npz: workload 'w': buffer 1: field 'size' = {text} is not an integer"):
        load(path)


def test_npz_whole_float_sizes_load_like_json(tmp_path):
    path = _write_npz(tmp_path, size=np.array([64.0, 32.0]))
    assert load(path).size.tolist() == [64, 32]
    assert load(path).size.dtype == np.int64


def test_json_fractional_size_is_rejected_like_npz(tmp_path):
    with pytest.raises(ValueError, match=r"buffer 1: field 'size' = 262144.7 is not an integer"):
        load(_write_json(tmp_path, _doc(size=262144.7)))


def test_garbled_npz_does_not_suggest_allow_pickle(tmp_path):
    path = tmp_path / "g.npz"
    path.write_bytes(b"\x80\x04garbage that is not a zip archive" * 10)
    with pytest.raises(ValueError, match=r"g.npz: not a mallocgym NPZ file") as info:
        load(path)
    assert "allow_pickle" not in str(info.value)
    objects = _write_npz(tmp_path, meta=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match=r"w.npz: not a mallocgym NPZ file \(it holds Python objects") as info:
        load(objects)
    assert "allow_pickle" not in str(info.value)


def test_bool_sizes_and_string_flops_are_rejected():
    with pytest.raises(ValueError, match=r"field 'size' must hold integers, got booleans"):
        Workload.with_default_accesses("w", [1.0, 1.0], [True, True], [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"field 'flops' must hold numbers"):
        Workload.with_default_accesses("w", ["x", 1.0], [4, 4], [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"workload name must be a string"):
        Workload.with_default_accesses(7, [1.0, 1.0], [4, 4], [0, 0], [1, 1])


def test_an_access_far_larger_than_its_buffer_is_rejected(tmp_path):
    doc = _doc(size=256 * KIB, accesses=[[0, 256 * KIB, "w"], [1, 10**12, "r"]])
    with pytest.raises(ValueError, match=r"buffer 1: access 1: field 'bytes' = 1000000000000 is more than 65536 "
                                         r"times the buffer's size 262144"):
        load(_write_json(tmp_path, doc))
    # a loop body run 5 times may read its buffer 5 times over (the XLA importer does this)
    ok = load(_write_json(tmp_path, _doc(size=64, accesses=[[0, 64, "w"], [1, 5 * 64, "r"]])))
    assert ok.accesses(1)[1] == (1, 320, False)


def test_a_program_with_no_work_is_rejected_everywhere(tmp_path):
    doc = _doc(accesses=[[0, 0, "w"], [1, 0, "r"]])
    doc["flops"] = [0.0, 0.0]
    doc["buffers"][0]["accesses"] = [[0, 0, "w"]]
    with pytest.raises(ValueError, match=r"the program does no work"):
        load(_write_json(tmp_path, doc))
    with pytest.raises(ValueError, match=r"the program does no work"):
        Workload.from_buffers("w", [0.0], [8], [0], [0], [[(0, 0, True)]])


def test_default_capacity_is_checked():
    with pytest.raises(ValueError, match=r"field 'default_capacity' = 0 must be >= 1"):
        Workload.with_default_accesses("w", [1.0], [4], [0], [0], default_capacity=0)
    with pytest.raises(ValueError, match=r"field 'default_capacity' must be an integer, got float"):
        Workload.with_default_accesses("w", [1.0], [4], [0], [0], default_capacity=4.5)


# ------------------------------------------------------------------------------ hardware
@pytest.mark.parametrize("capacity", [True, "abc", 2.5, -5, 0, 2**70])
def test_hardware_capacity_must_be_a_bounded_integer(capacity):
    with pytest.raises(ValueError, match=r"Hardware.fast_capacity must be an integer >= 1"):
        Hardware(fast_capacity=capacity)


def test_hardware_rates_reject_bools_and_strings():
    with pytest.raises(ValueError, match=r"Hardware.slow_bw must be a finite number > 0, got True"):
        Hardware(slow_bw=True)
    with pytest.raises(ValueError, match=r"Hardware.peak_flops must be a finite number > 0, got '1e12'"):
        Hardware(peak_flops="1e12")


# ------------------------------------------------------------------------------ env arguments
@pytest.mark.parametrize("kwargs, error, text", [
    ({"capacity": -5}, ValueError, r"capacity = -5 must be >= 1"),
    ({"capacity": "abc"}, TypeError, r"capacity must be an integer, got str"),
    ({"capacity": True}, TypeError, r"capacity must be an integer, got bool"),
    ({"capacity": 2**70}, ValueError, r"capacity = \d+ must be <= 281474976710656"),
    ({"hardware": "nope"}, ValueError, r"unknown hardware profile 'nope'"),
    ({"hardware": 3}, TypeError, r"hardware must be a Hardware or a profile name"),
    ({"n_candidates": 2.5}, TypeError, r"n_candidates must be an integer, got float"),
    ({"n_candidates": 0}, ValueError, r"n_candidates = 0 must be >= 1"),
    ({"n_next": True}, TypeError, r"n_next must be an integer, got bool"),
    ({"memory_bins": 32}, TypeError, r"memory_bins must be two integers"),
    ({"memory_bins": (32, 0)}, ValueError, r"memory_bins\[1\] = 0 must be >= 1"),
    ({"workload": 123}, TypeError, r"workload must be a Workload, a Scenario, a bundled name"),
    ({"workload": [mallocgym.Workload, 5]}, TypeError, r"workload must be a Workload"),
])
def test_bad_env_arguments_name_the_argument(kwargs, error, text):
    with pytest.raises(error, match=text):
        MallocGameEnv(**{"workload": "mlp-train@1/8", **kwargs})


def test_hardware_and_capacity_apply_to_every_suite_scenario():
    env = gym.make("MallocGame-v0", hardware="gpu-a100-like", capacity=1 << 20)
    for scenario in env.unwrapped.scenarios:
        assert scenario.hardware.name == "gpu-a100-like"
        assert scenario.hardware.fast_capacity == 1 << 20
        assert scenario.name == f"{scenario.workload.name}@1048576B"
    env.reset(seed=3)
    assert env.unwrapped.hardware.name == "gpu-a100-like" and env.unwrapped.hardware.fast_capacity == 1 << 20


def test_hardware_alone_keeps_each_scenarios_capacity_and_name():
    base = {s.name: s for s in MallocGameEnv().scenarios}
    for scenario in MallocGameEnv(hardware="gpu-a100-like").scenarios:
        assert scenario.hardware.name == "gpu-a100-like"
        assert scenario.hardware.fast_capacity == base[scenario.name].hardware.fast_capacity


def test_hardware_and_capacity_apply_to_generated_scenarios():
    env = gym.make("MallocGame-v0", workload=WorkloadGenerator("small"), hardware="npu-edge-like",
                   capacity=300_000)
    for seed in range(3):
        env.reset(seed=seed)
        hw = env.unwrapped.hardware
        assert (hw.name, hw.fast_capacity) == ("npu-edge-like", 300_000)
        assert env.unwrapped.scenario.name.endswith("@300000B")


def test_hardware_and_capacity_apply_to_vector_envs():
    for mode in ("vector_entry_point", "sync"):
        venv = gym.make_vec("MallocGame-v0", num_envs=2, vectorization_mode=mode, hardware="gpu-a100-like",
                            capacity=1 << 20)
        venv.reset(seed=0)
        envs = venv.envs if mode == "vector_entry_point" else [e.unwrapped for e in venv.envs]
        for env in envs:
            hw = env.hardware if mode == "sync" else env.unwrapped.hardware
            assert (hw.name, hw.fast_capacity) == ("gpu-a100-like", 1 << 20)
        venv.close()


def test_a_capacity_override_renames_the_scenario():
    scenario = resolve("unet-infer@1/8", capacity=20_000_000)
    assert scenario.name == "unet-infer@20000000B" and scenario.hardware.fast_capacity == 20_000_000
    same = resolve("unet-infer@1/8", capacity=resolve("unet-infer@1/8").hardware.fast_capacity)
    assert same.name == "unet-infer@1/8"  # the capacity did not change
    assert override(scenario) is scenario


# ------------------------------------------------------------------------------ oversized buffers
def _with_oversized() -> Scenario:
    """Buffer 0 (600 B) is larger than the 400-byte fast memory; buffers 1 and 2 fit."""
    w = Workload.from_buffers("big", [0.0, 0.0, 0.0], [600, 200, 100], [0, 0, 1], [2, 1, 2])
    hw = Hardware(peak_flops=1e12, slow_bw=1000.0, fast_bw=10000.0, fast_capacity=400)
    return Scenario("big", w, hw)


def test_oversized_buffer_plays_to_the_end_with_only_skip_legal():
    scenario = _with_oversized()
    env = MallocGameEnv(scenario, invalid_action="raise")
    obs, info = env.reset(seed=0)
    assert info["oversized_buffers"] == 1
    done, steps = False, 0
    while not done:
        mask = info["action_mask"]
        if env.current_buffer == 0:
            assert mask.tolist() == [0] * env.k + [1]  # only skip
        obs, reward, done, _, info = env.step(int(np.flatnonzero(mask)[0]))
        steps += 1
    assert steps == 3 and info["offsets"][0] == -1 and info["offsets"][1] >= 0 and info["offsets"][2] >= 0
    ev = evaluate(scenario.workload, info["offsets"], scenario.hardware)
    assert ev.oversized_buffers == 1
    # hand-worked: buffers 1 and 2 fast save (200 + 100) * 2 bytes * (1/1000 - 1/10000) s = 0.54 s
    assert ev.time_all_slow - ev.time == pytest.approx(0.54)


@pytest.mark.parametrize("agent", ["all-slow", "random", "xla", "first-fit", "best-fit", "rollout", "beam", "mcts"])
def test_every_agent_leaves_an_oversized_buffer_slow(agent):
    from mallocgym.harness import solve

    result = solve(_with_oversized(), agent)
    assert result.offsets[0] == -1
    if agent != "all-slow" and agent != "random":
        assert result.offsets[1] >= 0 and result.offsets[2] >= 0


def test_exact_leaves_an_oversized_buffer_slow():
    pytest.importorskip("ortools")
    from mallocgym.harness import solve

    result = solve(_with_oversized(), "exact")
    assert result.offsets[0] == -1 and result.offsets[1] >= 0 and result.offsets[2] >= 0


def test_a_real_program_below_its_largest_tensor_plays_to_the_end():
    scenario = resolve("alexnet-train@1/8")
    largest = int(scenario.workload.size.max())
    env = MallocGameEnv(scenario.name, capacity=largest // 2)
    obs, info = env.reset(seed=0)
    assert info["oversized_buffers"] == int((scenario.workload.size > largest // 2).sum()) > 0
    done = False
    while not done:
        obs, _, done, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    evaluate(env.workload, info["offsets"], env.hardware)  # valid
    big = scenario.workload.size > largest // 2
    assert all(info["offsets"][b] == -1 for b in np.flatnonzero(big))


# ------------------------------------------------------------------------------ round trips
@settings(max_examples=40, deadline=None)
@given(case=scenario_strategy())
def test_random_workloads_round_trip_through_every_format(tmp_path_factory, case):
    workload, _ = case
    folder = tmp_path_factory.mktemp("rt")
    for suffix in (".json", ".npz"):
        back = load(save(workload, folder / f"w{suffix}"))
        for key in ("flops", "size", "start", "end", "access_ptr", "access_op", "access_bytes", "access_write"):
            assert np.array_equal(getattr(back, key), getattr(workload, key)), (suffix, key)
    # MiniMalloc CSV keeps the rectangles: sizes, and which buffers are live together
    from mallocgym.workloads.minimalloc import write_minimalloc

    back = load(write_minimalloc(folder / "w.csv", workload))
    assert back.size.tolist() == workload.size.tolist()

    def together(w):
        return (w.start[:, None] <= w.end[None, :]) & (w.start[None, :] <= w.end[:, None])

    assert np.array_equal(together(back), together(workload))


@settings(max_examples=30, deadline=None)
@given(case=scenario_strategy(), field=hs.sampled_from(["size", "start", "end"]),
       bad=hs.sampled_from([-1, 2**49, 2**70, 1.5, "x", None]))
def test_a_bad_field_is_rejected_by_json_and_npz_alike(tmp_path_factory, case, field, bad):
    workload, _ = case
    folder = tmp_path_factory.mktemp("bad")
    doc = workload_to_dict(workload)
    doc["buffers"][0][field] = bad
    (folder / "w.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"w.json: .*buffer 0.*'" + field + "'"):
        load(folder / "w.json")
    if isinstance(bad, str) or bad is None or bad == 2**70:
        return  # NPZ arrays hold numbers that fit a dtype; JSON alone can say these
    arrays = {field: np.array([bad] + getattr(workload, field)[1:].tolist())}
    path = _write_npz_from(folder, workload, arrays)
    with pytest.raises(ValueError, match=r"w.npz: .*buffer 0.*'" + field + "'"):
        load(path)


def _write_npz_from(folder, workload, arrays):
    good = save(workload, folder / "good.npz")
    with np.load(good) as data:
        content = {key: data[key] for key in data.files}
    content.update(arrays)
    path = folder / "w.npz"
    np.savez(path, **content)
    return path


def test_outputs_are_checked_and_saved(tmp_path):
    from mallocgym.workloads.io import load, save

    w = Workload.with_default_accesses("w", [1.0, 1.0], [4, 4], [0, 0], [1, 0], outputs=[0])
    assert w.outputs == (0,) and w.output_mask.tolist() == [True, False]
    for name in ("w.json", "w.npz"):
        save(w, tmp_path / name)
        assert load(tmp_path / name).outputs == (0,)
    plain = Workload.with_default_accesses("w", [1.0, 1.0], [4, 4], [0, 0], [1, 0])
    assert plain.outputs is None and plain.output_mask.tolist() == [True, False]  # live at the last op
    save(plain, tmp_path / "p.json")
    assert "outputs" not in (tmp_path / "p.json").read_text() and load(tmp_path / "p.json").outputs is None
    with pytest.raises(ValueError, match="field 'outputs' is empty"):  # XLA programs always have an output
        Workload.with_default_accesses("w", [1.0, 1.0], [4], [0], [1], outputs=[])
    for bad, text in (([1], r"outputs\[0\] = buffer 1 ends at op 0, but an output must be live at the last op \(1\)"),
                      ([0, 0], "lists a buffer twice"), ([2], r"outputs\[0\]"), ([0.5], r"outputs\[0\]"),
                      ("0", "must be a list of buffer indices")):
        with pytest.raises(ValueError, match=text):
            Workload.with_default_accesses("w", [1.0, 1.0], [4, 4], [0, 0], [1, 0], outputs=bad)
