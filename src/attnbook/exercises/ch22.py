"""Checkers for the coding exercises of chapter 22 (the modern block)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch import layer_norm, rms_norm, swiglu


def _rms_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2201)
    cases = [Case("x=[[3, 4]], gamma=1, eps=0 (root mean square 3.5355)",
                  (torch.tensor([[3.0, 4.0]], dtype=torch.float64), torch.ones(2, dtype=torch.float64), 0.0)),
             Case("x=[[1, 1, 1, 1]] + 2 (a shifted constant vector), gamma=1, eps=1e-5",
                  (torch.full((1, 4), 3.0, dtype=torch.float64), torch.ones(4, dtype=torch.float64), 1e-5)),
             Case("small x (scale 1e-2), eps=1e-2: eps matters",
                  (torch.randn(2, 5, generator=g, dtype=torch.float64) * 1e-2, torch.ones(5, dtype=torch.float64),
                   1e-2))]
    for shape in ((3, 6), (2, 4, 8)):
        x = torch.randn(*shape, generator=g, dtype=torch.float64) * 3 + 1
        gamma = torch.randn(shape[-1], generator=g, dtype=torch.float64)
        cases.append(Case(f"random x {shape} with mean about 1, random gamma, eps=1e-5", (x, gamma, 1e-5)))
    return cases


def _centred(x, gamma, eps):
    return layer_norm(x, gamma, torch.zeros_like(gamma), eps)


def _eps_outside(x, gamma, eps):
    return x / (torch.sqrt((x * x).mean(-1, keepdim=True)) + eps) * gamma


def _no_gamma(x, gamma, eps):
    return rms_norm(x, torch.ones_like(gamma), eps)


def _sum_not_mean(x, gamma, eps):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps) * gamma


check_rms_norm = Checker(
    name="rms_norm",
    doc="Check ``fn(x, gamma, eps) -> x.shape``: RMS normalisation over the last axis, ``x`` a float tensor.",
    reference=rms_norm,
    cases=_rms_cases(),
    mistakes=(
        Mistake(_centred, "RMSNorm does not subtract the mean: divide x itself by its root mean square."),
        Mistake(_eps_outside, "eps goes inside the square root, added to the mean square."),
        Mistake(_no_gamma, "after normalising, scale by gamma."),
        Mistake(_sum_not_mean, "the root MEAN square: divide the sum of squares by d before the square root."),
    ),
)


def _swiglu_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2202)
    cases = []
    for shape, d_ff in (((1, 2), 3), ((4, 6), 16), ((2, 3, 8), 21)):
        d = shape[-1]
        x = torch.randn(*shape, generator=g, dtype=torch.float64)
        W1, W3 = (torch.randn(d, d_ff, generator=g, dtype=torch.float64) for _ in range(2))
        W2 = torch.randn(d_ff, d, generator=g, dtype=torch.float64)
        cases.append(Case(f"random x {shape}, d_ff = {d_ff}", (x, W1, W3, W2)))
    return cases


def _glu(x, W1, W3, W2):  # the original GLU: a sigmoid gate
    return (torch.sigmoid(x @ W1) * (x @ W3)) @ W2


def _swapped(x, W1, W3, W2):
    return swiglu(x, W3, W1, W2)


def _silu_after(x, W1, W3, W2):
    return F.silu((x @ W1) * (x @ W3)) @ W2


def _no_gate(x, W1, W3, W2):
    return F.silu(x @ W1) @ W2


check_swiglu = Checker(
    name="swiglu",
    doc="Check ``fn(x, W1, W3, W2) -> x.shape``: ``(silu(x W1) * (x W3)) W2``, float tensors.",
    reference=swiglu,
    cases=_swiglu_cases(),
    mistakes=(
        Mistake(_glu, "that is GLU's sigmoid gate; SwiGLU gates with silu(z) = z * sigmoid(z)."),
        Mistake(_swapped, "silu goes on x W1, the gate; x W3 is the value it multiplies."),
        Mistake(_silu_after, "apply silu to the gate x W1 alone, then multiply by x W3."),
        Mistake(_no_gate, "multiply the gate silu(x W1) by the value x W3 before the output projection W2."),
    ),
)
