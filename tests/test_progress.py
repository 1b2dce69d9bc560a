"""Progress bars: tqdm, labelled by the command, and `--quiet` on the long commands."""

from __future__ import annotations

import io

import pytest

from mallocgym._progress import Progress, command
from mallocgym.cli import _quiet_trainer_args, main

SMALL = ["--scenario", "mlp-train-s0@1/8", "--scenario", "mlp-train-s0@1/2"]


def test_a_bar_counts_and_shows_its_label_and_the_command():
    stream = io.StringIO()
    with Progress(4, "bench", stream=stream) as bar:
        for i in range(4):
            bar.update(f"scenario {i}")
    text = stream.getvalue()
    assert "bench" in text and "4/4" in text and "scenario 3" in text and "100%" in text
    # not a terminal: whole lines (no carriage returns), the first and the last at least
    lines = text.splitlines()
    assert "\r" not in text and len(lines) >= 2 and all(line.startswith("bench: ") for line in lines)
    stream = io.StringIO()
    with command("mallocgym eval"):
        with Progress(2, "bench", stream=stream) as bar:
            bar.update(done=2)
    assert "mallocgym eval" in stream.getvalue() and "bench" not in stream.getvalue()


def test_quiet_and_disabled_bars_write_nothing_but_still_count():
    stream = io.StringIO()
    with command("mallocgym bench", quiet=True):
        with Progress(3, "bench", stream=stream) as bar:
            bar.update(advance=2)
    assert stream.getvalue() == "" and bar.done == 2
    with Progress(3, "bench", stream=stream, enabled=False) as bar:
        bar.update(done=3)
    assert stream.getvalue() == "" and bar.done == 3


@pytest.mark.parametrize("argv, label", [
    (["bench", "--agents", "all-slow,xla", *SMALL], "mallocgym bench"),
    (["eval", "--agent", "xla", *SMALL], "mallocgym eval"),
])
def test_long_commands_draw_a_bar_named_after_them_unless_quiet(capsys, argv, label):
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert label in err and "100%" in err, err
    assert main(argv + ["--quiet"]) == 0
    captured = capsys.readouterr()
    assert label not in captured.err and "%|" not in captured.err, captured.err
    assert "mlp-train-s0@1/8" in captured.out  # the results are still printed


def test_train_quiet_goes_to_both_trainers():
    assert _quiet_trainer_args("sb3", ["--algo", "ppo", "--quiet"]) == (["--algo", "ppo", "--quiet"], True)
    assert _quiet_trainer_args("muzero", ["--quiet", "--minutes", "1"]) == (["--quiet", "--minutes", "1"], True)
    assert _quiet_trainer_args("muzero", ["--minutes", "1"]) == (["--minutes", "1"], False)
    from mallocgym.agents.muzero.train import build_parser

    action = build_parser()._option_string_actions["--quiet"]  # the muzero trainer parses it itself
    assert action.dest == "no_progress"
