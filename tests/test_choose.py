"""baselines/muzero/choose.py: the validation set and the score that pick a checkpoint."""

import pytest

from conftest import baseline_script

choose = baseline_script("muzero/choose.py")


def test_validation_set_is_held_out_medium_programs():
    default = choose.validation_set()
    assert len(default) == 12                                     # six programs x {1/8, 1/2}
    assert [s.name.rsplit("@", 1)[1] for s in default[:2]] == ["1/8", "1/2"]
    assert all(s.name.startswith("gen-medium") and "-s200000000" in s.name for s in default)
    # the fractions are of the program's peak live bytes: the 1/2 memory is four times the 1/8 one
    assert default[1].hardware.fast_capacity == pytest.approx(4 * default[0].hardware.fast_capacity, rel=1e-6)
    per_family = choose.validation_set(["unet", "rnn"])
    assert len(per_family) == 8                                   # two programs per family x 2
    assert [s.name.split("-")[2] for s in per_family[::2]] == ["unet", "unet", "rnn", "rnn"]
    assert all(300 <= s.workload.num_buffers <= 800 for s in per_family)
    # the same seeds give the same programs (a fixed validation set)
    again = choose.validation_set(["unet", "rnn"])
    assert [s.name for s in again] == [s.name for s in per_family]
    assert (again[0].workload.size == per_family[0].workload.size).all()
    # a larger set per family holds the smaller one, program for program
    six = choose.validation_set(["unet", "rnn"], per_family=6)
    assert len(six) == 24
    assert [s.name for s in six[:4]] == [s.name for s in per_family[:4]]
    assert len({s.name for s in six}) == 24
    with pytest.raises(ValueError, match="per_family"):
        choose.validation_set(["unet"], per_family=7)


def test_score_counts_wins_and_losses_against_xla_by_hand():
    rows = [{"scenario": s, "agent": a, "speedup": v} for s, a, v in [
        ("p", "xla", 2.0), ("p", "me", 2.5),      # win
        ("q", "xla", 1.5), ("q", "me", 1.5),      # tie
        ("r", "xla", 3.0), ("r", "me", 2.0),      # loss
        ("s", "xla", 1.0), ("s", "me", 1.0 + 1e-12)]]  # a tie within the tolerance
    got = choose.score(rows, "me")
    assert (got["wins"], got["losses"], got["n"]) == (1, 1, 4)
    assert got["geomean"] == pytest.approx((2.5 * 1.5 * 2.0 * 1.0) ** 0.25)
