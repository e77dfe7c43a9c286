"""Chapter 28's checkers: answers computed another way pass, the package's functions are refused, the listed
mistakes get their hints, and plausible wrong answers of other kinds fail."""

import numpy as np
import torch

from attnbook.exercises import check_induction_targets_by_hand, check_v_composition_by_hand
from attnbook.exercises._harness import Outcome
from attnbook.exercises.ch28 import _composition_cases, _targets_cases
from attnbook.torch.circuits import composition_score, induction_targets, v_composition


def targets_by_loops(ids):
    row = ids.tolist()
    last = {}  # token -> its latest position so far
    out = []
    for t, token in enumerate(row):
        out.append(last[token] + 1 if token in last else -1)
        last[token] = t
    return torch.tensor(out)


def test_induction_targets_accepts_loops_and_lists():
    assert check_induction_targets_by_hand(targets_by_loops)
    assert check_induction_targets_by_hand(lambda ids: targets_by_loops(ids).tolist())
    assert check_induction_targets_by_hand(lambda ids: targets_by_loops(ids).numpy())


def test_induction_targets_refuses_the_package():
    verdict = check_induction_targets_by_hand(lambda ids: induction_targets(ids))
    assert not verdict and "induction_targets" in verdict.message


def hinted(checker, fn, words):
    verdict = checker(fn)
    assert not verdict and words in verdict.message, verdict.message


def test_induction_targets_names_each_mistake():
    def first(ids):
        row = ids.tolist()
        return torch.tensor([row.index(x) + 1 if row.index(x) < t else -1 for t, x in enumerate(row)])

    def occurrence(ids):
        out = targets_by_loops(ids)
        return torch.where(out >= 0, out - 1, out)

    def zero_for_none(ids):
        return targets_by_loops(ids).clamp_min(0)

    hinted(check_induction_targets_by_hand, first, "most recent")
    hinted(check_induction_targets_by_hand, occurrence, "one position past")
    hinted(check_induction_targets_by_hand, zero_for_none, "return -1")


def test_induction_targets_refuses_a_shift_by_the_previous_token():
    # attention to the token after the previous *position*, a previous-token head's pattern shifted: t
    assert not check_induction_targets_by_hand(lambda ids: torch.arange(len(ids)))


def test_the_cases_cover_first_tokens_and_immediate_repeats():
    labels = " ".join(c.label for c in _targets_cases())
    assert "[7, 7, 7]" in labels and "no token repeats" in labels


def test_induction_targets_refuses_floats_and_says_what_arrived():
    for answer, what in ((lambda ids: targets_by_loops(ids).float(), "dtype torch.float32"),
                         (lambda ids: targets_by_loops(ids).numpy().astype(float), "dtype float64"),
                         (lambda ids: [float(t) for t in targets_by_loops(ids).tolist()], "list of float")):
        verdict = check_induction_targets_by_hand(answer)
        assert not verdict and verdict.outcome is Outcome.WRONG_FORM, verdict.message
        assert what in verdict.message and "expected integer positions" in verdict.message, verdict.message
    verdict = check_induction_targets_by_hand(lambda ids: targets_by_loops(ids) >= 0)
    assert not verdict and "dtype torch.bool" in verdict.message, verdict.message
    assert check_induction_targets_by_hand(lambda ids: targets_by_loops(ids).to(torch.int32))


def test_induction_targets_refuses_a_table_sized_by_the_chapters_vocabulary():
    def table_of_32(ids):  # V = 32 slots, as the chapter's rows need; chapter 17's ids go up to 64
        latest = [-1] * 32
        out = []
        for t, token in enumerate(ids.tolist()):
            out.append(latest[token] + 1 if latest[token] >= 0 else -1)
            latest[token] = t
        return torch.tensor(out)

    verdict = check_induction_targets_by_hand(table_of_32)
    assert not verdict and "IndexError" in verdict.message and "ids 50 to 64" in verdict.message, verdict.message


def ov_column(W_V, W_O):
    return W_O.numpy().T @ W_V.numpy().T  # the paper's W_OV = W_O W_V, its matrices the transposes of ours


def v_by_column_convention(heads):
    # the paper's virtual head: W_OV^n ... W_OV^1, the latest head on the left
    ovs = [ov_column(W_V, W_O) for W_V, W_O in heads]
    product = ovs[0]
    for ov in ovs[1:]:
        product = ov @ product
    return float(np.linalg.norm(product) / np.prod([np.linalg.norm(ov) for ov in ovs]))


def test_v_composition_accepts_the_column_convention_and_the_row_layout():
    assert check_v_composition_by_hand(v_by_column_convention)

    def row_layout(heads):  # ||OV_1 OV_2 ... OV_n|| in the row layout, the same number
        ovs = [W_V @ W_O for W_V, W_O in heads]
        product = ovs[0]
        for ov in ovs[1:]:
            product = product @ ov
        norms = torch.stack([torch.linalg.matrix_norm(ov) for ov in ovs])
        return torch.linalg.matrix_norm(product) / norms.prod()

    assert check_v_composition_by_hand(row_layout)
    assert check_v_composition_by_hand(lambda heads: row_layout(tuple(heads)).item())


def test_v_composition_refuses_the_package():
    def pairs(heads, f):
        (W_V1, W_O1), (W_V2, W_O2) = heads[:2]
        return f(W_V1, W_O1, W_V2, W_O2)

    verdict = check_v_composition_by_hand(lambda heads: pairs(heads, lambda a, b, c, d: v_composition(c @ d, a @ b)))
    assert not verdict and "v_composition" in verdict.message
    verdict = check_v_composition_by_hand(lambda heads: pairs(heads, lambda a, b, c, d: composition_score(a @ b,
                                                                                                     c @ d)))
    assert not verdict and "composition_score" in verdict.message


def test_the_chapters_pair_formula_transcribed_is_refused_with_a_hint():
    # chapter 28's cell builds the paper's matrices of two heads from the weights (W_o.T @ W_v.T) and scores a
    # pair: copied for V-composition it answers two heads, and the longer paths say what is missing
    def transcribed(heads):
        (W_v1, W_o1), (W_v2, W_o2) = heads[0], heads[1]
        paper_OV1, paper_OV2 = W_o1.T @ W_v1.T, W_o2.T @ W_v2.T
        return torch.linalg.matrix_norm(paper_OV2 @ paper_OV1) / (torch.linalg.matrix_norm(paper_OV2)
                                                                 * torch.linalg.matrix_norm(paper_OV1))

    hinted(check_v_composition_by_hand, transcribed, "more than two heads")


def test_v_composition_names_each_mistake():
    def norm(a):
        return np.linalg.norm(a)

    def ovs(heads):
        return [(W_V @ W_O).numpy() for W_V, W_O in heads]

    def score(mats):
        product = mats[0]
        for m in mats[1:]:
            product = product @ m
        return norm(product) / np.prod([norm(m) for m in mats])

    def reversed_order(heads):
        return score(ovs(heads)[::-1])

    def pairwise(heads):
        o = ovs(heads)
        return np.prod([score([a, b]) for a, b in zip(o, o[1:], strict=False)])

    def one_transposed(heads):
        o = ovs(heads)
        return score([o[0].T, *o[1:]])

    def no_norms(heads):
        o = ovs(heads)
        return score(o) * np.prod([norm(m) for m in o])

    def factor_norms(heads):
        return score(ovs(heads)) * np.prod([norm((W_V @ W_O).numpy()) / (norm(W_V.numpy()) * norm(W_O.numpy()))
                                            for W_V, W_O in heads])

    hinted(check_v_composition_by_hand, reversed_order, "order is reversed")
    hinted(check_v_composition_by_hand, pairwise, "product of the pairs' scores")
    hinted(check_v_composition_by_hand, one_transposed, "transpose every")
    hinted(check_v_composition_by_hand, no_norms, "Frobenius norms")
    hinted(check_v_composition_by_hand, factor_norms, "their factors")


def test_v_composition_refuses_the_spectral_norm():
    def spectral(heads):
        ovs = [(W_V @ W_O).numpy() for W_V, W_O in heads]
        product = ovs[0]
        for ov in ovs[1:]:
            product = product @ ov
        return np.linalg.norm(product, 2) / np.prod([np.linalg.norm(ov, 2) for ov in ovs])

    assert not check_v_composition_by_hand(spectral)


def test_the_rank_one_path_scores_one_only_in_the_right_order():
    (heads,) = _composition_cases()[-1].args
    assert len(heads) == 3
    assert abs(v_by_column_convention(heads) - 1) < 1e-9
    assert v_by_column_convention(heads[::-1]) < 0.99
    # and the pair formula of the package agrees with the column convention on two heads
    (pair,) = _composition_cases()[0].args
    (W_V1, W_O1), (W_V2, W_O2) = pair
    assert abs(float(v_composition(W_V2 @ W_O2, W_V1 @ W_O1)) - v_by_column_convention(pair)) < 1e-12
