"""baselines/muzero/v1/departures.py: a departure's cost alone, scored exactly."""

import torch

from conftest import baseline_script

torch.set_num_threads(1)


def test_one_departure_costs_the_game_what_it_costs_alone():
    """A game with a single departure is that move then xla-msa's completion: its cost against
    xla-msa's game is the departure's own cost; with a margin no gain clears there is none."""
    script = baseline_script("muzero/v1/departures.py")
    from mallocgym.agents import make_agent

    scenario = next(s for s in script.programs("validation") if s.name.startswith("gen-medium-transformer-infer"))
    agent = make_agent(f"muzero-pol:{script.Path(script.__file__).parent},margin=0.25")
    row = script.departures(agent, scenario, 0.25)
    assert row["departures"] == 1 and row["final_cost"] < 0
    assert abs(row["final_cost"] - row["sum_alone"]) < 1e-9 and row["worst_alone"] == row["sum_alone"]
    none = script.departures(agent, scenario, 1e9)
    assert none == {**row, "final_cost": 0.0, "departures": 0, "bad_alone": 0, "worst_alone": 0.0, "sum_alone": 0.0,
                    "by_move": {}, "moves": []}
    assert sum(row["by_move"].values()) == row["sum_alone"]
    (kind, gain, cost), = row["moves"]
    assert kind in row["by_move"] and gain > 0.25 and abs(cost - row["sum_alone"]) < 1e-4


def test_summary_adds_each_departures_cost_above_the_margin():
    """Hand-worked: program A's departures cost -1 % (gain 1.0) and +2 % (gain 0.1), program B's
    +0.3 % (gain 0.6). Above margin 0.5: A -1 %, B +0.3 % (a win, no loss over 0.5 %); above
    margin 0 A is +1 % (a loss over 0.5 %); the oracle keeps A's -1 % only."""
    script = baseline_script("muzero/v1/departures.py")
    rows = [{"moves": [["fast->slow", 1.0, -1.0], ["prefetch->slow", 0.1, 2.0]]},
            {"moves": [["fast->fast", 0.6, 0.3]]}]
    out = script.summary(rows, [0.0, 0.5, 2.0])
    assert abs(out["0.5"].pop("speedup") - (0.99 * 1.003) ** -0.5) < 1e-12
    assert out["0.5"] == {"wins": 1, "losses_over_0.5": 0, "worst": 0.3}
    assert out["0"]["wins"] == 0 and out["0"]["losses_over_0.5"] == 1 and out["0"]["worst"] == 1.0
    assert out["2"] == {"speedup": 1.0, "wins": 0, "losses_over_0.5": 0, "worst": 0}
    assert out["oracle"]["wins"] == 1 and abs(out["oracle"]["speedup"] - 0.99 ** -0.5) < 1e-12


def test_bad_arguments_are_refused(capsys):
    script = baseline_script("muzero/v1/departures.py")
    import pytest

    for argv in (["--generated", "3", "--margin", "0"], ["--set", "validation"], []):
        with pytest.raises(SystemExit) as e:
            script.main(argv)
        assert e.value.code == 2
    assert "--margin is required" in capsys.readouterr().err
