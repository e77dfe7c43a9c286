"""Layers and paths checked against an independent oracle: torch.nn modules holding copied weights,
a fixed dropout mask, the uncached forward pass, a FLOP counter."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import attnbook.numpy as anp
import attnbook.torch as at
from attnbook.interop import copy_mha_from_torch, copy_norm
from attnbook.torch.flops import flops_per_token

pytestmark = pytest.mark.usefixtures("float64")  # compare in float64 (tests/conftest.py)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def randomise(module, seed=0):
    """Random values in every parameter, biases and norms included, so that none can hide."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return module


@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_nn_linear_with_copied_weights(bias):
    theirs = randomise(nn.Linear(5, 3, bias=bias))
    ours = at.Linear(5, 3, bias=bias)
    with torch.no_grad():
        ours.W.copy_(theirs.weight.T)  # row convention: (d_in, d_out)
        if bias:
            ours.b.copy_(theirs.bias)
    x = randn(2, 4, 5, seed=1)
    torch.testing.assert_close(ours(x), theirs(x))


@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_matches_nn_layer_norm_with_copied_weights(bias):
    theirs = randomise(nn.LayerNorm(8, eps=1e-5, bias=bias))
    ours = at.LayerNorm(8, 1e-5, bias)
    copy_norm(ours, theirs)
    x = randn(2, 3, 8, seed=2) * 5 + 2
    torch.testing.assert_close(ours(x), theirs(x))
    back = randomise(nn.LayerNorm(8, bias=bias), seed=9)  # and the other way round
    copy_norm(back, ours)
    torch.testing.assert_close(back(x), theirs(x))


def test_hand_written_layer_norm_with_random_scale_and_shift():
    x = randn(4, 6, seed=3) * 3 - 1
    gamma, beta = randn(6, seed=4), randn(6, seed=5)
    torch.testing.assert_close(at.layer_norm(x, gamma, beta), F.layer_norm(x, (6,), gamma, beta, 1e-5))
    np.testing.assert_allclose(anp.backprop.layer_norm_forward(x.numpy(), gamma.numpy(), beta.numpy())[0],
                               F.layer_norm(x, (6,), gamma, beta, 1e-5).numpy(), atol=1e-12)


def test_feed_forward_matches_torch_nn_with_copied_weights():
    ours = randomise(at.FeedForward(4, 8, activation="gelu_tanh"))
    theirs = nn.Sequential(nn.Linear(4, 8), nn.GELU(approximate="tanh"), nn.Linear(8, 4))
    with torch.no_grad():
        for lin, fc in ((theirs[0], ours.fc1), (theirs[2], ours.fc2)):
            lin.weight.copy_(fc.W.T)
            lin.bias.copy_(fc.b)
    x = randn(3, 4, seed=6)
    torch.testing.assert_close(ours(x), theirs(x))


def _reference_heads(theirs: nn.MultiheadAttention, x: torch.Tensor, n_heads: int):
    """Queries, keys and values per head, computed from torch's packed weights."""
    w_q, w_k, w_v = theirs.in_proj_weight.split(theirs.embed_dim)
    b_q, b_k, b_v = theirs.in_proj_bias.split(theirs.embed_dim)
    return [at.split_heads(F.linear(x, w, b), n_heads) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v))]


def test_attention_dropout_against_a_fixed_mask():
    """The weights returned in training mode are the reference weights, zeroed where dropped and scaled by
    1 / (1 - p) elsewhere; the output is the product of exactly those weights with V."""
    d, h, p = 16, 4, 0.25
    theirs = randomise(nn.MultiheadAttention(d, h, batch_first=True)).eval()
    ours = at.MultiHeadAttention(d, h, dropout=p)
    copy_mha_from_torch(ours, theirs)
    x = randn(2, 48, d, seed=7)
    _, ref_weights = theirs(x, x, x, need_weights=True, average_attn_weights=False)  # (B, h, T, T), no dropout
    torch.manual_seed(0)
    out, dropped = ours.train()(x, need_weights=True)
    kept = dropped != 0  # the dropout mask this call drew
    assert abs(1 - kept.double().mean().item() - p) < 0.02  # about a quarter of the weights dropped
    torch.testing.assert_close(dropped, torch.where(kept, ref_weights / (1 - p), 0.0))
    _, _, v = _reference_heads(theirs, x, h)
    expected = theirs.out_proj(at.merge_heads(dropped @ v))
    torch.testing.assert_close(out, expected)
    # The fused kernel draws the same mask from the same seed: the same output without the weights.
    torch.manual_seed(0)
    torch.testing.assert_close(ours(x)[0], out)
    # In evaluation mode nothing is dropped.
    torch.testing.assert_close(ours.eval()(x)[0], theirs(x, x, x)[0])


@pytest.mark.parametrize("n_kv_heads", [None, 2])
def test_cache_with_a_padding_mask_matches_the_uncached_pass(n_kv_heads):
    d, h, T = 16, 4, 7
    mha = randomise(at.MultiHeadAttention(d, h, n_kv_heads=n_kv_heads)).eval()
    x = randn(3, T, d, seed=8)
    pad = at.padding_mask(torch.tensor([7, 5, 2]), T)  # (B, 1, T): the last keys of rows 1 and 2 are padding
    full = mha(x, mask=pad, causal=True)[0]
    cache = at.KVCache()
    first = mha(x[:, :4], mask=pad[..., :4], causal=True, cache=cache)[0]
    rest = mha(x[:, 4:], mask=pad, causal=True, cache=cache)[0]  # the new queries see all 7 keys
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full)
    torch.testing.assert_close(full, mha(x, mask=pad, causal=True, need_weights=True)[0])  # explicit path


def test_padding_masks_take_the_fused_kernel_and_agree_with_the_explicit_path():
    d, h = 16, 4
    mha = randomise(at.MultiHeadAttention(d, h)).eval()
    x, memory = randn(2, 5, d, seed=10), randn(2, 6, d, seed=11)
    pad = at.padding_mask(torch.tensor([6, 3]), 6)
    out, weights = mha(x, memory, mask=pad, need_weights=True)
    torch.testing.assert_close(mha(x, memory, mask=pad)[0], out)
    assert bool((weights[1, :, :, 3:] == 0).all())  # padded keys get no weight


def test_learned_positions_set_to_the_sinusoids_reproduce_the_sinusoidal_model():
    """``positions="learned"`` swaps only the position table: given the sinusoidal values, the same model."""
    kw = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=16, n_heads=2, max_len=12)
    sinusoidal = at.EncoderDecoderTransformer(at.TransformerConfig(**kw)).eval()
    learned = at.EncoderDecoderTransformer(at.TransformerConfig(**kw, positions="learned")).eval()
    assert isinstance(learned.positions, at.LearnedPositions)
    assert "positions.P" in dict(learned.named_parameters())  # trained, not a buffer
    state = {k: v for k, v in sinusoidal.state_dict().items() if k != "positions.P"}
    learned.load_state_dict(state | {"positions.P": sinusoidal.positions.P.clone()})
    src, tgt = torch.randint(1, 11, (2, 9)), torch.randint(1, 13, (2, 6))
    torch.testing.assert_close(learned(src, tgt), sinusoidal(src, tgt))
    learned.load_state_dict(state | {"positions.P": torch.zeros(12, 16)})
    assert not torch.allclose(learned(src, tgt), sinusoidal(src, tgt))  # the table does matter


@pytest.mark.parametrize("our_bias", [True, False])
def test_interop_copies_a_bias_free_torch_attention(our_bias):
    theirs = randomise(nn.MultiheadAttention(8, 2, bias=False, batch_first=True)).eval()
    assert theirs.in_proj_bias is None
    ours = randomise(at.MultiHeadAttention(8, 2, bias=our_bias)).eval()
    copy_mha_from_torch(ours, theirs)  # our biases, if any, become zeros
    x, z = randn(2, 3, 8, seed=12), randn(2, 5, 8, seed=13)
    torch.testing.assert_close(ours(x, z)[0], theirs(x, z, z)[0])


def test_benchmark_flop_count_matches_torch_flop_counter():
    """``flops_per_token`` (6 per weight plus 12 L d T) against PyTorch's count of one training step."""
    torch.manual_seed(0)
    model = at.GPT(at.GPTConfig(vocab_size=65, block_size=32, n_layers=2, n_heads=4, d_model=32))
    ids = torch.randint(65, (1, 32))
    # The math backend runs attention as matrix products, which the counter sees (the fused kernel it skips).
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
    assert counter.get_total_flops() / 32 == flops_per_token(model)
