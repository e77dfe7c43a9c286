"""Checkers for the coding exercises of chapter 12 (from NumPy to PyTorch)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch import masked_softmax, scaled_dot_product_attention

# --- attention with PyTorch's mask convention: True where a key is NOT allowed ---------------------------


def _blocked(Q, K, V, blocked, variant=""):
    # The typical mistakes run inside the reference, where the package's attention may be called.
    if variant == "as_allowed":
        return scaled_dot_product_attention(Q, K, V, mask=blocked)[0]
    if variant == "unscaled":
        return scaled_dot_product_attention(Q * K.shape[-1] ** 0.5, K, V, mask=~blocked)[0]
    return scaled_dot_product_attention(Q, K, V, mask=~blocked)[0]


def _blocked_as_allowed(Q, K, V, blocked):
    return _blocked(Q, K, V, blocked, "as_allowed")


def _blocked_unscaled(Q, K, V, blocked):
    return _blocked(Q, K, V, blocked, "unscaled")


def _blocked_nan_rows(Q, K, V, blocked):
    scores = (Q @ K.mT / K.shape[-1] ** 0.5).masked_fill(blocked, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V


def _blocked_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1203)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    future = torch.ones(4, 4, dtype=torch.bool).triu(1)
    pad = torch.tensor([[False] * 6, [False] * 3 + [True] * 3])[:, None, :]  # (B, 1, T_k): padded keys
    some = torch.rand(2, 3, 5, generator=g) > 0.6
    some[1, 0] = True  # query 0 of sequence 1: every key blocked
    return [
        Case("Q, K, V (4, 2), causal: blocked = the upper triangle", (r(4, 2), r(4, 2), r(4, 2), future)),
        Case("Q (2, 3, 8), K (2, 6, 8), V (2, 6, 5), padding mask (2, 1, 6)",
             (r(2, 3, 8), r(2, 6, 8), r(2, 6, 5), pad)),
        Case("Q (2, 3, 4), K and V (2, 5, 4), random mask, one query with every key blocked",
             (r(2, 3, 4), r(2, 5, 4), r(2, 5, 4), some)),
    ]


check_attention_blocked = Checker(
    name="attention_blocked",
    doc="Check ``fn(Q, K, V, blocked) -> (..., T_q, d_v)``: scaled dot-product attention with ``blocked`` True "
        "where a key is not allowed (PyTorch's convention); a query with every key blocked outputs zeros.",
    reference=_blocked,
    cases=_blocked_cases(),
    mistakes=(
        Mistake(_blocked_as_allowed, "here True means blocked: those scores are the ones to remove."),
        Mistake(_blocked_unscaled, "divide the scores by sqrt(d_k) before the softmax."),
        Mistake(_blocked_nan_rows, "a query whose keys are all blocked has nothing to normalise (0 / 0 in the "
                "softmax): its weights, and so its output, must be zero."),
    ),
    atol=1e-10,
    forbidden=(scaled_dot_product_attention, masked_softmax, "attnbook.numpy.scaled_dot_product_attention",
               "torch.nn.functional.scaled_dot_product_attention", "torch.nn.functional.multi_head_attention_forward"),
)


# --- the gradient of cross-entropy with label smoothing and ignored targets, without autograd ------------

IGNORE = -100


def _smoothed_ce_grad(logits, target, smoothing):
    logits = logits.detach().clone().requires_grad_(True)
    F.cross_entropy(logits, target, ignore_index=IGNORE, label_smoothing=smoothing).backward()
    return logits.grad


def _smoothed_no_smoothing(logits, target, smoothing):
    return _smoothed_ce_grad(logits, target, 0.0)


def _smoothed_mean_over_all_rows(logits, target, smoothing):
    kept = (target != IGNORE).sum()
    return _smoothed_ce_grad(logits, target, smoothing) * kept / len(target)


def _smoothed_over_the_others(logits, target, smoothing):
    # spreads the smoothing over the V - 1 wrong classes, as some papers do; PyTorch spreads it over all V
    V = logits.shape[-1]
    kept = target != IGNORE
    q = torch.full_like(logits, smoothing / (V - 1))
    q[kept, target[kept]] = 1 - smoothing
    return (torch.softmax(logits, -1) - q) * kept[:, None] / kept.sum()


def _smoothed_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1204)
    cases = [Case("logits [[2, 1, 0]], target [0], smoothing 0.1",
                  (torch.tensor([[2.0, 1.0, 0.0]], dtype=torch.float64), torch.tensor([0]), 0.1))]
    for B, V, s, ignored in ((4, 5, 0.0, ()), (5, 7, 0.2, (1, 3)), (6, 3, 0.1, (0,))):
        target = torch.randint(0, V, (B,), generator=g)
        target[list(ignored)] = IGNORE
        cases.append(Case(f"random logits ({B}, {V}), smoothing {s}, targets at {list(ignored)} ignored (-100)",
                          (torch.randn(B, V, generator=g, dtype=torch.float64) * 3, target, s)))
    return cases


check_smoothed_ce_grad = Checker(
    name="smoothed_ce_grad",
    doc="Check ``fn(logits, target, smoothing) -> (B, V)``: the gradient of ``F.cross_entropy(logits, target, "
        "ignore_index=-100, label_smoothing=smoothing)`` with respect to ``logits``, without autograd.",
    reference=_smoothed_ce_grad,
    cases=_smoothed_cases(),
    mistakes=(
        Mistake(_smoothed_no_smoothing, "with smoothing s the target distribution is no longer one-hot: every "
                "class gets some of the probability."),
        Mistake(_smoothed_mean_over_all_rows, "the mean runs over the targets that count: ignored rows are left "
                "out of the denominator too."),
        Mistake(_smoothed_over_the_others, "PyTorch spreads the smoothing uniformly over all V classes, the "
                "target included."),
    ),
    atol=1e-10,
    forbidden=("torch.autograd.backward", "torch.autograd.grad", "torch.autograd.functional.vjp",
               "torch.autograd.functional.jacobian", "torch.func.grad", "torch.func.vjp"),
)
