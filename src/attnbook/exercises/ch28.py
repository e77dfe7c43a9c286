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
    random_composition,
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
    cases.append(Case("20 random tokens of 4", (torch.randint(4, (20,), generator=g),)))
    # ids up to 64, as chapter 17's 65 characters give: a table sized by the chapter's V = 32 is too small
    cases.append(Case("33 random tokens among the ids 50 to 64", (torch.randint(50, 65, (33,), generator=g),)))
    return cases


check_induction_targets_by_hand = Checker(
    name="induction_targets_by_hand",
    doc="Check ``fn(ids) -> targets``: for a 1-D integer tensor ``ids`` of length T, ``targets[t]`` is the "
        "position just after the most recent earlier occurrence (at p < t) of the token ``ids[t]``, or -1 if "
        "the token has not occurred before; integers, shape (T,). Forbidden: the package's induction_targets.",
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


# --- V-composition from the weights in the package's layout ---------------------------------------------


def _v_composition(W_V1, W_O1, W_V2, W_O2):
    return v_composition(W_V2 @ W_O2, W_V1 @ W_O1)


def _ratio(left, right):
    """``||left right|| / (||left|| ||right||)`` written out: the mistakes may not call the forbidden functions."""
    norm = torch.linalg.matrix_norm
    return norm(left @ right) / (norm(left) * norm(right))


def _wrong_order(W_V1, W_O1, W_V2, W_O2):
    return _ratio(W_V2 @ W_O2, W_V1 @ W_O1)  # OV2 OV1: the later head applied first


def _one_transposed(W_V1, W_O1, W_V2, W_O2):
    return _ratio((W_V1 @ W_O1).T, W_V2 @ W_O2)  # the paper's W_OV for one head, the row OV for the other


def _unnormalised(W_V1, W_O1, W_V2, W_O2):
    return torch.linalg.matrix_norm((W_V1 @ W_O1) @ (W_V2 @ W_O2))


def _factor_norms(W_V1, W_O1, W_V2, W_O2):
    norm = torch.linalg.matrix_norm
    return norm((W_V1 @ W_O1) @ (W_V2 @ W_O2)) / (norm(W_V1) * norm(W_O1) * norm(W_V2) * norm(W_O2))


def _composition_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2802)
    cases = []
    for d_model, d_head in ((8, 2), (12, 4), (16, 8)):
        W_V1, W_V2 = (torch.randn(d_model, d_head, generator=g, dtype=torch.float64) for _ in range(2))
        W_O1, W_O2 = (torch.randn(d_head, d_model, generator=g, dtype=torch.float64) for _ in range(2))
        cases.append(Case(f"random weights, d_model {d_model}, d_head {d_head}", (W_V1, W_O1, W_V2, W_O2)))
    # a later head whose values read exactly the direction the earlier head writes: a score of 1
    u = torch.randn(8, 1, generator=g, dtype=torch.float64)
    W_V1 = torch.randn(8, 1, generator=g, dtype=torch.float64)
    W_O2 = torch.randn(1, 8, generator=g, dtype=torch.float64)
    cases.append(Case("rank-one heads: the later head's values read the direction the earlier head writes",
                      (W_V1, u.T.clone(), u.clone(), W_O2)))
    return cases


check_v_composition_by_hand = Checker(
    name="v_composition_by_hand",
    doc="Check ``fn(W_V1, W_O1, W_V2, W_O2) -> score``: the V-composition of a later head (its value weights "
        "``W_V2`` (d_model, d_head) and output rows ``W_O2`` (d_head, d_model), in the package's (in, out) layout) "
        "with an earlier head (``W_V1``, ``W_O1``, the same shapes); Elhage et al.'s "
        "||W_OV^2 W_OV^1||_F / (||W_OV^2||_F ||W_OV^1||_F), a number between 0 and 1. Forbidden: the package's "
        "v_composition, q_composition, k_composition, composition_score, composition_scores, random_composition, "
        "qk_matrix and ov_matrix.",
    reference=_v_composition,
    cases=_composition_cases(),
    mistakes=(
        Mistake(_wrong_order, "the order is reversed: a row y written by the earlier head becomes y OV1, and the "
                "later head's values turn that into y OV1 OV2, so the product is OV1 OV2 (the transpose of the "
                "paper's W_OV^2 W_OV^1), not OV2 OV1."),
        Mistake(_one_transposed, "transpose both heads' OV or neither: the paper's W_OV is OV^T for every head, and "
                "(W_OV^2 W_OV^1)^T = OV1 OV2 has the same Frobenius norm."),
        Mistake(_unnormalised, "divide by the product of the two OV matrices' Frobenius norms: the score must not "
                "change when a matrix is scaled."),
        Mistake(_factor_norms, "divide by the norms of the two OV matrices, ||W_V W_O||, not by the norms of their "
                "four factors: the score lies between 0 and 1 only then."),
    ),
    atol=1e-9,
    forbidden=(v_composition, q_composition, k_composition, composition_score, composition_scores,
               random_composition, qk_matrix, ov_matrix),
)
