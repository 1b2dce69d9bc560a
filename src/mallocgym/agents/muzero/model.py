"""The network as the agents and the trainer call it, and the legal moves they search.

:class:`NetworkModel` wraps :class:`~.networks.MuZeroNet` (no gradients, float64 arrays out);
:func:`effective_legal` is the env's mask less placements that would save nothing now (XLA's
rule); :func:`xla_move` is XLA-like's move among them.
"""

from __future__ import annotations

import numpy as np
import torch

from .networks import MuZeroNet, obs_to_tensors

__all__ = ["NetworkModel", "effective_legal", "xla_move", "BENEFIT_NOW"]

# index of "benefit now / largest single-buffer benefit" in obs["buffer"] (features.BUFFER_FEATURES)
BENEFIT_NOW = 5


class NetworkModel:
    """:class:`MuZeroNet` for the simulator search and the policy (no gradients, float64 out)."""

    def __init__(self, net: MuZeroNet):
        self.net = net

    @torch.no_grad()
    def evaluate(self, obs: dict[str, np.ndarray], *, values: bool = True) -> tuple[np.ndarray | None, np.ndarray]:
        """``(value [B] or None, logits [B, A])`` of a batch of observations; ``values=False``
        skips decoding the value head (the simulator search with exact values needs only logits)."""
        out = self.net.initial_inference(obs_to_tensors(obs))
        value = self.net.value_support.decode(out.value_logits).double().numpy() if values else None
        return value, out.policy_logits.double().numpy()

    @torch.no_grad()
    def expert(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Version-2 networks: ``(logits [B, A], residual [B], advantage [B, A])`` as float64
        arrays (:meth:`MuZeroNet.expert`)."""
        logits, residual, advantage = self.net.expert(obs_to_tensors(obs))
        return logits.double().numpy(), residual.double().numpy(), advantage.double().numpy()


    @torch.inference_mode()
    def advantage(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Version-2 networks: the advantage ``[B, A]`` alone as float64 (:meth:`MuZeroNet.advantage`,
        the same numbers as :meth:`expert`'s third output for less work)."""
        return self.net.advantage(obs_to_tensors(obs)).double().numpy()


def effective_legal(obs: dict[str, np.ndarray], *, prune_no_benefit: bool) -> np.ndarray:
    """``bool[B, A]`` legal actions: the env's mask, minus placements of buffers that would save
    nothing now when ``prune_no_benefit``."""
    legal = np.asarray(obs["action_mask"]).astype(bool).copy()
    if prune_no_benefit:
        useless = np.asarray(obs["buffer"])[:, BENEFIT_NOW] <= 0.0
        legal[useless, :-1] = False
    return legal


def xla_move(legal: np.ndarray) -> int:
    """XLA-like's move among the search's legal actions (``effective_legal``): the best-fit
    candidate (action 0) when it is legal, else skip (the last action)."""
    return 0 if legal[0] else len(legal) - 1
