"""Copying weights between attnbook's NumPy layers and ``torch.nn`` modules (used by tests and chapters).

PyTorch stores linear weights in the column convention, shape ``(out, in)``; attnbook keeps them in
the row convention, ``(in, out)``. Every copy therefore transposes.
"""

from __future__ import annotations

import numpy as np

from attnbook.numpy.multihead import MultiHeadParams


def multihead_params_from_torch(mha) -> MultiHeadParams:
    """The weights of a ``torch.nn.MultiheadAttention`` as ``MultiHeadParams`` (float64 NumPy arrays)."""

    def t(x) -> np.ndarray:
        return x.detach().cpu().double().numpy().copy()

    E = mha.embed_dim
    if mha.in_proj_weight is not None:
        W_q, W_k, W_v = (t(w).T for w in mha.in_proj_weight.split(E, dim=0))
    else:
        W_q, W_k, W_v = t(mha.q_proj_weight).T, t(mha.k_proj_weight).T, t(mha.v_proj_weight).T
    if mha.in_proj_bias is not None:
        b_q, b_k, b_v = (t(b) for b in mha.in_proj_bias.split(E))
    else:
        b_q = b_k = b_v = np.zeros(E)
    b_o = t(mha.out_proj.bias) if mha.out_proj.bias is not None else np.zeros(E)
    return MultiHeadParams(W_q, b_q, W_k, b_k, W_v, b_v, t(mha.out_proj.weight).T, b_o)


# --- PyTorch modules --------------------------------------------------------------------------------------

def _copy_linear_from_torch(ours, theirs_weight, theirs_bias) -> None:
    """Copy ``torch.nn.Linear``-style weights (``(out, in)``) into an attnbook ``Linear`` (``(in, out)``).

    A module without biases computes what zero biases compute, so our biases, if any, become zeros."""
    import torch

    with torch.no_grad():
        ours.W.copy_(theirs_weight.T)
        if ours.b is not None:
            ours.b.copy_(theirs_bias) if theirs_bias is not None else ours.b.zero_()


def copy_mha_from_torch(ours, mha) -> None:
    """Copy a ``torch.nn.MultiheadAttention`` into an attnbook ``MultiHeadAttention`` of the same sizes."""
    E = mha.embed_dim
    if mha.in_proj_weight is not None:
        weights = mha.in_proj_weight.split(E, dim=0)
    else:
        weights = (mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight)
    biases = mha.in_proj_bias.split(E) if mha.in_proj_bias is not None else (None, None, None)
    for lin, w, b in zip((ours.q_proj, ours.k_proj, ours.v_proj), weights, biases, strict=True):
        _copy_linear_from_torch(lin, w, b)
    _copy_linear_from_torch(ours.out_proj, mha.out_proj.weight, mha.out_proj.bias)


def _norm_parameters(norm) -> tuple:
    """The scale and shift of a layer norm, attnbook's (``gamma``, ``beta``) or torch's (``weight``, ``bias``)."""
    return (norm.gamma, norm.beta) if hasattr(norm, "gamma") else (norm.weight, norm.bias)


def copy_norm(dst, src) -> None:
    """Copy a layer norm's scale and shift from ``src`` to ``dst``, either of them attnbook's ``LayerNorm``
    or ``torch.nn.LayerNorm``. A missing shift (``bias=False``) is zero."""
    import torch

    with torch.no_grad():
        for d, s in zip(_norm_parameters(dst), _norm_parameters(src), strict=True):
            if d is not None:
                d.copy_(s) if s is not None else d.zero_()


def copy_encoder_block_from_torch(ours, layer) -> None:
    """Copy a ``torch.nn.TransformerEncoderLayer`` into an attnbook ``EncoderBlock``."""
    copy_mha_from_torch(ours.attn, layer.self_attn)
    _copy_linear_from_torch(ours.ff.fc1, layer.linear1.weight, layer.linear1.bias)
    _copy_linear_from_torch(ours.ff.fc2, layer.linear2.weight, layer.linear2.bias)
    copy_norm(ours.norm1, layer.norm1)
    copy_norm(ours.norm2, layer.norm2)


def copy_decoder_block_from_torch(ours, layer) -> None:
    """Copy a ``torch.nn.TransformerDecoderLayer`` into an attnbook ``DecoderBlock``."""
    copy_mha_from_torch(ours.self_attn, layer.self_attn)
    copy_mha_from_torch(ours.cross_attn, layer.multihead_attn)
    _copy_linear_from_torch(ours.ff.fc1, layer.linear1.weight, layer.linear1.bias)
    _copy_linear_from_torch(ours.ff.fc2, layer.linear2.weight, layer.linear2.bias)
    for k in (1, 2, 3):
        copy_norm(getattr(ours, f"norm{k}"), getattr(layer, f"norm{k}"))


def copy_transformer_from_torch(encoder, decoder, transformer) -> None:
    """Copy a ``torch.nn.Transformer`` into attnbook's ``Encoder`` and ``Decoder`` stacks."""
    for ours, theirs in zip(encoder.layers, transformer.encoder.layers, strict=True):
        copy_encoder_block_from_torch(ours, theirs)
    for ours, theirs in zip(decoder.layers, transformer.decoder.layers, strict=True):
        copy_decoder_block_from_torch(ours, theirs)
    copy_norm(encoder.norm, transformer.encoder.norm)
    copy_norm(decoder.norm, transformer.decoder.norm)


def gpt_from_gpt2(hf_model):
    """An attnbook ``GPT`` with the weights of a Hugging Face ``GPT2LMHeadModel``.

    GPT-2 stores its projections as ``Conv1D`` with weights of shape ``(in, out)``, the row convention,
    so they copy without a transpose; ``c_attn`` holds the query, key and value maps side by side.
    """
    import torch

    from attnbook.torch.transformer import GPT, GPTConfig

    hc = hf_model.config
    config = GPTConfig(vocab_size=hc.vocab_size, block_size=hc.n_positions, n_layers=hc.n_layer, n_heads=hc.n_head,
                       d_model=hc.n_embd, d_ff=hc.n_inner or 4 * hc.n_embd, activation="gelu_tanh",
                       eps=hc.layer_norm_epsilon)
    model = GPT(config).to(dtype=hf_model.dtype)
    t = hf_model.transformer
    d = hc.n_embd
    with torch.no_grad():
        model.tok.E.copy_(t.wte.weight)
        model.pos.P.copy_(t.wpe.weight)
        for ours, h in zip(model.blocks, t.h, strict=True):
            W_qkv, b_qkv = h.attn.c_attn.weight, h.attn.c_attn.bias  # (d, 3d), (3d,)
            for k, lin in enumerate((ours.self_attn.q_proj, ours.self_attn.k_proj, ours.self_attn.v_proj)):
                lin.W.copy_(W_qkv[:, k * d:(k + 1) * d])
                lin.b.copy_(b_qkv[k * d:(k + 1) * d])
            ours.self_attn.out_proj.W.copy_(h.attn.c_proj.weight)
            ours.self_attn.out_proj.b.copy_(h.attn.c_proj.bias)
            ours.ff.fc1.W.copy_(h.mlp.c_fc.weight)
            ours.ff.fc1.b.copy_(h.mlp.c_fc.bias)
            ours.ff.fc2.W.copy_(h.mlp.c_proj.weight)
            ours.ff.fc2.b.copy_(h.mlp.c_proj.bias)
            ours.norm1.gamma.copy_(h.ln_1.weight)
            ours.norm1.beta.copy_(h.ln_1.bias)
            ours.norm3.gamma.copy_(h.ln_2.weight)
            ours.norm3.beta.copy_(h.ln_2.bias)
        model.norm.gamma.copy_(t.ln_f.weight)
        model.norm.beta.copy_(t.ln_f.bias)
    return model


def _llama_rope_base(hc) -> float:
    """The rotary base of a Hugging Face ``LlamaConfig``: ``rope_parameters["rope_theta"]`` in transformers 5,
    ``rope_theta`` (with ``rope_scaling``) in transformers 4. Only plain rotary positions convert."""
    params = getattr(hc, "rope_parameters", None)
    if not params:  # transformers 4
        params = dict(getattr(hc, "rope_scaling", None) or {}, rope_theta=getattr(hc, "rope_theta", 10000.0))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind != "default":
        raise ValueError(f"only Llama's plain rotary positions convert (rope_type 'default'); this model's "
                         f"rope_type is {kind!r}, which rescales the frequencies")
    return float(params.get("rope_theta", 10000.0))


def gpt_from_llama(hf_model):
    """An attnbook ``GPT`` with the weights of a Hugging Face ``LlamaForCausalLM`` (chapter 22).

    Llama's block is the GPT's with ``norm="rms"``, ``activation="swiglu"``, ``bias=False`` and
    ``positions="rotary"``, ``n_kv_heads`` key-value heads and ``rope_base`` from its configuration, and the
    output layer tied or not as Llama's. Hugging Face's Llama rotates pairs ``(i, i + d_head/2)``, as the
    package does, so its query and key rows copy unpermuted (Meta's original checkpoints pair neighbours,
    and Hugging Face's conversion permutes their rows once). Its linear weights are ``(out, in)``, so every
    copy transposes. Refuses what the GPT cannot hold: biases, another activation, rescaled rotary
    frequencies, a head width other than ``hidden_size / num_attention_heads``.
    """
    import torch

    from attnbook.torch.transformer import GPT, GPTConfig

    hc = hf_model.config
    n_heads, d = hc.num_attention_heads, hc.hidden_size
    n_kv = getattr(hc, "num_key_value_heads", None) or n_heads
    head_dim = getattr(hc, "head_dim", None) or d // n_heads
    problems = [what for what, bad in (
        (f"head_dim {head_dim} (the GPT's is hidden_size / num_attention_heads = {d // n_heads})",
         head_dim * n_heads != d),
        ("attention_bias=True", getattr(hc, "attention_bias", False)),
        ("mlp_bias=True", getattr(hc, "mlp_bias", False)),
        (f"hidden_act {hc.hidden_act!r} (the GPT's SwiGLU uses 'silu')", hc.hidden_act != "silu")) if bad]
    if problems:
        raise ValueError("this Llama does not convert to a GPT: " + "; ".join(problems))
    config = GPTConfig(vocab_size=hc.vocab_size, block_size=hc.max_position_embeddings,
                       n_layers=hc.num_hidden_layers, n_heads=n_heads, d_model=d, d_ff=hc.intermediate_size,
                       activation="swiglu", eps=hc.rms_norm_eps, bias=False, n_kv_heads=n_kv, norm="rms",
                       positions="rotary", tie_embeddings=bool(hc.tie_word_embeddings), rope_base=_llama_rope_base(hc))
    model = GPT(config).to(dtype=hf_model.dtype)
    m = hf_model.model
    with torch.no_grad():
        model.tok.E.copy_(m.embed_tokens.weight)
        for ours, layer in zip(model.blocks, m.layers, strict=True):
            a, mlp = layer.self_attn, layer.mlp
            for lin, theirs in ((ours.self_attn.q_proj, a.q_proj), (ours.self_attn.k_proj, a.k_proj),
                                (ours.self_attn.v_proj, a.v_proj), (ours.self_attn.out_proj, a.o_proj),
                                (ours.ff.fc1, mlp.gate_proj), (ours.ff.fc3, mlp.up_proj), (ours.ff.fc2, mlp.down_proj)):
                _copy_linear_from_torch(lin, theirs.weight, None)
            ours.norm1.gamma.copy_(layer.input_layernorm.weight)
            ours.norm3.gamma.copy_(layer.post_attention_layernorm.weight)
        model.norm.gamma.copy_(m.norm.weight)
        if model.head is not None:
            _copy_linear_from_torch(model.head, hf_model.lm_head.weight, None)
    return model
