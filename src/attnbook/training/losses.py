"""The training loss for sequences (chapter 16)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sequence_loss(logits: torch.Tensor, targets: torch.Tensor, pad_id: int | None = 0,
                  label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the non-padding positions.

    Shapes: ``logits`` ``(B, T, V)``, ``targets`` ``(B, T)``. Positions whose target is ``pad_id`` do not
    count (loss masking). With ``label_smoothing = eps`` the target distribution puts ``1 - eps`` on the
    right token and spreads ``eps`` evenly over the whole vocabulary.
    """
    if logits.shape[:2] != targets.shape:
        raise ValueError(f"logits (B, T, V) and targets (B, T) disagree: got {tuple(logits.shape)} "
                         f"and {tuple(targets.shape)}")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=-100 if pad_id is None else pad_id, label_smoothing=label_smoothing)
