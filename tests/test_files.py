"""Atomic writes: all or nothing, with ordinary permissions."""

import os
import stat

import pytest

from mallocgym._files import atomic_write


def test_atomic_write_gives_the_permissions_of_a_plain_open(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    with atomic_write(tmp_path / "atomic.txt") as handle:
        handle.write("x")
    mode = stat.S_IMODE(os.stat(tmp_path / "atomic.txt").st_mode)
    assert mode == stat.S_IMODE(os.stat(plain).st_mode)


def test_atomic_write_leaves_the_old_file_on_error(tmp_path):
    target = tmp_path / "results.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as handle:
            handle.write("half")
            raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]   # no temporary left behind


def test_training_log_lines_are_whole_and_on_disk_at_once(tmp_path):
    pytest.importorskip("torch")
    from mallocgym.agents.muzero.runlog import JsonLog

    log = JsonLog(tmp_path / "log.jsonl")
    log.write({"event": "start", "n": 1})
    assert (tmp_path / "log.jsonl").read_text() == '{"event": "start", "n": 1}\n'  # no close needed
    with pytest.raises(TypeError):
        log.write({"event": "progress", "bad": object()})   # not serialisable: nothing written
    log.write({"event": "end"})
    assert (tmp_path / "log.jsonl").read_text().splitlines() == ['{"event": "start", "n": 1}', '{"event": "end"}']


def test_sb3_progress_csv_continues_an_existing_file(tmp_path):
    pytest.importorskip("stable_baselines3")
    from mallocgym.agents.sb3.train import _AppendingCSV

    path = tmp_path / "progress.csv"
    first = _AppendingCSV(str(path))
    first.write({"a": 1, "b": 2}, {"a": None, "b": None})
    assert path.read_text().splitlines()[1] in ("1,2", "2,1")   # flushed at once
    first.close()
    header = path.read_text().splitlines()[0].split(",")
    again = _AppendingCSV(str(path))   # a resumed run
    again.write({"a": 3, "b": 4}, {"a": None, "b": None})
    again.write({"a": 5, "b": 6, "c": 7}, {"a": None, "b": None, "c": None})   # a new column
    again.close()
    lines = path.read_text().splitlines()
    assert lines[0].split(",") == header + ["c"]
    rows = [dict(zip(lines[0].split(","), line.split(","))) for line in lines[1:]]
    assert rows == [{"a": "1", "b": "2", "c": ""}, {"a": "3", "b": "4", "c": ""}, {"a": "5", "b": "6", "c": "7"}]
