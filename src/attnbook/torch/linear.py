"""A linear layer in the row convention, ``y = x W + b`` with ``W`` of shape ``(d_in, d_out)`` (chapter 12).

``torch.nn.Linear`` stores ``W^T`` (shape ``(d_out, d_in)``); attnbook keeps every weight the way the
book writes it, so NumPy arrays and GPT-2's checkpoints (which use the same layout) copy in directly.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.torch._checks import check_last_dim


class Linear(nn.Module):
    """``y = x W + b``. Shapes: ``x`` ``(..., d_in)`` to ``(..., d_out)``; ``W`` ``(d_in, d_out)``, ``b`` ``(d_out,)``.
    """

    def __init__(self, d_in: int, d_out: int, bias: bool = True) -> None:
        super().__init__()
        self.d_in, self.d_out = d_in, d_out
        self.W = nn.Parameter(torch.empty(d_in, d_out))
        self.b = nn.Parameter(torch.empty(d_out)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # The same uniform range as torch.nn.Linear: +-1/sqrt(d_in).
        bound = 1.0 / math.sqrt(self.d_in)
        nn.init.uniform_(self.W, -bound, bound)
        if self.b is not None:
            nn.init.uniform_(self.b, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_in:
            check_last_dim("x", x.unsqueeze(0) if x.dim() == 1 else x, self.d_in, "(..., d_in)")
        # x @ W + b in one fused call (addmm): F.linear takes the weight transposed, as nn.Linear stores it.
        return F.linear(x, self.W.T, self.b)

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_out={self.d_out}, bias={self.b is not None}"
