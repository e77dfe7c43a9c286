"""Layer normalisation (chapter 13; Phuong and Hutter, algorithm 6)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnbook._validate import check_norm, require_real


def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Normalise each vector (last axis) to mean 0 and variance 1, then scale by ``gamma`` and shift by ``beta``.

    Shapes: ``x`` ``(..., d)``, ``gamma`` and ``beta`` ``(d,)``. The variance is the biased one (divide
    by ``d``), as in ``torch.nn.LayerNorm``. Refuses a negative or NaN ``eps``.
    """
    require_real("eps", eps, "a finite number, 0 or more", lambda e: e >= 0)
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


class LayerNorm(nn.Module):
    """``layer_norm`` with learned ``gamma`` (starting at 1) and ``beta`` (starting at 0) of shape ``(d,)``;
    ``bias=False`` leaves ``beta`` out.

    The module calls PyTorch's fused kernel, which computes the same function as ``layer_norm`` above
    (the tests check it) in one call. Refuses a width ``d`` below 1 and a negative or NaN
    ``eps``.
    """

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        check_norm(d, eps)  # refuses d < 1 and a negative eps
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d))
        self.beta = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.gamma, self.beta, self.eps)
