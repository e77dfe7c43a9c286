"""Checkers for the coding exercises of chapter 13 (the encoder block)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch import EncoderBlock, layer_norm


def _ln_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1301)
    cases = [Case("x=[[1, 2, 3, 4]], gamma=1, beta=0", (torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64),
                                                        torch.ones(4, dtype=torch.float64),
                                                        torch.zeros(4, dtype=torch.float64), 1e-5))]
    for shape in ((3, 6), (2, 4, 8)):
        x = torch.randn(*shape, generator=g, dtype=torch.float64) * 3 + 1
        gamma = torch.randn(shape[-1], generator=g, dtype=torch.float64)
        beta = torch.randn(shape[-1], generator=g, dtype=torch.float64)
        cases.append(Case(f"random x {shape}, random gamma and beta", (x, gamma, beta, 1e-5)))
    return cases


def _unbiased(x, gamma, beta, eps):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True, unbiased=True) + eps) * gamma + beta


def _wrong_axis(x, gamma, beta, eps):
    mean = x.mean(0, keepdim=True)
    var = x.var(0, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def _no_affine(x, gamma, beta, eps):
    return layer_norm(x, torch.ones_like(gamma), torch.zeros_like(beta), eps)


check_layer_norm = Checker(
    name="layer_norm",
    doc="Check ``fn(x, gamma, beta, eps) -> x.shape``: layer normalisation over the last axis.",
    reference=layer_norm,
    cases=_ln_cases(),
    mistakes=(
        Mistake(_unbiased, "layer norm divides by d, not d - 1: use the biased variance (unbiased=False)."),
        Mistake(_wrong_axis, "normalise each vector, over its features: the last axis (dim=-1)."),
        Mistake(_no_affine, "after normalising, scale by gamma and shift by beta."),
    ),
)


def _block_params(d_model: int, d_ff: int) -> int:
    return sum(p.numel() for p in EncoderBlock(d_model, 1, d_ff).parameters())


def _no_norms(d_model: int, d_ff: int) -> int:
    return 4 * d_model * d_model + 4 * d_model + 2 * d_model * d_ff + d_ff + d_model


def _no_ffn_bias(d_model: int, d_ff: int) -> int:
    return 4 * d_model * d_model + 4 * d_model + 2 * d_model * d_ff + 4 * d_model


check_encoder_block_parameters = Checker(
    name="encoder_block_parameters",
    doc="Check ``fn(d_model, d_ff) -> int``: the parameters of one encoder block.",
    reference=_block_params,
    cases=[Case(f"d_model={d}, d_ff={f}", (d, f)) for d, f in ((8, 32), (512, 2048), (64, 100))],
    mistakes=(
        Mistake(_no_norms, "each of the two layer norms has a gamma and a beta of d_model numbers."),
        Mistake(_no_ffn_bias, "the feed-forward layers have biases too: d_ff for the first, d_model for the second."),
    ),
)
