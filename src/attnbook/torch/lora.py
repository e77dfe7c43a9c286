"""Low-rank adapters (LoRA, Hu et al. 2022) for the package's ``Linear`` (chapter 27).

A frozen layer ``y = x W + b``, ``W`` of shape ``(d_in, d_out)``, learns a change of rank at most ``r``:

    y = x W + b + (alpha / r) x A B,    A: (d_in, r),  B: (r, d_out).

``A`` starts random and ``B`` at zero, so the adapted layer starts as the layer it wraps. Only ``A`` and ``B``
train: ``r (d_in + d_out)`` numbers in place of ``d_in d_out``. ``merge()`` adds ``(alpha / r) A B`` into
``W``, after which the layer costs what the plain one costs; ``unmerge()`` takes it out again.

This is the row convention of the book. Hu et al. write the column convention, ``h = W_0 x + B A x`` with
``B`` ``(d_out, r)`` and ``A`` ``(r, d_in)``: the same factorisation transposed, with the same roles (``A``
reads the input, random; ``B`` writes the output, zero). Hugging Face ``peft`` stores ``lora_A.weight``
``(r, d_in)`` and ``lora_B.weight`` ``(d_out, r)``, the transposes of ``A`` and ``B`` here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from attnbook._validate import require_int, require_real
from attnbook.torch.linear import Linear

#: The names of the ``Linear`` layers of a GPT block (chapter 15): four in attention, two in the feed-forward network.
GPT_LINEAR_NAMES = ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2")


class LoRALinear(nn.Module):
    """``y = x W + b + (alpha / r) x A B`` around a frozen ``Linear``; ``A`` ``(d_in, r)``, ``B`` ``(r, d_out)``.

    Shapes: ``x`` ``(..., d_in)`` to ``(..., d_out)``. ``alpha`` defaults to ``rank`` (a scaling of 1). ``A``
    is drawn as ``Linear`` draws its weights, uniform in ``+-1/sqrt(d_in)``, and ``B`` is zero, so the output
    starts equal to the wrapped layer's. The wrapped layer's parameters stop requiring gradients. Raises
    ``ValueError`` for a ``base`` that is not the package's ``Linear`` or a ``rank`` below 1 (chapter 27).
    """

    def __init__(self, base: Linear, rank: int, alpha: float | None = None) -> None:
        super().__init__()
        _check_lora(base, rank, alpha)
        self.base, self.rank = base, rank
        self.alpha = float(rank if alpha is None else alpha)
        self.scaling = self.alpha / rank  # alpha / r
        self.merged = False
        for p in base.parameters():  # W and b stay as they are: no gradient reaches them
            p.requires_grad_(False)
        W = base.W  # (d_in, d_out)
        self.A = nn.Parameter(torch.empty(base.d_in, rank, dtype=W.dtype, device=W.device))  # (d_in, r)
        self.B = nn.Parameter(torch.zeros(rank, base.d_out, dtype=W.dtype, device=W.device))  # (r, d_out), zero
        bound = 1.0 / math.sqrt(base.d_in)
        nn.init.uniform_(self.A, -bound, bound)  # as Linear draws its weights

    # The wrapped layer's sizes and weights under its own names: MultiHeadAttention reads q_proj.W.
    d_in = property(lambda self: self.base.d_in)
    d_out = property(lambda self: self.base.d_out)
    W = property(lambda self: self.base.W)
    b = property(lambda self: self.base.b)

    def delta(self) -> torch.Tensor:
        """The change the adapter makes to the weight, ``(alpha / r) A B``: ``(d_in, d_out)``, rank at most ``r``."""
        return self.scaling * (self.A @ self.B)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)  # (..., d_out); checks the last dimension of x
        if self.merged:
            return y
        return y + self.scaling * ((x @ self.A) @ self.B)  # (..., r) first: r (d_in + d_out) per row, not d_in d_out

    @torch.no_grad()
    def merge(self) -> LoRALinear:
        """Add ``(alpha / r) A B`` into the wrapped weight: the same outputs (up to rounding) at the cost of one
        matrix. Raises ``ValueError`` when already merged."""
        if self.merged:
            raise ValueError("the adapter is merged already; unmerge() it first")
        self.base.W += self.delta()
        self.merged = True
        return self

    @torch.no_grad()
    def unmerge(self) -> LoRALinear:
        """Subtract ``(alpha / r) A B`` from the wrapped weight again (exact up to rounding); ``A`` and ``B`` are
        kept, so training can go on. Raises ``ValueError`` when not merged."""
        if not self.merged:
            raise ValueError("the adapter is not merged; merge() it first")
        self.base.W -= self.delta()
        self.merged = False
        return self

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha:g}, merged={self.merged}"


def _check_lora(base: object, rank: int, alpha: float | None) -> None:
    """``LoRALinear``'s refusals: a ``base`` that is not the package's ``Linear``, a ``rank`` below 1, an ``alpha``
    that is not positive (``None`` stands for ``rank``)."""
    if not isinstance(base, Linear):
        hint = (" (torch.nn.Linear stores its weight (d_out, d_in); attnbook.torch.Linear stores (d_in, d_out))"
                if isinstance(base, nn.Linear) else "")
        raise ValueError(f"LoRALinear wraps an attnbook.torch.Linear; got {type(base).__name__}{hint}")
    require_int("rank", rank, 1)
    require_real("alpha", float(rank) if alpha is None else alpha, "a positive number", lambda a: a > 0)


def add_lora(model: nn.Module, rank: int, alpha: float | None = None,
             targets: Sequence[str] = ("q_proj", "v_proj")) -> list[str]:
    """Freeze every parameter of ``model`` and wrap its ``Linear`` layers named in ``targets`` (the last part
    of the name, e.g. ``"q_proj"``; ``GPT_LINEAR_NAMES`` for all of a GPT's) in ``LoRALinear``, in place.

    Returns the full names of the wrapped layers. Only the adapters' ``A`` and ``B`` then require gradients:
    ``rank (d_in + d_out)`` numbers per wrapped layer. Raises ``ValueError`` when no layer matches, naming
    the ``Linear`` layers the model has (chapter 27)."""
    require_int("rank", rank, 1)
    if isinstance(targets, str):
        targets = (targets,)
    for p in model.parameters():
        p.requires_grad_(False)
    found = [(name, module) for name, module in model.named_modules()
             if isinstance(module, Linear) and name.rsplit(".", 1)[-1] in targets]
    if not found:
        names = sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, Linear)})
        raise ValueError(f"no Linear layer of the model is named any of {list(targets)}; its Linear layers are "
                         f"named {names}")
    for name, module in found:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoRALinear(module, rank, alpha))
    return [name for name, _ in found]


def lora_layers(model: nn.Module) -> list[LoRALinear]:
    """The ``LoRALinear`` layers of ``model``, in the order of ``named_modules``."""
    return [m for m in model.modules() if isinstance(m, LoRALinear)]


def merge_lora(model: nn.Module) -> nn.Module:
    """Merge every adapter of ``model`` into its weight (``LoRALinear.merge``), in place; returns ``model``."""
    for layer in lora_layers(model):
        layer.merge()
    return model


def count_trainable(model: nn.Module) -> int:
    """The number of parameters of ``model`` that require gradients: what an optimizer updates."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def unload_lora(model: nn.Module) -> nn.Module:
    """Merge every adapter of ``model`` (``merge_lora``, for those not merged yet) and put each wrapped ``Linear``
    back in its place, in place: the model becomes a plain one of its original size, with the fine-tuned
    weights. Its parameters stay frozen. Returns ``model`` (chapter 27)."""
    wrapped = [(name, m) for name, m in model.named_modules() if isinstance(m, LoRALinear)]
    for name, layer in wrapped:
        if not layer.merged:
            layer.merge()
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, layer.base)
    return model


@torch.no_grad()
def closest_low_rank_weight(before: torch.Tensor, after: torch.Tensor, rank: int) -> torch.Tensor:
    """The weight a rank-``rank`` adapter on ``before`` would need to come closest to ``after`` (chapter 27).

    ``before`` and ``after`` are ``(d_in, d_out)``: a matrix before and after full fine-tuning. Returns
    ``before + D_r``, where ``D_r`` keeps the ``rank`` largest singular values of the change
    ``after - before`` (the best approximation of rank ``rank`` in the Frobenius norm, Eckart and Young).
    Raises ``ValueError`` for shapes that differ or a rank outside ``1 .. min(d_in, d_out)``.
    """
    if before.ndim != 2 or before.shape != after.shape:
        raise ValueError(f"expected two matrices of one shape, got {tuple(before.shape)} and {tuple(after.shape)}")
    require_int("rank", rank, minimum=1)
    rank = int(rank)
    if rank > min(before.shape):
        raise ValueError(f"rank must be at most min(d_in, d_out) = {min(before.shape)}, got {rank}")
    U, S, Vh = torch.linalg.svd(after - before, full_matrices=False)  # descending singular values
    return before + (U[:, :rank] * S[:rank]) @ Vh[:rank]
