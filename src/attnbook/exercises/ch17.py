"""Checkers for the coding exercises of chapter 17 (training a GPT on Shakespeare)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake


def _bigram_counts(train_ids, V, start: float) -> torch.Tensor:
    """``(V, V)``: how often each pair (previous, next) occurs in ``train_ids``, every count from ``start``."""
    counts = torch.full((V, V), start, dtype=torch.float64)
    counts.index_put_((train_ids[:-1], train_ids[1:]), torch.ones(len(train_ids) - 1, dtype=torch.float64),
                      accumulate=True)
    return counts


def _bigram_loss(train_ids, val_ids, V):
    counts = _bigram_counts(train_ids, V, start=1.0)  # add-one: every pair has been 'seen' once
    log_p = (counts / counts.sum(dim=1, keepdim=True)).log()
    return float(-log_p[val_ids[:-1], val_ids[1:]].mean())


def _unsmoothed(train_ids, val_ids, V):
    counts = _bigram_counts(train_ids, V, start=0.0)
    log_p = (counts / counts.sum(dim=1, keepdim=True).clamp_min(1)).log()
    return float(-log_p[val_ids[:-1], val_ids[1:]].mean())


def _on_train(train_ids, val_ids, V):
    return _bigram_loss(train_ids, train_ids, V)


def _unigram(train_ids, val_ids, V):
    counts = torch.ones(V, dtype=torch.float64) + torch.bincount(train_ids, minlength=V)
    return float(-(counts / counts.sum()).log()[val_ids[1:]].mean())


def _bigram_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1701)
    cases = [Case("train [0, 1, 0, 1, 0], val [0, 1, 1], V=2",
                  (torch.tensor([0, 1, 0, 1, 0]), torch.tensor([0, 1, 1]), 2))]
    for n, V in ((200, 5), (500, 8)):
        train = torch.randint(V, (n,), generator=g)
        cases.append(Case(f"random ids, {n} training and 60 validation, V={V}",
                          (train, torch.randint(V, (60,), generator=g), V)))
    return cases


check_bigram_loss = Checker(
    name="bigram_loss",
    doc="Check ``fn(train_ids, val_ids, V) -> float``: add-one bigram cross-entropy on the validation ids.",
    reference=_bigram_loss,
    cases=_bigram_cases(),
    mistakes=(
        Mistake(_unsmoothed, "a pair never seen in training gets probability 0 and an infinite loss: start every "
                "count at 1 (add-one smoothing)."),
        Mistake(_on_train, "evaluate on the validation ids; the counts come from the training ids."),
        Mistake(_unigram, "that ignores the previous character: count pairs (previous, next), one row per previous "
                "character."),
    ),
    atol=1e-9,
)


def _scores(prompt_len, new_tokens, use_cache):
    p, n = prompt_len, new_tokens
    if not use_cache:  # forward s runs causal attention over all p + s tokens
        return sum((p + s) * (p + s + 1) // 2 for s in range(n))
    return p * (p + 1) // 2 + sum(p + s for s in range(1, n))  # then one query over p + s keys


def _full_squares(prompt_len, new_tokens, use_cache):
    p, n = prompt_len, new_tokens
    if not use_cache:
        return sum((p + s) ** 2 for s in range(n))
    return p * p + sum(p + s for s in range(1, n))


def _one_forward_too_many(prompt_len, new_tokens, use_cache):
    p, n = prompt_len, new_tokens
    if not use_cache:
        return sum((p + s) * (p + s + 1) // 2 for s in range(n + 1))
    return p * (p + 1) // 2 + sum(p + s for s in range(1, n + 1))


check_attention_scores = Checker(
    name="attention_scores",
    doc="Check ``fn(prompt_len, new_tokens, use_cache) -> int``: query-key pairs scored during generation.",
    reference=_scores,
    cases=[Case(f"prompt_len={p}, new_tokens={n}, use_cache={c}", (p, n, c))
           for p, n in ((1, 1), (3, 4), (64, 256)) for c in (False, True)],
    mistakes=(
        Mistake(_full_squares, "causal attention scores only the allowed pairs: L (L + 1) / 2 for L tokens, "
                "not L squared."),
        Mistake(_one_forward_too_many, "n new tokens take n forward passes: the last token sampled is never fed "
                "back in."),
    ),
)
