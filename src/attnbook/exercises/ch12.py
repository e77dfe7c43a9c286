"""Checkers for the coding exercises of chapter 12 (from NumPy to PyTorch)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from attnbook.exercises._harness import Case, Checker, Mistake, Outcome, Problem
from attnbook.exercises._modules import (
    ModuleCase,
    ModuleChecker,
    ReferenceAttention,
    away_from_init,
    causal_mask,
    lengths_mask,
)
from attnbook.torch.attention import scaled_dot_product_attention

# --- the one float mask nn.MultiheadAttention builds from its two masks -------------------------------------

_NEG_INF = float("-inf")


def _as_added(mask: torch.Tensor, name: str) -> torch.Tensor:
    # PyTorch's own conversion, the one nn.MultiheadAttention applies: a boolean True becomes -inf, a float stays.
    return F._canonical_mask(mask=mask, mask_name=name, other_type=None, other_name="", target_type=torch.float64,
                             check_other=False)


def _float_mask(attn_mask: torch.Tensor, key_padding_mask: torch.Tensor, n_heads: int) -> torch.Tensor:
    """As ``F.multi_head_attention_forward`` merges them: the padding mask along the keys, added, per head."""
    total = _as_added(attn_mask, "attn_mask") + _as_added(key_padding_mask, "key_padding_mask")[:, None, :]
    return total[:, None].expand(-1, n_heads, -1, -1)  # (B, h, T_q, T_k)


def _to_float(mask, blocked_value=_NEG_INF, allowed_when_true=False):
    # The mistakes' own conversion: F._canonical_mask is forbidden to answers.
    if mask.dtype != torch.bool:
        return mask
    blocked = ~mask if allowed_when_true else mask
    return torch.zeros(mask.shape, dtype=torch.float64).masked_fill(blocked, blocked_value)


def _true_as_allowed(attn_mask, key_padding_mask, n_heads):
    total = _to_float(attn_mask, allowed_when_true=True) + _to_float(key_padding_mask, allowed_when_true=True)[:, None]
    return total[:, None].expand(-1, n_heads, -1, -1)


def _finite_fill(attn_mask, key_padding_mask, n_heads):
    total = _to_float(attn_mask, -1e9) + _to_float(key_padding_mask, -1e9)[:, None]
    return total[:, None].expand(-1, n_heads, -1, -1)


def _floats_as_booleans(attn_mask, key_padding_mask, n_heads):
    def blocked_or_not(mask):
        return _to_float(mask if mask.dtype == torch.bool else mask != 0)

    total = blocked_or_not(attn_mask) + blocked_or_not(key_padding_mask)[:, None]
    return total[:, None].expand(-1, n_heads, -1, -1)


def _padding_on_queries(attn_mask, key_padding_mask, n_heads):
    total = _to_float(attn_mask) + _to_float(key_padding_mask)[:, :, None]
    return total[:, None].expand(-1, n_heads, -1, -1)


def _smaller_of_the_two(attn_mask, key_padding_mask, n_heads):
    total = torch.minimum(_to_float(attn_mask), _to_float(key_padding_mask)[:, None])
    return total[:, None].expand(-1, n_heads, -1, -1)


def _no_head_axis(attn_mask, key_padding_mask, n_heads):
    return (_to_float(attn_mask) + _to_float(key_padding_mask)[:, None])[:, None]


def _float_mask_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1203)
    f64 = torch.float64
    inf = _NEG_INF
    future = torch.ones(4, 4, dtype=torch.bool).triu(1)  # True = blocked
    distance = -0.5 * (torch.arange(4)[:, None] - torch.arange(4)).abs().to(f64)  # a bias by distance
    biased_causal = distance.masked_fill(future, inf)
    pad = torch.tensor([[False] * 5, [False] * 2 + [True] * 3])
    all_padded = torch.tensor([[False, False, False, True], [True] * 4])
    one_row_blocked = torch.rand(3, 4, generator=g) > 0.6
    one_row_blocked[1] = True
    return [
        Case("attn_mask float (4, 4): a bias by distance, -inf above the diagonal; key_padding_mask bool (2, 4), "
             "sequence 1 all padding; 3 heads", (biased_causal, all_padded, 3)),
        Case("attn_mask bool (4, 4), blocked above the diagonal; key_padding_mask float (2, 4) with -inf and a "
             "bias; 1 head", (future, torch.tensor([[0.0, -0.3, 0.0, inf], [0.2, 0.0, inf, inf]], dtype=f64), 1)),
        Case("attn_mask bool (3, 5), key_padding_mask bool (2, 5), 2 heads",
             (torch.rand(3, 5, generator=g) > 0.7, pad, 2)),
        Case("attn_mask float (3, 6) and key_padding_mask float (1, 6), both finite biases; 2 heads",
             (torch.randn(3, 6, generator=g, dtype=f64), torch.randn(1, 6, generator=g, dtype=f64), 2)),
        Case("attn_mask bool (3, 4) with query 1 blocked from every key; key_padding_mask bool (2, 4) all False; "
             "2 heads", (one_row_blocked, torch.zeros(2, 4, dtype=torch.bool), 2)),
    ]


check_mha_float_mask = Checker(
    name="mha_float_mask",
    doc="Check ``fn(attn_mask, key_padding_mask, n_heads) -> (B, n_heads, T_q, T_k)``: the float mask "
        "``nn.MultiheadAttention`` adds to the scores, from ``attn_mask`` ``(T_q, T_k)`` and ``key_padding_mask`` "
        "``(B, T_k)``, each boolean (True = blocked, -inf) or float (added as it is).",
    reference=_float_mask,
    cases=_float_mask_cases(),
    mistakes=(
        Mistake(_true_as_allowed, "nn.MultiheadAttention reads a boolean True as blocked (the opposite of "
                "F.scaled_dot_product_attention): True must become -inf, False 0."),
        Mistake(_finite_fill, "a blocked score is -inf, not a large negative number: with a finite fill a query "
                "whose keys are all blocked spreads its weight over them instead of getting nothing."),
        Mistake(_floats_as_booleans, "a float mask is added to the scores as it is: its finite values are biases "
                "to keep, not flags to turn into 0 or -inf."),
        Mistake(_padding_on_queries, "key_padding_mask marks keys: broadcast it along the queries, as (B, 1, T_k), "
                "so that it blocks columns of the scores, not rows."),
        Mistake(_smaller_of_the_two, "the layer adds the two masks; the smaller of the two loses one bias "
                "wherever both are finite."),
        Mistake(_no_head_axis, "give the heads an axis of their own, of length n_heads: (B, n_heads, T_q, T_k)."),
    ),
    atol=1e-12,
    forbidden=("torch.nn.functional._canonical_mask", "torch.nn.MultiheadAttention.merge_masks"),
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
    # The formula in float64 agrees with autograd to about 1e-16; float32's rounding (about 1e-7 relative) does
    # not pass, since the inputs are float64.
    atol=1e-12,
    rtol=1e-9,
    forbidden=("torch.autograd.backward", "torch.autograd.grad", "torch.autograd.functional.vjp",
               "torch.autograd.functional.jacobian", "torch.func.grad", "torch.func.vjp"),
)


# --- a module: multi-query attention, one key and value head shared by every query head ---------------------


class _MultiQueryAttention(ReferenceAttention):
    """The reference: the package's attention on ``n_heads`` query heads that share one key-value head."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__(d_model, n_heads, n_kv_heads=1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return super().forward(x, None, mask)


def _mqa_cases() -> list[ModuleCase]:
    g = torch.Generator().manual_seed(1203)
    f64 = torch.float64
    return [
        ModuleCase("x (2, 5, 8), no mask", (8, 2), (torch.randn(2, 5, 8, generator=g, dtype=f64),)),
        ModuleCase("x (2, 6, 12), the causal mask (6, 6)", (12, 3),
                   (torch.randn(2, 6, 12, generator=g, dtype=f64), causal_mask(6))),
        ModuleCase("x (3, 5, 8), a padding mask (3, 1, 5) of lengths 5, 2, 4", (8, 4),
                   (torch.randn(3, 5, 8, generator=g, dtype=f64), lengths_mask((5, 2, 4), 5)[:, None, :])),
        ModuleCase("x (1, 4, 16) in float32, no mask", (16, 4), (torch.randn(1, 4, 16, generator=g),)),
    ]


_MASK_SHAPE = ("a padding mask (B, 1, T) lines up with the scores (B, n_heads, T, T) from the right, so its batch "
               "axis meets the head axis: give a mask with a batch axis a head axis too, (B, 1, 1, T) or (B, 1, T, T), "
               "before the attention broadcasts it over the heads.")


@dataclass(repr=False)
class _MaskChecker(ModuleChecker):
    """A ``ModuleChecker`` that explains a size mismatch raised on a case with a mask of three axes."""

    def _run(self, fn: Any, args: tuple[Any, ...], what: str, label: str, extra_allowed: Sequence[Any] = ()
             ) -> tuple[Any, Problem | None]:
        got, problem = super()._run(fn, args, what, label, extra_allowed)
        masks = [a for a in args if isinstance(a, torch.Tensor) and a.dtype == torch.bool]
        if (problem is not None and problem.outcome is Outcome.ERROR
                and any(words in problem.text for words in ("must match the size", "does not fit", "broadcast"))
                and any(m.dim() == 3 for m in masks)):
            problem = problem.extended(f"Hint: {_MASK_SHAPE}")
        return got, problem


check_multi_query_attention = _MaskChecker(
    name="MultiQueryAttention",
    doc="Check the class ``MultiQueryAttention(d_model, n_heads)``: ``nn.Linear`` submodules ``w_q`` "
        "``(d_model -> d_model)``, ``w_k`` and ``w_v`` ``(d_model -> d_head)`` with ``d_head = d_model / n_heads``, "
        "and ``w_o`` ``(d_model -> d_model)``, all with biases; ``forward(x, mask=None)`` for ``x`` "
        "``(B, T, d_model)`` and a boolean ``mask`` broadcastable to ``(B, T, T)`` (True where allowed) returns "
        "``(B, T, d_model)``: ``n_heads`` query heads, every one attending with the one key head and value head.",
    reference=_MultiQueryAttention,
    cases=_mqa_cases(),
    prepare=away_from_init,
    allowed=(scaled_dot_product_attention,),
    seed=1203,
)
