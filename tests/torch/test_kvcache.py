"""The key-value cache gives what the model gives without it; the torch.nn reference computes the same GPT."""

import pytest
import torch

from attnbook.torch import GPT, GPTConfig, KVCache, generate, record_attention
from attnbook.torch.reference import TorchGPT, copy_gpt_to_torch


@pytest.fixture(params=[True, False], ids=["biases", "no-biases"])
def model(request):
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=23, block_size=24, n_layers=2, n_heads=4, d_model=32, activation="gelu",
                      bias=request.param))
    with torch.no_grad():  # larger weights than the initialisation, so tokens differ in their predictions
        for p in m.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return m.eval()


def test_cached_logits_equal_the_full_forward(model):
    ids = torch.randint(23, (3, 20))
    full = model(ids)  # (B, T, V)
    cache = KVCache()
    parts = [model(ids[:, :5], cache=cache)]  # a prompt of 5, then chunks of 1, 3 and 11 tokens
    for a, b in ((5, 6), (6, 9), (9, 20)):
        parts.append(model(ids[:, a:b], cache=cache))
    assert cache.length == 20
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-5)


def test_generation_with_and_without_cache_agree(model):
    prompt = torch.randint(23, (2, 4))
    for kwargs in ({"greedy": True}, {"temperature": 0.9, "top_k": 8}):
        # 30 new tokens: the text outgrows the context of 24, so the window slides too
        runs = [generate(model, prompt, 30, generator=torch.Generator().manual_seed(1), use_cache=c, **kwargs)
                for c in (False, True)]
        assert runs[0].shape == (2, 34)
        assert torch.equal(runs[0], runs[1])


def test_cache_changes_nothing_in_recorded_attention(model):
    ids = torch.randint(23, (1, 10))
    with record_attention(model) as full:
        model(ids)
    cache = KVCache()
    model(ids[:, :9], cache=cache)
    with record_attention(model) as last:
        model(ids[:, 9:], cache=cache)
    for name, w in last.items():
        assert w.shape == (1, 4, 1, 10)
        torch.testing.assert_close(w[:, :, 0], full[name][:, :, 9], atol=1e-6, rtol=1e-5)


def test_cache_errors_are_clear(model):
    cache = KVCache()
    model(torch.randint(23, (1, 20)), cache=cache)
    with pytest.raises(ValueError, match="after 20 cached tokens is longer than block_size = 24"):
        model(torch.randint(23, (1, 5)), cache=cache)
    attn = model.blocks[0].self_attn
    x = torch.randn(1, 3, 32)
    with pytest.raises(ValueError, match="self-attention only"):
        attn(x, torch.randn(1, 4, 32), cache=KVCache())


@pytest.mark.parametrize("bias", [True, False])
def test_torch_reference_computes_the_same_gpt(bias):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=30, block_size=16, n_layers=2, n_heads=4, d_model=32, activation="gelu", bias=bias)
    ours, ref = GPT(config), TorchGPT(config)
    with torch.no_grad():  # non-zero biases and norm parameters, so that copying them is tested
        for p in ours.parameters():
            p.add_(0.1 * torch.randn_like(p))
    copy_gpt_to_torch(ours, ref)
    assert sum(p.numel() for p in ref.parameters()) == ours.n_params()
    ids = torch.randint(30, (3, 16))
    torch.testing.assert_close(ref(ids), ours(ids), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ref(ids[:, :7]), ours(ids[:, :7]), atol=1e-5, rtol=1e-5)  # causal: shorter input
    with pytest.raises(ValueError, match="gelu_tanh"):
        TorchGPT(GPTConfig(vocab_size=30, activation="gelu_tanh"))
