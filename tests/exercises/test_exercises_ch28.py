"""Chapter 28's checkers: answers computed another way pass, the package's functions are refused, the listed
mistakes get their hints, and plausible wrong answers of other kinds fail."""

import numpy as np
import torch

from attnbook.exercises import check_induction_targets_by_hand, check_v_composition_by_hand
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


def v_by_column_convention(W_V1, W_O1, W_V2, W_O2):
    # the column convention's matrices are the transposes of the package's (in, out) ones
    Wv1, Wo1, Wv2, Wo2 = (W.numpy().T for W in (W_V1, W_O1, W_V2, W_O2))
    OV1, OV2 = Wo1 @ Wv1, Wo2 @ Wv2  # the paper's W_OV = W_O W_V
    return float(np.linalg.norm(OV2 @ OV1) / (np.linalg.norm(OV2) * np.linalg.norm(OV1)))


def test_v_composition_accepts_the_column_convention_formula():
    assert check_v_composition_by_hand(v_by_column_convention)

    def row_layout(W_V1, W_O1, W_V2, W_O2):  # ||OV1 OV2|| in the row layout, the same number
        ov1, ov2 = W_V1 @ W_O1, W_V2 @ W_O2
        return torch.linalg.matrix_norm(ov1 @ ov2) / (torch.linalg.matrix_norm(ov1) * torch.linalg.matrix_norm(ov2))

    assert check_v_composition_by_hand(row_layout)


def test_v_composition_refuses_the_package():
    verdict = check_v_composition_by_hand(lambda W_V1, W_O1, W_V2, W_O2: v_composition(W_V2 @ W_O2, W_V1 @ W_O1))
    assert not verdict and "v_composition" in verdict.message
    verdict = check_v_composition_by_hand(lambda W_V1, W_O1, W_V2, W_O2: composition_score(W_V1 @ W_O1, W_V2 @ W_O2))
    assert not verdict and "composition_score" in verdict.message


def test_v_composition_names_each_mistake():
    def norm(a):
        return np.linalg.norm(a)

    def ovs(W_V1, W_O1, W_V2, W_O2):
        return (W_V1 @ W_O1).numpy(), (W_V2 @ W_O2).numpy()

    def reversed_order(*w):
        ov1, ov2 = ovs(*w)
        return norm(ov2 @ ov1) / (norm(ov1) * norm(ov2))

    def one_transposed(*w):
        ov1, ov2 = ovs(*w)
        return norm(ov1.T @ ov2) / (norm(ov1) * norm(ov2))

    def no_norms(*w):
        ov1, ov2 = ovs(*w)
        return norm(ov1 @ ov2)

    def factor_norms(W_V1, W_O1, W_V2, W_O2):
        ov1, ov2 = ovs(W_V1, W_O1, W_V2, W_O2)
        return norm(ov1 @ ov2) / float(np.prod([norm(W.numpy()) for W in (W_V1, W_O1, W_V2, W_O2)]))

    hinted(check_v_composition_by_hand, reversed_order, "order is reversed")
    hinted(check_v_composition_by_hand, one_transposed, "transpose both")
    hinted(check_v_composition_by_hand, no_norms, "Frobenius norms")
    hinted(check_v_composition_by_hand, factor_norms, "four factors")


def test_v_composition_refuses_the_spectral_norm():
    def spectral(W_V1, W_O1, W_V2, W_O2):
        ov1, ov2 = (W_V1 @ W_O1).numpy(), (W_V2 @ W_O2).numpy()
        return np.linalg.norm(ov1 @ ov2, 2) / (np.linalg.norm(ov1, 2) * np.linalg.norm(ov2, 2))

    assert not check_v_composition_by_hand(spectral)


def test_the_rank_one_case_scores_one_only_in_the_right_order():
    W_V1, W_O1, W_V2, W_O2 = _composition_cases()[-1].args
    assert abs(v_by_column_convention(W_V1, W_O1, W_V2, W_O2) - 1) < 1e-9
    assert v_by_column_convention(W_V2, W_O2, W_V1, W_O1) < 0.99
