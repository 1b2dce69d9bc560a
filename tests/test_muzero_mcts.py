"""Batched MCTS (pUCT and Gumbel MuZero) on toy games with known answers."""

import numpy as np
import pytest

from mallocgym.agents.muzero.config import SearchConfig
from mallocgym.agents.muzero.mcts import considered_visit_sequence, effective_legal, run_search

# A three-action game. From state 0: action 0 pays 1 at once and leads nowhere (state 1);
# action 1 pays nothing now but leads to state 2, where action 1 pays 3; action 2 pays 0.5 and
# then 0.2. Best first move: 1 (return 3), which a greedy one-step look-ahead misses.
NEXT = np.array([[1, 2, 3], [4, 4, 4], [4, 4, 4], [4, 4, 4], [4, 4, 4]])
REWARD = np.array([[1, 0, 0.5], [0, 0, 0], [0, 3, 0], [0.2, 0.2, 0.2], [0, 0, 0]])


class ToyModel:
    """Exact dynamics, uninformative value (0) and prior (uniform)."""

    def __init__(self, next_state=NEXT, reward=REWARD):
        self.next_state, self.reward = next_state, reward
        self.calls = 0

    def recurrent(self, embedding, actions):
        self.calls += 1
        (state,) = embedding
        assert actions.min() >= 0
        nxt = self.next_state[state, actions]
        return self.reward[state, actions], np.zeros(len(state)), np.zeros((len(state), self.next_state.shape[1])), (nxt,)


def search(model, config, n_sims, batch=4, logits=None, legal=None, rngs=None):
    a = model.next_state.shape[1]
    return run_search(model, values=np.zeros(batch), logits=np.zeros((batch, a)) if logits is None else logits,
                      embedding=(np.zeros(batch, np.int64),),
                      legal=np.ones((batch, a), bool) if legal is None else legal,
                      config=config, num_simulations=n_sims, rngs=rngs)


def test_gumbel_finds_the_delayed_reward_with_few_simulations():
    model = ToyModel()
    res = search(model, SearchConfig(algorithm="gumbel"), 32, rngs=[np.random.default_rng(i) for i in range(4)])
    assert model.calls == 32                       # one model call per simulation for the batch
    np.testing.assert_array_equal(res.action, [1, 1, 1, 1])
    assert np.all(res.policy.argmax(1) == 1)
    np.testing.assert_allclose(res.policy.sum(1), 1.0, rtol=1e-6)
    assert np.all(res.q[:, 0] == pytest.approx(1.0))  # Q of action 0 is exactly its reward


def test_puct_finds_the_delayed_reward():
    model = ToyModel()
    res = search(model, SearchConfig(algorithm="puct"), 128, batch=2)
    np.testing.assert_array_equal(res.action, [1, 1])
    assert np.all(res.visits.sum(1) == 128)
    np.testing.assert_allclose(res.policy, res.visits / 128.0)
    assert res.q[0, 1] > res.q[0, 0]


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_root_mask_is_respected(algorithm):
    legal = np.array([[True, False, True]] * 2)
    res = search(ToyModel(), SearchConfig(algorithm=algorithm), 16, batch=2, legal=legal,
                 rngs=[np.random.default_rng(i) for i in range(2)])
    assert np.all(res.visits[:, 1] == 0)
    assert np.all(res.policy[:, 1] == 0)
    assert set(res.action.tolist()) <= {0, 2}


def test_sequential_halving_schedule():
    assert considered_visit_sequence(4, 8) == (0, 0, 0, 0, 1, 1, 2, 2)
    assert considered_visit_sequence(2, 6) == (0, 0, 1, 1, 2, 2)
    assert considered_visit_sequence(1, 3) == (0, 1, 2)
    # m = 3, n = 10: ceil(log2 3) = 2 phases; 10 // (2 * 3) = 1 visit each, then 10 // (2 * 2) = 2
    # rounds for the best two, then the best two again until the budget is used
    assert considered_visit_sequence(3, 10) == (0, 0, 0, 1, 1, 2, 2, 3, 3, 4)


def test_gumbel_sequential_halving_hand_worked():
    """Four root actions, each ending the game: rewards 0, 0, 1, 0.5 (values 0 after), logits
    2, 1, 0, -1, no Gumbel noise, 8 simulations (schedule 0 0 0 0 1 1 2 2).

    Phase 1 visits all four once (in logit order). Then sigma(q) = (50 + max N) * 0.1 * q (the
    node's completed Q already spans [0, 1]): sim 4 (target 1): scores 2, 1, 0 + 5.1, -1 + 2.55
    -> action 2; sim 5 (target 1, max N = 2): among N == 1: 2, 1, -1 + 2.6 -> action 0; sims 6
    and 7 (target 2): action 2 (5.2 > 2), then action 0 (the only one left with N == 2).
    Visits 3 1 3 1; the action is the best of the most visited: 0 + 5.3 > 2 -> action 2; the
    policy target is softmax(logits + sigma) = softmax(2, 1, 5.3, 1.65).
    """
    next_state = np.array([[1, 1, 1, 1], [1, 1, 1, 1]])
    reward = np.array([[0.0, 0.0, 1.0, 0.5], [0.0, 0.0, 0.0, 0.0]])
    model = ToyModel(next_state, reward)
    logits = np.array([[2.0, 1.0, 0.0, -1.0]])
    res = search(model, SearchConfig(algorithm="gumbel", max_considered=8), 8, batch=1, logits=logits)
    np.testing.assert_array_equal(res.visits[0], [3, 1, 3, 1])
    assert res.action[0] == 2
    expected = np.exp([2.0, 1.0, 5.3, 1.65])
    np.testing.assert_allclose(res.policy[0], expected / expected.sum(), rtol=1e-6)


def test_gumbel_considers_only_top_m_actions():
    next_state = np.array([[1, 1, 1, 1], [1, 1, 1, 1]])
    reward = np.zeros((2, 4))
    logits = np.array([[0.0, 5.0, 4.0, -3.0]])
    res = search(ToyModel(next_state, reward), SearchConfig(algorithm="gumbel", max_considered=2), 6,
                 batch=1, logits=logits)
    np.testing.assert_array_equal(res.visits[0], [0, 3, 3, 0])


def test_effective_legal_prunes_placements_without_benefit():
    obs = {"action_mask": np.array([[1, 1, 0, 1], [1, 0, 0, 1]], np.int8),
           "buffer": np.zeros((2, 12), np.float32)}
    obs["buffer"][0, 5] = 0.2   # benefit now > 0
    np.testing.assert_array_equal(effective_legal(obs, prune_no_benefit=True),
                                  [[True, True, False, True], [False, False, False, True]])
    np.testing.assert_array_equal(effective_legal(obs, prune_no_benefit=False), obs["action_mask"].astype(bool))


def test_pruning_reads_the_benefit_now_feature():
    from mallocgym.agents.muzero.mcts import BENEFIT_NOW
    from mallocgym.features.v0 import BUFFER_FEATURES

    assert BUFFER_FEATURES[BENEFIT_NOW].startswith("benefit now")


def test_min_q_span_keeps_small_q_differences_small():
    """The hand-worked game above with ``min_q_span = 100``: Q in [0, 1] now normalises to at
    most 0.01, sigma(q) to at most ~0.5, so the logits decide: action 0."""
    next_state = np.array([[1, 1, 1, 1], [1, 1, 1, 1]])
    reward = np.array([[0.0, 0.0, 1.0, 0.5], [0.0, 0.0, 0.0, 0.0]])
    logits = np.array([[2.0, 1.0, 0.0, -1.0]])
    res = search(ToyModel(next_state, reward), SearchConfig(algorithm="gumbel", min_q_span=100.0), 8,
                 batch=1, logits=logits)
    assert res.action[0] == 0
    sigma = (50 + res.visits[0].max()) * 0.1 * np.array([0.0, 0.0, 1.0, 0.5]) / 100.0
    expected = np.exp(logits[0] + sigma)
    np.testing.assert_allclose(res.policy[0], expected / expected.sum(), rtol=1e-6)
