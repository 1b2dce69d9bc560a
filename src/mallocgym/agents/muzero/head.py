"""The departure head of a MallocGame-v1 policy (issue 31): from the network's own features, does
leaving xla-msa's move for the network's best other move gain? A checkpoint's head
(``extra["departure_head"]``, fitted by ``baselines/muzero/v1/head.py``) makes ``muzero-pol``
depart only where its score is below ``simulator.head_threshold`` (``head=T``); search ignores it.
"""

from __future__ import annotations

import numpy as np

from .networks import _mlp_np

__all__ = ["DepartureHead", "head_inputs"]


def head_inputs(advantage: np.ndarray, features: tuple, base: int, move: int, k: int, buffers: int) -> np.ndarray:
    """The raw input row for leaving ``base`` for ``move`` (``k`` offsets per window, a program of
    ``buffers`` buffers; ``advantage, *features`` from :meth:`.networks.NumpyAdvantage.features`):
    the predicted gain, both advantages, both actions, k, log(buffers), the features' rows."""
    latent, keyed, rows = features
    head = [advantage[move] - advantage[base], advantage[base], advantage[move], base, move, k, np.log(buffers)]
    return np.concatenate([head, latent, keyed[base], keyed[move], rows[base], rows[move]])


def prepare(raw: np.ndarray) -> np.ndarray:
    """``[N, D]`` raw rows (:func:`head_inputs`) -> the network's inputs: the actions replaced by
    the kinds of both moves (slow, fast, prefetch: one-hot each)."""
    raw = np.atleast_2d(raw)
    k, base, move = raw[:, 5], raw[:, 3], raw[:, 4]
    kinds = [a == 0 for a in (base, move)] + [(a >= 1) & (a <= k) for a in (base, move)] + [a > k for a in (base, move)]
    return np.concatenate([raw[:, [0, 1, 2, 6]], np.stack(kinds, 1).astype(np.float64), raw[:, 7:]], 1)


class DepartureHead:
    """The head in numpy: standardised :func:`prepare`'d inputs through ReLU layers to one score
    (the logit of "the departure loses"; below ``threshold``: depart)."""

    def __init__(self, state: dict, threshold: float):
        try:
            self.mean = np.asarray(state["mean"], np.float64)
            self.scale = np.asarray(state["scale"], np.float64)
            self.layers = [(np.asarray(w, np.float64), np.asarray(b, np.float64))
                           for w, b in zip(state["weights"], state["biases"])]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a departure head needs mean, scale, weights and biases ({exc})") from None
        if not self.layers or self.layers[-1][0].shape[1:] != (1,) or self.mean.shape != self.scale.shape:
            raise ValueError("a departure head's layers must end in one output and its mean and scale match")
        if not np.isfinite(threshold):
            raise ValueError(f"the departure head's threshold must be finite, got {threshold!r}")
        self.threshold = float(threshold)

    def score(self, raw: np.ndarray) -> np.ndarray:
        """The head's score of every raw row (:func:`head_inputs`)."""
        return _mlp_np((prepare(raw) - self.mean) / self.scale, self.layers)[:, 0]

    def departs(self, raw: np.ndarray) -> bool:
        """Whether the head lets the policy leave xla-msa's move (one raw row)."""
        return bool(self.score(raw)[0] < self.threshold)