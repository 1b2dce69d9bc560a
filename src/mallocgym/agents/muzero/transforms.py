"""Value and reward transforms: the invertible h(x) scaling and categorical (two-hot) supports.

MuZero (Schrittwieser et al. 2020, appendix F; the transform from Pohlen et al. 2018) predicts
values and rewards as distributions over an integer support after squashing them with

    h(x)      = sign(x) * (sqrt(|x| + 1) - 1) + eps * x
    h^-1(y)   = sign(y) * (((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1)

A scalar ``y = h(x)`` on the support ``[lo, lo + 1, ..., hi]`` is represented by the two
neighbouring atoms with weights that preserve its mean ("two-hot"); the prediction's scalar is
``h^-1(sum_i p_i * atom_i)``. Torch versions are used for training, NumPy versions for search.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["EPS", "h", "h_inv", "h_np", "h_inv_np", "two_hot", "two_hot_np", "Support"]

EPS = 1e-3


def h(x: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """``sign(x) * (sqrt(|x| + 1) - 1) + eps * x``."""
    return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1.0) - 1.0) + eps * x


def h_inv(y: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """The exact inverse of :func:`h`."""
    root = (torch.sqrt(1.0 + 4.0 * eps * (torch.abs(y) + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return torch.sign(y) * (root * root - 1.0)


def h_np(x, eps: float = EPS):
    """NumPy :func:`h` (float64)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + eps * x


def h_inv_np(y, eps: float = EPS):
    """NumPy :func:`h_inv` (float64)."""
    y = np.asarray(y, dtype=np.float64)
    root = (np.sqrt(1.0 + 4.0 * eps * (np.abs(y) + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return np.sign(y) * (root * root - 1.0)


def two_hot(y: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """Project scalars ``y [...]`` onto the integer atoms ``lo..hi``: ``[..., hi - lo + 1]``.

    Values outside ``[lo, hi]`` are clipped to the end atoms. The projection keeps the mean:
    ``sum_i p_i * atom_i == clip(y, lo, hi)``.
    """
    y = torch.clamp(y, float(lo), float(hi)) - lo
    below = torch.floor(y)
    upper_w = y - below
    n = hi - lo + 1
    below_i = below.long()
    above_i = torch.clamp(below_i + 1, max=n - 1)
    out = torch.zeros(*y.shape, n, dtype=y.dtype, device=y.device)
    out.scatter_add_(-1, below_i.unsqueeze(-1), (1.0 - upper_w).unsqueeze(-1))
    out.scatter_add_(-1, above_i.unsqueeze(-1), upper_w.unsqueeze(-1))
    return out


def two_hot_np(y, lo: int, hi: int) -> np.ndarray:
    """NumPy :func:`two_hot`."""
    return two_hot(torch.as_tensor(np.asarray(y, dtype=np.float64)), lo, hi).numpy()


class Support:
    """A symmetric categorical support ``[-size, ..., size]`` in h-space.

    ``encode(x)`` gives the two-hot target of scalars ``x``; ``decode(logits)`` the scalar of
    a predicted distribution. ``size`` bounds the representable scalars at ``h^-1(size)``
    (``size = 10`` covers ``|x| <= 130``).
    """

    def __init__(self, size: int, eps: float = EPS):
        if int(size) < 1:
            raise ValueError(f"support size must be >= 1, got {size}")
        self.size = int(size)
        self.eps = float(eps)
        self.n = 2 * self.size + 1
        self.atoms = torch.arange(-self.size, self.size + 1, dtype=torch.float32)

    @property
    def max_scalar(self) -> float:
        """The largest scalar the support represents without clipping."""
        return float(h_inv_np(self.size, self.eps))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Two-hot targets ``[..., n]`` for scalars ``x [...]``."""
        return two_hot(h(x.float(), self.eps), -self.size, self.size)

    def decode(self, logits: torch.Tensor) -> torch.Tensor:
        """Scalars ``[...]`` (float64: h^-1 loses digits in float32) of the distributions given
        by ``logits [..., n]``."""
        probs = torch.softmax(logits.double(), dim=-1)
        return h_inv((probs * self.atoms.double()).sum(-1), self.eps)

    def __repr__(self) -> str:
        return f"Support(size={self.size}, eps={self.eps}, max_scalar={self.max_scalar:.4g})"

