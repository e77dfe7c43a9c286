"""Chapter 28's checkers: answers computed another way pass, the package's functions are refused, the listed
mistakes get their hints, and plausible wrong answers of other kinds fail."""

import numpy as np
import torch

from attnbook.exercises import check_induction_targets, check_q_composition
from attnbook.exercises.ch28 import _composition_cases, _targets_cases
from attnbook.torch.circuits import composition_score, induction_targets, q_composition


def targets_by_loops(ids):
    row = ids.tolist()
    last = {}  # token -> its latest position so far
    out = []
    for t, token in enumerate(row):
        out.append(last[token] + 1 if token in last else -1)
        last[token] = t
    return torch.tensor(out)


def test_induction_targets_accepts_loops_and_lists():
    assert check_induction_targets(targets_by_loops)
    assert check_induction_targets(lambda ids: targets_by_loops(ids).tolist())
    assert check_induction_targets(lambda ids: targets_by_loops(ids).numpy())


def test_induction_targets_refuses_the_package():
    verdict = check_induction_targets(lambda ids: induction_targets(ids))
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

    hinted(check_induction_targets, first, "most recent")
    hinted(check_induction_targets, occurrence, "one position past")
    hinted(check_induction_targets, zero_for_none, "return -1")


def test_induction_targets_refuses_a_shift_by_the_previous_token():
    # attention to the token after the previous *position*, a previous-token head's pattern shifted: t
    assert not check_induction_targets(lambda ids: torch.arange(len(ids)))


def test_the_cases_cover_first_tokens_and_immediate_repeats():
    labels = " ".join(c.label for c in _targets_cases())
    assert "[7, 7, 7]" in labels and "no token repeats" in labels


def q_by_column_convention(W_Q, W_K, W_V, W_O):
    Wq, Wk, Wv, Wo = (W.numpy() for W in (W_Q.T, W_K.T, W_V.T, W_O.T))  # the column convention's matrices
    W_QK, W_OV = Wq.T @ Wk, Wo @ Wv
    return float(np.linalg.norm(W_QK.T @ W_OV) / (np.linalg.norm(W_QK) * np.linalg.norm(W_OV)))


def test_q_composition_accepts_the_column_convention_formula():
    assert check_q_composition(q_by_column_convention)

    def through_the_ov_side(W_Q, W_K, W_V, W_O):  # ||OV QK|| in the row layout, the same number
        qk, ov = W_Q @ W_K.T, W_V @ W_O
        return torch.linalg.matrix_norm(ov @ qk) / (torch.linalg.matrix_norm(qk) * torch.linalg.matrix_norm(ov))

    assert check_q_composition(through_the_ov_side)


def test_q_composition_refuses_the_package():
    verdict = check_q_composition(lambda W_Q, W_K, W_V, W_O: q_composition(W_Q @ W_K.T, W_V @ W_O))
    assert not verdict and "q_composition" in verdict.message
    verdict = check_q_composition(lambda W_Q, W_K, W_V, W_O: composition_score(W_V @ W_O, W_Q @ W_K.T))
    assert not verdict and "composition_score" in verdict.message


def test_q_composition_names_each_mistake():
    def k_comp(W_Q, W_K, W_V, W_O):
        qk, ov = (W_Q @ W_K.T).numpy(), (W_V @ W_O).numpy()
        return np.linalg.norm(qk @ ov.T) / (np.linalg.norm(qk) * np.linalg.norm(ov))

    def row_ov(W_Q, W_K, W_V, W_O):
        qk, ov = (W_Q @ W_K.T).numpy(), (W_V @ W_O).numpy()
        return np.linalg.norm(qk.T @ ov) / (np.linalg.norm(qk) * np.linalg.norm(ov))

    def no_norms(W_Q, W_K, W_V, W_O):
        qk, ov = (W_Q @ W_K.T).numpy(), (W_V @ W_O).numpy()
        return np.linalg.norm(qk.T @ ov.T)

    hinted(check_q_composition, k_comp, "K-composition")
    hinted(check_q_composition, row_ov, "transpose")
    hinted(check_q_composition, no_norms, "Frobenius norms")


def test_q_composition_refuses_the_spectral_norm():
    def spectral(W_Q, W_K, W_V, W_O):
        qk, ov = (W_Q @ W_K.T).numpy(), (W_V @ W_O).numpy()
        return np.linalg.norm(qk.T @ ov.T, 2) / (np.linalg.norm(qk, 2) * np.linalg.norm(ov, 2))

    assert not check_q_composition(spectral)


def test_the_rank_one_case_separates_q_from_k_composition():
    W_Q, W_K, W_V, W_O = _composition_cases()[-1].args
    assert abs(q_by_column_convention(W_Q, W_K, W_V, W_O) - 1) < 1e-9
