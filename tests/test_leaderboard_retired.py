"""baselines/make_readme.py: an agent whose mode was removed leaves the leaderboard's tables with
the line its entry's ``retired.json`` gives (issue 31), its rows kept in the entry's results."""

import json

import pytest

from conftest import baseline_script


def test_a_retired_agent_leaves_the_tables_with_its_reason(tmp_path):
    mr = baseline_script("make_readme.py")
    folder = tmp_path / "mz" / "default-test"
    folder.mkdir(parents=True)
    (folder / "command.txt").write_text("mallocgym bench --agents xla,old-mode,kept\n")
    (folder / "results.json").write_text(json.dumps([
        {"scenario": "minimalloc-A@1MiB", "agent": a, "speedup": x, "placed_bytes_fraction": 0.5, "wall_s": 0.1}
        for a, x in (("xla", 2.0), ("old-mode", 9.0), ("kept", 3.0))]))
    (folder / "retired.json").write_text(json.dumps({"old-mode": "its mode was removed; numbers in the README"}))
    gone = mr.retired(tmp_path)
    assert gone == {("mz/default-test", "old-mode"): "its mode was removed; numbers in the README"}
    rows = mr.load_entries(tmp_path)
    assert sorted(r["agent"] for r in rows) == ["kept", "xla"]
    text, _ = mr.render(rows, mr.suite_of(), gone=gone)
    page = mr.entry_pages(rows, mr.suite_of(), gone)["mz/default-test"]
    assert "| minimalloc-A@1MiB | 2.000 | **3.000** |" in page   # the best speedup is the kept agent's
    assert "| scenario | xla | kept |" in page   # no column for the retired agent
    assert "- `old-mode`: its mode was removed; numbers in the README" in page
    assert ("- `old-mode` ([`mz/default-test`](mz/default-test/RESULTS.md)): its mode was removed; numbers in the "
            "README") in text
    (folder / "retired.json").write_text('["old-mode"]')
    with pytest.raises(ValueError, match="expected an object of agent -> reason"):
        mr.retired(tmp_path)

