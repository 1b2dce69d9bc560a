"""The frozen, validated mallocMuZero config."""

import dataclasses

import numpy as np
import pytest

from mallocgym.agents.muzero.config import MuZeroConfig, SearchConfig, TrainConfig


def test_defaults_round_trip_through_dict():
    cfg = MuZeroConfig()
    again = MuZeroConfig.from_dict(cfg.to_dict())
    assert again == cfg
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.search.num_simulations = 3


@pytest.mark.parametrize("make, field", [
    (lambda: SearchConfig(algorithm="ucb"), "search.algorithm"),
    (lambda: SearchConfig(num_simulations=0), "search.num_simulations"),
    (lambda: SearchConfig(num_simulations=2.5), "search.num_simulations"),
    (lambda: SearchConfig(prune_no_benefit=1), "search.prune_no_benefit"),
    (lambda: TrainConfig(priority_alpha=1.5), "train.priority_alpha"),
    (lambda: TrainConfig(reward_mode="sparse"), "train.reward_mode"),
    (lambda: TrainConfig(min_replay=10, replay_capacity=5), "train.min_replay"),
    (lambda: TrainConfig(teacher_fraction=1.5), "train.teacher_fraction"),
    (lambda: TrainConfig(teacher_temperature=-1.0), "teacher_temperature"),
    (lambda: TrainConfig(teacher_margin=1.5), "train.teacher_margin"),
    (lambda: TrainConfig(action_value_weight=-1.0), "action_value_weight"),
    (lambda: TrainConfig(action_value_weight=1.0), "needs train.teacher_fraction"),
    (lambda: TrainConfig(teacher_fraction=1.0, action_value_weight=1.0, action_value_actions=0),
     "train.action_value_actions"),
    (lambda: TrainConfig(teacher_fraction=0.5, reward_mode="self_competition"), "train.teacher_fraction"),
    (lambda: TrainConfig(generator_families="unet,gnn"), "train.generator_families"),
    (lambda: TrainConfig(generator_families="rnn,rnn"), "train.generator_families"),
])
def test_bad_values_name_the_field(make, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        make()


def test_overrides_parse_json_and_reject_typos():
    cfg = MuZeroConfig().with_overrides(["search.num_simulations=8", "train.reward_mode=self_competition",
                                         "env.memory_bins=[8, 4]", "train.lr=3e-4"])
    assert cfg.search.num_simulations == 8
    assert cfg.train.reward_mode == "self_competition"
    assert cfg.env.memory_bins == (8, 4)
    assert cfg.train.lr == 3e-4
    with pytest.raises(ValueError, match=r"search.num_simulation.*did you mean 'num_simulations'"):
        MuZeroConfig().with_overrides(["search.num_simulation=8"])
    with pytest.raises(ValueError, match="part.field=value"):
        MuZeroConfig().with_overrides(["num_simulations=8"])
    with pytest.raises(ValueError, match="unknown config field train.learning_rate"):
        MuZeroConfig.from_dict({"train": {"lr": 1e-3, "learning_rate": 1}})
    with pytest.raises(ValueError, match=r"unknown config field search\.num_simulation \(did you mean 'num_simulations'\?\)"):
        MuZeroConfig.from_dict({"search": {"num_simulation": 8}})
    with pytest.raises(ValueError, match=r"unknown config part 'serach' \(did you mean 'search'\?\)"):
        MuZeroConfig.from_dict({"serach": {}})


def test_docs_list_every_config_field_with_its_default():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "muzero-config.md").read_text()
    for part, values in MuZeroConfig().to_dict().items():
        for name, default in values.items():
            assert f"| `{part}.{name}` | `{default!r}` |" in text, f"{part}.{name}"


def test_generator_families_choose_what_training_draws():
    from mallocgym.agents.muzero.selfplay import make_generator

    assert make_generator("small").config.families == ("transformer", "cnn", "mlp")
    gen = make_generator("small", TrainConfig(generator_families="unet, rnn").generator_families)
    assert gen.config.families == ("unet", "rnn")
    rng = np.random.default_rng(0)
    names = {gen(rng).workload.name.split("-")[2] for _ in range(8)}
    assert names == {"unet", "rnn"}
