"""Chapter 12's checkers accept answers written another way, refuse one that delegates to the package, to
PyTorch's attention or to autograd, and reject wrong answers a learner would plausibly write."""

import pytest
import torch
import torch.nn.functional as F

import attnbook.torch as at
from attnbook.exercises import check_attention_blocked, check_smoothed_ce_grad


def blocked_with_where(Q, K, V, blocked):
    scores = Q @ K.mT / K.shape[-1] ** 0.5
    scores = torch.where(blocked, torch.full_like(scores, -1e300), scores)
    w = torch.exp(scores - scores.amax(-1, keepdim=True)) * ~blocked
    total = w.sum(-1, keepdim=True)
    return torch.where(total > 0, w / total.clamp_min(1e-300), 0.0) @ V


def smoothed_by_loops(logits, target, smoothing):
    B, V = logits.shape
    kept = [b for b in range(B) if target[b] != -100]
    grad = torch.zeros_like(logits)
    for b in kept:
        q = torch.full((V,), smoothing / V, dtype=logits.dtype)
        q[target[b]] += 1 - smoothing
        grad[b] = (torch.softmax(logits[b], 0) - q) / len(kept)
    return grad


def test_answers_written_another_way_pass():
    assert check_attention_blocked(blocked_with_where)
    assert check_smoothed_ce_grad(smoothed_by_loops)


@pytest.mark.parametrize(("checker", "answer", "named"), [
    (check_attention_blocked, lambda Q, K, V, b: at.scaled_dot_product_attention(Q, K, V, mask=~b)[0],
     "attnbook.torch.attention.scaled_dot_product_attention"),
    (check_attention_blocked, lambda Q, K, V, b: F.scaled_dot_product_attention(Q, K, V, attn_mask=~b).nan_to_num(0.0),
     "scaled_dot_product_attention"),
    (check_smoothed_ce_grad,
     lambda z, t, s: torch.autograd.grad(F.cross_entropy(z.requires_grad_(), t, label_smoothing=s), z)[0],
     "torch.autograd.grad"),
], ids=["package", "torch-sdpa", "autograd"])
def test_delegating_answers_are_refused_by_name(checker, answer, named):
    verdict = checker(answer)
    assert not verdict and named in verdict.message and "calls" in verdict.message


def test_zeroing_blocked_weights_after_the_softmax_is_refused():
    # the softmax then normalised over the blocked keys too: the allowed weights no longer sum to one
    def zero_after(Q, K, V, blocked):
        w = torch.softmax(Q @ K.mT / K.shape[-1] ** 0.5, dim=-1).masked_fill(blocked, 0.0)
        return w @ V

    assert not check_attention_blocked(zero_after)


def test_ignored_rows_left_in_the_gradient_are_refused():
    # a learner who maps -100 to class 0 instead of leaving the row out
    def ignored_as_class_zero(logits, target, smoothing):
        return smoothed_by_loops(logits, target.clamp_min(0), smoothing)

    assert not check_smoothed_ce_grad(ignored_as_class_zero)
