import json
import re

import numpy as np
import pytest

from mallocgym import Workload, evaluate
from mallocgym.cli import main
from mallocgym.heuristics import xla_like
from mallocgym.scenarios import names, resolve
from mallocgym.workloads import load_minimalloc
from mallocgym.workloads.io import read_minimalloc_rows
from mallocgym.workloads.minimalloc import minimalloc_rows, read_minimalloc_solution, write_minimalloc

from conftest import MINIMALLOC

CSVS = sorted(MINIMALLOC.glob("*.csv"))
EXAMPLE = MINIMALLOC / "input.12.csv"


def _same(a: Workload, b: Workload) -> bool:
    return (a.name == b.name and a.buffer_names == b.buffer_names and a.op_names == b.op_names
            and a.default_capacity == b.default_capacity
            and all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("size", "start", "end", "flops")))


@pytest.mark.parametrize("path", CSVS, ids=[p.name for p in CSVS])
def test_write_keeps_the_original_rows(tmp_path, path):
    workload = load_minimalloc(path)
    out = write_minimalloc(tmp_path / path.name, workload)
    assert read_minimalloc_rows(out) == read_minimalloc_rows(path)
    assert _same(load_minimalloc(out), workload)


@pytest.mark.parametrize("path", CSVS, ids=[p.name for p in CSVS])
def test_solution_round_trip(tmp_path, path):
    scenario = resolve(path)
    offsets = xla_like(scenario)
    out = write_minimalloc(tmp_path / "solution.csv", scenario.workload, offsets)
    rows, has_offset = read_minimalloc_rows(out)
    assert has_offset and [r["offset"] for r in rows] == offsets.tolist()
    back = read_minimalloc_solution(out, scenario.workload)
    assert back.dtype == np.int64 and np.array_equal(back, offsets)
    w, hw = scenario.workload, scenario.hardware
    assert evaluate(w, back, hw) == evaluate(w, offsets, hw)


def test_a_hand_made_solution_of_the_example(tmp_path):
    # capacity 12, five buffers of 4 bytes; b5 lives throughout, b3 then b4 share a slot, b1
    # then b2 the other; rows in another order than the input file's, with a blank line
    path = tmp_path / "out.12.csv"
    path.write_text("id,lower,upper,size,offset\nb5,0,21,4,0\nb4,9,21,4,4\n\nb3,0,9,4,4\n"
                    "b2,3,9,4,8\nb1,0,3,4,8\n")
    workload = load_minimalloc(EXAMPLE)
    offsets = read_minimalloc_solution(path, workload)
    assert offsets.tolist() == [8, 8, 4, 4, 0]  # in the workload's order b1..b5
    ev = evaluate(workload, offsets)
    assert ev.placed_bytes_fraction == 1.0 and ev.placed_buffers == 5


GOOD = "id,lower,upper,size,offset\nb1,0,3,4,8\nb2,3,9,4,8\nb3,0,9,4,4\nb4,9,21,4,4\nb5,0,21,4,0\n"


@pytest.mark.parametrize("text, message", [
    (GOOD.replace("b3,0,9", "b9,0,9"), r"line 4: field 'id' = 'b9' is not a buffer of workload 'input'"),
    (GOOD.replace("b2,3,9", "b2,2,9"), r"line 3: field 'lower' = 2 does not match buffer 'b2' .*\(lower 3\)"),
    (GOOD.replace("b4,9,21", "b4,9,20"), r"line 5: field 'upper' = 20 does not match buffer 'b4'"),
    (GOOD.replace("b5,0,21,4", "b5,0,21,8"), r"line 6: field 'size' = 8 does not match buffer 'b5'"),
    (GOOD.replace("\nb2,3,9,4,8\n", "\n\nb2,3,9,4,x8\n"), r"line 4: field 'offset' = 'x8' is not an integer"),
    (GOOD.replace("b1,0,3,4,8", "b1,0,3,4,-3"), r"line 2: field 'offset' = -3 must be >= -1"),
    (GOOD.replace("b5,0,21,4,0\n", ""), r"no row for buffer 'b5' of workload 'input' \(1 buffer"),
    (EXAMPLE.read_text(), r"line 1: missing column 'offset'"),
    (GOOD.replace("b3,0,9,4,4", "\nb3,1,9,4,4"), r"line 5: field 'lower' = 1 does not match buffer 'b3'"),
])
def test_bad_solution_rows_name_file_line_and_field(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}: ") + message):
        read_minimalloc_solution(path, load_minimalloc(EXAMPLE))


def test_write_any_workload_and_refuse_bad_offsets(tmp_path):
    w = Workload.from_buffers("w", flops=[1.0, 0.0, 2.0, 0.0], size=[8, 16, 4], start=[0, 1, 3], end=[2, 3, 3],
                              op_names=("load", "dot", "add", "store"))
    ids, lower, upper = minimalloc_rows(w)
    assert ids == ["0", "1", "2"] and lower.tolist() == [0, 1, 3] and upper.tolist() == [3, 4, 4]
    out = write_minimalloc(tmp_path / "w.csv", w, [0, 8, -1])
    assert out.read_text() == "id,lower,upper,size,offset\n0,0,3,8,0\n1,1,4,16,8\n2,3,4,4,-1\n"
    assert read_minimalloc_solution(out, w).tolist() == [0, 8, -1]
    for bad, message in (([0, 8], r"offsets have shape \(2,\)"), ([0, 8, -2], r"buffer 2: offset -2 must be >= -1"),
                         ([0.5, 8, 0], "offsets must be integers")):
        with pytest.raises(ValueError, match=message):
            write_minimalloc(tmp_path / "bad.csv", w, bad)
    assert not (tmp_path / "bad.csv").exists()


def test_cli_solve_writes_a_minimalloc_solution(tmp_path, capsys):
    path = MINIMALLOC / "A.1048576.csv"
    out = tmp_path / "A.solution.csv"
    assert main(["solve", str(path), "--agent", "xla", "--json", "--minimalloc-out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    workload = load_minimalloc(path)
    offsets = read_minimalloc_solution(out, workload)
    assert offsets.tolist() == result["offsets"]
    ev = evaluate(workload, offsets)
    assert ev.placed_bytes_fraction == pytest.approx(result["placed_bytes_fraction"])


def test_cli_minimalloc_out_needs_a_minimalloc_workload(tmp_path, capsys):
    out = tmp_path / "x.csv"
    assert main(["solve", names()[0], "--minimalloc-out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--minimalloc-out needs a workload loaded from a MiniMalloc .csv" in err
    assert not out.exists()
