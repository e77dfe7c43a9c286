"""attnbook.torch layers against their NumPy twins and against torch.nn with copied weights."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
import attnbook.torch as at
from attnbook.interop import (
    copy_decoder_block_from_torch,
    copy_encoder_block_from_torch,
    copy_mha_from_torch,
    copy_transformer_from_torch,
    multihead_params_from_torch,
)

rng = np.random.default_rng(7)


pytestmark = pytest.mark.usefixtures("float64")  # compare in float64 (tests/conftest.py)


def t(x):
    return torch.tensor(x)


def randomise(module, std=0.3, seed=0):
    """Random values everywhere, biases and norms included, so that no parameter can hide."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return module


def test_softmax_and_attention_match_numpy_twins():
    x = rng.normal(size=(3, 5))
    x[1] = -np.inf
    np.testing.assert_allclose(at.softmax(t(x)).numpy(), anp.softmax(x), rtol=1e-12)
    Q, K, V = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 7, 6)), rng.normal(size=(2, 7, 3))
    mask = rng.random((2, 4, 7)) > 0.3
    mask[0, 1] = False
    out_t, w_t = at.scaled_dot_product_attention(t(Q), t(K), t(V), t(mask))
    out_n, w_n = anp.scaled_dot_product_attention(Q, K, V, mask)
    np.testing.assert_allclose(out_t.numpy(), out_n, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w_t.numpy(), w_n, rtol=1e-10, atol=1e-12)
    expected = F.scaled_dot_product_attention(t(Q), t(K), t(V), attn_mask=t(mask))
    np.testing.assert_allclose(out_t.numpy(), expected.numpy(), rtol=1e-10, atol=1e-12)


def test_attention_errors_name_shapes_and_masks():
    with pytest.raises(ValueError, match=r"same last dimension d_k; got Q \(3, 4\) and K \(5, 6\)"):
        at.scaled_dot_product_attention(torch.ones(3, 4), torch.ones(5, 6), torch.ones(5, 2))
    with pytest.raises(ValueError, match="mask must be boolean.*got dtype torch.float64"):
        at.scaled_dot_product_attention(torch.ones(3, 4), torch.ones(5, 4), torch.ones(5, 2), torch.ones(3, 5))
    with pytest.raises(ValueError, match=r"mask of shape \(5, 3\) does not fit the attention scores of shape \(3, 5\)"):
        at.scaled_dot_product_attention(torch.ones(3, 4), torch.ones(5, 4), torch.ones(5, 2),
                                        torch.ones(5, 3, dtype=torch.bool))


def test_functional_mha_matches_numpy_twin_and_module():
    mha = randomise(at.MultiHeadAttention(8, 2, d_kv=6))
    X_q, X_kv = rng.normal(size=(2, 4, 8)), rng.normal(size=(2, 5, 6))
    mask = rng.random((2, 4, 5)) > 0.3
    mask[:, :, 0] = True
    out_t, w_t = mha(t(X_q), t(X_kv), mask=t(mask), need_weights=True)
    params = anp.MultiHeadParams(*(getattr(mha, n).detach().numpy() for n in
                                   ("W_q", "b_q", "W_k", "b_k", "W_v", "b_v", "W_o", "b_o")))
    out_n, w_n = anp.multi_head_attention(X_q, X_kv, params, 2, mask)
    np.testing.assert_allclose(out_t.detach().numpy(), out_n, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w_t.detach().numpy(), w_n, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kdim", [None, 6])
def test_mha_matches_torch_multihead_attention(kdim):
    theirs = randomise(torch.nn.MultiheadAttention(8, 2, batch_first=True, kdim=kdim, vdim=kdim))
    ours = at.MultiHeadAttention(8, 2, d_kv=kdim)
    copy_mha_from_torch(ours, theirs)
    X_q = t(rng.normal(size=(3, 5, 8)))
    X_kv = X_q if kdim is None else t(rng.normal(size=(3, 7, 6)))
    T_k = X_kv.shape[1]
    pad = torch.ones(3, T_k, dtype=torch.bool)
    pad[1, -2:] = False
    out, w = ours(X_q, X_kv, mask=pad[:, None, :], need_weights=True)
    ref, ref_w = theirs(X_q, X_kv, X_kv, key_padding_mask=~pad, average_attn_weights=False)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(w, ref_w)
    if kdim is None:  # causal self-attention, through the fused path and the explicit one
        causal = at.causal_mask(5)
        ref_c, _ = theirs(X_q, X_q, X_q, attn_mask=~causal)
        torch.testing.assert_close(ours(X_q, causal=True)[0], ref_c)
        torch.testing.assert_close(ours(X_q, causal=True, need_weights=True)[0], ref_c)
    np.testing.assert_allclose(ours.W_q.detach().numpy(), multihead_params_from_torch(theirs).W_q)


def test_layer_norm_matches_torch():
    x = t(rng.normal(size=(2, 3, 8)) * 5 + 2)
    ln = randomise(at.LayerNorm(8))
    ref = F.layer_norm(x, (8,), ln.gamma, ln.beta, 1e-5)
    torch.testing.assert_close(ln(x), ref)
    y = at.layer_norm(x, torch.ones(8), torch.zeros(8))
    torch.testing.assert_close(y.mean(-1), torch.zeros(2, 3), atol=1e-12, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(2, 3), atol=1e-4, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_block_matches_torch(norm_first, activation):
    theirs = randomise(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=activation,
                                                        batch_first=True, norm_first=norm_first)).eval()
    ours = at.EncoderBlock(8, 2, 16, norm_first=norm_first, activation=activation)
    copy_encoder_block_from_torch(ours, theirs)
    x = t(rng.normal(size=(2, 5, 8)))
    pad = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    torch.testing.assert_close(ours(x, pad[:, None, :]), theirs(x, src_key_padding_mask=~pad))
    causal = at.causal_mask(5)
    torch.testing.assert_close(ours(x, causal=True), theirs(x, src_mask=~causal))


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_matches_torch(norm_first):
    theirs = randomise(torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                                        norm_first=norm_first)).eval()
    ours = at.DecoderBlock(8, 2, 16, norm_first=norm_first)
    copy_decoder_block_from_torch(ours, theirs)
    x, memory = t(rng.normal(size=(2, 4, 8))), t(rng.normal(size=(2, 6, 8)))
    mem_pad = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    causal = at.causal_mask(4)
    ref = theirs(x, memory, tgt_mask=~causal, memory_key_padding_mask=~mem_pad)
    torch.testing.assert_close(ours(x, memory, memory_mask=mem_pad[:, None, :]), ref)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")  # PyTorch's note about a fast path it skips
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_decoder_stacks_match_torch_transformer(norm_first):
    theirs = randomise(torch.nn.Transformer(8, 2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16,
                                            dropout=0.0, batch_first=True, norm_first=norm_first)).eval()
    encoder = at.Encoder(2, 8, 2, 16, norm_first=norm_first)
    decoder = at.Decoder(2, 8, 2, 16, norm_first=norm_first)
    copy_transformer_from_torch(encoder, decoder, theirs)
    src, tgt = t(rng.normal(size=(2, 6, 8))), t(rng.normal(size=(2, 4, 8)))
    src_pad = torch.tensor([[True] * 6, [True] * 5 + [False]])
    causal = at.causal_mask(4)
    ref = theirs(src, tgt, tgt_mask=~causal, src_key_padding_mask=~src_pad, memory_key_padding_mask=~src_pad)
    memory = encoder(src, src_pad[:, None, :])
    torch.testing.assert_close(decoder(tgt, memory, memory_mask=src_pad[:, None, :]), ref)


def test_linear_and_feedforward_match_torch():
    lin = randomise(at.Linear(4, 3))
    x = t(rng.normal(size=(5, 4)))
    torch.testing.assert_close(lin(x), F.linear(x, lin.W.T, lin.b))
    ff = randomise(at.FeedForward(4, 8, activation="gelu_tanh"))
    ref = F.linear(F.gelu(F.linear(x, ff.fc1.W.T, ff.fc1.b), approximate="tanh"), ff.fc2.W.T, ff.fc2.b)
    torch.testing.assert_close(ff(x), ref)
    with pytest.raises(ValueError, match="activation must be one of"):
        at.FeedForward(4, 8, activation="swish")


def test_mha_module_names_the_shapes_it_got():
    mha = at.MultiHeadAttention(8, 2)
    expected = r"X_q must have shape \(\.\.\., T_q, 8\) to match W_q \(8, 8\); got \(2, 3, 7\)"
    with pytest.raises(ValueError, match=expected):
        mha(torch.ones(2, 3, 7))
    with pytest.raises(ValueError, match=r"X_kv must have shape \(\.\.\., T_k, 8\).*got \(2, 4, 5\)"):
        mha(torch.ones(2, 3, 8), torch.ones(2, 4, 5), causal=True)
