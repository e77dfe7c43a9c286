"""Checkers for the coding exercises of chapter 16 (training an encoder-decoder)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.tasks import PAD
from attnbook.training.losses import sequence_loss
from attnbook.training.schedule import lr_at


def _smoothed_masked_loss(logits, tgt, eps):
    return sequence_loss(logits, tgt, PAD, eps)


def _log_probs(logits):
    return torch.log_softmax(logits.double(), dim=-1)


def _padding_counted(logits, tgt, eps):
    log_p = _log_probs(logits)
    V = logits.shape[-1]
    picked = log_p.gather(-1, tgt[..., None])[..., 0]
    return -((1 - eps) * picked + eps / V * log_p.sum(-1)).mean()


def _others_only(logits, tgt, eps):
    log_p, real = _log_probs(logits), tgt != PAD
    V = logits.shape[-1]
    picked = log_p.gather(-1, tgt[..., None])[..., 0]
    rest = log_p.sum(-1) - picked
    return -((1 - eps) * picked + eps / (V - 1) * rest)[real].mean()


def _unsmoothed(logits, tgt, eps):
    return -_log_probs(logits).gather(-1, tgt[..., None])[..., 0][tgt != PAD].mean()


def _per_sequence_mean(logits, tgt, eps):
    log_p, real = _log_probs(logits), (tgt != PAD).double()
    V = logits.shape[-1]
    per_position = -((1 - eps) * log_p.gather(-1, tgt[..., None])[..., 0] + eps / V * log_p.sum(-1))
    return ((per_position * real).sum(1) / real.sum(1)).mean()


def _loss_cases() -> list[Case]:
    g = torch.Generator().manual_seed(16)
    cases = []
    for B, T, V, eps in ((1, 3, 4, 0.1), (3, 5, 6, 0.2), (4, 7, 14, 0.1)):
        tgt = torch.randint(1, V, (B, T), generator=g)  # any token but PAD
        for row in range(1, B):  # later rows shorter: their ends are padding
            tgt[row, T - row:] = PAD
        cases.append(Case(f"logits ({B}, {T}, {V}), {int((tgt == PAD).sum())} padded targets, eps={eps}",
                          (torch.randn(B, T, V, generator=g), tgt, eps)))
    return cases


check_smoothed_masked_loss = Checker(
    name="smoothed_masked_loss",
    doc="Check ``fn(logits, tgt, eps) -> float``: label-smoothed cross-entropy, mean over the non-padding "
        "positions of ``tgt``.",
    reference=_smoothed_masked_loss,
    cases=_loss_cases(),
    mistakes=(
        Mistake(_padding_counted, "padded positions count here: average only over the positions whose target "
                "is not PAD."),
        Mistake(_others_only, "PyTorch's label_smoothing spreads eps over all V tokens, the right one included: "
                "eps / V each, plus 1 - eps on the target."),
        Mistake(_unsmoothed, "that is the loss without smoothing: the target distribution also puts eps / V on "
                "every token."),
        Mistake(_per_sequence_mean, "that averages each sequence first, so a short sequence weighs as much as a "
                "long one: average over all real positions of the batch at once."),
    ),
    atol=1e-6,
    forbidden=(sequence_loss, F.cross_entropy),
)


def _schedule(step, peak, warmup, total):  # a wrapper: the checker's reference is not lr_at itself
    return lr_at(step, peak, warmup, total, final=0.0, shape="cosine")


def _from_zero(step, peak, warmup, total):
    return peak * step / warmup if step < warmup else _schedule(step, peak, warmup, total)


def _decay_over_total_minus_warmup(step, peak, warmup, total):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))


def _no_warmup(step, peak, warmup, total):
    return peak * 0.5 * (1 + math.cos(math.pi * step / (total - 1)))


check_warmup_cosine = Checker(
    name="warmup_cosine",
    doc="Check ``fn(step, peak, warmup, total) -> float``: linear warm-up, then cosine decay to 0.",
    reference=_schedule,
    cases=[*(Case(f"step={s}, peak=1e-3, warmup=100, total=1000", (s, 1e-3, 100, 1000)) for s in (0, 49, 99, 100)),
           # the last step of a short run: the rate must have reached 0 there
           Case("step=9, peak=1.0, warmup=2, total=10", (9, 1.0, 2, 10)),
           *(Case(f"step={s}, peak=1e-3, warmup=100, total=1000", (s, 1e-3, 100, 1000)) for s in (550, 999))],
    mistakes=(
        Mistake(_from_zero, "count steps from 0 but reach peak * (step + 1) / warmup, so step 0 already trains."),
        Mistake(_no_warmup, "rise linearly during the first `warmup` steps before decaying."),
        Mistake(_decay_over_total_minus_warmup, "the decay must be complete at the last step, total - 1: it "
                "takes total - 1 - warmup steps after the warm-up, not total - warmup."),
    ),
    forbidden=(lr_at,),
    atol=1e-12,
)
