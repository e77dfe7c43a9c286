"""Chapter 24's checker accepts answers computed another way and names the typical mistakes."""

import torch
import torch.nn.functional as F

from attnbook.exercises import check_masked_loss


def by_ignore_index(logits, targets, chosen):
    # The other common spelling: targets outside the loss set to -100, which cross_entropy skips.
    labels = targets.masked_fill(~chosen, -100)
    return float(F.cross_entropy(logits.flatten(0, -2), labels.flatten(), ignore_index=-100))


def by_log_softmax(logits, targets, chosen):
    nll = -torch.log_softmax(logits.double(), dim=-1).gather(-1, targets[..., None])[..., 0]
    return float(nll[chosen].sum() / chosen.sum())


def test_independent_answers_pass():
    assert check_masked_loss(by_ignore_index)
    assert check_masked_loss(by_log_softmax)


def test_loss_over_every_position_is_named():
    def every(logits, targets, chosen):
        return float(F.cross_entropy(logits.flatten(0, -2), targets.flatten()))

    verdict = check_masked_loss(every)
    assert not verdict and "every position" in verdict.message


def test_dividing_by_all_positions_is_named():
    def wrong_mean(logits, targets, chosen):
        nll = F.cross_entropy(logits.flatten(0, -2), targets.flatten(), reduction="none")
        return float((nll * chosen.flatten()).sum() / chosen.numel())

    verdict = check_masked_loss(wrong_mean)
    assert not verdict and "number of chosen" in verdict.message


def test_the_checker_has_a_contract():
    assert "chosen positions" in check_masked_loss.__doc__
