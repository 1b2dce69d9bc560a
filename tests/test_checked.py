"""The v1 policy's checked games (``baselines/muzero/v1/checked.py``): which checks each rule
takes, the summary by hand, and rows that reproduce the published policy's game."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from mallocgym.agents import make_agent
from mallocgym.pricing.v1 import evaluate_v1

from conftest import baseline_script, mlp_scenario

torch.set_num_threads(1)
CHECKED = baseline_script("muzero/v1/checked.py")


def test_each_check_takes_its_departures_by_hand():
    # checked games before departures 0..5; the own game ends at 5.0
    row = {"own": 5.0, "checked": [4.0, 3.0, 6.0, 2.0, 1.5, 0.5]}
    assert CHECKED.check_time(row, "first") == 4.0        # k = 0 only
    assert CHECKED.check_time(row, "doubling") == 1.5     # k = 0, 1, 2, 4: 4, 3, 6, 1.5
    assert CHECKED.check_time(row, "every") == 0.5
    assert CHECKED.check_time({"own": 1.0, "checked": [4.0]}, "doubling") == 1.0   # its own game wins
    assert CHECKED.check_time({"own": 1.0, "checked": []}, "every") == 1.0          # no departure


def test_summary_by_hand(tmp_path, capsys):
    # two programs, all-slow time 10: T = 0 ends at 5 (speedup 2) and 4 (2.5) with the doubling
    # check, against xla-msa's 2 and 2: one win, one tie, geomean sqrt(2 * 2.5)
    rows = [{"scenario": "a", "buffers": 1, "xla-msa": 2.0, "0": {"checked": [5.0], "own": 6.0, "slow": 10.0}},
            {"scenario": "b", "buffers": 1, "xla-msa": 2.0, "0": {"checked": [5.0, 4.0], "own": 4.5, "slow": 10.0}}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert CHECKED.main(["summary", str(path)]) == 0
    got = {line["check"]: line for line in map(json.loads, capsys.readouterr().out.splitlines())}
    assert (got["doubling"]["wins"], got["doubling"]["losses"]) == (1, 0)
    assert got["doubling"]["geomean"] == pytest.approx(math.sqrt(2 * 2.5), abs=1e-4)
    assert (got["first"]["wins"], got["first"]["geomean"]) == (1, pytest.approx(math.sqrt(2 * 10 / 4.5), abs=1e-4))
    assert [got[c]["completions"] for c in ("first", "doubling", "every")] == [2, 3, 3]
    # rows without xla-msa's speedup are refused
    path.write_text(json.dumps({"scenario": "a", "buffers": 1, "0": rows[0]["0"]}) + "\n")
    with pytest.raises(SystemExit):
        CHECKED.main(["summary", str(path)])


def test_rows_reproduce_the_published_policy():
    scenario = mlp_scenario(0, Fraction(1, 8))
    agent = make_agent(f"muzero-pol:{Path(__file__).resolve().parents[1] / 'baselines/muzero/v1'}")
    row = CHECKED.checked_game(agent, scenario)
    solution = agent.solve_v1(scenario)
    assert len(row["checked"]) == solution.info["departures"] >= 2
    time = evaluate_v1(scenario.workload, solution.mapping, scenario.hardware).time
    assert time == pytest.approx(CHECKED.check_time(row, "doubling"), rel=1e-12)
