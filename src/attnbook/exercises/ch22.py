"""Checkers for the coding exercises of chapter 22 (the modern block)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch import rms_norm

# The package's and PyTorch's own RMSNorm: each would do the half-precision exercise in one call.
_RMS_NORMS = (rms_norm, "attnbook.numpy.rms_norm", "torch.nn.functional.rms_norm", "torch.rms_norm")


def _half_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2203)
    h = dict(dtype=torch.float16)
    cases = [Case("x=[[3, 4]] in float16, gamma=1, eps=0", (torch.tensor([[3.0, 4.0]], **h), torch.ones(2, **h), 0.0))]
    for scale, eps, why in ((300.0, 1e-5, "its squares pass float16's largest number, 65504"),
                            (1e-3, 1e-8, "its squares fall below float16's smallest normal number"),
                            (1.0, 1e-5, "ordinary sizes")):
        for shape in ((3, 16), (2, 4, 32)):
            x = (torch.randn(*shape, generator=g) * scale).to(torch.float16)
            gamma = (1 + 0.3 * torch.randn(shape[-1], generator=g)).to(torch.float16)
            cases.append(Case(f"random float16 x {shape} of scale {scale:g} ({why}), eps={eps:g}", (x, gamma, eps)))
    return cases


def _half_reference(x, gamma, eps):
    # everything in float32: float16's squares overflow above 256 and lose their digits below about 0.008
    return rms_norm(x.float(), gamma.float(), eps)


def _all_in_half(x, gamma, eps):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * gamma


def _rescaled_by_max(x, gamma, eps):
    # divide by the largest entry first (safe from overflow) but forget that eps is then rescaled too
    m = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-30)
    y = x / m
    return y.float() / torch.sqrt((y.float() ** 2).mean(dim=-1, keepdim=True) + eps) * gamma.float()


check_rms_norm_fp16 = Checker(
    name="rms_norm_fp16",
    doc="Check ``fn(x, gamma, eps) -> x.shape``: RMSNorm over the last axis of a float16 ``x`` with a float16 "
        "gain ``gamma`` ``(d,)``, computed in float32 (the mean square above all), the result in float32.",
    reference=_half_reference,
    cases=_half_cases(),
    mistakes=(
        Mistake(_all_in_half, "in float16 the squares of entries above about 256 are inf, and those of entries "
                "below about 0.008 lose their digits: compute the mean square in float32."),
        Mistake(_rescaled_by_max, "dividing by the largest entry first avoids the overflow but changes what eps is "
                "added to: the mean square must be that of x itself."),
    ),
    atol=1e-6, rtol=1e-5,  # float32's rounding, well below a 0.1% error
    forbidden=_RMS_NORMS,
)


def _backward_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2201)
    f64 = dict(dtype=torch.float64)
    cases = [Case("x=[[3, 4]], gamma=1, eps=0, dy=[[1, 0]]",
                  (torch.tensor([[3.0, 4.0]], **f64), torch.ones(2, **f64), 0.0, torch.tensor([[1.0, 0.0]], **f64))),
             Case("dy parallel to x (x=[[1, 2, 2]], dy=x, gamma=1, eps=0): the scale direction",
                  (torch.tensor([[1.0, 2.0, 2.0]], **f64), torch.ones(3, **f64), 0.0,
                   torch.tensor([[1.0, 2.0, 2.0]], **f64))),
             Case("small x (scale 1e-2), eps=1e-2: eps matters",
                  (torch.randn(2, 5, generator=g, **f64) * 1e-2, torch.ones(5, **f64), 1e-2,
                   torch.randn(2, 5, generator=g, **f64)))]
    for shape in ((3, 6), (2, 4, 8)):
        x = torch.randn(*shape, generator=g, **f64) * 3 + 1
        gamma = torch.randn(shape[-1], generator=g, **f64)
        dy = torch.randn(*shape, generator=g, **f64)
        cases.append(Case(f"random x {shape} with mean about 1, random gamma and dy, eps=1e-5", (x, gamma, 1e-5, dy)))
    return cases


def _backward_reference(x, gamma, eps, dy):
    x = x.detach().clone().requires_grad_(True)
    (dx,) = torch.autograd.grad(rms_norm(x, gamma, eps), x, dy)
    return dx


def _inv_rms(x, eps):
    return torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps)


def _rms_held_constant(x, gamma, eps, dy):
    return dy * gamma * _inv_rms(x, eps)


def _gamma_forgotten(x, gamma, eps, dy):
    r = _inv_rms(x, eps)
    return r * (dy - x * r * r * (dy * x).mean(dim=-1, keepdim=True))


def _sum_not_mean(x, gamma, eps, dy):
    r, gd = _inv_rms(x, eps), dy * gamma
    return r * (gd - x * r * r * (gd * x).sum(dim=-1, keepdim=True))


def _sign_flipped(x, gamma, eps, dy):
    r, gd = _inv_rms(x, eps), dy * gamma
    return r * (gd + x * r * r * (gd * x).mean(dim=-1, keepdim=True))


check_rms_norm_backward = Checker(
    name="rms_norm_backward",
    doc="Check ``fn(x, gamma, eps, dy) -> dx``: the gradient of ``sum(dy * rms_norm(x, gamma, eps))`` with respect "
        "to ``x``, all float64, ``x`` and ``dy`` ``(..., d)``, ``gamma`` ``(d,)``, ``dx`` shaped like ``x``; "
        "without autograd.",
    reference=_backward_reference,
    cases=_backward_cases(),
    mistakes=(
        Mistake(_rms_held_constant, "the root mean square is a function of x too: moving one x_i changes every "
                "output through it, which adds a term along x."),
        Mistake(_gamma_forgotten, "the gain multiplies the output, so dy reaches the normalised vector as dy * "
                "gamma: use that product everywhere dy appears."),
        Mistake(_sum_not_mean, "the derivative of the MEAN square with respect to x_i is 2 x_i / d: the 1/d stays."),
        Mistake(_sign_flipped, "a larger root mean square makes every output smaller: the term along x enters "
                "with a minus sign."),
    ),
    forbidden=("torch.autograd.grad", "torch.autograd.backward"),
)
