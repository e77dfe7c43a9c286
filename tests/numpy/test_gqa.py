"""Grouped-query attention: equal to multi-head attention when every query head has its own key-value head,
equal to the repeat-the-heads formula otherwise, twins agree, and its cache is smaller by the group size."""

import numpy as np
import pytest
import torch

import attnbook.numpy as an
import attnbook.torch as at
from attnbook.numpy.multihead import MultiHeadParams


def _torch_params(p):
    return MultiHeadParams(*(torch.from_numpy(a) for a in (p.W_q, p.b_q, p.W_k, p.b_k, p.W_v, p.b_v, p.W_o, p.b_o)))


def test_gqa_with_as_many_kv_heads_as_heads_is_multi_head_attention():
    rng = np.random.default_rng(0)
    p = an.grouped_query_params(16, 4, 4, seed=1)
    X, Z = rng.normal(size=(2, 5, 16)), rng.normal(size=(2, 7, 16))
    mask = rng.random((2, 5, 7)) < 0.8
    for a, b in zip(an.grouped_query_attention(X, Z, p, 4, 4, mask), an.multi_head_attention(X, Z, p, 4, mask),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 3, 6])
def test_gqa_equals_repeated_kv_heads_formula(n_kv_heads):
    rng = np.random.default_rng(n_kv_heads)
    d_model, h = 24, 6
    p = an.grouped_query_params(d_model, h, n_kv_heads, seed=n_kv_heads)
    X = rng.normal(size=(3, 9, d_model))
    mask = an.causal_mask(9)
    out, weights = an.grouped_query_attention(X, X, p, h, n_kv_heads, mask)
    # The same by hand: each query head i uses key-value columns of head i // group, one head at a time.
    d_head, group = d_model // h, h // n_kv_heads
    Q, K, V = X @ p.W_q + p.b_q, X @ p.W_k + p.b_k, X @ p.W_v + p.b_v
    heads = []
    for i in range(h):
        j = i // group
        o, w = an.scaled_dot_product_attention(Q[..., i * d_head:(i + 1) * d_head], K[..., j * d_head:(j + 1) * d_head],
                                               V[..., j * d_head:(j + 1) * d_head], mask=mask)
        np.testing.assert_allclose(weights[:, i], w, rtol=1e-13, atol=1e-15)
        heads.append(o)
    np.testing.assert_allclose(out, np.concatenate(heads, axis=-1) @ p.W_o + p.b_o, rtol=1e-12, atol=1e-13)
    # and the torch twin
    t_out, t_w = at.grouped_query_attention(torch.from_numpy(X), torch.from_numpy(X), _torch_params(p), h, n_kv_heads,
                                            torch.from_numpy(mask))
    np.testing.assert_allclose(t_out.numpy(), out, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(t_w.numpy(), weights, rtol=1e-12, atol=1e-14)


def test_repeat_kv_twins_and_pytorch_enable_gqa():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, 5, 4, generator=g)
    k, v = torch.randn(2, 2, 5, 4, generator=g), torch.randn(2, 2, 5, 4, generator=g)
    np.testing.assert_array_equal(at.repeat_kv(k, 4).numpy(), an.repeat_kv(k.numpy(), 4))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    got = torch.nn.functional.scaled_dot_product_attention(q, at.repeat_kv(k, 4), at.repeat_kv(v, 4), is_causal=True)
    torch.testing.assert_close(got, want)


def _copy_mha_into_gqa(mha, gqa):
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            getattr(gqa, name).W.copy_(getattr(mha, name).W)
            getattr(gqa, name).b.copy_(getattr(mha, name).b)


def test_gqa_module_with_full_kv_heads_matches_multi_head_module():
    torch.manual_seed(0)
    mha, gqa = at.MultiHeadAttention(16, 4), at.GroupedQueryAttention(16, 4, 4)
    _copy_mha_into_gqa(mha, gqa)
    x, z = torch.randn(2, 6, 16), torch.randn(2, 9, 16)
    torch.testing.assert_close(gqa(x, causal=True)[0], mha(x, causal=True)[0])
    a, wa = gqa(x, z, need_weights=True)
    b, wb = mha(x, z, need_weights=True)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(wa, wb)


def test_gqa_module_matches_functional_form():
    torch.manual_seed(1)
    gqa = at.GroupedQueryAttention(24, 6, 2).double()
    x = torch.randn(2, 7, 24, dtype=torch.float64)
    mask = at.causal_mask(7)
    want = at.grouped_query_attention(x, x, gqa, 6, 2, mask)
    torch.testing.assert_close(gqa(x, causal=True)[0], want[0])
    torch.testing.assert_close(gqa(x, causal=True, need_weights=True)[1], want[1])


def test_gpt_with_gqa_cache_is_smaller_and_generation_matches():
    torch.manual_seed(0)
    for n_kv in (None, 4, 2, 1):
        model = at.GPT(at.GPTConfig(vocab_size=11, block_size=16, n_layers=2, n_heads=4, d_model=32,
                                    n_kv_heads=n_kv)).eval()
        ids = torch.randint(11, (2, 12))
        cache = at.KVCache()
        with torch.no_grad():
            first = model(ids[:, :7], cache=cache)
            rest = model(ids[:, 7:], cache=cache)
            torch.testing.assert_close(torch.cat([first, rest], 1), model(ids), atol=1e-5, rtol=1e-5)
        kv = 4 if n_kv is None else n_kv
        assert cache.nbytes == at.kv_cache_bytes(2, kv, 8, n_tokens=12, bytes_per_value=4, batch=2)
        assert all(k.shape == (2, kv, 12, 8) for k in cache.keys.values())


def test_gpt_default_is_unchanged_by_the_option():
    torch.manual_seed(3)
    a = at.GPT(at.GPTConfig(vocab_size=11, n_layers=2))
    torch.manual_seed(3)
    b = at.GPT(at.GPTConfig(vocab_size=11, n_layers=2, n_kv_heads=None))
    assert all(isinstance(blk.self_attn, at.MultiHeadAttention) for blk in a.blocks)
    for (na, pa), (nb, pb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert na == nb and torch.equal(pa, pb)


def test_bad_head_counts_are_rejected():
    with pytest.raises(ValueError, match="n_heads = 6 must be divisible by n_kv_heads"):
        an.grouped_query_params(24, 6, 4)
    with pytest.raises(ValueError, match="divisible by n_kv_heads"):
        at.GroupedQueryAttention(24, 6, 4)
    with pytest.raises(ValueError, match="divisible by n_kv_heads"):
        at.GPTConfig(vocab_size=5, n_heads=4, n_kv_heads=3)
    p = an.grouped_query_params(24, 6, 2)
    with pytest.raises(ValueError, match="n_kv_heads \\* d_head = 24"):
        an.grouped_query_attention(np.zeros((3, 24)), np.zeros((3, 24)), p, 6, 6)
    with pytest.raises(ValueError, match="X_q must have shape"):
        an.grouped_query_attention(np.zeros((3, 8)), np.zeros((3, 24)), p, 6, 2)
