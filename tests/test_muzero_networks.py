"""Network shapes and the pointer-style policy: candidates are a set whose slots are actions."""

import dataclasses

import numpy as np
import pytest
import torch

from mallocgym.agents.muzero.config import NetworkConfig
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec, obs_to_tensors

torch.set_num_threads(1)

SPEC = ObsSpec(k=4, candidate_dim=9, buffer_dim=12, n_next=3, next_dim=7, memory_dim=2 * 4 * 4, progress_dim=6)


@pytest.fixture
def net():
    torch.manual_seed(0)
    return MuZeroNet(SPEC, NetworkConfig(hidden=32, candidate_hidden=16, memory_hidden=8,
                                         value_support=5, reward_support=3)).eval()


def batch(b=3, seed=0):
    rng = np.random.default_rng(seed)
    cands = rng.random((b, SPEC.k, SPEC.candidate_dim)).astype(np.float32)
    cands[:, :, 0] = 1.0
    cands[0, 3] = 0.0            # an absent candidate
    return {"buffer": rng.random((b, 12), dtype=np.float32), "candidates": cands.reshape(b, -1),
            "next": rng.random((b, 21), dtype=np.float32), "memory": rng.random((b, 32), dtype=np.float32),
            "progress": rng.random((b, 6), dtype=np.float32), "action_mask": np.ones((b, 5), np.int8)}


def test_shapes(net):
    out = net.initial_inference(obs_to_tensors(batch()))
    assert out.latent.shape == (3, 32) and out.cands.shape == (3, 4, 16)
    assert out.policy_logits.shape == (3, 5) and out.value_logits.shape == (3, 11)
    logits, residual, advantage = net.expert(obs_to_tensors(batch()))
    assert logits.shape == (3, 5) and residual.shape == (3,) and advantage.shape == (3, 5)


def test_advantage_alone_is_experts_advantage(net):
    """The policy's and the search's per-decision call runs only the advantage head: the same
    numbers as the full expert call, bit for bit, with and without the skip row, and through
    the float64 wrapper the agents use."""
    from mallocgym.agents.muzero.model import NetworkModel
    obs = batch()
    with torch.no_grad():
        _, _, full = net.expert(obs_to_tensors(obs))
        alone = net.advantage(obs_to_tensors(obs))
    assert alone.shape == (3, 5)
    assert torch.equal(alone, full)
    np.testing.assert_array_equal(NetworkModel(net).advantage(obs), NetworkModel(net).expert(obs)[2])
    torch.manual_seed(0)
    v1_game = MuZeroNet(dataclasses.replace(SPEC, game="v1"), net.config).eval()
    with torch.no_grad():
        assert torch.equal(v1_game.advantage(obs_to_tensors(obs)), v1_game.expert(obs_to_tensors(obs))[2])
        assert v1_game.advantage(obs_to_tensors(obs)).shape == (3, 4)   # SLOW is a pointer row: no skip


def test_policy_is_equivariant_to_candidate_order(net):
    obs = batch()
    perm = np.array([2, 0, 3, 1])
    shuffled = dict(obs)
    shuffled["candidates"] = obs["candidates"].reshape(3, 4, 9)[:, perm].reshape(3, -1)
    a = net.initial_inference(obs_to_tensors(obs))
    b = net.initial_inference(obs_to_tensors(shuffled))
    torch.testing.assert_close(b.policy_logits[:, :4], a.policy_logits[:, perm])
    torch.testing.assert_close(b.policy_logits[:, 4], a.policy_logits[:, 4])   # skip
    torch.testing.assert_close(b.value_logits, a.value_logits)
    # the advantage head is pointer-style too: it permutes with the candidates
    _, res_a, adv_a = net.expert(obs_to_tensors(obs))
    _, res_b, adv_b = net.expert(obs_to_tensors(shuffled))
    torch.testing.assert_close(adv_b[:, :4], adv_a[:, perm])
    torch.testing.assert_close(res_b, res_a)


def test_a_version_1_network_has_no_version_2_heads():
    torch.manual_seed(0)
    v1 = MuZeroNet(SPEC, NetworkConfig(hidden=32, candidate_hidden=16, memory_hidden=8, version=1)).eval()
    with pytest.raises(ValueError, match="no residual and advantage heads"):
        v1.expert(obs_to_tensors(batch()))
    with pytest.raises(ValueError, match="no residual and advantage heads"):
        v1.advantage(obs_to_tensors(batch()))
    assert not any(name.startswith(("residual_head", "advantage_")) for name in v1.state_dict())
