"""attnbook.numpy multi-head attention against torch.nn.MultiheadAttention with copied weights."""

import numpy as np
import pytest
import torch

from attnbook.interop import multihead_params_from_torch
from attnbook.numpy import (
    MultiHeadParams,
    causal_mask,
    combine_masks,
    merge_heads,
    multi_head_attention,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)

rng = np.random.default_rng(4)


def torch_mha(d_model, n_heads, kdim=None, seed=0):
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True, kdim=kdim, vdim=kdim, dtype=torch.float64)
    with torch.no_grad():  # PyTorch initialises biases to zero; random ones test that we add them
        for name, p in m.named_parameters():
            if "bias" in name:
                p.normal_()
    return m


def run_torch(m, X_q, X_kv, mask=None):
    # nn.MultiheadAttention's boolean attn_mask means the opposite of ours: True = NOT allowed.
    attn_mask = None if mask is None else torch.tensor(~mask)
    out, w = m(torch.tensor(X_q), torch.tensor(X_kv), torch.tensor(X_kv), attn_mask=attn_mask,
               average_attn_weights=False)
    return out.detach().numpy(), w.detach().numpy()


@pytest.mark.parametrize("n_heads", [1, 2, 4])
def test_self_attention_matches_torch(n_heads):
    m = torch_mha(8, n_heads)
    X = rng.normal(size=(3, 5, 8))
    out, w = multi_head_attention(X, X, multihead_params_from_torch(m), n_heads)
    t_out, t_w = run_torch(m, X, X)
    np.testing.assert_allclose(out, t_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w, t_w, rtol=1e-10, atol=1e-12)


def test_cross_attention_with_other_length_and_dimension_matches_torch():
    m = torch_mha(8, 2, kdim=6)
    X_q, X_kv = rng.normal(size=(2, 4, 8)), rng.normal(size=(2, 7, 6))
    out, w = multi_head_attention(X_q, X_kv, multihead_params_from_torch(m), 2)
    assert out.shape == (2, 4, 8) and w.shape == (2, 2, 4, 7)
    t_out, t_w = run_torch(m, X_q, X_kv)
    np.testing.assert_allclose(out, t_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w, t_w, rtol=1e-10, atol=1e-12)


def test_causal_and_padding_masks_match_torch():
    m = torch_mha(8, 2)
    B, T = 2, 5
    X = rng.normal(size=(B, T, 8))
    mask = combine_masks(causal_mask(T), padding_mask(np.array([5, 3]), T))  # (B, T, T), no empty rows
    out, w = multi_head_attention(X, X, multihead_params_from_torch(m), 2, mask=mask)
    t_mask = np.repeat(mask, 2, axis=0)  # torch wants (B * h, T, T) for a per-sequence mask
    t_out, t_w = run_torch(m, X, X, mask=t_mask)
    np.testing.assert_allclose(out, t_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w, t_w, rtol=1e-10, atol=1e-12)


def test_fully_masked_query_gives_no_nan_where_torch_does():
    m = torch_mha(4, 2)
    X = rng.normal(size=(1, 3, 4))
    mask = np.ones((3, 3), dtype=bool)
    mask[1] = False
    out, w = multi_head_attention(X, X, multihead_params_from_torch(m), 2, mask=mask)
    t_out, _ = run_torch(m, X, X, mask=mask)
    assert np.isnan(t_out[0, 1]).all()  # PyTorch's nn.MultiheadAttention leaks NaN here
    assert not np.isnan(out).any() and np.all(w[0, :, 1] == 0)
    np.testing.assert_allclose(out[0, 1], multihead_params_from_torch(m).b_o)  # zero heads, then W_o and b_o
    np.testing.assert_allclose(out[0, [0, 2]], t_out[0, [0, 2]], rtol=1e-10)


def test_reshape_equals_loop_over_heads():
    d_model, h = 12, 3
    p = MultiHeadParams.init(d_model, seed=1)
    X = rng.normal(size=(6, d_model))
    out, _ = multi_head_attention(X, X, p, h)
    d_head = d_model // h
    Q, K, V = X @ p.W_q + p.b_q, X @ p.W_k + p.b_k, X @ p.W_v + p.b_v
    heads = [scaled_dot_product_attention(Q[:, i * d_head:(i + 1) * d_head], K[:, i * d_head:(i + 1) * d_head],
                                          V[:, i * d_head:(i + 1) * d_head])[0] for i in range(h)]
    np.testing.assert_allclose(out, np.concatenate(heads, axis=1) @ p.W_o + p.b_o, rtol=1e-12)
    np.testing.assert_array_equal(merge_heads(split_heads(X[None], h))[0], X)


def test_parameter_count_formula():
    for d_model, d_kv in [(8, 8), (16, 6)]:
        p = MultiHeadParams.init(d_model, d_kv)
        torch_count = sum(t.numel() for t in torch_mha(d_model, 2, kdim=d_kv if d_kv != d_model else None).parameters())
        assert p.n_params() == (d_model + 2 * d_kv + d_model) * d_model + 4 * d_model == torch_count


def test_shape_and_head_errors():
    p = MultiHeadParams.init(8)
    X = np.ones((5, 8))
    with pytest.raises(ValueError, match="d_model = 8 must be divisible by n_heads, .*; got n_heads = 3"):
        multi_head_attention(X, X, p, 3)
    with pytest.raises(ValueError, match=r"X_q must have shape \(\.\.\., T_q, 8\) to match W_q \(8, 8\); got \(5, 7\)"):
        multi_head_attention(np.ones((5, 7)), X, p, 2)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 5\) does not fit the attention scores of shape \(5, 5\)"):
        multi_head_attention(X, X, p, 2, mask=np.ones((4, 5), dtype=bool))
    with pytest.raises(ValueError, match="mask must be boolean"):
        multi_head_attention(X, X, p, 2, mask=np.ones((5, 5)))
