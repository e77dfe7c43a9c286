"""Scoring functions against their definitions written as loops, and against torch where torch has them."""

import math

import numpy as np
import pytest
import torch

from attnbook.numpy import (
    AdditiveScore,
    BilinearScore,
    DotScore,
    GatedScore,
    LocalScore,
    ScaledDotScore,
    attention_with,
    scaled_dot_product_attention,
)

rng = np.random.default_rng(5)
Q, K, V = rng.normal(size=(4, 6)), rng.normal(size=(5, 6)), rng.normal(size=(5, 3))


def loop(score, Q, K):
    return np.array([[score(q, k) for k in K] for q in Q])


def test_dot_and_scaled_dot():
    np.testing.assert_allclose(DotScore()(Q, K), loop(lambda q, k: q @ k, Q, K))
    np.testing.assert_allclose(ScaledDotScore()(Q, K), loop(lambda q, k: q @ k / math.sqrt(6), Q, K))
    out, _ = attention_with(ScaledDotScore(), Q, K, V)
    np.testing.assert_allclose(out, scaled_dot_product_attention(Q, K, V)[0], rtol=1e-12)


def test_bilinear_matches_torch_bilinear():
    W = rng.normal(size=(6, 4))
    K4 = rng.normal(size=(5, 4))
    scores = BilinearScore(W)(Q, K4)
    bil = torch.nn.Bilinear(6, 4, 1, bias=False, dtype=torch.float64)
    with torch.no_grad():
        bil.weight.copy_(torch.tensor(W)[None])
    qs = torch.tensor(np.repeat(Q, 5, axis=0))
    ks = torch.tensor(np.tile(K4, (4, 1)))
    expected = bil(qs, ks).detach().numpy().reshape(4, 5)
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
    assert BilinearScore(W).n_params() == 24


def test_additive_matches_loop():
    W_q, W_k, b, v = rng.normal(size=(6, 8)), rng.normal(size=(6, 8)), rng.normal(size=8), rng.normal(size=8)
    scorer = AdditiveScore(W_q, W_k, b, v)
    np.testing.assert_allclose(scorer(Q, K), loop(lambda q, k: v @ np.tanh(q @ W_q + k @ W_k + b), Q, K), rtol=1e-12)
    assert scorer.n_params() == 6 * 8 * 2 + 8 + 8


def test_gated_matches_loop_and_scales_the_scaled_dot():
    w_g = rng.normal(size=12)
    gated = GatedScore(w_g, b_g=0.3)(Q, K)

    def one(q, k):
        gate = 1 / (1 + math.exp(-(np.concatenate([q, k]) @ w_g + 0.3)))
        return gate * (q @ k) / math.sqrt(6)

    np.testing.assert_allclose(gated, loop(one, Q, K), rtol=1e-12)
    ratio = gated / ScaledDotScore()(Q, K)
    assert np.all((ratio > 0) & (ratio < 1))  # a gate in (0, 1)


def test_local_window_keeps_only_near_keys():
    T = 6
    X = rng.normal(size=(T, 4))
    scores = LocalScore(window=1)(X, X)
    for i in range(T):
        for j in range(T):
            assert np.isfinite(scores[i, j]) == (abs(i - j) <= 1)
    _, w = attention_with(LocalScore(window=1), X, X, X)
    assert np.all(w[np.abs(np.subtract.outer(range(T), range(T))) > 1] == 0)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    assert LocalScore(window=1).cost(T, T, 4) < ScaledDotScore().cost(T, T, 4)


def test_errors():
    with pytest.raises(ValueError, match=r"same size d; got Q \(4, 6\) and K \(5, 3\)"):
        DotScore()(Q, rng.normal(size=(5, 3)))
    with pytest.raises(ValueError, match=r"W must have shape \(d_q, d_k\) = \(6, 6\); got \(6, 4\)"):
        BilinearScore(np.ones((6, 4)))(Q, K)
    with pytest.raises(ValueError, match=r"V must have shape \(T_k, d_v\) with T_k = 5; got \(4, 3\)"):
        attention_with(DotScore(), Q, K, np.ones((4, 3)))
    with pytest.raises(ValueError, match="mask must be boolean"):
        attention_with(DotScore(), Q, K, V, mask=np.ones((4, 5)))
