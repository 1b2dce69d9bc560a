"""The frozen, validated mallocMuZero config."""

import dataclasses

import numpy as np
import pytest

from mallocgym.agents.muzero.config import MuZeroConfig, SearchConfig, SimulatorConfig, TrainConfig


def test_defaults_round_trip_through_dict():
    cfg = MuZeroConfig()
    again = MuZeroConfig.from_dict(cfg.to_dict())
    assert again == cfg
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.simulator.num_simulations = 3


@pytest.mark.parametrize("make, field", [
    (lambda: SearchConfig(prune_no_benefit=1), "search.prune_no_benefit"),
    (lambda: SimulatorConfig(num_simulations=0), "simulator.num_simulations"),
    (lambda: SimulatorConfig(num_simulations=2.5), "simulator.num_simulations"),
    (lambda: TrainConfig(heldout_fraction=1.5), "train.heldout_fraction"),
    (lambda: TrainConfig(device="tpu"), "train.device"),
    (lambda: TrainConfig(min_replay=10, replay_capacity=5), "train.min_replay"),
    (lambda: TrainConfig(label_fraction=1.5), "train.label_fraction"),
    (lambda: TrainConfig(label_temperature=0.0), "train.label_temperature"),
    (lambda: TrainConfig(positive_weight=0.5), "train.positive_weight"),
    (lambda: TrainConfig(label_fraction=0.5, label_workers=2), "train.label_fraction = 1"),
    (lambda: TrainConfig(generator_families="unet,gnn"), "train.generator_families"),
    (lambda: TrainConfig(generator_families="rnn,rnn"), "train.generator_families"),
])
def test_bad_values_name_the_field(make, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        make()


def test_overrides_parse_json_and_reject_typos():
    cfg = MuZeroConfig().with_overrides(["simulator.num_simulations=8", "train.generator_preset=medium",
                                         "env.memory_bins=[8, 4]", "train.lr=3e-4"])
    assert cfg.simulator.num_simulations == 8
    assert cfg.train.generator_preset == "medium"
    assert cfg.env.memory_bins == (8, 4)
    assert cfg.train.lr == 3e-4
    with pytest.raises(ValueError, match=r"simulator.num_simulation.*did you mean 'num_simulations'"):
        MuZeroConfig().with_overrides(["simulator.num_simulation=8"])
    with pytest.raises(ValueError, match="part.field=value"):
        MuZeroConfig().with_overrides(["num_simulations=8"])
    with pytest.raises(ValueError, match="unknown config field train.learning_rate"):
        MuZeroConfig.from_dict({"train": {"lr": 1e-3, "learning_rate": 1}})
    with pytest.raises(ValueError, match=r"unknown config field simulator\.num_simulation \(did you mean 'num_simulations'\?\)"):
        MuZeroConfig.from_dict({"simulator": {"num_simulation": 8}})
    with pytest.raises(ValueError, match=r"unknown config part 'serach' \(did you mean 'search'\?\)"):
        MuZeroConfig.from_dict({"serach": {}})


def test_docs_list_every_config_field_with_its_default():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "muzero-config.md").read_text()
    for part, values in MuZeroConfig().to_dict().items():
        for name, default in values.items():
            assert f"| `{part}.{name}` | `{default!r}` |" in text, f"{part}.{name}"


def test_generator_families_choose_what_training_draws():
    from mallocgym.agents.muzero.source import make_generator

    assert make_generator("small").config.families == ("transformer", "cnn", "mlp")
    gen = make_generator("small", TrainConfig(generator_families="unet, rnn").generator_families)
    assert gen.config.families == ("unet", "rnn")
    rng = np.random.default_rng(0)
    names = {gen(rng).workload.name.split("-")[2] for _ in range(8)}
    assert names == {"unet", "rnn"}


def test_the_defaults_train_the_labelled_agent_and_old_checkpoints_keep_theirs():
    """Issue 31: version 2 and labelled games are the defaults; a checkpoint that records no
    network.version or train.label_fraction was written when they were 1 and 0."""
    cfg = MuZeroConfig()
    assert (cfg.network.version, cfg.train.label_fraction) == (2, 1.0)
    old = MuZeroConfig.from_dict({"network": {"hidden": 32}}, saved=True)
    assert (old.network.version, old.train.label_fraction) == (1, 0.0)
    assert MuZeroConfig.from_dict({"network": {"hidden": 32}}).network.version == 2   # a user's file: today's
