"""The learning-rate schedule: linear warm-up, then linear or cosine decay (chapter 16)."""

from __future__ import annotations

import math


def lr_at(step: int, peak: float, warmup: int, total: int, final: float = 0.0, shape: str = "cosine") -> float:
    """Learning rate at ``step`` (counted from 0) of ``total`` steps.

    Rises linearly from ``peak / warmup`` to ``peak`` over the first ``warmup`` steps, then decays to
    ``final`` at the last step, along a cosine (``shape="cosine"``) or a straight line (``"linear"``).
    """
    if shape not in ("cosine", "linear"):
        raise ValueError(f"shape must be 'cosine' or 'linear'; got {shape!r}")
    if warmup < 0 or total < 1 or warmup > total:
        raise ValueError(f"need 0 <= warmup <= total and total >= 1; got warmup={warmup}, total={total}")
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - 1 - warmup)
    progress = min(max(progress, 0.0), 1.0)
    factor = 0.5 * (1 + math.cos(math.pi * progress)) if shape == "cosine" else 1 - progress
    return final + (peak - final) * factor
