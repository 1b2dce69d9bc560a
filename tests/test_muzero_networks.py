"""Network shapes and the pointer-style policy: candidates are a set whose slots are actions."""

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
    step = net.recurrent_inference(out.latent, out.cands, torch.tensor([0, 4, 2]))
    assert step.reward_logits.shape == (3, 7) and step.cands.shape == (3, 4, 16)


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
    # the dynamics embeds an action as its candidate: same choice, same next latent
    na = net.recurrent_inference(a.latent, a.cands, torch.tensor([2, 2, 2]))
    nb = net.recurrent_inference(b.latent, b.cands, torch.tensor([0, 0, 0]))   # perm[0] == 2
    torch.testing.assert_close(nb.latent, na.latent)
    torch.testing.assert_close(nb.reward_logits, na.reward_logits)


def test_actions_are_embedded_from_their_candidate(net):
    out = net.initial_inference(obs_to_tensors(batch()))
    nxt = [net.recurrent_inference(out.latent, out.cands, torch.full((3,), a)).latent for a in range(5)]
    for a in range(5):
        for b in range(a + 1, 5):
            assert not torch.allclose(nxt[a][1], nxt[b][1])
