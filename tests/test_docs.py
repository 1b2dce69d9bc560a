"""The docs describe what the code does: feature tables and the README's commands."""

from pathlib import Path

from mallocgym.features.v0 import BUFFER_FEATURES, CANDIDATE_FEATURES, NEXT_FEATURES, PROGRESS_FEATURES

ROOT = Path(__file__).resolve().parent.parent


def test_game_doc_lists_every_feature_in_order():
    text = (ROOT / "docs" / "game.md").read_text()
    tables = {"buffer": BUFFER_FEATURES, "candidates": CANDIDATE_FEATURES, "next": NEXT_FEATURES,
              "progress": PROGRESS_FEATURES}
    for key, names in tables.items():
        section = text.index(f"### `{key}`")
        rows = [f"| {i} | {name} |" for i, name in enumerate(names)]
        positions = [text.find(row, section) for row in rows]
        assert all(p >= 0 for p in positions), [r for r, p in zip(rows, positions) if p < 0]
        assert positions == sorted(positions)


def test_readme_setup_commands_exist_in_makefile():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "make run" in readme and "make test" in readme
    assert "\nrun:" in makefile and "\ntest:" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_make_run_is_the_headline_and_the_quick_start_leads_with_v1():
    """`make run` calls `mallocgym run` (the v1 headline), after creating the venv; the README's
    quick start shows MallocGame-v1 before v0."""
    makefile = (ROOT / "Makefile").read_text()
    run = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert run.startswith(" $(STAMP)") and "mallocgym run" in run and "bench" not in run
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1]
    assert quick.index('gym.make("MallocGame-v1"') < quick.index('gym.make("MallocGame-v0"')
    assert "make run" in readme and "mallocgym run" in readme
