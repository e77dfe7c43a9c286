"""A GPT trained entirely in NumPy: forward, backward and loss of the book's decoder-only model (chapter 19).

The same function as ``attnbook.torch.GPT`` (chapter 15): token and learned position embeddings, pre-norm
blocks with causal self-attention, a final layer norm, and logits through the token embedding (tied).
Parameters are a dict whose keys are the names in ``attnbook.torch.GPT(...).state_dict()``, so
``model.load_state_dict({k: torch.from_numpy(v) ...})`` copies them into the PyTorch twin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from attnbook._fields import Checked, blame, choice, count, real
from attnbook._validate import check_heads, shape_str
from attnbook.numpy.backprop.block import block_backward, block_forward, init_block_params
from attnbook.numpy.backprop.cross_entropy import cross_entropy_backward, cross_entropy_forward
from attnbook.numpy.backprop.embedding import embedding_backward, embedding_forward
from attnbook.numpy.backprop.layernorm import layer_norm_backward, layer_norm_forward

_GELU = {"gelu_tanh": "tanh", "gelu": "none"}
Activation = Literal["gelu_tanh", "gelu"]


@dataclass
class GPTConfig(Checked):
    """Sizes of the NumPy GPT; the fields mean what they mean in ``attnbook.torch.GPTConfig``, and are checked
    the same way. ``ff_width`` is ``d_ff``, or ``4 d_model`` when it is ``None``; ``activation`` is
    ``"gelu_tanh"`` (GPT-2's) or ``"gelu"`` (exact).
    """

    vocab_size: int = count(help="the vocabulary's size")
    block_size: int = count(64, help="the context: the longest sequence of tokens the model reads")
    n_layers: int = count(4, help="decoder blocks")
    n_heads: int = count(4, help="attention heads per layer; they must divide d_model")
    d_model: int = count(128, help="the width of every token's vector, d_model")
    d_ff: int | None = count(None, optional="4 d_model", help="the MLP's hidden width, d_ff")
    activation: Activation = choice("gelu_tanh", tuple(_GELU), help="the MLP's GELU: tanh-approximated or exact")
    eps: float = real(1e-5, ok=lambda e: e >= 0, expected="a finite number, 0 or more",
                      help="the small number the norms add to the variance before its root")

    def check(self) -> None:
        super().check()
        with blame("n_heads", "d_model"):
            check_heads(self.d_model, self.n_heads)

    @property
    def ff_width(self) -> int:
        """The MLP's hidden width: ``d_ff``, or ``4 d_model`` when it is ``None``."""
        return 4 * self.d_model if self.d_ff is None else self.d_ff


def init_gpt_params(config: GPTConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """GPT-2's initialisation, as ``attnbook.torch.GPT.reset_parameters``: normal(0, 0.02) weights and
    embeddings, residual projections normal(0, 0.02 / sqrt(2 n_layers)), zero biases, unit gammas. float64."""
    c, rng = config, np.random.default_rng(seed)
    params = {"tok.E": rng.normal(0.0, 0.02, (c.vocab_size, c.d_model)),
              "pos.P": rng.normal(0.0, 0.02, (c.block_size, c.d_model))}
    for i in range(c.n_layers):
        block = init_block_params(c.d_model, c.ff_width, rng, residual_std=0.02 / math.sqrt(2 * c.n_layers))
        params.update({f"blocks.{i}.{k}": v for k, v in block.items()})
    params["norm.gamma"], params["norm.beta"] = np.ones(c.d_model), np.zeros(c.d_model)
    return params


def _block(params: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    prefix = f"blocks.{i}."
    return {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}


def gpt_forward(params: dict[str, np.ndarray], ids: np.ndarray, config: GPTConfig) -> tuple[np.ndarray, dict]:
    """Logits ``(B, T, V)`` for integer ``ids`` ``(B, T)``, ``T <= block_size``; returns ``(logits, cache)``."""
    ids = np.asarray(ids)
    if ids.ndim != 2 or ids.shape[1] > config.block_size:
        raise ValueError(f"ids must have shape (B, T) with T <= block_size = {config.block_size}; "
                         f"got {shape_str(ids.shape)}")
    T = ids.shape[1]
    x, c_emb = embedding_forward(ids, params["tok.E"])
    x = x + params["pos.P"][:T]  # (B, T, d_model)
    c_blocks = []
    for i in range(config.n_layers):
        x, c = block_forward(x, _block(params, i), config.n_heads, config.eps, _GELU[config.activation])
        c_blocks.append(c)
    h, c_norm = layer_norm_forward(x, params["norm.gamma"], params["norm.beta"], config.eps)
    logits = h @ params["tok.E"].T  # (B, T, V): the unembedding is the embedding, tied
    return logits, {"emb": c_emb, "blocks": c_blocks, "norm": c_norm, "h": h, "E": params["tok.E"],
                    "P_shape": params["pos.P"].shape}


def gpt_backward(dlogits: np.ndarray, cache: dict) -> dict[str, np.ndarray]:
    """Gradients of every parameter, keyed like the parameters, given ``dlogits`` ``(B, T, V)``.

    The token table is used twice, to embed and to unembed; its gradient is the sum of both uses.
    """
    h, E = cache["h"], cache["E"]
    grads: dict[str, np.ndarray] = {}
    dE_out = dlogits.reshape(-1, E.shape[0]).T @ h.reshape(-1, E.shape[1])  # (V, d_model)
    dx, grads["norm.gamma"], grads["norm.beta"] = layer_norm_backward(dlogits @ E, cache["norm"])
    for i in reversed(range(len(cache["blocks"]))):
        dx, g = block_backward(dx, cache["blocks"][i])
        grads.update({f"blocks.{i}.{k}": v for k, v in g.items()})
    grads["tok.E"] = dE_out + embedding_backward(dx, cache["emb"])
    grads["pos.P"] = np.zeros(cache["P_shape"], dtype=dx.dtype)  # rows past T were not used: gradient 0
    grads["pos.P"][: dx.shape[1]] = dx.sum(axis=0)  # every sequence of the batch used the same positions
    return grads


def gpt_loss_and_grads(params: dict[str, np.ndarray], ids: np.ndarray, targets: np.ndarray,
                       config: GPTConfig) -> tuple[float, dict[str, np.ndarray], dict]:
    """Mean cross-entropy of the next-token predictions, the gradients of every parameter, and the cache.

    Shapes: ``ids`` and ``targets`` ``(B, T)``; each gradient has its parameter's shape.
    """
    logits, cache = gpt_forward(params, ids, config)
    loss, c_loss = cross_entropy_forward(logits, targets)
    return loss, gpt_backward(cross_entropy_backward(c_loss), cache), cache
