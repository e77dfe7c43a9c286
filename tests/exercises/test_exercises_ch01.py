"""Chapter 1's checkers, as a learner meets them: an answer that calls the package is refused by name, and
wrong answers written independently of the checkers' own mistakes are refused (tests/exercises/test_checkers.py runs
every checker on its reference and mistakes)."""

import numpy as np
import pytest

import attnbook.numpy as anp
from attnbook.exercises import Verdict, check_combined_row_weight, check_neighbours, check_solve_analogies


def not_attempted(*args):
    raise NotImplementedError


def loop_neighbours(E, k):
    """An oracle written from the definition: every pair's cosine by its formula, in Python loops."""
    V = len(E)
    out = []
    for i in range(V):
        cos = [-np.inf if j == i else float(E[i] @ E[j]) / np.sqrt(float(E[i] @ E[i]) * float(E[j] @ E[j]))
               for j in range(V)]
        out.append(sorted(range(V), key=lambda j: -cos[j])[:k])
    return np.array(out)


def loop_analogies(a, b, c, E):
    answers = []
    for x, y, z in zip(a, b, c, strict=True):
        t = E[y] - E[x] + E[z]
        cos = [-np.inf if j in (x, y, z) else float(t @ E[j]) / (np.linalg.norm(t) * np.linalg.norm(E[j]))
               for j in range(len(E))]
        answers.append(int(np.argmax(cos)))
    return np.array(answers)


def test_verdict_reads_as_its_message_and_its_truth():
    v = Verdict(True, "f: all 3 checks passed.")
    assert repr(v) == "f: all 3 checks passed." and bool(v)
    assert not Verdict(False, "f: wrong")


@pytest.mark.parametrize("check", [check_neighbours, check_solve_analogies, check_combined_row_weight])
def test_every_checker_reports_not_attempted_and_non_functions(check):
    verdict = check(not_attempted)
    assert not verdict and not verdict.attempted
    assert "not attempted yet" in verdict.message
    assert "expected a function, got int" in check(3).message


def test_answers_written_from_the_definition_pass_unless_they_loop_where_the_statement_forbids_it():
    assert check_neighbours(loop_neighbours), check_neighbours(loop_neighbours).message
    verdict = check_solve_analogies(loop_analogies)  # right values, but the statement rules out the loop
    assert not verdict and "loops over the questions" in verdict.message, verdict.message


# --- an answer that calls the package ----------------------------------------------------------------

def test_neighbours_through_nearest_is_refused_by_name():
    def delegating(E, k):
        return np.stack([anp.nearest(E[i], E, k=k, exclude=[i]) for i in range(len(E))])

    verdict = check_neighbours(delegating)
    assert not verdict and "attnbook.numpy.similarity.nearest" in verdict.message


def test_neighbours_through_pairwise_cosine_similarity_is_refused_by_name():
    def delegating(E, k):
        S = anp.pairwise_cosine_similarity(E, E)
        np.fill_diagonal(S, -np.inf)
        return np.argsort(-S, axis=1)[:, :k]

    verdict = check_neighbours(delegating)
    assert not verdict and "attnbook.numpy.similarity.pairwise_cosine_similarity" in verdict.message


def test_analogies_through_analogy_are_refused_by_name():
    def delegating(a, b, c, E):
        words = [str(i) for i in range(len(E))]
        return np.array([int(anp.analogy(str(x), str(y), str(z), E, words)) for x, y, z in zip(a, b, c, strict=True)])

    verdict = check_solve_analogies(delegating)
    assert not verdict and "attnbook.numpy.similarity.analogy" in verdict.message


# --- wrong answers a learner writes, beyond the listed mistakes -------------------------------------

def test_neighbours_that_rule_out_the_word_itself_with_zero_are_refused():
    # A cosine of 0 still beats every negative cosine: with k reaching them, the word comes back.
    def zero_diagonal(E, k):
        unit = E / np.linalg.norm(E, axis=1, keepdims=True)
        S = unit @ unit.T
        np.fill_diagonal(S, 0.0)
        return np.argsort(-S, axis=1)[:, :k]

    verdict = check_neighbours(zero_diagonal)
    assert not verdict and "wrong value" in verdict.message


def test_neighbours_that_drop_the_first_column_and_an_off_by_one_are_refused():
    # Dropping column 0 of the full sort assumes the word itself always comes first: not so when another row
    # points the same way (cosine 1 as well), which one case has.
    def drop_first(E, k):
        unit = E / np.linalg.norm(E, axis=1, keepdims=True)
        return np.argsort(-(unit @ unit.T), axis=1, kind="stable")[:, 1:k + 1]

    verdict = check_neighbours(drop_first)
    assert not verdict and "parallel to the first" in verdict.message
    off_by_one = check_neighbours(lambda E, k: drop_first(E, k)[:, :-1])
    assert not off_by_one and "returned shape" in off_by_one.message


def test_analogies_with_columns_normalised_are_refused():
    def columns(a, b, c, E):
        unit = E / np.linalg.norm(E, axis=0, keepdims=True)
        S = (unit[b] - unit[a] + unit[c]) @ unit.T
        rows = np.arange(len(a))
        for w in (a, b, c):
            S[rows, w] = -np.inf
        return np.argmax(S, axis=1)

    verdict = check_solve_analogies(columns)
    assert not verdict and "wrong value" in verdict.message


def test_analogies_with_argmax_over_the_whole_matrix_are_refused():
    def flat(a, b, c, E):
        S = (E[b] - E[a] + E[c]) @ E.T
        return np.argmax(S)

    verdict = check_solve_analogies(flat)
    assert not verdict and "expected shape (5,)" in verdict.message


# --- what every checker does, shown on chapter 1's ---------------------------------------------------

def test_checker_reports_exceptions_none_nan_and_shape():
    assert "raised ValueError" in check_neighbours(lambda E, k: E @ E).message
    assert "returned None" in check_neighbours(lambda E, k: None).message
    assert "returned NaN" in check_neighbours(lambda E, k: np.full((len(E), k), np.nan)).message
    assert "expected shape (13, 3)" in check_neighbours(lambda E, k: np.zeros((len(E), k + 1), int)).message
    assert "returned str 'x'" in check_neighbours(lambda E, k: "x").message


def test_checker_inputs_survive_a_function_that_changes_them_in_place():
    def correct_then_clobbers(E, k):
        result = loop_neighbours(E, k)
        E[:] = 0.0  # were the checker's stored cases handed over, they would now hold zero vectors
        return result

    # The change is reported (its caller would lose its data), and the stored cases stay whole.
    for _ in range(2):
        verdict = check_neighbours(correct_then_clobbers)
        assert not verdict and "changed its input `E` in place" in verdict.message
    assert check_neighbours(loop_neighbours)


# --- a stack of torch.nn.Linear weights as one row-convention matrix -----------------------------------

def stack_by_images_of_basis(weights):
    """Where each basis row vector goes, pushed through the stored weights one layer at a time as x w^T."""
    rows = np.eye(weights[0].shape[1])
    for w in weights:
        rows = np.array([[sum(r[i] * w[o, i] for i in range(w.shape[1])) for o in range(w.shape[0])] for r in rows])
    return rows


def test_combined_row_weight_written_another_way_passes():
    assert check_combined_row_weight(stack_by_images_of_basis)

    def transpose_of_column_product(weights):
        M = weights[0]
        for w in weights[1:]:
            M = w @ M  # the column convention: W_n ... W_1, then one transpose for rows
        return M.T

    assert check_combined_row_weight(transpose_of_column_product)


def test_combined_row_weight_through_torch_is_refused_by_name():
    import torch

    def through_linear(weights):
        x = torch.eye(weights[0].shape[1], dtype=torch.float64)
        for w in weights:
            x = torch.nn.functional.linear(x, torch.tensor(w))
        return x.numpy()

    def through_modules(weights):
        layers = []
        for w in weights:
            layer = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=torch.float64)
            with torch.no_grad():
                layer.weight.copy_(torch.tensor(w))
            layers.append(layer)
        return torch.nn.Sequential(*layers)(torch.eye(weights[0].shape[1], dtype=torch.float64)).detach().numpy()

    verdict = check_combined_row_weight(through_linear)
    assert not verdict and "linear" in verdict.message and "ready-made" in verdict.message
    verdict = check_combined_row_weight(through_modules)
    assert not verdict and "Linear.forward" in verdict.message


def test_combined_row_weight_of_the_last_layer_only_is_refused():
    # Keeping only the last layer's transpose: right for one layer, wrong for a stack.
    verdict = check_combined_row_weight(lambda weights: weights[-1].T)
    assert not verdict and "expected shape (2, 2)" not in verdict.message and "two square layers" in verdict.message


def test_combined_row_weight_mistakes_give_their_hints():
    def column_product(weights):
        M = weights[0]
        for w in weights[1:]:
            M = w @ M
        return M

    verdict = check_combined_row_weight(column_product)
    assert not verdict and "column-convention matrix" in verdict.message
