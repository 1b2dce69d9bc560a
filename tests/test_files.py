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
