"""n-step value targets, unroll targets and the prioritised replay, on hand-worked games."""

import numpy as np
import pytest

from mallocgym.agents.muzero.networks import ObsSpec
from mallocgym.agents.muzero.replay import GameRecord, Replay, nstep_returns

SPEC = ObsSpec(k=2, candidate_dim=3, buffer_dim=2, n_next=1, next_dim=2, memory_dim=4, progress_dim=1)
SKIP = SPEC.num_actions - 1


def game(rewards, values, actions=None, tag=0.0):
    n = len(rewards)
    a = SPEC.num_actions
    obs = {
        "buffer": np.full((n, 2), tag, np.float32) + np.arange(n, dtype=np.float32)[:, None],
        "candidates": np.zeros((n, 6), np.float32), "next": np.zeros((n, 2), np.float32),
        "memory": np.zeros((n, 4), np.float32), "progress": np.zeros((n, 1), np.float32),
        "action_mask": np.ones((n, a), np.int8),
    }
    policies = np.zeros((n, a), np.float32)
    policies[np.arange(n), np.arange(n) % a] = 1.0
    actions = np.arange(n) % a if actions is None else np.asarray(actions)
    return GameRecord(obs, actions.astype(np.int64), np.asarray(rewards, np.float32),
                      np.asarray(values, np.float32), policies)


def test_nstep_returns_hand_worked():
    # rewards 1 2 3 4, search values 10 20 30 40, n = 2, gamma = 0.5:
    # z0 = 1 + .5*2 + .25*30 = 9.5; z1 = 2 + .5*3 + .25*40 = 13.5; z2 = 3 + .5*4 = 5 (no
    # bootstrap past the end); z3 = 4
    z = nstep_returns([1, 2, 3, 4], [10, 20, 30, 40], td_steps=2, discount=0.5)
    np.testing.assert_allclose(z, [9.5, 13.5, 5.0, 4.0])


def test_nstep_returns_undiscounted_long_horizon_is_return_to_go():
    z = nstep_returns([1, 2, 3, 4], [99, 99, 99, 99], td_steps=10, discount=1.0)
    np.testing.assert_allclose(z, [10, 9, 7, 4])


def test_unroll_targets_hand_worked():
    replay = Replay(100, SPEC)
    replay.add(game([1, 2, 3, 4], [10, 20, 30, 40], actions=[0, 1, 2, 0]))
    t = replay.targets(np.array([1, 3]), unroll_steps=2, td_steps=2, discount=0.5)
    # from position 1: values z1 z2 z3, rewards (unused) r1 r2, actions a1 a2
    np.testing.assert_allclose(t.values[0], [13.5, 5.0, 4.0])
    np.testing.assert_allclose(t.rewards[0], [0.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.actions[0], [1, 2])
    np.testing.assert_array_equal(t.mask[0], [True, True, True])
    # from the last position: the game ends after one step (absorbing: value 0, reward 0, skip)
    np.testing.assert_allclose(t.values[1], [4.0, 0.0, 0.0])
    np.testing.assert_allclose(t.rewards[1], [0.0, 4.0, 0.0])
    np.testing.assert_array_equal(t.actions[1], [0, SKIP])
    np.testing.assert_array_equal(t.mask[1], [True, False, False])
    np.testing.assert_allclose(t.policies[1, 1:], 0.0)
    np.testing.assert_allclose(t.policies[0, 0], replay.policies[1])


def test_unroll_targets_never_cross_into_the_next_game():
    replay = Replay(100, SPEC)
    replay.add(game([1, 1], [5, 5]))
    replay.add(game([7, 7, 7], [50, 50, 50]))
    t = replay.targets(np.array([1]), unroll_steps=3, td_steps=5, discount=1.0)
    np.testing.assert_allclose(t.values[0], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(t.rewards[0], [0.0, 1.0, 0.0, 0.0])


def test_bootstrap_values_can_be_replaced():
    replay = Replay(100, SPEC)
    replay.add(game([1, 2, 3, 4], [10, 20, 30, 40]))
    fresh = replay.values.astype(np.float64).copy()
    fresh[2] = 100.0
    t = replay.targets(np.array([0]), unroll_steps=0, td_steps=2, discount=0.5, values=fresh)
    np.testing.assert_allclose(t.values[0], [1 + 1 + 25.0])


def test_wrapping_drops_overwritten_games_whole():
    replay = Replay(10, SPEC)
    replay.add(game([1] * 4, [0] * 4, tag=100))   # positions 0-3
    replay.add(game([1] * 4, [0] * 4, tag=200))   # positions 4-7
    assert replay.size == 8
    replay.add(game([1] * 3, [0] * 3, tag=300))   # does not fit at 8: wraps to 0, drops game 1
    assert replay.size == 7
    assert replay.obs["buffer"][0, 0] == 300
    assert np.all(replay.weight[3] == 0)          # the rest of the first game is gone too
    replay.add(game([1] * 2, [0] * 2, tag=400))   # positions 3-4: overlaps game 2, which goes
    assert replay.size == 5
    live = np.flatnonzero(replay.weight)
    np.testing.assert_array_equal(live, [0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="does not fit"):
        replay.add(game([1] * 11, [0] * 11))


def test_sampling_follows_priorities_and_weights_correct_for_it():
    replay = Replay(100, SPEC, alpha=1.0, beta=1.0)
    replay.add(game([0] * 4, [0] * 4), priorities=np.array([1.0, 1.0, 1.0, 97.0]))
    rng = np.random.default_rng(0)
    idx, w = replay.sample(20000, rng)
    share = np.mean(idx == 3)
    p3 = (97.0 + 1e-3) / (100.0 + 4e-3)
    assert share == pytest.approx(p3, abs=0.01)
    # importance weights (N P(i))^-beta / max: the frequent position gets the smallest weight
    assert w[idx == 3].max() == pytest.approx((1.0 + 1e-3) / (97.0 + 1e-3), rel=1e-5)
    assert w.max() == pytest.approx(1.0)
    replay.update_priorities(np.array([3]), np.array([0.0]))
    idx, _ = replay.sample(2000, rng)
    assert np.mean(idx == 3) < 0.01


def test_per_action_targets_are_stored_and_blank_otherwise():
    a = SPEC.num_actions
    with_targets = game([1, 2], [3, 4])
    with_targets.action_rewards = np.array([[0.5, np.nan, 0.0], [np.nan, 1.5, 0.0]], np.float32)
    with_targets.action_values = np.array([[2.0, np.nan, 3.0], [np.nan, 4.0, 5.0]], np.float32)
    replay = Replay(10, SPEC)
    replay.add(game([1, 1, 1], [0, 0, 0]))            # positions 0-2: no per-action targets
    replay.add(with_targets)                          # positions 3-4
    assert np.isnan(replay.action_values[:3]).all() and np.isnan(replay.action_rewards[:3]).all()
    np.testing.assert_array_equal(replay.action_values[3:5], with_targets.action_values)
    np.testing.assert_array_equal(replay.action_rewards[3:5], with_targets.action_rewards)
    # a game written over old positions leaves no stale targets behind
    replay.pointer = 3
    replay.add(game([1, 1], [0, 0]))
    assert np.isnan(replay.action_values[3:5]).all()
    bad = game([1, 2], [3, 4])
    bad.action_values = np.zeros((2, a + 1), np.float32)
    before = replay.weight.copy()
    with pytest.raises(ValueError, match="action_values"):
        replay.add(bad)
    np.testing.assert_array_equal(replay.weight, before)   # nothing written
