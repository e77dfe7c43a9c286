"""The modern block (chapter 22): RMSNorm, SwiGLU, the Llama-style GPT, each against an oracle."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
from attnbook.bench import MODERN_ARMS
from attnbook.bench import main as bench_main
from attnbook.torch import (
    GPT,
    FeedForward,
    GPTConfig,
    KVCache,
    LayerNorm,
    RMSNorm,
    SwiGLU,
    generate,
    rms_norm,
    swiglu,
    swiglu_hidden,
)
from attnbook.torch.rmsnorm import make_norm
from attnbook.training.lm import GPTRunConfig, load_gpt, preset, train_gpt

# RMSNorm


@pytest.mark.parametrize("eps", [1e-5, 1e-6, 0.1])
def test_rms_norm_matches_torch_nn_rmsnorm_with_copied_weights(eps):
    torch.manual_seed(0)
    x = torch.randn(3, 5, 16) * 4 + 1.5
    theirs = torch.nn.RMSNorm(16, eps=eps)
    with torch.no_grad():
        theirs.weight.copy_(torch.randn(16))
    ours = RMSNorm(16, eps)
    with torch.no_grad():
        ours.gamma.copy_(theirs.weight)
    torch.testing.assert_close(rms_norm(x, ours.gamma, eps), theirs(x))
    torch.testing.assert_close(ours(x), theirs(x))
    # gradients too: the module's fused kernel and torch.nn's agree on the backward pass
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours(xa).pow(2).sum().backward()
    theirs(xb).pow(2).sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad)
    torch.testing.assert_close(ours.gamma.grad, theirs.weight.grad)


def test_rms_norm_matches_the_formula_written_out():
    rng = np.random.default_rng(1)
    x, gamma, eps = rng.normal(size=(4, 7)) * 3, rng.normal(size=7), 1e-5
    want = np.empty_like(x)
    for i, row in enumerate(x):  # one vector at a time, with a Python sum
        rms = math.sqrt(sum(v * v for v in row) / len(row) + eps)
        want[i] = [v / rms * g for v, g in zip(row, gamma, strict=True)]
    np.testing.assert_allclose(anp.rms_norm(x, gamma, eps), want, rtol=1e-12)
    np.testing.assert_allclose(rms_norm(torch.tensor(x), torch.tensor(gamma), eps).numpy(), want, rtol=1e-12)


def test_rms_norm_numpy_and_torch_twins_agree():
    rng = np.random.default_rng(2)
    for shape in ((8,), (2, 3, 8)):
        x, gamma = rng.normal(size=shape), rng.normal(size=8)
        np.testing.assert_allclose(anp.rms_norm(x, gamma), rms_norm(torch.tensor(x), torch.tensor(gamma)).numpy(),
                                   rtol=1e-12, atol=1e-14)


def test_rms_norm_is_layer_norm_on_centred_vectors_without_bias():
    torch.manual_seed(3)
    x = torch.randn(5, 12, dtype=torch.float64)
    centred = x - x.mean(-1, keepdim=True)
    ln = torch.nn.LayerNorm(12, bias=False, dtype=torch.float64)
    with torch.no_grad():
        ln.weight.copy_(torch.randn(12))
    torch.testing.assert_close(rms_norm(centred, ln.weight), ln(centred))
    assert not torch.allclose(rms_norm(x + 2.0, ln.weight), ln(x + 2.0))  # a shift LayerNorm removes


def test_rms_norm_refuses_a_gamma_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"gamma must have shape \(d,\).*\(2, 4\).*\(3,\)"):
        rms_norm(torch.ones(2, 4), torch.ones(3))
    with pytest.raises(ValueError, match="gamma must have shape"):
        anp.rms_norm(np.ones((2, 4)), np.ones(5))
    with pytest.raises(ValueError, match="torch.Tensor"):
        rms_norm(np.ones((2, 4)), torch.ones(4))
    with pytest.raises(ValueError, match="norm must be 'layer' or 'rms'"):
        make_norm("batch", 4)


# SwiGLU


def _swiglu_by_hand(x, W1, W3, W2):
    gate = x @ W1
    return ((gate * torch.sigmoid(gate)) * (x @ W3)) @ W2  # silu(z) = z sigmoid(z), written out


def test_swiglu_matches_the_direct_formula_and_the_module():
    torch.manual_seed(4)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    W1, W3, W2 = (torch.randn(8, 12, dtype=torch.float64), torch.randn(8, 12, dtype=torch.float64),
                  torch.randn(12, 8, dtype=torch.float64))
    torch.testing.assert_close(swiglu(x, W1, W3, W2), _swiglu_by_hand(x, W1, W3, W2))
    module = SwiGLU(8, 12).double()
    with torch.no_grad():
        module.fc1.W.copy_(W1)
        module.fc3.W.copy_(W3)
        module.fc2.W.copy_(W2)
    torch.testing.assert_close(module(x), _swiglu_by_hand(x, W1, W3, W2))
    np.testing.assert_allclose(anp.swiglu(x.numpy(), W1.numpy(), W3.numpy(), W2.numpy()),
                               _swiglu_by_hand(x, W1, W3, W2).numpy(), rtol=1e-10, atol=1e-12)


def test_swiglu_with_biases_adds_them_where_the_linear_layers_do():
    torch.manual_seed(5)
    module = SwiGLU(6, 10, bias=True)
    x = torch.randn(3, 6)
    a, b = module.fc1(x), module.fc3(x)
    torch.testing.assert_close(module(x), (F.silu(x @ module.fc1.W + module.fc1.b) * (x @ module.fc3.W + module.fc3.b))
                               @ module.fc2.W + module.fc2.b)
    assert a.shape == b.shape == (3, 10)


def test_swiglu_refuses_mismatched_weights():
    with pytest.raises(ValueError, match="W1 and W3 \\(d_model, d_ff\\)"):
        swiglu(torch.ones(2, 4), torch.ones(4, 6), torch.ones(4, 5), torch.ones(6, 4))
    with pytest.raises(ValueError, match="W2 \\(d_ff, d_model\\)"):
        anp.swiglu(np.ones((2, 4)), np.ones((4, 6)), np.ones((4, 6)), np.ones((4, 6)))


@pytest.mark.parametrize("d_model", [1, 3, 32, 128, 4096])
def test_swiglu_hidden_matches_the_weights_of_the_gelu_mlp(d_model):
    h = swiglu_hidden(d_model)
    gelu = sum(p.numel() for p in FeedForward(d_model, 4 * d_model, "gelu", bias=False).parameters())
    gated = sum(p.numel() for p in SwiGLU(d_model, h).parameters())
    assert abs(gated - gelu) <= 1.5 * d_model  # rounding h by at most 1/2 moves 3 d_model h by at most 1.5 d_model
    assert all(abs(gated - gelu) <= abs(3 * d_model * k - gelu) for k in (h - 1, h + 1))  # the nearest width


# The GPT's options


def test_gpt_options_are_validated():
    with pytest.raises(ValueError, match="norm must be one of 'layer', 'rms'; got 'batch'"):
        GPTConfig(vocab_size=10, norm="batch")
    with pytest.raises(ValueError, match="activation must be one of .*'swiglu'.*got 'swish'"):
        GPTConfig(vocab_size=10, activation="swish")
    with pytest.raises(ValueError, match="activation must be one of"):
        GPTRunConfig(activation="geglu")
    assert GPTConfig(vocab_size=10, d_model=128, activation="swiglu").ff_width == swiglu_hidden(128) == 341
    assert GPTConfig(vocab_size=10, d_model=128, activation="swiglu", d_ff=384).ff_width == 384
    assert GPTConfig(vocab_size=10, d_model=128).ff_width == 512


def test_the_default_gpt_is_the_gpt2_layout():
    torch.manual_seed(6)
    a = GPT(GPTConfig(vocab_size=17, n_layers=2, d_model=16, n_heads=2))
    torch.manual_seed(6)
    b = GPT(GPTConfig(vocab_size=17, n_layers=2, d_model=16, n_heads=2, norm="layer", activation="gelu_tanh"))
    assert all(isinstance(m, LayerNorm) for m in (a.norm, a.blocks[0].norm1, a.blocks[0].norm3))
    assert isinstance(a.blocks[0].ff, FeedForward)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _llama(**overrides) -> GPT:
    torch.manual_seed(7)
    config = dict(vocab_size=19, block_size=16, n_layers=2, n_heads=4, n_kv_heads=2, d_model=16, norm="rms",
                  activation="swiglu", bias=False, eps=1e-6, positions="rotary")
    m = GPT(GPTConfig(**{**config, **overrides}))
    with torch.no_grad():  # larger weights than the initialisation, gammas away from 1
        for p in m.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return m.eval()


def _rotate(x: torch.Tensor) -> torch.Tensor:
    """Rotary positions written out (rotate-half form, base 10000): pair (i, i + d/2) of row t turned by
    t * 10000^(-2i/d)."""
    T, d = x.shape[-2:]
    angles = torch.arange(T, dtype=x.dtype)[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    cos, sin = torch.cos(angles), torch.sin(angles)  # (T, d/2)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def _by_hand(m: GPT, ids: torch.Tensor) -> torch.Tensor:
    """The Llama-style GPT assembled from torch.nn.functional, reading the model's weights."""
    c = m.config
    d_head, B, T = c.d_model // c.n_heads, *ids.shape
    x = F.embedding(ids, m.tok.E)
    if c.positions == "learned":
        x = x + m.pos.P[:T]
    for blk in m.blocks:
        at = blk.self_attn
        h = F.rms_norm(x, (c.d_model,), blk.norm1.gamma, c.eps)
        q = (h @ at.q_proj.W).view(B, T, c.n_heads, d_head).transpose(1, 2)
        k = (h @ at.k_proj.W).view(B, T, c.n_kv_heads, d_head).transpose(1, 2)
        v = (h @ at.v_proj.W).view(B, T, c.n_kv_heads, d_head).transpose(1, 2)
        if c.positions == "rotary":
            q, k = _rotate(q), _rotate(k)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + o.transpose(1, 2).reshape(B, T, c.d_model) @ at.out_proj.W
        h = F.rms_norm(x, (c.d_model,), blk.norm3.gamma, c.eps)
        x = x + (F.silu(h @ blk.ff.fc1.W) * (h @ blk.ff.fc3.W)) @ blk.ff.fc2.W
    return F.rms_norm(x, (c.d_model,), m.norm.gamma, c.eps) @ m.tok.E.T


def test_the_llama_style_gpt_matches_a_hand_assembled_reference():
    m = _llama()
    assert m.pos is None  # rotary positions: no table
    assert not any(name.endswith(".b") or "beta" in name for name, _ in m.named_parameters())
    assert all(isinstance(blk.ff, SwiGLU) and isinstance(blk.norm1, RMSNorm) for blk in m.blocks)
    ids = torch.randint(19, (3, 16))
    torch.testing.assert_close(m(ids), _by_hand(m, ids), atol=1e-5, rtol=1e-5)


def test_each_option_alone_matches_the_reference_where_it_applies():
    for overrides in ({"n_kv_heads": 4}, {"positions": "learned"}, {"n_kv_heads": 1, "positions": "learned"}):
        m = _llama(**overrides)
        ids = torch.randint(19, (2, 9))
        torch.testing.assert_close(m(ids), _by_hand(m, ids), atol=1e-5, rtol=1e-5)


def test_the_llama_style_gpt_caches_and_generates_as_without_the_cache():
    m = _llama()
    ids = torch.randint(19, (2, 14))
    cache = KVCache()
    parts = [m(ids[:, :4], cache=cache), m(ids[:, 4:5], cache=cache), m(ids[:, 5:], cache=cache)]
    torch.testing.assert_close(torch.cat(parts, 1), m(ids), atol=1e-5, rtol=1e-5)
    prompt = torch.randint(19, (2, 3))
    runs = [generate(m, prompt, 20, greedy=True, use_cache=c) for c in (False, True)]
    assert torch.equal(runs[0], runs[1])


def test_the_initialisation_scales_swiglus_output_projection_as_gpt2s():
    torch.manual_seed(8)
    m = GPT(GPTConfig(vocab_size=19, n_layers=8, d_model=64, norm="rms", activation="swiglu", bias=False))
    std = {name: p.std().item() for name, p in m.named_parameters()}
    want = 0.02 / math.sqrt(2 * 8)
    assert std["blocks.0.ff.fc2.W"] == pytest.approx(want, rel=0.1)
    assert std["blocks.0.ff.fc1.W"] == pytest.approx(0.02, rel=0.1)
    assert std["blocks.0.ff.fc3.W"] == pytest.approx(0.02, rel=0.1)
    assert all(torch.equal(p, torch.ones_like(p)) for name, p in m.named_parameters() if "gamma" in name)


# Training and checkpoints


def test_a_modern_run_saves_resumes_and_loads_its_options(word_text, tmp_path):
    config = preset("tiny", progress=False, steps=16, eval_every=8, norm="rms", activation="swiglu", bias=False,
                    n_kv_heads=1, positions="rotary")
    whole = train_gpt(config, text=word_text)
    b = replace(config, out_dir=str(tmp_path))
    train_gpt(b, text=word_text, stop_after=8)
    resumed = train_gpt(b, text=word_text, resume=True)
    sa, sb = resumed.model.state_dict(), whole.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sb)
    model, _ = load_gpt(tmp_path / "ckpt.pt")
    assert (model.config.norm, model.config.activation, model.config.bias, model.config.positions) == (
        "rms", "swiglu", False, "rotary")
    assert isinstance(model.norm, RMSNorm) and isinstance(model.blocks[0].ff, SwiGLU)
    ids = torch.randint(whole.tokenizer.vocab_size, (2, 10))
    torch.testing.assert_close(model(ids), whole.model(ids))
    with pytest.raises(ValueError, match="norm: saved 'rms', requested 'layer'"):
        train_gpt(replace(b, norm="layer", steps=20), text=word_text, resume=True)


def test_the_bench_arms_are_valid_and_close_in_size():
    sizes = {arm: GPT(replace(preset("cpu-small"), **kw).model_config(65)).n_params()
             for arm, kw in MODERN_ARMS.items()}
    assert all(abs(n / sizes["gpt2"] - 1) < 0.01 for n in sizes.values())
    assert abs(sizes["llama"] / sizes["gpt2"] - 1) < 0.001
    with pytest.raises(SystemExit):
        bench_main(["modern", "--arms", "nonsense"])
