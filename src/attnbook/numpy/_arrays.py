"""Turning learners' inputs into float arrays, with errors that say what arrived."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import check_mask_fits


def as_float(name: str, x: ArrayLike) -> np.ndarray:
    """Accept lists and integer arrays; compute in floating point. Booleans are refused."""
    arr = np.asarray(x)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must hold numbers; got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must hold real numbers; got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


def as_mask(x: ArrayLike) -> np.ndarray:
    """A boolean mask, True where attention is allowed; any other dtype is an error."""
    arr = np.asarray(x)
    if arr.dtype != bool:
        raise ValueError(
            f"mask must be boolean, True where attention is allowed; got dtype {arr.dtype}. "
            "For a 0/1 mask use mask.astype(bool); for an additive mask of 0 and -inf use mask == 0"
        )
    return arr


def head_mask(mask: ArrayLike, scores_shape: tuple[int, ...]) -> np.ndarray:
    """A boolean mask checked against the scores ``(..., T_q, T_k)`` of one head, with a head axis added:
    ``(..., 1, T_q, T_k)``, the same for every head. The one preparation the multi-head functions share."""
    mask = as_mask(mask)
    check_mask_fits(mask.shape, tuple(scores_shape))
    return mask[..., None, :, :]
