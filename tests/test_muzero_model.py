"""The legal moves the agents and the labels search (issue 31 removed the batched search over the
learned model, and its tests, with ``muzero:DIR``)."""

import numpy as np

from mallocgym.agents.muzero.model import effective_legal, xla_move


def test_effective_legal_prunes_placements_without_benefit():
    obs = {"action_mask": np.array([[1, 1, 0, 1], [1, 0, 0, 1]], np.int8),
           "buffer": np.zeros((2, 12), np.float32)}
    obs["buffer"][0, 5] = 0.2   # benefit now > 0
    np.testing.assert_array_equal(effective_legal(obs, prune_no_benefit=True),
                                  [[True, True, False, True], [False, False, False, True]])
    np.testing.assert_array_equal(effective_legal(obs, prune_no_benefit=False), obs["action_mask"].astype(bool))


def test_pruning_reads_the_benefit_now_feature():
    from mallocgym.agents.muzero.model import BENEFIT_NOW
    from mallocgym.features.v0 import BUFFER_FEATURES

    assert BUFFER_FEATURES[BENEFIT_NOW].startswith("benefit now")


def test_xla_move_is_best_fit_else_skip():
    assert xla_move(np.array([True, True, False, True])) == 0
    assert xla_move(np.array([False, True, False, True])) == 3
