"""baselines/muzero/table_md.py: the equal-time table's markdown, from a hand-made result."""

import json

import pytest

from conftest import baseline_script

table_md = baseline_script("muzero/table_md.py")

S = "muzero-sim:some/dir,sims=8"


def _result():
    c = {"wins": 1, "losses": 0, "n": 2, "max_loss_percent": 0.0, "geomean": 1.5, "other_geomean": 1.25}
    row = {"scenario": "a@1/2", "buffers": 7, "xla": 1.25, "policy": 1.5, "mcts8": 1.5, "mcts8_wall_s": 0.25,
           f"{S}@8": 2.0, f"{S}@8_wall_s": 0.5}
    return {"sims": [8], "search": [S], "policy": "muzero-pol:x", "rows": [row],
            "summary": {"policy_vs_xla": c, "policy_wall_s": 1.0, "mcts8_wall_s": 2.0, "mcts8_vs_xla": c,
                        f"{S}@8 vs mcts8": {**c, "wins": 0, "losses": 1, "max_loss_percent": 12.5},
                        f"{S}@8_wall_s": 3.0, f"{S}@8 vs xla": c}}


def test_rows_and_summary():
    text = table_md.markdown(_result())
    # the checkpoint folder is dropped from the column names, the options kept
    assert "muzero-sim,sims=8 at mcts 8's time (s)" in text and "some/dir" not in text
    assert "| a@1/2 | 7 | 1.2500 | 1.5000 | 1.5000 (0.25) | 2.0000 (0.50) |" in text
    # ties = n - wins - losses; the loss row shows its largest loss and both geomeans
    assert "| policy | xla | 1 / 0 / 1 | 0.00 % | 1.5000 (1.2500) | 1.0 |" in text
    assert "| muzero-sim,sims=8 at mcts 8's time | mcts 8 | 0 / 1 / 1 | 12.50 % | 1.5000 (1.2500) | 3.0 |" in text


def test_bad_file_is_one_clear_error(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"set": "test"}))
    with pytest.raises(SystemExit, match="not an equal_time.py table result"):
        table_md.main([str(path)])
    with pytest.raises(SystemExit, match="cannot read"):
        table_md.main([str(tmp_path / "missing.json")])
