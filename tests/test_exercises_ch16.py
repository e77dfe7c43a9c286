"""Chapter 16's checkers: answers computed another way pass, the package's own function is refused, and
plausible wrong answers beyond the listed mistakes fail."""

import math

import torch

from attnbook.exercises import check_smoothed_masked_loss, check_warmup_cosine
from attnbook.tasks import PAD
from attnbook.training import lr_at, sequence_loss


def loss_by_mixture(logits, tgt, eps):
    # the smoothed target as a distribution, then its cross-entropy, position by position
    V = logits.shape[-1]
    q = torch.full(logits.shape, eps / V).scatter_add(-1, tgt[..., None], torch.full(tgt[..., None].shape, 1 - eps))
    per_position = -(q * torch.log_softmax(logits, -1)).sum(-1)
    real = tgt != PAD
    return float(per_position[real].sum() / real.sum())


def test_smoothed_masked_loss_accepts_the_mixture_written_out():
    assert check_smoothed_masked_loss(loss_by_mixture)


def test_smoothed_masked_loss_refuses_the_package_loss():
    verdict = check_smoothed_masked_loss(lambda logits, tgt, eps: sequence_loss(logits, tgt, PAD, eps))
    assert not verdict and "sequence_loss" in verdict.message
    verdict = check_smoothed_masked_loss(
        lambda logits, tgt, eps: torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(),
                                                                   ignore_index=PAD, label_smoothing=eps))
    assert not verdict and "cross_entropy" in verdict.message


def test_smoothed_masked_loss_refuses_smoothing_of_the_probabilities():
    def smoothed_probabilities(logits, tgt, eps):
        # mixes the model's probabilities with the uniform instead of the targets
        V = logits.shape[-1]
        p = (1 - eps) * torch.softmax(logits, -1) + eps / V
        real = tgt != PAD
        return float(-p.log().gather(-1, tgt[..., None])[..., 0][real].mean())

    assert not check_smoothed_masked_loss(smoothed_probabilities)


def schedule(step, peak, warmup, total):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * math.sin(math.pi / 2 * (total - 1 - step) / (total - 1 - warmup)) ** 2  # cos² (x/2) = (1 + cos x) / 2


def test_warmup_cosine_accepts_the_half_angle_form_and_refuses_lr_at():
    assert check_warmup_cosine(schedule)
    verdict = check_warmup_cosine(lambda step, peak, warmup, total: lr_at(step, peak, warmup, total))
    assert not verdict and "lr_at" in verdict.message


def test_warmup_cosine_shows_the_denominator_mistake_on_a_short_run():
    def over_total_minus_warmup(step, peak, warmup, total):
        if step < warmup:
            return peak * (step + 1) / warmup
        return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))

    verdict = check_warmup_cosine(over_total_minus_warmup)
    assert not verdict and "step=9, peak=1.0, warmup=2, total=10" in verdict.message and "total - 1" in verdict.message


def test_warmup_cosine_refuses_a_linear_decay():
    def linear(step, peak, warmup, total):
        return peak * (step + 1) / warmup if step < warmup else peak * (total - 1 - step) / (total - 1 - warmup)

    assert not check_warmup_cosine(linear)
