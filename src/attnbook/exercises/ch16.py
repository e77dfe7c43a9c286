"""Checkers for the coding exercises of chapter 16 (training an encoder-decoder)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.training.schedule import lr_at


def _smoothed(target, V, eps):
    return torch.full((len(target), V), eps / V).scatter(1, target[:, None], 1 - eps + eps / V)


def _others_only(target, V, eps):
    out = torch.full((len(target), V), eps / (V - 1))
    return out.scatter(1, target[:, None], 1 - eps)


def _unsmoothed(target, V, eps):
    return torch.nn.functional.one_hot(target, V).float()


check_smoothed_targets = Checker(
    name="smoothed_targets",
    doc="Check ``fn(target, V, eps) -> (B, V)``: the label-smoothed target distributions.",
    reference=_smoothed,
    cases=[Case(f"target={t}, V={V}, eps={e}", (torch.tensor(t), V, e))
           for t, V, e in (([1], 4, 0.1), ([0, 3, 2], 5, 0.2), ([2], 3, 0.0))],
    mistakes=(
        Mistake(_others_only, "PyTorch's label_smoothing spreads eps over all V tokens, the right one included: "
                "eps / V each, plus 1 - eps on the target."),
        Mistake(_unsmoothed, "that is the plain one-hot target; move eps of its mass to the uniform distribution."),
    ),
)


def _schedule(step, peak, warmup, total):
    return lr_at(step, peak, warmup, total, final=0.0, shape="cosine")


def _from_zero(step, peak, warmup, total):
    return peak * step / warmup if step < warmup else _schedule(step, peak, warmup, total)


def _no_warmup(step, peak, warmup, total):
    return lr_at(step, peak, 0, total, 0.0, "cosine") if total > 1 else peak


check_warmup_cosine = Checker(
    name="warmup_cosine",
    doc="Check ``fn(step, peak, warmup, total) -> float``: linear warm-up, then cosine decay to 0.",
    reference=_schedule,
    cases=[Case(f"step={s}, peak=1e-3, warmup=100, total=1000", (s, 1e-3, 100, 1000))
           for s in (0, 49, 99, 100, 550, 999)],
    mistakes=(
        Mistake(_from_zero, "count steps from 0 but reach peak * (step + 1) / warmup, so step 0 already trains."),
        Mistake(_no_warmup, "rise linearly during the first `warmup` steps before decaying."),
    ),
    atol=1e-12,
)
