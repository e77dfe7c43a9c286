"""Backpropagation by hand (chapter 19): a forward pass that returns a cache, and a backward pass that takes
the gradient of the loss with respect to the output and returns the gradients of the inputs and parameters.

One concept per module: ``linear``, ``softmax``, ``attention``, ``multihead``, ``layernorm``, ``gelu``,
``embedding``, ``cross_entropy``, the pre-norm ``block``, the whole ``gpt``, the ``adam`` optimiser,
``memory`` (what the caches hold) and ``gradcheck`` (finite differences).
"""

from attnbook.numpy.backprop.adam import Adam
from attnbook.numpy.backprop.attention import attention_backward, attention_forward
from attnbook.numpy.backprop.block import block_backward, block_forward, init_block_params
from attnbook.numpy.backprop.cross_entropy import cross_entropy_backward, cross_entropy_forward
from attnbook.numpy.backprop.embedding import embedding_backward, embedding_forward
from attnbook.numpy.backprop.gelu import gelu_backward, gelu_forward
from attnbook.numpy.backprop.gpt import GPTConfig, gpt_backward, gpt_forward, gpt_loss_and_grads, init_gpt_params
from attnbook.numpy.backprop.gradcheck import numerical_gradient
from attnbook.numpy.backprop.layernorm import layer_norm_backward, layer_norm_forward
from attnbook.numpy.backprop.linear import linear_backward, linear_forward
from attnbook.numpy.backprop.memory import cache_nbytes
from attnbook.numpy.backprop.multihead import mha_backward, mha_forward
from attnbook.numpy.backprop.softmax import softmax_backward

__all__ = [
    "Adam",
    "GPTConfig",
    "attention_backward",
    "attention_forward",
    "block_backward",
    "block_forward",
    "cache_nbytes",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "embedding_backward",
    "embedding_forward",
    "gelu_backward",
    "gelu_forward",
    "gpt_backward",
    "gpt_forward",
    "gpt_loss_and_grads",
    "init_block_params",
    "init_gpt_params",
    "layer_norm_backward",
    "layer_norm_forward",
    "linear_backward",
    "linear_forward",
    "mha_backward",
    "mha_forward",
    "numerical_gradient",
    "softmax_backward",
]
