"""Whole models: GPT against GPT-2 (transformers), causality, gradient flow, decoding."""

import pytest
import torch

import attnbook.torch as at
from attnbook.interop import gpt_from_gpt2

pytestmark = pytest.mark.usefixtures("float64")  # compare in float64 (tests/conftest.py)


def small_gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=61, n_positions=32, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config).double().eval()
    with torch.no_grad():  # GPT-2 initialises biases and norms to 0 and 1; randomise them so they are tested
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                p.normal_(0.0, 0.1 if name.endswith("bias") else 1.0)
    return model


def test_gpt_reproduces_gpt2_logits_and_greedy_continuation():
    hf = small_gpt2()
    ours = gpt_from_gpt2(hf).eval()
    ids = torch.randint(0, 61, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = hf(ids).logits
    torch.testing.assert_close(ours(ids), ref, atol=1e-5, rtol=1e-5)
    prompt = ids[:1, :5]
    hf_out = hf.generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=0,
                         attention_mask=torch.ones_like(prompt))
    assert torch.equal(at.generate(ours, prompt, 12, greedy=True), hf_out)


def tiny_gpt(seed=0, **kw):
    torch.manual_seed(seed)
    return at.GPT(at.GPTConfig(vocab_size=17, block_size=16, n_layers=2, n_heads=2, d_model=16, **kw))


def test_gpt_is_causal():
    model = tiny_gpt().eval()
    ids = torch.randint(0, 17, (2, 12), generator=torch.Generator().manual_seed(2))
    changed = ids.clone()
    changed[:, 7:] = (changed[:, 7:] + 5) % 17
    a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def tiny_seq2seq(norm_first=False, seed=0):
    torch.manual_seed(seed)
    cfg = at.TransformerConfig(src_vocab_size=11, tgt_vocab_size=13, d_model=16, n_heads=2, n_encoder_layers=2,
                               n_decoder_layers=2, max_len=20, norm_first=norm_first)
    return at.EncoderDecoderTransformer(cfg)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_decoder_is_causal_in_the_target_and_ignores_source_padding(norm_first):
    model = tiny_seq2seq(norm_first).eval()
    src = torch.tensor([[3, 4, 5, 6, 0, 0], [7, 8, 9, 1, 2, 3]])
    tgt = torch.tensor([[1, 5, 6, 7, 8], [1, 2, 3, 4, 5]])
    logits = model(src, tgt)
    assert logits.shape == (2, 5, 13)
    tgt2 = tgt.clone()
    tgt2[:, 3:] = 9
    torch.testing.assert_close(model(src, tgt2)[:, :3], logits[:, :3])
    # Source padding is invisible: a longer tail of padding changes nothing.
    src_longer = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    src_longer[1, 6:] = 0
    torch.testing.assert_close(model(src_longer[:1], tgt[:1]), logits[:1])


@pytest.mark.parametrize("make", [tiny_gpt, tiny_seq2seq,
                                  lambda: at.EncoderOnlyTransformer(at.EncoderConfig(11, d_model=16, n_heads=2))])
def test_gradients_reach_every_parameter(make):
    model = make()
    if isinstance(model, at.EncoderDecoderTransformer):
        out = model(torch.tensor([[3, 4, 5, 0]]), torch.tensor([[1, 5, 6]]))
    else:
        out = model(torch.tensor([[3, 4, 5, 6]]))
    out.square().mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing, f"parameters without gradient: {missing}"


def test_greedy_decode_stops_and_pads_with_eos():
    model = tiny_seq2seq()
    out = at.greedy_decode(model, torch.tensor([[3, 4, 5], [6, 7, 8]]), bos_id=1, eos_id=2, max_len=8)
    assert out.shape[0] == 2 and out.shape[1] <= 8 and torch.all(out[:, 0] == 1)
    # Step by step, each token is the argmax of the model's prediction for the prefix so far.
    memory, src_mask = model.encode(torch.tensor([[3, 4, 5]]))
    for k in range(1, out.shape[1]):
        if out[0, k - 1] == 2:
            break
        assert out[0, k] == model.decode(out[:1, :k], memory, src_mask)[0, -1].argmax()


def test_sampling_rules():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
    assert at.sample_next(logits, greedy=True).item() == 0
    g = torch.Generator().manual_seed(0)
    draws = torch.cat([at.sample_next(logits, top_k=2, generator=g) for _ in range(400)])
    assert set(draws.flatten().tolist()) == {0, 1}  # only the two likeliest
    share = (draws == 0).double().mean().item()
    assert abs(share - torch.softmax(torch.tensor([2.0, 1.0]), 0)[0].item()) < 0.07
    cold = torch.cat([at.sample_next(logits, temperature=0.01, generator=g) for _ in range(50)])
    assert torch.all(cold == 0)
    with pytest.raises(ValueError, match="temperature must be positive"):
        at.sample_next(logits, temperature=0.0)
    with pytest.raises(ValueError, match="top_k must be between 1 and the vocabulary size 4; got 9"):
        at.sample_next(logits, top_k=9)


def test_configuration_and_input_errors():
    with pytest.raises(ValueError, match="d_model = 10 must be divisible by n_heads, .*; got n_heads = 3"):
        at.GPTConfig(vocab_size=5, d_model=10, n_heads=3)
    model = tiny_gpt()
    with pytest.raises(ValueError, match="sequence of length 17 is longer than block_size = 16"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 16\]; got values from 0 to 20"):
        model(torch.tensor([[0, 20]]))
    with pytest.raises(ValueError, match="token ids must be integer ids; got dtype torch.float64"):
        model(torch.zeros(1, 3))


def test_record_attention_returns_every_layers_weights_and_changes_nothing():
    model = tiny_seq2seq().eval()
    src, tgt = torch.tensor([[3, 4, 5, 0]]), torch.tensor([[1, 5, 6]])
    plain = model(src, tgt)
    with at.record_attention(model) as weights:
        recorded = model(src, tgt)
    torch.testing.assert_close(recorded, plain)
    assert set(weights) == {f"encoder.layers.{i}.attn" for i in range(2)} | {
        f"decoder.layers.{i}.{k}" for i in range(2) for k in ("self_attn", "cross_attn")}
    cross = weights["decoder.layers.0.cross_attn"]
    assert cross.shape == (1, 2, 3, 4)
    torch.testing.assert_close(cross.sum(-1), torch.ones(1, 2, 3))
    assert torch.all(cross[..., 3] == 0)  # the padded source position
    assert torch.all(weights["decoder.layers.1.self_attn"].triu(1) == 0)  # causal
    assert all(m.last_weights is None and not m.record for m in model.modules() if isinstance(m, at.MultiHeadAttention))
