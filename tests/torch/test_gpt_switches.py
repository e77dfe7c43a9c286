"""The architecture and training switches the speedrun measures (chapter 25), each against its definition:
ReLU squared, query-key normalisation, an untied output layer, and torch.compile's place in training."""

import math
import random
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from attnbook.torch import GPT, GPTConfig
from attnbook.torch.decoding import generate
from attnbook.torch.feedforward import FeedForward
from attnbook.torch.multihead import QK_NORM_EPS, MultiHeadAttention
from attnbook.torch.rotary import apply_rotary
from attnbook.training.lm import preset, train_gpt
from attnbook.training.muon import muon_parameters

_rng = random.Random(0)
TEXT = "\n".join(" ".join(_rng.choice("to be or not that is the question".split()) for _ in range(9))
                 for _ in range(400))


def small(**overrides) -> GPTConfig:
    return GPTConfig(vocab_size=23, d_model=32, n_heads=4, n_layers=2, block_size=16, **overrides)


def test_relu_squared_is_the_square_of_relu():
    torch.manual_seed(0)
    ff = FeedForward(8, 32, activation="relu2")
    x = torch.randn(3, 5, 8)
    hidden = x @ ff.fc1.W + ff.fc1.b
    expected = torch.where(hidden > 0, hidden * hidden, torch.zeros_like(hidden)) @ ff.fc2.W + ff.fc2.b
    torch.testing.assert_close(ff(x), expected)
    # Not ReLU: a hidden unit at 3 contributes 9 times its weight.
    assert not torch.allclose(ff(x), F.relu(hidden) @ ff.fc2.W + ff.fc2.b)


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + QK_NORM_EPS)


@pytest.mark.parametrize("rotary", [False, True])
def test_qk_norm_scores_are_those_of_normalised_queries_and_keys(rotary):
    torch.manual_seed(1)
    attn = MultiHeadAttention(16, 4, rotary=rotary, qk_norm=True)
    x = torch.randn(2, 6, 16)
    _, weights = attn(x, causal=True, need_weights=True)  # (2, 4, 6, 6)
    q = _rms((x @ attn.W_q + attn.b_q).view(2, 6, 4, 4).transpose(1, 2))
    k = _rms((x @ attn.W_k + attn.b_k).view(2, 6, 4, 4).transpose(1, 2))
    if rotary:  # normalised first, then rotated
        q, k = apply_rotary(q, torch.arange(6)), apply_rotary(k, torch.arange(6))
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), -math.inf)
    torch.testing.assert_close(weights, scores.softmax(-1))
    # The fused path gives the same output as the explicit one.
    torch.testing.assert_close(attn(x, causal=True)[0], attn(x, causal=True, need_weights=True)[0])
    # Without the switch the weights differ, so the comparison above could fail.
    plain = MultiHeadAttention(16, 4, rotary=rotary)
    plain.load_state_dict(attn.state_dict())
    assert not torch.allclose(plain(x, causal=True, need_weights=True)[1], weights, atol=1e-3)


def test_qk_norm_bounds_the_scores_however_large_the_projections():
    torch.manual_seed(2)
    attn = MultiHeadAttention(16, 2, qk_norm=True)
    with torch.no_grad():
        attn.q_proj.W.mul_(1000.0)
        attn.k_proj.W.mul_(1000.0)
    x = torch.randn(1, 8, 16)
    _, weights = attn(x, need_weights=True)
    # |q . k| / sqrt(d) <= |q| |k| / sqrt(d) = d / sqrt(d) for vectors of RMS 1: softmax ratios stay bounded.
    d = 8
    ratio = weights.max(-1).values / weights.min(-1).values
    assert ratio.max() <= math.exp(2 * math.sqrt(d)) * (1 + 1e-4)


def test_a_cached_qk_norm_model_generates_what_the_full_forward_pass_does():
    torch.manual_seed(3)
    model = GPT(small(qk_norm=True, positions="rotary")).eval()
    assert all(block.self_attn.qk_norm for block in model.blocks)
    start = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(model(start), model(start))  # deterministic in eval mode
    assert torch.equal(generate(model, start, 10, greedy=True), generate(model, start, 10, greedy=True, use_cache=True))


def test_an_untied_output_layer_is_a_matrix_of_its_own():
    torch.manual_seed(4)
    tied = GPT(small())
    untied = GPT(small(tie_embeddings=False))
    assert untied.n_params() - tied.n_params() == 32 * 23 and tied.head is None
    # Copying the embedding into the head gives back the tied model exactly.
    state = {**tied.state_dict(), "head.W": tied.tok.E.detach().T.clone()}
    untied.load_state_dict(state)
    ids = torch.randint(23, (2, 9))
    torch.testing.assert_close(untied(ids), tied(ids))
    # Then a gradient step moves the two apart: the embedding no longer receives the output's gradient.
    untied(ids).logsumexp(-1).sum().backward()
    tied(ids).logsumexp(-1).sum().backward()
    assert not torch.allclose(untied.tok.E.grad, tied.tok.E.grad)
    assert untied.head.W.grad is not None
    matrices, rest = muon_parameters(untied)
    assert any(p is untied.head.W for p in rest) and not any(p is untied.head.W for p in matrices)


def test_training_with_compile_calls_it_once_and_counts_its_time(monkeypatch):
    compiled = []

    def fake_compile(module, *args, **kwargs):  # stands in for the compiler: the same module, recorded
        compiled.append(module)
        return module

    monkeypatch.setattr(torch, "compile", fake_compile)
    config = preset("tiny", steps=6, eval_every=0, progress=False, device="cpu")
    plain = train_gpt(config, text=TEXT)
    with_compile = train_gpt(replace(config, compile=True), text=TEXT)
    assert len(compiled) == 1 and isinstance(compiled[0], GPT)
    assert [e["loss"] for e in plain.log] == [e["loss"] for e in with_compile.log]


def test_the_switches_train():
    config = preset("tiny", steps=100, eval_every=0, progress=False, device="cpu")
    for switch in ({"activation": "relu2"}, {"qk_norm": True}, {"tie_embeddings": False}):
        run = train_gpt(replace(config, **switch), text=TEXT)
        assert run.val_loss < math.log(run.tokenizer.vocab_size) - 0.3, switch
