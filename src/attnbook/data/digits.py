"""scikit-learn's bundled handwritten digits, 8 x 8 pixels, as image tensors (chapter 26).

The 1,797 images ship inside scikit-learn (``sklearn.datasets.load_digits``), so nothing is downloaded.
Their pixels are counts from 0 to 16; here they are scaled to [0, 1] and split once, by a seeded
permutation, into a training and a test set; ``scale=2`` enlarges them to 16 x 16 by bilinear interpolation,
so that a grid of small patches has room for near and far.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from attnbook._validate import require_int


@dataclass(frozen=True)
class DigitsSplit:
    """``X_*`` images ``(n, 1, 8 s, 8 s)`` float32 in [0, 1], ``s`` the ``scale``; ``y_*`` labels ``(n,)`` int64
    from 0 to 9."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor


def load_digits_split(n_test: int = 360, seed: int = 0, scale: int = 1) -> DigitsSplit:
    """The digits, scaled to [0, 1], split into ``n_test`` test images and the rest for training.

    The split is a permutation of the 1,797 images drawn by ``numpy.random.default_rng(seed)``: the same
    on every machine. ``scale`` 2 or 4 enlarges every image to ``8 scale`` pixels a side by bilinear
    interpolation (``F.interpolate``, ``align_corners=False``: each new pixel mixes the two nearest old ones in
    each direction, edges repeated); its weights are multiples of ``1 / (2 scale)``, so the enlarged pixels are
    exact in float32, the same on every machine. Needs scikit-learn; raises ``ImportError`` saying so when it
    is missing. Chapter 26.
    """
    require_int("n_test", n_test, 1)
    if scale not in (1, 2, 4) or isinstance(scale, bool):
        raise ValueError(f"scale must be 1, 2 or 4 (images of 8, 16 or 32 pixels a side); got {scale!r}")
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the digits data set ships with scikit-learn, which is not installed; install it with "
                          "`pip install scikit-learn`") from exc
    digits = load_digits()
    images = digits.images.astype(np.float32) / 16.0  # (1797, 8, 8), counts 0..16 to [0, 1]
    labels = digits.target.astype(np.int64)
    if n_test >= len(labels):
        raise ValueError(f"n_test must leave some training images: at most {len(labels) - 1}; got {n_test}")
    order = np.random.default_rng(seed).permutation(len(labels))
    test, train = order[:n_test], order[n_test:]
    X = torch.from_numpy(images[:, None])  # (1797, 1, 8, 8)
    if scale > 1:
        X = F.interpolate(X, scale_factor=scale, mode="bilinear", align_corners=False)  # (1797, 1, 8 s, 8 s)
    y = torch.from_numpy(labels)
    return DigitsSplit(X[train], y[train], X[test], y[test])
