import json

import numpy as np
import pytest

import mallocgym
from mallocgym import Workload
from mallocgym.workloads import load_minimalloc, save

from conftest import MINIMALLOC


def _simple(**overrides):
    args = dict(flops=[1.0, 2.0, 3.0], size=[10, 20], start=[0, 1], end=[1, 2])
    args.update(overrides)
    return Workload.from_buffers("w", **args)


def test_default_accesses_and_statistics():
    w = _simple()
    assert w.num_ops == 3 and w.num_buffers == 2 and w.num_accesses == 4
    assert w.accesses(0) == [(0, 10, True), (1, 10, False)]
    assert w.accesses(1) == [(1, 20, True), (2, 20, False)]
    assert w.live_bytes.tolist() == [10, 30, 20]
    assert w.peak_live_bytes == 30 and w.total_bytes == 30


def test_arrays_are_read_only_copies():
    size = np.array([10, 20])
    w = _simple(size=size)
    size[0] = 999
    assert w.size[0] == 10
    with pytest.raises(ValueError):
        w.size[0] = 5


@pytest.mark.parametrize("overrides, message", [
    (dict(end=[1, 0]), r"buffer 1: field 'end' = 0 is before start = 1"),
    (dict(size=[10, 0]), r"buffer 1: field 'size' = 0 must be > 0"),
    (dict(size=[-5, 20]), r"buffer 0: field 'size' = -5 must be > 0"),
    (dict(end=[1, 3]), r"buffer 1: field 'end' = 3 is past the last op 2"),
    (dict(start=[-1, 1]), r"buffer 0: field 'start' = -1 must be >= 0"),
    (dict(flops=[1.0, float("nan"), 3.0]), r"op 1: field 'flops' = nan must be finite and >= 0"),
    (dict(flops=[1.0, 2.0, -3.0]), r"op 2: field 'flops' = -3.0 must be finite and >= 0"),
    (dict(accesses=[[(0, 10, True), (2, 10, False)], [(1, 20, True)]]),
     r"buffer 0: access 1 at op 2 is outside its live range \[0, 1\]"),
    (dict(accesses=[[(0, -1, True)], [(1, 20, True)]]), r"buffer 0: access 0: field 'bytes' = -1"),
    (dict(size=[], start=[], end=[]), r"no buffers"),
])
def test_bad_workloads_raise_one_clear_error(overrides, message):
    with pytest.raises(ValueError, match=message):
        _simple(**overrides)


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_save_load_round_trip(tmp_path, suffix):
    w = Workload.from_buffers(
        "rt", flops=[1.5, 0.0, 7.0], size=[3, 4], start=[0, 1], end=[2, 2],
        accesses=[[(0, 3, True), (2, 1, False)], [(1, 4, True), (2, 4, False), (2, 2, False)]],
        transcendentals=[0.0, 5.0, 0.0], buffer_names=("a", "b"), op_names=("x", "y", "z"),
        default_capacity=64,
    )
    path = save(w, tmp_path / f"w{suffix}")
    back = mallocgym.load(path)
    for field in ("flops", "transcendentals", "size", "start", "end", "access_ptr", "access_op",
                  "access_bytes", "access_write"):
        np.testing.assert_array_equal(getattr(back, field), getattr(w, field), err_msg=field)
    assert (back.name, back.buffer_names, back.op_names, back.default_capacity) == (
        "rt", ("a", "b"), ("x", "y", "z"), 64)


def test_json_without_accesses_gets_the_default_pair(tmp_path):
    doc = {"format": "mallocgym-workload", "version": 1, "name": "j", "flops": [0, 0, 0],
           "buffers": [{"size": 8, "start": 0, "end": 2}]}
    path = tmp_path / "j.json"
    path.write_text(json.dumps(doc))
    assert mallocgym.load(path).accesses(0) == [(0, 8, True), (2, 8, False)]


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["buffers"][1].update(size="big"), r"buffer 1: field 'size' = 'big' is not an integer"),
    (lambda d: d["buffers"][0].pop("end"), r"buffer 0: missing field 'end'"),
    (lambda d: d["buffers"][1].update(end=0), r"buffer 1: field 'end' = 0 is before start = 1"),
    (lambda d: d.update(version=7), r"unsupported version 7"),
    (lambda d: d["buffers"][0].update(accesses=[[0, 1, "x"]]), r"buffer 0: access 0"),
])
def test_bad_json_names_file_buffer_and_field(tmp_path, mutate, message):
    doc = json.loads(json.dumps(mallocgym.workloads.io.workload_to_dict(_simple())))
    mutate(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=str(path).replace("\\", "\\\\") + ".*" + message):
        mallocgym.load(path)


def test_truncated_json_and_npz_raise_value_error(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text('{"format": "mallocgym-workload", "buffers": [')
    with pytest.raises(ValueError, match=r"cut.json:1:\d+: invalid JSON"):
        mallocgym.load(path)
    good = save(_simple(), tmp_path / "w.npz")
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.read_bytes()[:40])
    with pytest.raises(ValueError, match=r"cut.npz: not a mallocgym NPZ file \(not a zip archive"):
        mallocgym.load(cut)


def test_failed_save_leaves_existing_file_untouched(tmp_path):
    path = save(_simple(), tmp_path / "keep.json")
    before = path.read_bytes()

    with pytest.raises(AttributeError):
        save(object(), path)  # not a workload: fails while writing
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["keep.json"]


def test_unknown_extension_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="unknown workload file type '.txt'"):
        mallocgym.load(tmp_path / "w.txt")
    with pytest.raises(ValueError, match="no such file"):
        mallocgym.load(tmp_path / "none.json")


@pytest.mark.parametrize("name, buffers", [("A", 154), ("B", 170), ("C", 203), ("D", 213), ("E", 215)])
def test_minimalloc_instances_load_with_right_counts(name, buffers):
    w = mallocgym.load(MINIMALLOC / f"{name}.1048576.csv")
    assert w.num_buffers == buffers
    assert w.default_capacity == 1048576
    assert w.name == name
    assert np.all(w.flops == 0)
    # one write at lower, one read at upper - 1, both of the buffer's size
    assert np.array_equal(np.diff(w.access_ptr), np.full(buffers, 2))
    assert np.array_equal(w.access_bytes, np.repeat(w.size, 2))


def test_minimalloc_time_compression_keeps_overlaps():
    import csv

    path = MINIMALLOC / "B.1048576.csv"
    rows = list(csv.DictReader(path.open()))
    w = load_minimalloc(path)
    lo = np.array([int(r["lower"]) for r in rows])
    up = np.array([int(r["upper"]) for r in rows])
    original = (lo[:, None] < up[None, :]) & (lo[None, :] < up[:, None])
    compressed = (w.start[:, None] <= w.end[None, :]) & (w.start[None, :] <= w.end[:, None])
    assert np.array_equal(original, compressed)
    assert np.array_equal(w.size, [int(r["size"]) for r in rows])


def test_minimalloc_example():
    w = mallocgym.load(MINIMALLOC / "input.12.csv")
    assert w.num_buffers == 5 and w.default_capacity == 12 and w.buffer_names[0] == "b1"


@pytest.mark.parametrize("text, message", [
    ("id,lower,size\nb1,0,4\n", r"line 1: missing column 'upper'"),
    ("id,lower,upper,size\nb1,0,3,4\nb2,x,9,4\n", r"line 3: field 'lower' = 'x' is not an integer"),
    ("id,lower,upper,size\nb1,0,3,4.5\n", r"line 2: field 'size' = '4.5' is not an integer"),
    ("id,lower,upper,size\nb1,0,3\n", r"line 2: 3 fields, header has 4"),
    ("id,lower,upper,size\nb1,3,3,4\n", r"line 2: field 'upper' = 3 must be > lower = 3"),
    ("id,lower,upper,size\nb1,0,3,-4\n", r"line 2: field 'size' = -4 must be > 0"),
    ("id,lower,upper,size\nb1,0,3,4\nb1,1,2,4\n", r"line 3: field 'id' = 'b1' is repeated"),
    ("", r"empty file"),
])
def test_bad_minimalloc_csv(tmp_path, text, message):
    path = tmp_path / "bad.12.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"bad\.12\.csv: " + message):
        mallocgym.load(path)


def test_npz_is_reproducible_and_bad_meta_is_named(tmp_path):
    import zipfile

    w = _simple()
    a, b = save(w, tmp_path / "a.npz"), save(w, tmp_path / "b.npz")
    assert a.read_bytes() == b.read_bytes()
    bad = tmp_path / "bad.npz"
    with zipfile.ZipFile(a) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.namelist():
            data = src.read(item)
            if item == "meta.npy":
                buf = __import__("io").BytesIO()
                np.lib.format.write_array(buf, np.array("{not json"))
                data = buf.getvalue()
            dst.writestr(item, data)
    with pytest.raises(ValueError, match=r"bad.npz: array 'meta':1:2: invalid JSON"):
        mallocgym.load(bad)
