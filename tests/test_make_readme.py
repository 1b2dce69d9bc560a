"""baselines/make_readme.py (issue 32): a leaderboard that fits a screen (one summary table per
game and suite, v1 first, at most 8 columns, wins / ties / losses against the game's XLA
baseline) and the per-scenario tables in each entry's generated RESULTS.md; --check fails on
any stale page."""

import json

import pytest

from conftest import baseline_script

mr = baseline_script("make_readme.py")


def _entry(root, entry, rows, command=None, env="v1"):
    folder = root / entry
    folder.mkdir(parents=True)
    if command:
        (folder / "command.txt").write_text(command + "\n")
    (folder / "results.json").write_text(json.dumps([
        {"scenario": s, "agent": a, "env": env, "speedup": x, "placed_bytes_fraction": 0.5, "wall_s": w}
        for s, a, x, w in rows]))


@pytest.fixture
def tiny(tmp_path):
    """v1 on three test scenarios: xla-msa 2.0 / 1.5 / 3.0; rollout 2.2 / 1.5 / 2.9 (a win, a
    tie, a loss); a learned policy 2.0 / 1.6 / 3.0 from a 25-minute training run; v0: xla and
    random on one scenario."""
    s1, s2, s3 = "unet-infer@1/8", "unet-infer@1/2", "lstm-train@1/8"
    _entry(tmp_path, "v1/default-test", [(s1, "xla-msa", 2.0, 0.1), (s2, "xla-msa", 1.5, 0.2), (s3, "xla-msa", 3.0, 0.3),
                                         (s1, "rollout", 2.2, 2.0), (s2, "rollout", 1.5, 2.0), (s3, "rollout", 2.9, 2.0)],
           "mallocgym bench --env v1 --agents xla-msa,rollout")
    _entry(tmp_path, "mz/v1-test", [(s1, "muzero-pol", 2.0, 1.0), (s2, "muzero-pol", 1.6, 1.0),
                                    (s3, "muzero-pol", 3.0, 1.0)],
           "mallocgym bench --env v1 --agents muzero-pol:baselines/mz/model,margin=1")
    (tmp_path / "mz" / "model").mkdir()
    (tmp_path / "mz" / "model" / "train-log.jsonl").write_text(json.dumps(
        {"event": "end", "elapsed_s": 1500.0, "env_steps": 4, "episodes": 4, "train_steps": 3}) + "\n")
    _entry(tmp_path, "xla/default-test", [(s1, "xla", 1.9, 0.1)], "mallocgym bench --agents xla", env="v0")
    _entry(tmp_path, "random/default-test", [(s1, "random", 1.2, 0.1)], "mallocgym bench --agents random", env="v0")
    return tmp_path


def test_summary_tables_count_wins_ties_losses_and_fit_eight_columns(tiny):
    rows, where = mr.load_entries(tiny), mr.suite_of()
    text, docs = mr.render(rows, where, models=mr.trained_models(tiny))
    table_lines = [line for line in text.splitlines() if line.startswith("|")]
    assert table_lines and all(mr._markdown_cells(line) <= mr.MAX_COLUMNS for line in table_lines)
    assert text.index("## MallocGame-v1") < text.index("## MallocGame-v0")
    # geomeans: xla-msa (2 * 1.5 * 3)^(1/3) = 2.080; rollout (2.2 * 1.5 * 2.9 = 9.57)^(1/3) = 2.123
    assert "| xla-msa | 2.080 | baseline | 0.6 |  | [v1/default-test](v1/default-test/RESULTS.md) |" in text
    assert "| rollout | 2.123 | 1 / 1 / 1 | 6.0 |  | [v1/default-test](v1/default-test/RESULTS.md) |" in text
    # (2 * 1.6 * 3)^(1/3) = 2.125: ties two, wins one; its training budget read from the model's log
    assert "| muzero-pol | 2.125 | 1 / 2 / 0 | 3.0 | 25 min | [mz/v1-test](mz/v1-test/RESULTS.md) |" in text
    assert "vs `xla`: wins / ties / losses" in text and "| random | 1.200 | 0 / 0 / 1 |" in text
    assert "unet-infer@1/8" not in text   # no per-scenario rows on the leaderboard
    assert "(../baselines/mz/v1-test/RESULTS.md)" in docs


def test_entry_pages_hold_the_per_scenario_tables(tiny):
    pages = mr.entry_pages(mr.load_entries(tiny), mr.suite_of())
    assert set(pages) == {"v1/default-test", "mz/v1-test", "xla/default-test", "random/default-test"}
    page = pages["mz/v1-test"]   # xla-msa's column first (from its entry), for reference
    assert "| scenario | xla-msa | muzero-pol |" in page and "from `v1/default-test`" in page
    assert "| unet-infer@1/2 | 1.500 | **1.600** |" in page
    assert "Command: `mallocgym bench --env v1 --agents muzero-pol:baselines/mz/model,margin=1`" in page
    assert "| unet-infer@1/8 | 1.900 | **1.200** |" not in pages["random/default-test"]
    assert "| unet-infer@1/8 | **1.900** | 1.200 |" in pages["random/default-test"]


def test_training_of_matches_an_agent_to_its_model():
    models = {"maskable_ppo/model": "10 min", "muzero/checkpoint": "60 min"}
    cmd = ("mallocgym bench --agents xla,maskable_ppo:baselines/maskable_ppo/model,muzero-sim:baselines/muzero/checkpoint"
           " --out x")
    assert mr.training_of("maskable_ppo:model", cmd, models) == "10 min"
    assert mr.training_of("muzero-sim", cmd, models) == "60 min"
    assert mr.training_of("muzero-sim,budget_s=2", cmd, models) == "60 min"
    assert mr.training_of("xla", cmd, models) == ""
    assert mr.training_of("maskable_ppo:other", cmd, models) == ""
    assert mr.training_of("muzero-sim", None, models) == ""


def test_check_fails_on_a_stale_or_orphan_page(tiny, capsys):
    assert mr.main(["--root", str(tiny)]) == 0
    assert (tiny / "mz" / "v1-test" / "RESULTS.md").exists()
    assert mr.main(["--root", str(tiny), "--check"]) == 0
    readme = (tiny / "README.md").read_text()
    page = tiny / "v1" / "default-test" / "RESULTS.md"
    page.write_text(page.read_text().replace("2.200", "2.300"))
    capsys.readouterr()
    assert mr.main(["--root", str(tiny), "--check"]) == 1
    assert f"{page} is out of date" in capsys.readouterr().err
    assert mr.main(["--root", str(tiny)]) == 0 and mr.main(["--root", str(tiny), "--check"]) == 0
    orphan = tiny / "gone" / "RESULTS.md"
    orphan.parent.mkdir()
    orphan.write_text("old\n")
    assert mr.main(["--root", str(tiny), "--check"]) == 1
    assert "belongs to no entry" in capsys.readouterr().err
    assert mr.main(["--root", str(tiny)]) == 0 and not orphan.exists()
    (tiny / "README.md").write_text(readme + "x")
    assert mr.main(["--root", str(tiny), "--check"]) == 1


def test_an_entry_readme_written_by_hand_is_kept(tiny):
    hand = tiny / "mz" / "v1-test" / "README.md"
    hand.write_text("# Notes by hand\n")
    assert mr.main(["--root", str(tiny)]) == 0
    assert hand.read_text() == "# Notes by hand\n"


def test_a_departure_heads_labels_and_fit_count_in_the_training_budget(tiny):
    """25 minutes of training and a head whose labels took 270 s and fit 30 s: 30 minutes."""
    (tiny / "mz" / "model" / "head.json").write_text(json.dumps({"label_s": 270.0, "fit_s": 30.0, "departures": 9}))
    assert mr.trained_models(tiny)["mz/model"] == "30 min"
    line, = [x for x in mr.training_budgets(tiny) if "mz/model" in x]
    assert line.endswith("then 5 minutes of its departure head's labels and fit (`mz/model/head.json`)")
