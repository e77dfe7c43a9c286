"""The backward pass of a pre-norm decoder block, the block of the book's GPT (chapter 19).

Forward: ``a = x + MHA(LN1(x))`` with the causal mask, ``y = a + FFN(LN2(a))``, and
``FFN(z) = gelu(z W_1 + b_1) W_2 + b_2``.
A residual connection ``a = x + f(x)`` passes its gradient through unchanged and adds the branch's:
``dx = da + df/dx^T da``. Parameters are a dict named as in ``attnbook.torch.DecoderBlock``'s
``state_dict`` (with ``cross_attention=False``), so weights copy between the two directly.
"""

from __future__ import annotations

import numpy as np

from attnbook._validate import require_int
from attnbook.numpy.backprop.gelu import gelu_backward, gelu_forward
from attnbook.numpy.backprop.layernorm import layer_norm_backward, layer_norm_forward
from attnbook.numpy.backprop.linear import linear_backward, linear_forward
from attnbook.numpy.backprop.multihead import mha_backward, mha_forward
from attnbook.numpy.masks import causal_mask
from attnbook.numpy.multihead import MultiHeadParams

_PROJ = (("W_q", "q_proj.W"), ("b_q", "q_proj.b"), ("W_k", "k_proj.W"), ("b_k", "k_proj.b"),
         ("W_v", "v_proj.W"), ("b_v", "v_proj.b"), ("W_o", "out_proj.W"), ("b_o", "out_proj.b"))


def init_block_params(d_model: int, d_ff: int, rng: np.random.Generator, std: float = 0.02,
                      residual_std: float | None = None) -> dict[str, np.ndarray]:
    """GPT-2's initialisation: weights normal(0, std), the two projections into the residual stream normal(0,
    ``residual_std``), biases 0, layer norms' gamma 1 and beta 0. Keys as in ``DecoderBlock.state_dict()``.
    Refuses a ``d_model`` or ``d_ff`` that is not a positive integer."""
    require_int("d_model", d_model, 1)
    require_int("d_ff", d_ff, 1)
    residual_std = std if residual_std is None else residual_std
    p: dict[str, np.ndarray] = {}
    for n in ("norm1", "norm3"):
        p[f"{n}.gamma"], p[f"{n}.beta"] = np.ones(d_model), np.zeros(d_model)
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        p[f"self_attn.{proj}.W"] = rng.normal(0.0, residual_std if proj == "out_proj" else std, (d_model, d_model))
        p[f"self_attn.{proj}.b"] = np.zeros(d_model)
    p["ff.fc1.W"], p["ff.fc1.b"] = rng.normal(0.0, std, (d_model, d_ff)), np.zeros(d_ff)
    p["ff.fc2.W"], p["ff.fc2.b"] = rng.normal(0.0, residual_std, (d_ff, d_model)), np.zeros(d_model)
    return p


def _mha_params(p: dict[str, np.ndarray]) -> MultiHeadParams:
    return MultiHeadParams(**{field: p[f"self_attn.{name}"] for field, name in _PROJ})


def block_forward(x: np.ndarray, p: dict[str, np.ndarray], n_heads: int, eps: float = 1e-5,
                  approximate: str = "tanh") -> tuple[np.ndarray, dict]:
    """One pre-norm block with causal self-attention. ``x`` ``(B, T, d_model)`` to ``(B, T, d_model)``."""
    T = x.shape[-2]
    h1, c_ln1 = layer_norm_forward(x, p["norm1.gamma"], p["norm1.beta"], eps)
    att, c_att = mha_forward(h1, h1, _mha_params(p), n_heads, mask=causal_mask(T))
    a = x + att  # (B, T, d_model): the residual stream
    h2, c_ln2 = layer_norm_forward(a, p["norm3.gamma"], p["norm3.beta"], eps)
    u, c_fc1 = linear_forward(h2, p["ff.fc1.W"], p["ff.fc1.b"])  # (B, T, d_ff)
    g, c_act = gelu_forward(u, approximate)
    f, c_fc2 = linear_forward(g, p["ff.fc2.W"], p["ff.fc2.b"])  # (B, T, d_model)
    return a + f, {"ln1": c_ln1, "attn": c_att, "ln2": c_ln2, "fc1": c_fc1, "act": c_act, "fc2": c_fc2}


def block_backward(dy: np.ndarray, cache: dict) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Gradients ``(dx, grads)`` given ``dy`` ``(B, T, d_model)``; ``grads`` has the keys of the parameters."""
    grads: dict[str, np.ndarray] = {}
    dg, grads["ff.fc2.W"], grads["ff.fc2.b"] = linear_backward(dy, cache["fc2"])
    du = gelu_backward(dg, cache["act"])
    dh2, grads["ff.fc1.W"], grads["ff.fc1.b"] = linear_backward(du, cache["fc1"])
    dln2, grads["norm3.gamma"], grads["norm3.beta"] = layer_norm_backward(dh2, cache["ln2"])
    da = dy + dln2  # the residual: the gradient flows past the branch and through it
    dh1_q, dh1_kv, g = mha_backward(da, cache["attn"])
    for field, name in _PROJ:
        grads[f"self_attn.{name}"] = getattr(g, field)
    dln1, grads["norm1.gamma"], grads["norm1.beta"] = layer_norm_backward(dh1_q + dh1_kv, cache["ln1"])
    return da + dln1, grads
