"""attnbook.numpy attention against loops and torch.nn.functional.scaled_dot_product_attention (float64)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnbook.numpy import scaled_dot_product_attention, single_query_attention, softmax

rng = np.random.default_rng(2)


def loop_attention(Q, K, V, mask=None):
    """One query at a time, one key at a time: the definition, with nothing vectorised."""
    T_q, d_k = Q.shape
    T_k, d_v = V.shape
    out, weights = np.zeros((T_q, d_v)), np.zeros((T_q, T_k))
    for i in range(T_q):
        allowed = [j for j in range(T_k) if mask is None or mask[i, j]]
        scores = {j: sum(Q[i, c] * K[j, c] for c in range(d_k)) / math.sqrt(d_k) for j in allowed}
        if not scores:
            continue
        top = max(scores.values())
        total = sum(math.exp(s - top) for s in scores.values())
        for j, s in scores.items():
            weights[i, j] = math.exp(s - top) / total
            out[i] += weights[i, j] * V[j]
    return out, weights


def torch_sdpa(Q, K, V, mask=None):
    t = [torch.tensor(x) for x in (Q, K, V)]
    return F.scaled_dot_product_attention(*t, attn_mask=None if mask is None else torch.tensor(mask)).numpy()


@pytest.mark.parametrize("T_q, T_k, d_k, d_v", [(4, 4, 8, 8), (3, 7, 5, 2), (1, 1, 3, 4), (6, 1, 2, 2)])
def test_matches_loop_and_torch(T_q, T_k, d_k, d_v):
    Q, K, V = rng.normal(size=(T_q, d_k)), rng.normal(size=(T_k, d_k)), rng.normal(size=(T_k, d_v))
    out, weights = scaled_dot_product_attention(Q, K, V)
    loop_out, loop_weights = loop_attention(Q, K, V)
    np.testing.assert_allclose(out, loop_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, loop_weights, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out, torch_sdpa(Q, K, V), rtol=1e-10, atol=1e-12)


def test_batched_with_mask_matches_torch_and_loop():
    B, h, T_q, T_k = 2, 3, 5, 6
    Q, K, V = rng.normal(size=(B, h, T_q, 4)), rng.normal(size=(B, h, T_k, 4)), rng.normal(size=(B, h, T_k, 3))
    mask = rng.random((B, 1, T_q, T_k)) > 0.4
    mask[0, 0, 2] = False  # a query with every key masked
    out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    np.testing.assert_allclose(out, torch_sdpa(Q, K, V, mask), rtol=1e-10, atol=1e-12)
    for b in range(B):
        for head in range(h):
            lo, lw = loop_attention(Q[b, head], K[b, head], V[b, head], mask[b, 0])
            np.testing.assert_allclose(out[b, head], lo, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(weights[b, head], lw, rtol=1e-10, atol=1e-12)
    assert np.all(weights[~np.broadcast_to(mask, weights.shape)] == 0)
    assert np.all(out[0, :, 2] == 0) and not np.isnan(out).any()


def test_causal_mask_and_explicit_scale():
    T = 5
    X = rng.normal(size=(T, 4))
    causal = np.tril(np.ones((T, T), dtype=bool))
    out, weights = scaled_dot_product_attention(X, X, X, mask=causal, scale=1.0)
    assert np.allclose(np.triu(weights, 1), 0) and np.allclose(weights.sum(-1), 1)
    expected = F.scaled_dot_product_attention(*(torch.tensor(X),) * 3, attn_mask=torch.tensor(causal), scale=1.0)
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-10)
    np.testing.assert_allclose(weights, softmax(np.where(causal, X @ X.T, -np.inf)), rtol=1e-12)


def test_very_large_scores_stay_finite():
    Q = rng.normal(size=(3, 4)) * 1e4
    K = rng.normal(size=(5, 4)) * 1e4
    V = rng.normal(size=(5, 2))
    out, weights = scaled_dot_product_attention(Q, K, V)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, torch_sdpa(Q, K, V), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights.max(axis=-1), 1.0)  # saturated: one-hot rows


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((3, 4), (5, 6), (5, 2)), r"same last dimension d_k; got Q \(3, 4\) and K \(5, 6\)"),
        (((3, 4), (5, 4), (6, 2)), r"same number of positions T_k.*got K \(5, 4\) and V \(6, 2\)"),
        (((2, 3, 4), (1, 5, 4), (1, 5, 2)), r"same batch dimensions.*Q \(2, 3, 4\), K \(1, 5, 4\)"),
        (((4,), (5, 4), (5, 2)), r"Q must have shape \(\.\.\., T, d\) with at least 2 dimensions; got shape \(4,\)"),
    ],
)
def test_shape_errors_name_the_shapes(shapes, message):
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(*(np.ones(s) for s in shapes))


def test_mask_errors():
    Q, K, V = np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2))
    with pytest.raises(ValueError, match="mask must be boolean.*got dtype float64"):
        scaled_dot_product_attention(Q, K, V, mask=np.ones((3, 5)))
    with pytest.raises(ValueError, match=r"mask of shape \(5, 3\) does not fit the attention scores of shape \(3, 5\)"):
        scaled_dot_product_attention(Q, K, V, mask=np.ones((5, 3), dtype=bool))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 3, 5\) does not fit"):
        scaled_dot_product_attention(Q, K, V, mask=np.ones((2, 3, 5), dtype=bool))


def make_params(d_x, d_z, d_attn, d_out):
    return dict(
        W_q=rng.normal(size=(d_x, d_attn)), b_q=rng.normal(size=d_attn),
        W_k=rng.normal(size=(d_z, d_attn)), b_k=rng.normal(size=d_attn),
        W_v=rng.normal(size=(d_z, d_out)), b_v=rng.normal(size=d_out),
    )


def test_single_query_matches_batched_attention_with_all_dimensions_different():
    d_x, d_z, d_attn, d_out, T = 3, 5, 4, 2, 6
    p = make_params(d_x, d_z, d_attn, d_out)
    e, Z = rng.normal(size=d_x), rng.normal(size=(T, d_z))
    out, alpha = single_query_attention(e, Z, **p)
    assert out.shape == (d_out,) and alpha.shape == (T,)
    Q = (e @ p["W_q"] + p["b_q"])[None, :]
    K, V = Z @ p["W_k"] + p["b_k"], Z @ p["W_v"] + p["b_v"]
    ref_out, ref_w = scaled_dot_product_attention(Q, K, V)
    np.testing.assert_allclose(out, ref_out[0], rtol=1e-12)
    np.testing.assert_allclose(alpha, ref_w[0], rtol=1e-12)
    expected = F.scaled_dot_product_attention(*(torch.tensor(x) for x in (Q, K, V)))
    np.testing.assert_allclose(out, expected.numpy()[0], rtol=1e-10)


def test_single_query_shape_errors():
    p = make_params(3, 5, 4, 2)
    e, Z = np.ones(3), np.ones((6, 5))
    with pytest.raises(ValueError, match=r"W_q must have d_x = 4 rows to map e \(4,\); got W_q \(3, 4\)"):
        single_query_attention(np.ones(4), Z, **p)
    with pytest.raises(ValueError, match=r"W_k must have d_z = 6 rows to map Z \(6, 6\)"):
        single_query_attention(e, np.ones((6, 6)), **p)
    with pytest.raises(ValueError, match=r"b_v must have shape \(2,\) to match \(5, 2\); got \(3,\)"):
        single_query_attention(e, Z, **{**p, "b_v": np.ones(3)})
    with pytest.raises(ValueError, match=r"W_q and W_k must have the same last dimension"):
        single_query_attention(e, Z, **{**p, "W_k": np.ones((5, 3)), "b_k": np.ones(3)})
