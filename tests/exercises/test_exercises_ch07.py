"""Chapter 7's checkers accept answers computed another way, refuse the package's own scorers, and
reject wrong answers a learner might write."""

import numpy as np

from attnbook.exercises import check_batched_additive_scores, check_dilated_mask
from attnbook.numpy import AdditiveScore, LocalScore


def dilated_by_loops(T, window, dilation):
    return np.array([[j in range(i - window * dilation, i + window * dilation + 1, dilation) for j in range(T)]
                     for i in range(T)])


def additive_by_loops(Q, K, W_q, W_k, b, v):
    return np.array([[[v @ np.tanh(q @ W_q + k @ W_k + b) for k in Ks] for q in Qs]
                     for Qs, Ks in zip(Q, K, strict=True)])


def test_answers_computed_another_way_pass():
    assert check_dilated_mask(dilated_by_loops)
    assert check_batched_additive_scores(additive_by_loops)


def test_delegating_to_the_package_is_refused_by_name():
    def through_local_score(T, window, dilation):
        i, j = np.indices((T, T))
        within = np.isfinite(LocalScore(window * dilation)(np.ones((T, 1)), np.ones((T, 1))))
        return within & ((i - j) % dilation == 0)

    def through_additive_score(Q, K, W_q, W_k, b, v):
        return np.stack([AdditiveScore(W_q, W_k, b, v)(q, k) for q, k in zip(Q, K, strict=True)])

    verdict = check_dilated_mask(through_local_score)
    assert not verdict and "attnbook.numpy.scoring.LocalScore" in verdict.message
    verdict = check_batched_additive_scores(through_additive_score)
    assert not verdict and "attnbook.numpy.scoring.AdditiveScore" in verdict.message


def test_wrong_answers_not_among_the_listed_mistakes_fail():
    # A window one step too long or too short, and pairs formed across the sequences of the batch.
    def strict(T, window, dilation):
        offsets = np.subtract.outer(np.arange(T), np.arange(T))
        return (np.abs(offsets) < window * dilation) & (offsets % dilation == 0)

    assert not check_dilated_mask(lambda T, w, r: dilated_by_loops(T, w + 1, r))
    assert not check_dilated_mask(strict)

    def across_the_batch(Q, K, W_q, W_k, b, v):
        hidden = np.tanh((Q @ W_q)[:, :, None, None, :] + (K @ W_k)[None, None, :, :, :] + b)
        return (hidden @ v).mean(axis=2)

    assert not check_batched_additive_scores(across_the_batch)


def test_unattempted_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_dilated_mask(todo).attempted and not check_batched_additive_scores(todo).attempted
