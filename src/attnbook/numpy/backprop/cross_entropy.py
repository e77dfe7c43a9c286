"""The backward pass of the cross-entropy of a softmax: ``(p - onehot) / N`` (chapters 12 and 19)."""

from __future__ import annotations

import numpy as np

from attnbook._validate import shape_str


def cross_entropy_forward(logits: np.ndarray, targets: np.ndarray) -> tuple[float, dict]:
    """Mean of ``-log softmax(logits)[target]`` over all ``N`` positions, as ``torch.nn.functional.cross_entropy``.

    Shapes: ``logits`` ``(..., V)``, integer ``targets`` ``(...)``. Returns ``(loss, cache)``; the cache keeps
    the probabilities ``p`` ``(..., V)`` and the targets. Refuses targets that are not integers in
    ``[0, V)``: a target of -1 would silently pick the last class, as Python indexing does.
    """
    targets = np.asarray(targets)
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"targets must have shape {shape_str(logits.shape[:-1])} to match logits "
                         f"{shape_str(logits.shape)} (..., V); got {shape_str(targets.shape)}")
    V = logits.shape[-1]
    if not np.issubdtype(targets.dtype, np.integer):
        raise ValueError(f"targets must be integer class ids; got dtype {targets.dtype}")
    if targets.size and (targets.min() < 0 or targets.max() >= V):
        raise ValueError(f"targets must lie in [0, {V - 1}] (V = {V} classes); got values from {targets.min()} "
                         f"to {targets.max()}")
    z = logits - logits.max(axis=-1, keepdims=True)  # no overflow (chapter 2)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_p, targets[..., None], axis=-1)
    return float(-picked.mean()), {"p": np.exp(log_p), "targets": targets}


def cross_entropy_backward(cache: dict, dloss: float = 1.0) -> np.ndarray:
    """``dlogits = dloss * (p - onehot(targets)) / N``, shape ``(..., V)``."""
    p, targets = cache["p"], cache["targets"]
    dlogits = p.copy()
    np.put_along_axis(dlogits, targets[..., None], np.take_along_axis(p, targets[..., None], axis=-1) - 1.0,
                      axis=-1)
    return dlogits * (dloss / targets.size)
