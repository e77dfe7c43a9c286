"""Checkers for the coding exercises of chapter 28 (induction heads)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake, Outcome, Problem, _values
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
    # ids up to 64, as chapter 17's 65 characters give, and far beyond, as a BPE vocabulary's: a table sized by
    # the chapter's V = 32, or by chapter 17's 65, is too small
    ids = torch.cat([torch.randint(50, 65, (33,), generator=g), torch.tensor([50_000, 60, 50_000, 1_000, 60])])
    cases.append(Case("38 tokens among the ids 50 to 64, 1,000 and 50,000 (a large vocabulary)", (ids,)))
    return cases


def _kind_of(got) -> str:
    """What arrived, for a message: a tensor's or an array's dtype, or the Python type of a list's items."""
    if hasattr(got, "dtype"):
        return f"{type(got).__name__} of dtype {got.dtype}"
    items = {type(x).__name__ for x in got} if isinstance(got, (list, tuple)) else set()
    return f"{type(got).__name__} of {' and '.join(sorted(items))}" if items else type(got).__name__


class _PositionsChecker(Checker):
    """A ``Checker`` whose answer is a tensor of positions: indices, so an integer dtype is required, even when
    floats would hold the same whole numbers (3.0 cannot index a tensor)."""

    def _run(self, fn, args, label, forbidden):
        got, problem = super()._run(fn, args, label, forbidden)
        if problem is not None or got is None:
            return got, problem
        try:
            kind = _values(got).dtype.kind
        except Exception:  # not numbers at all: the comparison says what arrived
            return got, problem
        if kind not in "iu":
            return None, Problem(Outcome.WRONG_FORM, f"returned a {_kind_of(got)}, expected integer positions (a "
                                 "tensor of dtype torch.int64, say): a position indexes the sequence, and a float "
                                 f"or a boolean cannot (input: {label}).")
        return got, problem


_BEYOND_THE_TABLE = ("a token id can be any whole number, beyond the chapter's vocabulary (50,000 here): key a dict "
                     "by the token, or size a table by ids.max() + 1.")

check_induction_targets_by_hand = _PositionsChecker(
    name="induction_targets_by_hand",
    doc="Check ``fn(ids) -> targets``: for a 1-D integer tensor ``ids`` of length T, ``targets[t]`` is the "
        "position just after the most recent earlier occurrence (at p < t) of the token ``ids[t]``, or -1 if "
        "the token has not occurred before; integers (an integer dtype: floats are refused), shape (T,). "
        "Forbidden: the package's induction_targets.",
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
    error_hints=tuple((words, _BEYOND_THE_TABLE) for words in ("out of bounds", "index out of range")),
)


# --- V-composition along a path of heads, from the weights in the package's layout ----------------------


def _v_composition(heads):
    """The package's pairwise ``v_composition`` along the path: ``||P OV|| / (||P|| ||OV||)`` for each next head,
    where ``P`` is the path so far; the product of these ratios telescopes to the path's score."""
    ovs = [W_V @ W_O for W_V, W_O in heads]
    score, path = torch.ones((), dtype=ovs[0].dtype), ovs[0]
    for ov in ovs[1:]:
        score = score * v_composition(ov, path)
        path = path @ ov
    return score


def _score(mats):
    """``||M_1 ... M_n|| / (||M_1|| ... ||M_n||)`` written out: the mistakes may not call the forbidden functions."""
    norm = torch.linalg.matrix_norm
    product = mats[0]
    for m in mats[1:]:
        product = product @ m
    return norm(product) / torch.stack([norm(m) for m in mats]).prod()


def _ovs(heads):
    return [W_V @ W_O for W_V, W_O in heads]


def _wrong_order(heads):
    return _score(_ovs(heads)[::-1])  # OV_n ... OV_1: the latest head applied first


def _first_pair(heads):
    return _score(_ovs(heads)[:2])  # the pair formula, the heads after the second left out


def _pairwise(heads):
    ovs = _ovs(heads)
    return torch.stack([_score([a, b]) for a, b in zip(ovs, ovs[1:], strict=False)]).prod()


def _one_transposed(heads):
    ovs = _ovs(heads)
    return _score([ovs[0].T, *ovs[1:]])  # the paper's W_OV for the first head, the row OV for the others


def _unnormalised(heads):
    ovs = _ovs(heads)
    return _score(ovs) * torch.stack([torch.linalg.matrix_norm(m) for m in ovs]).prod()


def _factor_norms(heads):
    norm = torch.linalg.matrix_norm
    return _score(_ovs(heads)) * torch.stack([norm(W_V @ W_O) / (norm(W_V) * norm(W_O)) for W_V, W_O in heads]).prod()


def _composition_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2802)

    def head(d_model, d_head):
        return (torch.randn(d_model, d_head, generator=g, dtype=torch.float64),
                torch.randn(d_head, d_model, generator=g, dtype=torch.float64))

    cases = [Case(f"a path of {n} random heads, d_model {d_model}, d_head {d_head}",
                  ([head(d_model, d_head) for _ in range(n)],))
             for n, d_model, d_head in ((2, 8, 2), (3, 12, 4), (4, 16, 8))]
    # a path whose every head reads exactly the direction the one before it writes: a score of 1, in this order only
    a, u, w, z = (torch.randn(8, 1, generator=g, dtype=torch.float64) for _ in range(4))
    cases.append(Case("rank-one heads, three of them: each head's values read the direction the one before writes",
                      ([(a, u.T.clone()), (u.clone(), w.T.clone()), (w.clone(), z.T.clone())],)))
    return cases


check_v_composition_by_hand = Checker(
    name="v_composition_by_hand",
    doc="Check ``fn(heads) -> score``: ``heads`` lists two or more heads from the earliest layer to the latest, "
        "each a pair ``(W_V, W_O)`` in the package's (in, out) layout, ``W_V`` (d_model, d_head) and ``W_O`` "
        "(d_head, d_model); the score of the path is the Frobenius norm of the map that takes a row written by "
        "the first head through every later head's OV, divided by the product of the heads' own OV norms, a "
        "number between 0 and 1 (for two heads, Elhage et al.'s V-composition). Forbidden: the package's "
        "v_composition, q_composition, k_composition, composition_score, composition_scores, random_composition, "
        "qk_matrix and ov_matrix.",
    reference=_v_composition,
    cases=_composition_cases(),
    mistakes=(
        Mistake(_wrong_order, "the order is reversed: in the row layout a row y written by the first head becomes "
                "y OV_1, the next head turns that into y OV_1 OV_2, and so on, so the product runs from the earliest "
                "head on the left to the latest on the right (the transpose of the paper's W_OV^n ... W_OV^1)."),
        Mistake(_first_pair, "the path has more than two heads here: take the row through every head of the list, "
                "not only the first two."),
        Mistake(_pairwise, "a product of the pairs' scores is not the path's score: multiply the OV matrices along "
                "the whole path first, then take one norm of that product."),
        Mistake(_one_transposed, "transpose every head's OV or none: the paper's W_OV is OV^T for every head, and "
                "the transpose of the whole product has the same Frobenius norm."),
        Mistake(_unnormalised, "divide by the product of the heads' OV Frobenius norms: the score must not change "
                "when a head's matrix is scaled."),
        Mistake(_factor_norms, "divide by the norms of the heads' OV matrices, ||W_V W_O||, not by the norms of "
                "their factors: the score lies between 0 and 1 only then."),
    ),
    atol=1e-9,
    forbidden=(v_composition, q_composition, k_composition, composition_score, composition_scores,
               random_composition, qk_matrix, ov_matrix),
)
