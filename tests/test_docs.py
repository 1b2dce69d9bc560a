"""The docs describe what the code does: feature tables and the README's commands."""

import re
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


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _pages() -> list[Path]:
    return sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "baselines").glob("**/README.md")])


def relative_links(path: Path) -> list[str]:
    """The relative link targets of a Markdown page (outside fenced code), anchors dropped."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    targets = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor on the same page
        targets.append(target.split("#", 1)[0])
    return targets


def test_relative_links_resolve_to_files():
    pages = _pages()
    assert len(pages) > 10 and ROOT / "docs" / "game.md" in pages
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in pages for target in relative_links(page)
              if not (page.parent / target).exists()]
    assert not broken, "links to missing files:\n" + "\n".join(broken)


def test_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [url](https://x.org/a) [here](#top) [gone](missing.md#part)\n"
                    "```\n[in code](nowhere.md)\n```\n")
    assert relative_links(page) == ["page.md", "missing.md"]


def test_every_docs_page_opens_with_what_the_user_runs_and_gets():
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert len(pages) > 10
    for page in pages:
        first = " ".join(page.read_text(encoding="utf-8").split("\n\n")[1].split())  # the paragraph after the title
        assert first.startswith("You ") and "`" in first and "you get" in first.replace("and get", "you get"), \
            f"{page.name} opens with: {first[:120]!r}"


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
