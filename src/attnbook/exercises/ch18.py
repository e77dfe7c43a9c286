"""Checkers for the coding exercises of chapter 18 (looking inside trained models)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch import causal_mask
from attnbook.torch.inspect import attention_entropy, offset_score, weight_on


def _causal_weights(h: int, T: int, g: torch.Generator) -> torch.Tensor:
    scores = torch.randn(h, T, T, generator=g, dtype=torch.float64) * 2
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    return scores.softmax(dim=-1)  # (h, T, T), rows sum to 1, zero above the diagonal


def _profile_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1801)
    uniform = causal_mask(4).double() / torch.arange(1, 5.0, dtype=torch.float64)[:, None]
    cases = [Case("one head of uniform causal attention, T=4, max_back=3", (uniform[None], 3))]
    for h, T, k in ((2, 6, 2), (3, 9, 5)):
        cases.append(Case(f"random causal weights, {h} heads, T={T}, max_back={k}", (_causal_weights(h, T, g), k)))
    return cases


def _offset_profile(weights, max_back):
    return torch.stack([offset_score(weights, -k) for k in range(max_back + 1)], dim=-1)


def _profile_over_all_queries(weights, max_back):
    T = weights.shape[-1]
    return torch.stack([torch.diagonal(weights, -k, -2, -1).sum(-1) / T for k in range(max_back + 1)], dim=-1)


def _profile_forward(weights, max_back):
    return torch.stack([torch.diagonal(weights, k, -2, -1).mean(-1) for k in range(max_back + 1)], dim=-1)


def _profile_heads_last(weights, max_back):
    return _offset_profile(weights, max_back).transpose(-2, -1)


check_offset_profile = Checker(
    name="offset_profile",
    doc="Check ``fn(weights, max_back) -> (h, max_back + 1)``: entry ``[head, k]`` is the mean weight the head's "
        "queries put on the key k positions back, over the queries that have one.",
    reference=_offset_profile,
    cases=_profile_cases(),
    mistakes=(
        Mistake(_profile_over_all_queries, "query t has a key k positions back only when t >= k: average over "
                "those T - k queries, not over all T."),
        Mistake(_profile_forward, "k positions back is key t - k, below the main diagonal; the causal mask leaves "
                "nothing above it."),
        Mistake(_profile_heads_last, "one row per head, one column per offset: the shape is (h, max_back + 1)."),
    ),
    atol=1e-9,
    forbidden=(offset_score, weight_on),
)


def _per_query(weights):
    return -(weights * weights.clamp_min(1e-300).log()).sum(-1)  # (h, T): each query's entropy, 0 log 0 = 0


def _normalised_entropy(weights):
    T = weights.shape[-1]
    most = torch.log(torch.arange(1, T + 1, dtype=weights.dtype))  # ln(t + 1): uniform over the keys it sees
    return (_per_query(weights)[..., 1:] / most[1:]).mean(-1)


def _over_ln_T(weights):
    return _per_query(weights).mean(-1) / torch.log(torch.tensor(float(weights.shape[-1]), dtype=weights.dtype))


def _query_zero_counted(weights):
    T = weights.shape[-1]
    return _normalised_entropy(weights) * (T - 1) / T


def _ratio_of_means(weights):
    T = weights.shape[-1]
    most = torch.log(torch.arange(1, T + 1, dtype=weights.dtype))
    return _per_query(weights).mean(-1) / most.mean()


def _ceiling_from_nonzero(weights):
    """Each query's ceiling taken from the keys it gave weight to, not from the keys it may see."""
    seen = (weights > 0).sum(-1).to(weights.dtype)
    return torch.nan_to_num(_per_query(weights)[..., 1:] / seen.log()[..., 1:], nan=0.0).mean(-1)


def _entropy_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1802)
    uniform = causal_mask(5).double() / torch.arange(1, 6.0, dtype=torch.float64)[:, None]
    # half on the token itself and half on the one before it: exactly 0 on the older keys it may see
    pair = (torch.eye(5, dtype=torch.float64) + torch.eye(5, dtype=torch.float64).roll(-1, dims=1).tril()) / 2
    pair[0, 0] = 1.0
    cases = [Case("two heads, T=5: uniform causal attention, and one that puts half its weight on the token and "
                  "half on the one before it (exactly 0 on the older keys)", (torch.stack([uniform, pair]),))]
    for h, T in ((2, 6), (4, 11)):
        cases.append(Case(f"random causal weights, {h} heads, T={T}", (_causal_weights(h, T, g),)))
    return cases


check_normalised_entropy = Checker(
    name="normalised_entropy",
    doc="Check ``fn(weights) -> (h,)``: for causal weights ``(h, T, T)``, each query's entropy divided by the "
        "largest it could have, ln(t + 1), averaged over the queries t >= 1.",
    reference=_normalised_entropy,
    cases=_entropy_cases(),
    mistakes=(
        Mistake(_over_ln_T, "query t sees only t + 1 keys under the causal mask: its largest possible entropy is "
                "ln(t + 1), not ln T."),
        Mistake(_query_zero_counted, "query 0 sees one key: its entropy and its largest entropy are both 0, a ratio "
                "with no meaning. Leave it out of the average."),
        Mistake(_ratio_of_means, "divide each query's entropy by its own largest value first, then average the "
                "ratios; a ratio of two means weighs the long queries more."),
        Mistake(_ceiling_from_nonzero, "the ceiling is ln(t + 1), the entropy of uniform weights over all the t + 1 "
                "keys query t may see: a key given exactly 0 weight is still one it could have read, so count it."),
    ),
    atol=1e-9,
    forbidden=(attention_entropy,),
)
