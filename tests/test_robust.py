"""Issue 30, "Nothing wrong, nothing lost": unusual and malformed input through the readers, the
CLI, the env and the agents gives one ``ValueError`` naming the field (CLI: one line, exit 2);
results and training runs are never lost or half-written."""

from __future__ import annotations

import copy
import gzip
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mallocgym
from mallocgym import Hardware, Workload, cli
from mallocgym._files import claim_folder, lock_path, replace_folder
from mallocgym._interrupt import graceful_stop, terminate_as_interrupt, truncate_jsonl
from mallocgym._validate import MAX_DEPTH, clip, parse_json, read_json
from mallocgym.pricing.v1 import evaluate_v1, load_mapping
from mallocgym.workloads import save
from mallocgym.workloads.io import workload_from_dict, workload_to_dict

HW = Hardware(peak_flops=1.0, slow_bw=100.0, fast_bw=1000.0, fast_capacity=100, alignment=1, op_overhead=0.0)


def small_workload() -> Workload:
    """Buffer 0 (100 B) is written at op 0, read at ops 1 and 4; buffer 1 is the output."""
    return Workload.from_buffers("w", [1.0] * 6, [100, 1], [0, 0], [4, 5],
                                 [[(0, 100, True), (1, 100, False), (4, 100, False)], [(0, 1, True), (5, 1, False)]])


def good_mapping() -> dict:
    """Produced fast, evicted (done before op 2), prefetched back after op 2 for its use at op 4."""
    return {"format": "mallocgym-v1-mapping", "version": 1,
            "allocations": [{"buffer": 0, "segment": 0, "kind": "fast", "offset": 0},
                            {"buffer": 0, "segment": 1, "kind": "prefetch", "offset": 0, "prefetch_after": 2}],
            "evictions": [{"buffer": 0, "done_before": 2}]}


def test_the_reference_mapping_is_valid():
    ev = evaluate_v1(small_workload(), good_mapping(), HW)
    assert ev.prefetches == 1 and ev.evictions == 1


# ------------------------------------------------------------------------------ sentinels
@pytest.mark.parametrize("mutate, field", [
    (lambda m: m["evictions"][0].update(done_before=-1), "done_before"),          # was read as "no eviction"
    (lambda m: m["evictions"].insert(0, {"buffer": 0, "done_before": -1}), "done_before"),  # hid a duplicate
    (lambda m: m["allocations"][0].update(offset=-1), "offset"),
    (lambda m: m["allocations"][1].update(offset=-5), "offset"),
    (lambda m: m["allocations"][0].update(segment=-1), "segment"),
    (lambda m: m["allocations"][0].update(buffer=-1), "buffer"),
    (lambda m: m["allocations"][1].update(prefetch_after=-2), "prefetch_after"),
    (lambda m: m["allocations"][0].update(use_op=-1), "use_op"),
])
def test_negative_values_are_never_the_none_sentinel(mutate, field):
    mapping = good_mapping()
    mutate(mapping)
    with pytest.raises(ValueError, match=f"'{field}'|{field}"):
        evaluate_v1(small_workload(), mapping, HW)


def test_a_listed_eviction_is_never_reported_missing():
    mapping = good_mapping()
    mapping["evictions"].append({"buffer": 0, "done_before": 2})
    with pytest.raises(ValueError, match="evicted twice"):
        evaluate_v1(small_workload(), mapping, HW)


def test_a_prefetch_while_the_value_is_still_fast_is_named_as_such():
    """Was: 'eviction done before op 3 must lie in [2, 0]' (an empty range, blaming the eviction)."""
    mapping = good_mapping()
    mapping["allocations"][1]["prefetch_after"] = 0
    mapping["evictions"][0]["done_before"] = 3
    with pytest.raises(ValueError, match=r"segment 1 \(use at op 4\): prefetch after op 0 is issued while the value "
                                         r"is still in fast memory \(its last fast use is op 1\)"):
        evaluate_v1(small_workload(), mapping, HW)


@pytest.mark.parametrize("value", ["1_000", "٣", "0x10", "1e3"])
def test_minimalloc_integers_are_plain_digits(tmp_path, value):
    path = tmp_path / "t.csv"
    path.write_text(f"id,lower,upper,size\na,0,2,{value}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: field 'size' = .* is not an integer"):
        mallocgym.load(path)


# ------------------------------------------------------------------------------ unknown keys
@pytest.mark.parametrize("mutate, key, hint", [
    (lambda m: m.update(allocation=m.pop("allocations")), "allocation", "allocations"),
    (lambda m: m.update(evictons=[]), "evictons", "evictions"),
    (lambda m: m["allocations"][1].update(prefetch_afer=m["allocations"][1].pop("prefetch_after")),
     "prefetch_afer", "prefetch_after"),
    (lambda m: m["evictions"][0].update(done=2), "done", "done_before"),
])
def test_unknown_mapping_keys_name_the_nearest_known_one(mutate, key, hint):
    mapping = good_mapping()
    mutate(mapping)
    with pytest.raises(ValueError, match=f"unknown field '{key}' \\(did you mean '{hint}'\\?\\)"):
        evaluate_v1(small_workload(), mapping, HW)


@pytest.mark.parametrize("mutate, key, hint", [
    (lambda d: d.update(buffer=d.pop("buffers")), "buffer", "buffers"),
    (lambda d: d.update(output=[1]), "output", "outputs"),
    (lambda d: d["buffers"][0].update(sise=4), "sise", "size"),
    (lambda d: d["buffers"][1].update(acceses=[]), "acceses", "accesses"),
])
def test_unknown_workload_keys_name_the_nearest_known_one(tmp_path, mutate, key, hint):
    doc = workload_to_dict(small_workload())
    mutate(doc)
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"w.json.*unknown field '{key}' \\(did you mean '{hint}'\\?\\)"):
        mallocgym.load(path)


def test_unknown_npz_meta_key_is_an_error(tmp_path):
    good = save(small_workload(), tmp_path / "good.npz")
    with np.load(good) as data:
        content = {key: data[key] for key in data.files}
    meta = json.loads(str(content["meta"]))
    meta["op_name"] = []
    content["meta"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "bad.npz", **content)
    with pytest.raises(ValueError, match="bad.npz: array 'meta': unknown field 'op_name' \\(did you mean 'op_names'"):
        mallocgym.load(tmp_path / "bad.npz")


# ------------------------------------------------------------------------------ exact types and bounds
@pytest.mark.parametrize("version", [True, 1.0, "1", None, 2])
def test_version_is_the_integer_1(tmp_path, version):
    mapping = good_mapping()
    mapping["version"] = version
    with pytest.raises(ValueError, match="'version'"):
        evaluate_v1(small_workload(), mapping, HW)
    doc = workload_to_dict(small_workload())
    doc["version"] = version
    with pytest.raises(ValueError, match="'version'"):
        workload_from_dict(doc)


@pytest.mark.parametrize("where, key, value", [
    ("allocation", "offset", 2**70), ("allocation", "offset", 2**63), ("allocation", "buffer", 10**30),
    ("allocation", "segment", 2**64), ("eviction", "done_before", 2**80), ("allocation", "offset", "0"),
    ("allocation", "offset", 0.0), ("allocation", "buffer", True), ("allocation", "kind", ["fast"]),
    ("allocation", "kind", {"a": 1}), ("eviction", "buffer", [0]), ("allocation", "buffer", None),
])
def test_wrong_types_and_huge_integers_are_one_value_error(where, key, value):
    mapping = good_mapping()
    (mapping["allocations"][0] if where == "allocation" else mapping["evictions"][0])[key] = value
    with pytest.raises(ValueError, match=f"'{key}'"):
        evaluate_v1(small_workload(), mapping, HW)


@pytest.mark.parametrize("path, value, field", [
    (("buffers", 0, "size"), 2**70, "size"), (("buffers", 0, "start"), -1, "start"),
    (("buffers", 0, "accesses", 0, 0), 2**64, "op"), (("buffers", 0, "accesses", 0, 1), -3, "bytes"),
    (("flops", 0), 10**400, "flops"), (("flops", 0), True, "flops"), (("default_capacity",), 2**70, "default_capacity"),
    (("default_capacity",), -1, "default_capacity"), (("outputs",), [2**64], "outputs"), (("outputs",), [-1], "outputs"),
    (("name",), 5, "name"), (("op_names",), "abc", "op_names"), (("buffers", 0, "name"), 3, "name"),
    (("buffers",), {"0": 1}, "buffers"),
])
def test_workload_fields_are_exact_and_bounded(path, value, field):
    doc = workload_to_dict(small_workload())
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValueError, match=f"'{field}'"):
        workload_from_dict(doc)


def test_empty_outputs_are_refused(tmp_path):
    doc = workload_to_dict(small_workload())
    doc["outputs"] = []
    with pytest.raises(ValueError, match="field 'outputs' is empty"):
        workload_from_dict(doc)


# ------------------------------------------------------------------------------ nesting, JSON oddities
@pytest.mark.parametrize("reader", ["mapping", "workload"])
def test_deep_nesting_is_one_value_error(tmp_path, reader):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ValueError, match=f"nested 200000 deep; a mallocgym file nests at most {MAX_DEPTH}"):
        load_mapping(path) if reader == "mapping" else mallocgym.load(path)


@pytest.mark.parametrize("text, message", [
    ('{"a": NaN}', "NaN is not a JSON number"), ('{"a": 1, "a": 2}', "field 'a' is given twice"),
    ('{"a": ' + "9" * 5000 + "}", "invalid JSON"), (b'{"a": "\xff"}', "not UTF-8"),
    ('{"a": [1, 2}', "invalid JSON"),
])
def test_strict_json(text, message):
    with pytest.raises(ValueError, match=message):
        parse_json(text, "f.json")


def test_not_a_regular_file(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(ValueError, match="dir.json: is a folder, not a workload file"):
        mallocgym.load(tmp_path / "dir.json")
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(ValueError, match="fifo.json: is a FIFO, not a regular workload file"):
        mallocgym.load(tmp_path / "fifo.json")
    os.symlink(tmp_path / "loop.json", tmp_path / "loop.json")
    with pytest.raises(ValueError, match="loop.json: a symbolic link loop"):
        mallocgym.load(tmp_path / "loop.json")
    with pytest.raises(ValueError, match="fifo.json: is a FIFO, not a regular mapping file"):
        read_json(tmp_path / "fifo.json", what="mapping file")
    with pytest.raises(ValueError, match="none.json: no such file"):
        load_mapping(tmp_path / "none.json")


# ------------------------------------------------------------------------------ CLI
def _write_pair(tmp_path, mapping):
    workload = save(small_workload(), tmp_path / "w.json")
    path = tmp_path / "m.json"
    path.write_text(mapping if isinstance(mapping, str) else json.dumps(mapping))
    return str(workload), str(path)


@pytest.mark.parametrize("mapping", [
    "[" * 100_000, {**good_mapping(), "allocations": [{"buffer": 2**70, "segment": 0, "kind": "fast", "offset": 0}]},
    {**good_mapping(), "allocations": [{"buffer": [0], "segment": 0, "kind": "fast", "offset": 0}]},
    {**good_mapping(), "version": True}, {**good_mapping(), "evictions": [{"buffer": 0, "done_before": -1}]},
])
def test_cli_prints_one_line_for_bad_input(tmp_path, capsys, mapping):
    workload, path = _write_pair(tmp_path, mapping)
    assert cli.main(["evaluate", workload, path, "--capacity", "100"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mallocgym: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_cli_shows_an_internal_bug_as_a_traceback(tmp_path, monkeypatch):
    import importlib

    module = importlib.import_module("mallocgym.pricing.v1")

    workload, path = _write_pair(tmp_path, good_mapping())

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(module, "evaluate_v1", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["evaluate", workload, path, "--capacity", "100"])


def test_cli_does_not_echo_a_huge_argument(capsys):
    assert cli.main(["solve", "x" * 100_000]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 1200 and "characters)" in err
    assert len(clip("y" * 100_000)) < 120


# ------------------------------------------------------------------------------ env, vector, agents
@pytest.mark.parametrize("kwargs, field", [
    (dict(seed="1"), "seed"), (dict(seed=-1), "seed"), (dict(seed=1.5), "seed"), (dict(seed=True), "seed"),
    (dict(seed=2**64), "seed"), (dict(options=[("workload", "x")]), "options"), (dict(options="x"), "options"),
    (dict(options={"workloads": None}), "workloads"),
])
def test_env_reset_arguments(kwargs, field):
    import gymnasium as gym

    for env_id in ("MallocGame-v0", "MallocGame-v1"):
        env = gym.make(env_id, workload=small_workload(), capacity=100)
        with pytest.raises(ValueError, match=field):
            env.reset(**kwargs)


@pytest.mark.parametrize("action", [True, np.bool_(False), 1.5, "1", None, [1], np.array([0.0]), 10**30, -1])
def test_env_step_arguments(action):
    import gymnasium as gym

    env = gym.make("MallocGame-v0", workload=small_workload(), capacity=100)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(action)


@pytest.mark.parametrize("kwargs, field", [
    (dict(num_envs=2.0), "num_envs"), (dict(num_envs=True), "num_envs"), (dict(num_envs=10**9), "num_envs"),
    (dict(num_envs=0), "num_envs"), (dict(num_envs="2"), "num_envs"), (dict(autoreset_mode="Never"), "autoreset_mode"),
])
def test_make_vec_arguments(kwargs, field):
    import gymnasium as gym

    with pytest.raises(ValueError, match=field):
        gym.make_vec("MallocGame-v0", vectorization_mode="vector_entry_point", workload=small_workload(),
                     capacity=100, **kwargs)


@pytest.mark.parametrize("kwargs, field", [
    (dict(seed="x"), "seed"), (dict(seed=[0, "a"]), r"seed\[1\]"), (dict(seed=-3), "seed"),
    (dict(seed=2**63 - 1), "seed"), (dict(options=5), "options"), (dict(options={"reset_masks": None}), "reset_masks"),
])
def test_vector_reset_arguments(kwargs, field):
    import gymnasium as gym

    envs = gym.make_vec("MallocGame-v0", num_envs=2, vectorization_mode="vector_entry_point",
                        workload=small_workload(), capacity=100)
    with pytest.raises(ValueError, match=field):
        envs.reset(**kwargs)
    with pytest.raises(ValueError, match="actions"):
        envs.step("01")


@pytest.mark.parametrize("spec, field", [
    ("rollout:n_candidates=5000", "n_candidates"), ("mcts:simulations=4,simulations=8", "simulations.*twice"),
    ("beam:width=2,width=2", "width.*twice"), ("mcts:simulations=" + "9" * 30, "simulations"),
    ("mcts:c_uct=nan", "c_uct"), ("mcts:simulatons=4", "did you mean 'simulations'"),
    ("xla-mas", "did you mean 'xla-msa'"),
])
def test_agent_options_are_bounded_and_given_once(spec, field):
    from mallocgym.agents import make_agent

    with pytest.raises(ValueError, match=field):
        make_agent(spec)


# ------------------------------------------------------------------------------ bench --out
def _bench(tmp_path, out, *extra):
    workload = save(small_workload(), tmp_path / "w.json")
    return cli.main(["bench", "--scenario", str(workload), "--agents", "all-slow", "--quiet", "--out", str(out), *extra])


def test_bench_out_is_checked_before_the_run(tmp_path, capsys, monkeypatch):
    import mallocgym.harness as harness

    ran = []
    monkeypatch.setattr(harness, "bench", lambda *a, **k: ran.append(1) or [])
    (tmp_path / "file").write_text("x")
    assert _bench(tmp_path, tmp_path / "file" / "out") == 2  # its folder cannot be made
    assert "cannot create its folder" in capsys.readouterr().err
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    assert _bench(tmp_path, tmp_path / "mine") == 2  # the set would replace a user's file
    assert "holds 'notes.txt', which is not one of its result files" in capsys.readouterr().err
    assert not ran and (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_bench_results_replace_the_folder_as_one_set(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mappings.json.gz").write_bytes(gzip.compress(b"{}"))  # an older v1 run's
    (out / "results.md").write_text("old")
    (out / "RESULTS.md").write_text("page")  # a leaderboard entry's own files: kept as they are
    (out / "command.txt").write_text("cmd")
    assert _bench(tmp_path, out) == 0
    assert sorted(p.name for p in out.iterdir()) == ["RESULTS.md", "command.txt", "results.csv", "results.json",
                                                     "results.md"]
    assert (out / "RESULTS.md").read_text() == "page" and (out / "command.txt").read_text() == "cmd"
    assert "all-slow" in (out / "results.md").read_text()
    assert not lock_path(out).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_a_failure_between_files_leaves_the_old_set(tmp_path, monkeypatch):
    out = tmp_path / "out"
    replace_folder(out, {"results.md": b"old", "results.csv": b"old"})
    real_fsync, calls = os.fsync, []

    def full_disk(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        replace_folder(out, {"results.md": b"new", "results.csv": b"new", "results.json": b"new"})
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {"results.md": b"old", "results.csv": b"old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_second_run_into_the_same_folder_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    with claim_folder(out, ("results.md",)):
        assert _bench(tmp_path, out) == 2
        assert f"another run (process {os.getpid()}) is writing into this folder" in capsys.readouterr().err
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock_path(out).write_text(f"{dead.pid}\n")  # left by a run that died: taken over
    assert _bench(tmp_path, out) == 0 and not lock_path(out).exists()


# ------------------------------------------------------------------------------ training
def test_graceful_stop_turns_the_first_signal_into_a_flag():
    for sig in (signal.SIGINT, signal.SIGTERM):
        with graceful_stop() as stop:
            assert not stop
            os.kill(os.getpid(), sig)
            time.sleep(0.01)
            assert stop and stop.signal == sig
            with pytest.raises(KeyboardInterrupt):  # a second one stops at once
                os.kill(os.getpid(), sig)
                time.sleep(0.1)
    with terminate_as_interrupt(), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)


def test_truncate_jsonl(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"elapsed_s": 1}\n{"elapsed_s": 5}\n{"elapsed_s": 9}\n{"elapsed_s": 1')
    assert truncate_jsonl(path, lambda r: r["elapsed_s"] <= 5) == 2
    assert path.read_text() == '{"elapsed_s": 1}\n{"elapsed_s": 5}\n'


def test_sb3_resume_truncates_logs_and_a_fresh_run_refuses_a_log(tmp_path):
    pytest.importorskip("stable_baselines3")
    from mallocgym.agents.sb3.train import main, truncate_logs

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "progress.csv").write_text("a,time/total_timesteps\n1,100\n2,200\n3,300\n")
    (logs / "eval.csv").write_text("steps,score\n150,1.0\n250,1.1\n")
    truncate_logs(logs, 200)
    assert (logs / "progress.csv").read_text() == "a,time/total_timesteps\n1,100\n2,200\n"
    assert (logs / "eval.csv").read_text() == "steps,score\n150,1.0\n"
    with pytest.raises(ValueError, match=r"already holds a run; pass --resume to continue it or choose another --out "
                                         r"\(it has logs\)"):
        main(["--algo", "maskable_ppo", "--minutes", "1", "--out", str(tmp_path)])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_muzero_checkpoints_on_a_signal_and_resume_truncates_the_log(tmp_path, monkeypatch, sig):
    pytest.importorskip("torch")
    import importlib

    trainer = importlib.import_module("mallocgym.agents.muzero.train")  # the module, not the package's train()
    from mallocgym.agents.muzero.checkpoint import checkpoint_path, load_checkpoint

    from mallocgym.agents.muzero.config import MuZeroConfig
    from mallocgym.agents.muzero.runlog import JsonLog

    from conftest import mlp_scenario

    TINY = MuZeroConfig().with_overrides([  # as test_muzero_train's: a few seconds of training
        "network.hidden=32", "network.candidate_hidden=16", "network.memory_hidden=8",
        "train.min_replay=40", "train.batch_size=16", "train.replay_capacity=4000", "train.label_positions=1000",
        "train.checkpoint_every_s=1000", "train.log_every_s=0.5", "train.replay_ratio=8",
    ])

    real_write = JsonLog.write

    def write(self, record):
        real_write(self, record)
        if record.get("event") == "progress":
            os.kill(os.getpid(), sig)  # Ctrl-C (or SIGTERM) during training

    monkeypatch.setattr(JsonLog, "write", write)
    scenario = mlp_scenario(0)
    summary = trainer.train(TINY, scenarios=[scenario], out_dir=tmp_path, minutes=5, seed=0,
                            use_generator=False, progress=False)
    assert summary["interrupted"] and summary["elapsed_s"] < 120
    assert checkpoint_path(tmp_path).is_file()
    saved = load_checkpoint(tmp_path)["progress"]["elapsed_s"]
    with open(tmp_path / "log.jsonl", "a") as handle:  # as if killed after the checkpoint
        handle.write(json.dumps({"event": "progress", "elapsed_s": saved + 100.0}) + "\n")
    with pytest.raises(ValueError, match="already holds a run; pass --resume"):
        trainer.train(TINY, scenarios=[scenario], out_dir=tmp_path, minutes=0.01, use_generator=False, progress=False)
    monkeypatch.setattr(JsonLog, "write", real_write)
    trainer.train(TINY, scenarios=[scenario], out_dir=tmp_path, minutes=0.01, resume=True, use_generator=False,
                  progress=False)
    elapsed = [json.loads(line).get("elapsed_s", 0) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert saved + 100.0 not in elapsed


# ------------------------------------------------------------------------------ fuzzing
_WORKLOAD_BYTES = json.dumps(workload_to_dict(small_workload())).encode()
_MAPPING_BYTES = json.dumps(good_mapping()).encode()
_WORKLOAD = small_workload()

_BYTES = np.frombuffer(b'{}[]",:-0123456789.eE tfn\\xa\xff\x00', dtype=np.uint8)


def _mutate(data: bytes, seed: int) -> bytes:
    """1 to 4 byte edits (set, insert, delete) of ``data``, drawn from ``seed``: a seed is cheaper
    for hypothesis to draw than the edits themselves, so 10,000 examples run in seconds."""
    rng = np.random.default_rng(seed)
    out = bytearray(data)
    for _ in range(int(rng.integers(1, 5))):
        op, i, byte = int(rng.integers(3)), int(rng.integers(len(out) + 1)), int(rng.choice(_BYTES))
        if op == 0 or i == len(out):
            out.insert(i, byte)
        elif op == 1:
            out[i] = byte
        else:
            del out[i]
    return bytes(out)


_FUZZ = settings(max_examples=5_000, deadline=None, database=None, derandomize=True,
                 suppress_health_check=list(HealthCheck))


@_FUZZ
@given(st.integers(0, 2**32 - 1))
def test_fuzz_workload_bytes(seed):
    data = _mutate(_WORKLOAD_BYTES, seed)
    try:
        workload_from_dict(parse_json(data, "w.json"), "w.json")
    except ValueError:
        pass


@_FUZZ
@given(st.integers(0, 2**32 - 1))
def test_fuzz_mapping_bytes(seed):
    data = _mutate(_MAPPING_BYTES, seed)
    try:
        evaluate_v1(_WORKLOAD, parse_json(data, "m.json"), HW)
    except ValueError:
        pass
