"""Checkers for the coding exercises of chapter 28 (induction heads)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch.circuits import (
    composition_score,
    composition_scores,
    induction_targets,
    k_composition,
    ov_matrix,
    q_composition,
    qk_matrix,
    v_composition,
)

# --- the induction targets of a sequence ---------------------------------------------------------------


def _induction_targets(ids):
    return induction_targets(ids)


def _matches(ids, strict: bool = True, first: bool = False) -> list[list[int]]:
    """For each position, the earlier positions holding its token (``p < t``, or ``p <= t`` when not strict)."""
    row = ids.tolist()
    found = []
    for t, token in enumerate(row):
        hits = [p for p in range(t + (0 if strict else 1)) if row[p] == token]
        found.append(hits[:1] if first else hits[-1:])
    return found


def _first_occurrence(ids):
    return torch.tensor([h[0] + 1 if h else -1 for h in _matches(ids, first=True)])


def _the_occurrence_itself(ids):
    return torch.tensor([h[0] if h else -1 for h in _matches(ids)])


def _counting_the_token_itself(ids):
    return torch.tensor([h[0] + 1 if h else -1 for h in _matches(ids, strict=False)])


def _zero_for_none(ids):
    return torch.tensor([h[0] + 1 if h else 0 for h in _matches(ids)])


def _targets_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2801)
    segment = torch.randperm(10, generator=g)[:6]
    cases = [
        Case("ids [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]", (torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]),)),
        Case("a segment of 6 distinct tokens, repeated", (torch.cat([segment, segment]),)),
        Case("no token repeats: [0, 1, 2, 3, 4]", (torch.arange(5),)),
        Case("one token, three times: [7, 7, 7]", (torch.tensor([7, 7, 7]),)),
        Case("a single token", (torch.tensor([2]),)),
    ]
    for T, V in ((20, 4), (33, 12)):
        cases.append(Case(f"{T} random tokens of {V}", (torch.randint(V, (T,), generator=g),)))
    return cases


check_induction_targets = Checker(
    name="induction_targets_by_hand",
    doc="Check ``fn(ids) -> targets``: for a 1-D integer tensor ``ids`` of length T, ``targets[t]`` is the "
        "position just after the most recent earlier occurrence (at p < t) of the token ``ids[t]``, or -1 if "
        "the token has not occurred before; integers, shape (T,).",
    reference=_induction_targets,
    cases=_targets_cases(),
    mistakes=(
        Mistake(_first_occurrence, "take the most recent earlier occurrence of the token, the one closest "
                "before t, not the first one in the sequence."),
        Mistake(_the_occurrence_itself, "the induction head looks one position past the earlier occurrence: "
                "at the token that followed it, which is the one to predict."),
        Mistake(_counting_the_token_itself, "the occurrence must be earlier than t: position t always holds "
                "its own token, and the position after it lies in the future."),
        Mistake(_zero_for_none, "a token seen for the first time has no target: return -1 there (0 is a real "
                "position)."),
    ),
    forbidden=(induction_targets,),
)


# --- Q-composition from the weights in the package's layout ---------------------------------------------


def _q_composition(W_Q, W_K, W_V, W_O):
    return q_composition(W_Q @ W_K.T, W_V @ W_O)


def _ratio(left, right):
    """``||left right|| / (||left|| ||right||)`` written out: the mistakes may not call the forbidden functions."""
    norm = torch.linalg.matrix_norm
    return norm(left @ right) / (norm(left) * norm(right))


def _k_instead(W_Q, W_K, W_V, W_O):
    return _ratio(W_Q @ W_K.T, (W_V @ W_O).T)


def _row_ov_as_column(W_Q, W_K, W_V, W_O):
    return _ratio((W_Q @ W_K.T).T, W_V @ W_O)  # the row-layout OV used as the paper's W_OV


def _unnormalised(W_Q, W_K, W_V, W_O):
    return torch.linalg.matrix_norm((W_Q @ W_K.T).T @ (W_V @ W_O).T)


def _composition_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2802)
    cases = []
    for d_model, d_head in ((8, 2), (12, 4), (16, 8)):
        W_Q, W_K, W_V = (torch.randn(d_model, d_head, generator=g, dtype=torch.float64) for _ in range(3))
        W_O = torch.randn(d_head, d_model, generator=g, dtype=torch.float64)
        cases.append(Case(f"random weights, d_model {d_model}, d_head {d_head}", (W_Q, W_K, W_V, W_O)))
    # a later head whose queries read exactly what the earlier head writes
    u = torch.randn(8, 1, generator=g, dtype=torch.float64)
    W_V, W_O = torch.randn(8, 1, generator=g, dtype=torch.float64), u.T.clone()
    cases.append(Case("rank-one heads: the later head's queries read the direction the earlier head writes",
                      (u.clone(), torch.randn(8, 1, generator=g, dtype=torch.float64), W_V, W_O)))
    return cases


check_q_composition = Checker(
    name="q_composition_by_hand",
    doc="Check ``fn(W_Q, W_K, W_V, W_O) -> score``: the Q-composition of a later head (its query and key weights "
        "``W_Q``, ``W_K``, (d_model, d_head), in the package's (in, out) layout) with an earlier head (its value "
        "weights ``W_V`` (d_model, d_head) and output rows ``W_O`` (d_head, d_model)); Elhage et al.'s "
        "||W_QK^T W_OV||_F / (||W_QK||_F ||W_OV||_F), a number between 0 and 1.",
    reference=_q_composition,
    cases=_composition_cases(),
    mistakes=(
        Mistake(_k_instead, "that is the K-composition: the queries read the residual stream on the left of QK, "
                "so the earlier head's output meets QK transposed."),
        Mistake(_row_ov_as_column, "the package's V and O give OV = W_V W_O, a matrix applied on the right "
                "(y OV); the paper's W_OV, applied on the left, is its transpose."),
        Mistake(_unnormalised, "divide by the product of the two matrices' Frobenius norms: the score must not "
                "change when a matrix is scaled."),
    ),
    atol=1e-9,
    forbidden=(q_composition, k_composition, v_composition, composition_score, composition_scores, qk_matrix,
               ov_matrix),
)
