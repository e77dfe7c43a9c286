"""The learning-rate schedule: linear warm-up, then linear or cosine decay (chapter 16), or a trapezoid:
constant, then a linear cool-down (chapter 25)."""

from __future__ import annotations

import math

from attnbook._validate import require_int, require_real


def lr_at(step: int, peak: float, warmup: int, total: int, final: float = 0.0, shape: str = "cosine",
          cooldown: float = 0.4) -> float:
    """Learning rate at ``step`` (counted from 0) of ``total`` steps.

    Rises linearly from ``peak / warmup`` to ``peak`` over the first ``warmup`` steps, then decays to
    ``final`` at the last step, along a cosine (``shape="cosine"``) or a straight line (``"linear"``), and
    stays there past it. ``shape="trapezoid"`` (the warm-up, stable, decay schedule of the GPU speedruns)
    holds ``peak`` after the warm-up and decays along a straight line over the last ``cooldown`` fraction
    of the steps only. Refuses a negative or non-integer ``step``, ``warmup`` or ``total``, a ``peak`` that
    is not positive, and a ``final`` outside ``[0, peak]``: each would give a negative or rising rate.
    """
    if shape not in ("cosine", "linear", "trapezoid"):
        raise ValueError(f"shape must be 'cosine', 'linear' or 'trapezoid'; got {shape!r}")
    require_real("cooldown", cooldown, "a fraction in (0, 1]", lambda v: 0 < v <= 1)
    require_int("step", step, 0)
    require_int("warmup", warmup, 0)
    require_int("total", total, 1)
    if warmup > total:
        raise ValueError(f"need 0 <= warmup <= total and total >= 1; got warmup={warmup}, total={total}")
    require_real("peak", peak, "a positive finite number", lambda v: v > 0)
    require_real("final", final, f"a finite number in [0, peak = {peak}]", lambda v: 0 <= v <= peak)
    if step < warmup:
        return peak * (step + 1) / warmup
    if shape == "trapezoid":  # constant, then the last `cooldown` of the steps down a straight line
        start = max(warmup, total - 1 - round(cooldown * total))
        progress = (step - start) / max(1, total - 1 - start)
        return final + (peak - final) * (1 - min(max(progress, 0.0), 1.0))
    progress = (step - warmup) / max(1, total - 1 - warmup)
    progress = min(max(progress, 0.0), 1.0)
    factor = 0.5 * (1 + math.cos(math.pi * progress)) if shape == "cosine" else 1 - progress
    return final + (peak - final) * factor
