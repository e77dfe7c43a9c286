"""The Llama-style GPT against Hugging Face's ``LlamaForCausalLM`` (chapter 22): weights copied by
``gpt_from_llama`` from a randomly initialised Llama (no download), grouped-query heads, tied and untied
output layers, two rotary bases; logits compared to float64 precision."""

import inspect
import types

import pytest
import torch

import attnbook.torch as at
from attnbook.interop import gpt_from_llama


def llama_config(tied: bool, base: float = 10000.0, **kw):
    from transformers import LlamaConfig

    # transformers 5 takes the rotary base in rope_parameters, transformers 4 as rope_theta.
    if "rope_parameters" in inspect.signature(LlamaConfig.__init__).parameters:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": base}
    else:
        kw["rope_theta"] = base
    return LlamaConfig(vocab_size=53, hidden_size=32, intermediate_size=72, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=kw.pop("num_key_value_heads", 2),
                       max_position_embeddings=24, rms_norm_eps=1e-6, tie_word_embeddings=tied, **kw)


def small_llama(tied: bool, base: float = 10000.0, seed: int = 0, **kw):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config(tied, base, **kw)).double().eval()
    with torch.no_grad():  # larger weights than the initialisation's, and gains away from 1, so every part counts
        for name, p in model.named_parameters():
            p.copy_(1.0 + 0.3 * torch.randn_like(p) if name.endswith("norm.weight") else 0.3 * torch.randn_like(p))
    return model


def in_float64(hf, base: float):
    """Hugging Face's Llama computes its RMSNorm and its rotary cosines and sines in float32 whatever the
    model's dtype. Evaluate those two pieces in float64, the same formulas written out, so that the
    comparison is at float64's precision; everything else (projections, grouped heads, attention, SwiGLU,
    residuals, the output layer) is Hugging Face's own code."""
    for module in hf.modules():
        if type(module).__name__ == "LlamaRMSNorm":
            module.forward = types.MethodType(lambda self, x: self.weight * (
                x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)), module)
        elif type(module).__name__ == "LlamaRotaryEmbedding":
            d_head = hf.config.hidden_size // hf.config.num_attention_heads
            inv_freq = 1.0 / base ** (torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)

            def forward(self, x, position_ids, inv_freq=inv_freq):
                angles = position_ids[..., None].double() * inv_freq  # (B, T, d_head/2)
                angles = torch.cat([angles, angles], dim=-1)  # rotate-half: pair i is (i, i + d_head/2)
                return angles.cos().to(x.dtype), angles.sin().to(x.dtype)

            module.forward = types.MethodType(forward, module)
    return hf


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_gpt_from_llama_gives_llamas_logits_in_float64(tied, base):
    hf = small_llama(tied, base)
    ours = gpt_from_llama(hf).eval()
    c = ours.config
    assert (c.norm, c.activation, c.bias, c.positions, c.n_kv_heads, c.tie_embeddings, c.rope_base) == (
        "rms", "swiglu", False, "rotary", 2, tied, base)
    assert (ours.head is None) == tied and ours.n_params() == sum(p.numel() for p in hf.parameters())
    ids = torch.randint(0, 53, (3, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = in_float64(hf, base)(ids).logits
        got = ours(ids)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


def test_gpt_from_llama_matches_llama_as_it_runs_and_generates():
    # Hugging Face's own float32 norms and tables, untouched: agreement to float32's precision.
    hf = small_llama(tied=False, num_key_value_heads=1)  # multi-query attention: one key-value head
    ours = gpt_from_llama(hf).eval()
    ids = torch.randint(0, 53, (2, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(ids).logits, atol=1e-5, rtol=1e-5)
    prompt = ids[:1, :4]
    hf_out = hf.generate(prompt, max_new_tokens=10, do_sample=False, pad_token_id=0,
                         attention_mask=torch.ones_like(prompt))
    assert torch.equal(at.generate(ours, prompt, 10, greedy=True), hf_out)


def test_the_rotary_pairs_are_hugging_faces_rotate_half():
    # HF's rotate_half is the package's: (x1, x2) -> (-x2, x1), so q and k rows copy without a permutation.
    from transformers.models.llama.modeling_llama import rotate_half

    x = torch.randn(2, 3, 8, dtype=torch.float64)
    assert torch.equal(at.rotary.rotate_half(x), rotate_half(x))


def test_gpt_from_llama_refuses_what_the_gpt_cannot_hold():
    from transformers import LlamaForCausalLM

    for kw, message in (({"attention_bias": True}, "attention_bias"), ({"hidden_act": "gelu"}, "hidden_act"),
                        ({"head_dim": 16}, "head_dim")):
        with pytest.raises(ValueError, match=message):
            gpt_from_llama(LlamaForCausalLM(llama_config(True, **kw)))
    scaled = llama_config(True)
    if hasattr(scaled, "rope_parameters") and scaled.rope_parameters:
        scaled.rope_parameters = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    else:
        scaled.rope_scaling = {"rope_type": "linear", "factor": 2.0}
    with pytest.raises(ValueError, match="rope_type"):
        gpt_from_llama(LlamaForCausalLM(scaled))
