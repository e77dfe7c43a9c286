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


def additive_by_hidden_units(Q, K, W_q, W_k, b, v):
    # one hidden unit at a time: no array larger than the scores
    P_q, P_k = Q @ W_q + b, K @ W_k
    scores = np.zeros((Q.shape[0], Q.shape[1], K.shape[1]))
    for u in range(len(v)):
        scores += v[u] * np.tanh(P_q[:, :, None, u] + P_k[:, None, :, u])
    return scores


def additive_by_blocks_of_queries(Q, K, W_q, W_k, b, v):
    P_q, P_k = Q @ W_q + b, K @ W_k
    return np.concatenate([np.tanh(P_q[:, i:i + 8, None, :] + P_k[:, None, :, :]) @ v
                           for i in range(0, Q.shape[1], 8)], axis=1)


def additive_all_pairs_at_once(Q, K, W_q, W_k, b, v):
    return np.tanh((Q @ W_q)[:, :, None, :] + (K @ W_k)[:, None, :, :] + b) @ v


def test_answers_computed_another_way_pass():
    assert check_dilated_mask(dilated_by_loops)
    assert check_batched_additive_scores(additive_by_hidden_units)
    assert check_batched_additive_scores(additive_by_blocks_of_queries)


def test_additive_scores_of_every_pair_at_once_are_right_but_over_the_memory_budget():
    verdict = check_batched_additive_scores(additive_all_pairs_at_once)
    assert not verdict and "the values are right" in verdict.message and "B T_q T_k d_h" in verdict.message
    # the loops are right too, and hold one pair's hidden vector at a time, but take a while: not refused by memory
    assert "MiB" not in check_batched_additive_scores(additive_by_loops).message


def test_additive_mistakes_a_learner_makes_get_their_hint():
    # the tanh of each part, then the sum; and the query and key axes lined up wrongly, which fails to broadcast
    def tanh_then_sum(Q, K, W_q, W_k, b, v):
        return (np.tanh(Q @ W_q)[:, :, None, :] + np.tanh(K @ W_k + b)[:, None, :, :]) @ v

    def batch_axes_crossed(Q, K, W_q, W_k, b, v):
        return np.tanh((Q @ W_q)[:, :, None, :] + (K @ W_k)[None, :, :, :] + b) @ v

    verdict = check_batched_additive_scores(tanh_then_sum)
    assert not verdict and "tanh(a) + tanh(c) is not tanh(a + c)" in verdict.message, verdict.message
    verdict = check_batched_additive_scores(batch_axes_crossed)
    assert not verdict and "keys of its own sequence only" in verdict.message, verdict.message


def test_dilated_mask_inferred_from_the_drawn_rows_wrongly_gets_its_hint():
    # Query 6 of the statement's drawing sees keys 0, 3, 6, 9: read as "keys at multiples of the dilation".
    def multiples_of_r(T, window, dilation):
        i, j = np.indices((T, T))
        return (np.abs(i - j) <= window * dilation) & (j % dilation == 0)

    def rolled_row(T, window, dilation):
        # one row of the pattern rolled along the diagonal: the window wraps round the ends
        row = np.zeros(T, dtype=bool)
        row[[(m * dilation) % T for m in range(-window, window + 1)]] = True
        return np.stack([np.roll(row, i) for i in range(T)])

    verdict = check_dilated_mask(multiples_of_r)
    assert not verdict and "offset i - j" in verdict.message
    verdict = check_dilated_mask(rolled_row)
    assert not verdict and "does not wrap round" in verdict.message, verdict.message


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
