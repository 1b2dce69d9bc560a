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
                    "by_move": {}}
    assert sum(row["by_move"].values()) == row["sum_alone"]
