"""Checkers for the coding exercises of chapter 18 (looking inside trained models)."""

from __future__ import annotations

import math

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch import causal_mask
from attnbook.torch.inspect import attention_entropy, offset_score


def _causal_weights(h: int, T: int, g: torch.Generator) -> torch.Tensor:
    scores = torch.randn(h, T, T, generator=g, dtype=torch.float64) * 2
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    return scores.softmax(dim=-1)  # (h, T, T), rows sum to 1, zero above the diagonal


def _weight_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1801)
    eye = torch.eye(3, dtype=torch.float64)[None]
    cases = [Case("one head that attends to itself, T=3", (eye,))]
    for h, T in ((2, 5), (4, 9)):
        cases.append(Case(f"random causal weights, {h} heads, T={T}", (_causal_weights(h, T, g),)))
    return cases


def _previous(weights):
    return offset_score(weights, -1)


def _self(weights):
    return offset_score(weights, 0)


def _over_all_queries(weights):
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).sum(dim=-1) / weights.shape[-1]


check_previous_token_score = Checker(
    name="previous_token_score",
    doc="Check ``fn(weights) -> (h,)``: the mean weight each head puts on the previous token.",
    reference=_previous,
    cases=_weight_cases(),
    mistakes=(
        Mistake(_self, "that is the weight on the token itself (the main diagonal); the previous token is the diagonal "
                "just below it, key t - 1 for query t."),
        Mistake(_over_all_queries, "query 0 has no previous token: average over the T - 1 queries that have one."),
    ),
)


def _bits(weights):
    return attention_entropy(weights) / math.log(2)


def _summed(weights):
    return attention_entropy(weights) * weights.shape[-2]


def _of_the_mean(weights):
    p = weights.mean(dim=-2)  # (h, T_k): the queries' weights averaged first
    return -(p * p.clamp_min(1e-30).log()).sum(dim=-1)


check_attention_entropy = Checker(
    name="attention_entropy",
    doc="Check ``fn(weights) -> (h,)``: each head's mean entropy of its attention distributions, in nats.",
    reference=attention_entropy,
    cases=_weight_cases(),
    mistakes=(
        Mistake(_bits, "use the natural logarithm (nats), as the rest of the book does; that answer is in bits."),
        Mistake(_summed, "average the entropies over the queries rather than adding them up."),
        Mistake(_of_the_mean, "take each query's entropy first, then average: averaging the weights first blurs "
                "sharp heads that look at different keys into a flat one."),
    ),
    atol=1e-9,
)
