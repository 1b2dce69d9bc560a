"""The headline run (``mallocgym run``, what ``make run`` does) and the scoreboard it counts with."""

import json
import re
from pathlib import Path

import pytest

from mallocgym.cli import main
from mallocgym.harness import Result, write_results
from mallocgym.headline import Headline, best_gain, headline_text, search_agent
from mallocgym.scoreboard import geomean, outcome, tally

ROOT = Path(__file__).resolve().parents[1]


def test_geomean_and_outcomes_by_hand():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([3.0]) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="no values"):
        geomean([])
    with pytest.raises(ValueError, match="positive"):
        geomean([2.0, 0.0])
    assert outcome(2.2, 2.0) == "win" and outcome(1.9, 2.0) == "loss"
    assert outcome(2.0 * (1 + 1e-9), 2.0) == "tie"          # the baseline's own plan, up to rounding
    assert outcome(2.0 * (1 + 1e-4), 2.0) == "win"
    assert tally([(2.2, 2.0), (1.5, 1.5), (1.4, 1.5), (3.1, 3.0)]) == (2, 1, 1)
    with pytest.raises(ValueError, match="> 0"):
        outcome(1.0, 0.0)


def _result(scenario, agent, speedup, wall=1.0):
    return Result(scenario, agent, speedup, 0.5, 1.0 / speedup, 1.0, wall, [], env="v1")


def _hand_headline():
    """Two scenarios: xla-msa 2.0 and 1.5; rollout 2.2 (+10 %) and 1.5 (a tie); the policy 1.8
    (-10 %) and 1.5 (a tie)."""
    results = [_result("a@1/8", "xla-msa", 2.0, 0.1), _result("a@1/8", "rollout:time_limit=2", 2.2, 2.0),
               _result("a@1/8", "muzero-pol", 1.8, 0.5),
               _result("b@1/2", "xla-msa", 1.5, 0.2), _result("b@1/2", "rollout:time_limit=2", 1.5, 2.1),
               _result("b@1/2", "muzero-pol", 1.5, 3.5)]
    return Headline(results, ["xla-msa", "rollout:time_limit=2", "muzero-pol"])


def test_headline_table_and_summary_by_hand():
    h = _hand_headline()
    text = headline_text(h, title="T")
    assert "| scenario | xla-msa | rollout:time_limit=2 | muzero-pol |" in text
    assert "| a@1/8 | 2.000 | 2.200 (+10.0%) | 1.800 (-10.0%) |" in text
    assert "| b@1/2 | 1.500 | 1.500 (=) | 1.500 (=) |" in text
    # geomeans: sqrt(2 * 1.5) = 1.732, sqrt(2.2 * 1.5) = 1.817, sqrt(1.8 * 1.5) = 1.643
    summary = next(line for line in text.splitlines() if line.startswith("Geometric-mean speedup"))
    assert summary == ("Geometric-mean speedup over 2 scenarios (wins / ties / losses against `xla-msa`): "
                       "`xla-msa` 1.732; `rollout:time_limit=2` 1.817 (1 / 1 / 0); `muzero-pol` 1.643 (0 / 1 / 1).")
    assert "`muzero-pol` 4.0 s (slowest: b@1/2, 3.5 s)" in text   # 0.5 + 3.5
    assert best_gain(h, "rollout:time_limit=2") == ("a@1/8", pytest.approx(1.1))
    assert best_gain(h, "muzero-pol") is None


def test_search_agent_is_named_after_its_budget():
    assert search_agent("rollout", 2).name == "rollout:time_limit=2"
    agent = search_agent("beam:width=4", 0.5)
    assert agent.name == "beam:width=4,time_limit=0.5" and agent.config.time_limit == 0.5
    with pytest.raises(ValueError, match="does not search"):
        search_agent("xla-msa", 2)
    with pytest.raises(ValueError, match="sets time_limit=; the budget is --budget-s"):
        search_agent("mcts:time_limit=5", 2)   # never silently replaced by --budget-s


def test_write_results_refuses_an_unknown_extra_file(tmp_path):
    with pytest.raises(ValueError, match="extra file 'notes.txt'"):
        write_results([_result("a@1/8", "xla-msa", 2.0)], tmp_path / "out", extra={"notes.txt": b""})
    with pytest.raises(ValueError, match="extra file 'results.md'"):
        write_results([_result("a@1/8", "xla-msa", 2.0)], tmp_path / "out", extra={"results.md": b""})
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, message", [
    (["--budget-s", "0"], "--budget-s 0.0: a number of seconds > 0"),
    (["--budget-s", "nan"], "--budget-s nan"),
    (["--search", "xla-msa"], "does not search"),
    (["--search", " "], "--search is empty"),
    (["--policy", ""], "--policy is empty"),
    (["--scenario", "unet-infer@1/8", "--split", "train"], "is not in --split 'train'"),
])
def test_run_refuses_bad_input_and_writes_nothing(capsys, tmp_path, argv, message):
    out = tmp_path / "run"
    code = main(["run", "--out", str(out), "--quiet", "--policy", "none", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_the_default_policy_outside_a_checkout_is_one_clear_error(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--scenario", "unet-infer@1/8", "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "the published policy is read from a checkout's baselines/ folder" in err
    assert "--policy none" in err and not (tmp_path / "run").exists()


def test_make_run_headline_smoke(capsys, tmp_path):
    """The headline command as ``make run`` gives it, on one small scenario at a tiny budget: the
    files, the table with its three columns, the summary line, and a picture exactly when the
    search beats xla-msa."""
    out = tmp_path / "run"
    policy = f"muzero-pol:{ROOT / 'baselines' / 'muzero' / 'v1'}"
    code = main(["run", "--scenario", "strassen2-matmul@1/8", "--budget-s", "0.5", "--policy", policy,
                 "--out", str(out), "--quiet"])
    text = capsys.readouterr().out
    assert code == 0
    assert "| scenario | xla-msa | rollout:time_limit=0.5 | muzero-pol |" in text
    row = next(line for line in text.splitlines() if line.startswith("| strassen2-matmul@1/8 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    rows = json.loads((out / "results.json").read_text())
    speed = {r["agent"]: r["speedup"] for r in rows}
    assert set(speed) == {"xla-msa", "rollout:time_limit=0.5", "muzero-pol"} and all(r["env"] == "v1" for r in rows)
    assert cells[1] == f"{speed['xla-msa']:.3f}" and cells[2].startswith(f"{speed['rollout:time_limit=0.5']:.3f} (")
    # rollout completes with xla-msa and keeps the best: never below it
    assert speed["rollout:time_limit=0.5"] >= speed["xla-msa"] * (1 - 1e-6)
    summary = re.search(r"^Geometric-mean speedup over 1 scenarios \(wins / ties / losses against `xla-msa`\): (.*)$",
                        text, re.M)
    assert summary and f"`xla-msa` {speed['xla-msa']:.3f};" in summary.group(1)
    w, t, l = tally([(speed["muzero-pol"], speed["xla-msa"])])
    assert f"`muzero-pol` {speed['muzero-pol']:.3f} ({w} / {t} / {l})" in summary.group(1)
    assert (out / "headline.md").read_text() in text
    names = {p.name for p in out.iterdir()}
    assert {"results.md", "results.csv", "results.json", "mappings.json.gz", "headline.md"} <= names
    won = outcome(speed["rollout:time_limit=0.5"], speed["xla-msa"]) == "win"
    assert ("memory-map.png" in names) == won == ("Picture: `memory-map.png`" in text)
    if won:
        assert (out / "memory-map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "No picture: `rollout:time_limit=0.5` beats `xla-msa` on no scenario." in text
