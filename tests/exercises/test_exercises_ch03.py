"""Chapter 3's checkers: answers written another way pass, an answer that calls the package's lookup or
attention is refused by name, and wrong answers a learner writes beyond the listed mistakes are refused."""

import numpy as np

import attnbook.numpy as anp
from attnbook.exercises import check_loo_predictions, check_weighted_distance_attention


def loop_distance_attention(Q, K, V, lam):
    """Each query against all keys by its weighted distance, in a Python loop over the queries, with a stable
    softmax (a loop over every pair too would take seconds on the checker's large case)."""
    out = []
    for q in Q:
        scores = -np.sum(lam * (q - K) ** 2, axis=1)
        w = np.exp(scores - scores.max())
        out.append((w / w.sum()) @ V)
    return np.array(out)


def loop_loo(keys, values, sharpness):
    out = []
    for i in range(len(keys)):
        others = [j for j in range(len(keys)) if j != i]
        scores = np.array([-sharpness * (keys[i] - keys[j]) ** 2 for j in others])
        w = np.exp(scores - scores.max())
        out.append(float(w @ values[others] / w.sum()))
    return np.array(out)


def test_answers_written_another_way_pass():
    assert check_weighted_distance_attention(loop_distance_attention)
    # Scaling every coordinate by sqrt(lam) turns the weighted distance into the plain one.
    def through_square_roots(Q, K, V, lam):
        Qs, Ks = Q * np.sqrt(lam), K * np.sqrt(lam)
        return anp.softmax(2 * Qs @ Ks.T - np.sum(Ks**2, axis=1), axis=1) @ V

    assert check_weighted_distance_attention(through_square_roots)
    # Right values from a loop over the pairs: the statement rules the loop out, and the call count finds it.
    verdict = check_loo_predictions(loop_loo)
    assert not verdict and "loops over the pairs" in verdict.message, verdict.message


# --- an answer that calls the package is refused by name -------------------------------------------

def test_distance_attention_through_the_package_is_refused_by_name():
    def augmented(Q, K, V, lam):
        # A clever route through the package: [2 lam q, -1] . [k, lam . k^2] = 2 (lam q) . k - lam . k^2.
        Qa = np.hstack([2 * Q * lam, -np.ones((len(Q), 1))])
        Ka = np.hstack([K, (K**2 @ lam)[:, None]])
        return anp.scaled_dot_product_attention(Qa, Ka, V, scale=1.0)[0]

    verdict = check_weighted_distance_attention(augmented)
    assert not verdict and "attnbook.numpy.attention.scaled_dot_product_attention" in verdict.message


def test_loo_through_soft_lookup_is_refused_by_name():
    def delegating(keys, values, sharpness):
        return np.array([anp.soft_lookup(keys[i:i + 1], np.delete(keys, i), np.delete(values, i), sharpness)[0][0]
                         for i in range(len(keys))])

    verdict = check_loo_predictions(delegating)
    assert not verdict and "attnbook.numpy.lookup.soft_lookup" in verdict.message


# --- wrong answers a learner writes, beyond the listed mistakes -------------------------------------

def test_distance_attention_with_the_softmax_down_the_columns_is_refused():
    def columns(Q, K, V, lam):
        return anp.softmax(2 * (Q * lam) @ K.T - K**2 @ lam, axis=0) @ V

    verdict = check_weighted_distance_attention(columns)
    assert not verdict and "wrong value" in verdict.message


def test_distance_attention_that_ignores_the_weights_is_refused():
    # The chapter's plain distance, the weights left out: right only where every weight is 1.
    def plain(Q, K, V, lam):
        return anp.softmax(2 * Q @ K.T - np.sum(K**2, axis=1), axis=1) @ V

    verdict = check_weighted_distance_attention(plain)
    assert not verdict and "lam=[4, 0.5]" in verdict.message


def test_loo_that_leaves_out_every_equal_key_is_refused():
    # Ruling out by key value rather than by position also drops a second pair stored under the same key.
    def by_key_value(keys, values, sharpness):
        scores = -sharpness * (keys[:, None] - keys[None, :]) ** 2
        scores[keys[:, None] == keys[None, :]] = -np.inf
        return anp.softmax(scores, axis=1) @ values

    verdict = check_loo_predictions(by_key_value)
    assert not verdict and "keys=[1, 1, 2, 4]" in verdict.message
