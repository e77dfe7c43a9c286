"""Checkers for the coding exercises of chapter 12 (from NumPy to PyTorch)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch import scaled_dot_product_attention


def _ce_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1201)
    cases = [Case("logits [[2, 1, 0]], target [0]", (torch.tensor([[2.0, 1.0, 0.0]], dtype=torch.float64),
                                                       torch.tensor([0])))]
    for B, V in ((4, 5), (2, 10), (1, 2)):
        logits = torch.randn(B, V, generator=g, dtype=torch.float64) * 3
        cases.append(Case(f"random logits ({B}, {V})", (logits, torch.randint(0, V, (B,), generator=g))))
    return cases


def _ce_grad(logits, target):
    logits = logits.clone().requires_grad_(True)
    F.cross_entropy(logits, target).backward()
    return logits.grad


def _ce_grad_no_mean(logits, target):
    return torch.softmax(logits, -1) - F.one_hot(target, logits.shape[-1]).to(logits.dtype)


def _ce_grad_sign(logits, target):
    return -_ce_grad(logits, target)


check_cross_entropy_grad = Checker(
    name="cross_entropy_grad",
    doc="Check ``fn(logits, target) -> (B, V)``: the gradient of the mean cross-entropy loss, by hand.",
    reference=_ce_grad,
    cases=_ce_cases(),
    mistakes=(
        Mistake(_ce_grad_no_mean, "the loss is the mean over the batch, so divide softmax - one_hot by B."),
        Mistake(_ce_grad_sign, "the gradient points uphill: softmax(logits) minus the one-hot target, "
                "not the reverse."),
    ),
)


def _attn_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1202)
    cases = []
    for shape_q, shape_k, d_v in (((3, 4), (5, 4), 2), ((2, 3, 8), (2, 6, 8), 5), ((1, 1), (1, 1), 1)):
        Q = torch.randn(*shape_q, generator=g, dtype=torch.float64)
        K = torch.randn(*shape_k, generator=g, dtype=torch.float64)
        V = torch.randn(*shape_k[:-1], d_v, generator=g, dtype=torch.float64)
        cases.append(Case(f"Q {tuple(Q.shape)}, K {tuple(K.shape)}, V {tuple(V.shape)}", (Q, K, V)))
    return cases


def _attn(Q, K, V):
    return scaled_dot_product_attention(Q, K, V)[0]


def _attn_plain_T(Q, K, V):
    return torch.softmax(Q @ K.mT / K.shape[-1] ** 0.5, dim=-2) @ V


def _attn_unscaled(Q, K, V):
    return torch.softmax(Q @ K.mT, dim=-1) @ V


check_torch_attention = Checker(
    name="torch_attention",
    doc="Check ``fn(Q, K, V) -> (..., T_q, d_v)``: scaled dot-product attention on torch tensors.",
    reference=_attn,
    cases=_attn_cases(),
    mistakes=(
        Mistake(_attn_plain_T, "the softmax runs over the keys, the last axis: dim=-1."),
        Mistake(_attn_unscaled, "divide the scores by sqrt(d_k) before the softmax."),
    ),
)
