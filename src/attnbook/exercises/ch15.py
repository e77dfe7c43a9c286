"""Checkers for the coding exercises of chapter 15 (the whole Transformer)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch import GPT, GPTConfig
from attnbook.torch.decoding import top_k_filter


def _gpt_params(V: int, block_size: int, d: int, L: int) -> int:
    with torch.device("meta"):  # count without allocating memory
        model = GPT(GPTConfig(vocab_size=V, block_size=block_size, n_layers=L, n_heads=1, d_model=d))
    return model.n_params()


def _untied(V, block_size, d, L):
    return _gpt_params(V, block_size, d, L) + d * V


def _no_positions(V, block_size, d, L):
    return _gpt_params(V, block_size, d, L) - block_size * d


def _no_final_norm(V, block_size, d, L):
    return _gpt_params(V, block_size, d, L) - 2 * d


check_gpt_parameters = Checker(
    name="gpt_parameters",
    doc="Check ``fn(V, block_size, d_model, n_layers) -> int``: the parameters of a GPT-2-style model.",
    reference=_gpt_params,
    cases=[Case(f"V={V}, block_size={T}, d_model={d}, n_layers={L}", (V, T, d, L))
           for V, T, d, L in ((65, 64, 128, 4), (50257, 1024, 768, 12), (10, 8, 4, 1))],
    mistakes=(
        Mistake(_untied, "the unembedding is tied to the token embedding: no separate d_model x V matrix."),
        Mistake(_no_positions, "the learned position table has block_size x d_model parameters."),
        Mistake(_no_final_norm, "add the final layer norm before the unembedding: 2 d_model."),
    ),
)


def _top_k_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1501)
    cases = [Case("logits [[1, 3, 2, 0]], k=2", (torch.tensor([[1.0, 3.0, 2.0, 0.0]]), 2))]
    for B, V, k in ((2, 6, 1), (3, 10, 4), (1, 5, 5)):
        cases.append(Case(f"random logits ({B}, {V}), k={k}", (torch.randn(B, V, generator=g), k)))
    return cases


def _zero_fill(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, 0.0)


def _bottom_k(logits, k):
    kth = torch.topk(logits, k, dim=-1, largest=False).values[..., -1:]
    return logits.masked_fill(logits > kth, float("-inf"))


check_top_k_filter = Checker(
    name="top_k_filter",
    doc="Check ``fn(logits, k) -> logits.shape``: all but the ``k`` largest logits of each row set to ``-inf``.",
    reference=top_k_filter,
    cases=_top_k_cases(),
    mistakes=(
        Mistake(_zero_fill, "a logit of 0 still has probability; set the others to -inf."),
        Mistake(_bottom_k, "keep the k largest logits (torch.topk's default), not the smallest."),
    ),
)
