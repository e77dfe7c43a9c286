"""RMS normalisation in PyTorch (chapter 22; Zhang and Sennrich, 2019), twin of ``attnbook.numpy.rmsnorm``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnbook._validate import check_norm, require_real, shape_str
from attnbook.torch._checks import as_float, require_tensor
from attnbook.torch.layernorm import LayerNorm


def rms_norm(x: torch.Tensor, gamma: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Divide each vector (last axis) by its root mean square, then scale by ``gamma``.

    Shapes: ``x`` ``(..., d)``, ``gamma`` ``(d,)``; the result has the shape of ``x``.
    ``x / sqrt(mean(x**2) + eps) * gamma``: no mean is subtracted and no bias added, as in
    ``torch.nn.RMSNorm``. Chapter 22. Refuses a negative or NaN ``eps``; with ``eps = 0`` a zero vector gives
    NaN (0 / 0), as in the NumPy twin.
    """
    x, gamma = _checked(x, gamma, eps)
    ms = (x * x).mean(dim=-1, keepdim=True)  # (..., 1): the mean square, not the variance
    return x * torch.rsqrt(ms + eps) * gamma  # rsqrt: 1 / sqrt, one operation


def _checked(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``rms_norm``'s checks: tensors, a floating type, ``gamma`` of shape ``(d,)``, ``eps`` 0 or more."""
    require_tensor("x", x)
    require_tensor("gamma", gamma)
    x, gamma = as_float("x", x), as_float("gamma", gamma)
    if x.dim() == 0 or gamma.shape != x.shape[-1:]:
        raise ValueError(f"gamma must have shape (d,) with d the last axis of x; got x {shape_str(x.shape)} "
                         f"and gamma {shape_str(gamma.shape)}")
    require_real("eps", eps, "a finite number, 0 or more", lambda e: e >= 0)
    return x, gamma


class RMSNorm(nn.Module):
    """``rms_norm`` with a learned ``gamma`` of shape ``(d,)``, starting at 1; there is no bias to learn.

    ``LayerNorm``'s interface, so a block can hold either (``GPTShape(norm="rms")``). Like ``LayerNorm``, the
    module calls PyTorch's fused kernel, which computes the same function as ``rms_norm`` (the tests check it).
    Refuses a width ``d`` below 1 and a negative or NaN ``eps``, as ``LayerNorm`` does.
    """

    def __init__(self, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        check_norm(d, eps)  # refuses d < 1 and a negative eps
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, x.shape[-1:], self.gamma, self.eps)


def make_norm(kind: str, d: int, eps: float = 1e-5, bias: bool = True) -> nn.Module:
    """``LayerNorm(d, eps, bias)`` for ``kind="layer"``, ``RMSNorm(d, eps)`` for ``"rms"`` (which has no bias)."""
    if kind == "layer":
        return LayerNorm(d, eps, bias)
    if kind == "rms":
        return RMSNorm(d, eps)
    raise ValueError(f"norm must be 'layer' or 'rms'; got {kind!r}")
