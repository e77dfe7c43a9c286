"""NumPy implementations, one concept per module (Part I of the book).

Every function here has a twin of the same name and signature in ``attnbook.torch`` where the
concept exists there too.
"""

from attnbook.numpy import backprop  # chapter 19: backward passes by hand
from attnbook.numpy.attention import masked_softmax, scaled_dot_product_attention, single_query_attention
from attnbook.numpy.convolution import conv1d_as_attention, offset_attention_weights
from attnbook.numpy.feedforward import swiglu
from attnbook.numpy.flash import (
    flash_attention_backward,
    online_normalizer,
    online_softmax,
    tile_schedule,
    tiled_attention,
)
from attnbook.numpy.gqa import grouped_query_attention, grouped_query_params, repeat_kv
from attnbook.numpy.lookup import soft_lookup
from attnbook.numpy.masks import causal_mask, combine_masks, padding_mask, token_padding_mask
from attnbook.numpy.multihead import MultiHeadParams, merge_heads, multi_head_attention, split_heads
from attnbook.numpy.positional import relative_position_map, sinusoidal_encoding, sinusoidal_frequencies
from attnbook.numpy.rmsnorm import rms_norm
from attnbook.numpy.rotary import (
    apply_rotary,
    apply_rotary_complex,
    rotary_angles,
    rotary_frequencies,
    rotate_half,
    sliding_window_mask,
)
from attnbook.numpy.scoring import (
    AdditiveScore,
    BilinearScore,
    DotScore,
    GatedScore,
    LocalScore,
    ScaledDotScore,
    attention_with,
)
from attnbook.numpy.similarity import (
    analogy,
    cosine_similarity,
    dot,
    nearest,
    pairwise_cosine_similarity,
)
from attnbook.numpy.softmax import softmax, softmax_jacobian

__all__ = [
    "AdditiveScore",
    "BilinearScore",
    "DotScore",
    "GatedScore",
    "LocalScore",
    "MultiHeadParams",
    "ScaledDotScore",
    "analogy",
    "attention_with",
    "backprop",
    "causal_mask",
    "combine_masks",
    "conv1d_as_attention",
    "cosine_similarity",
    "dot",
    "masked_softmax",
    "merge_heads",
    "multi_head_attention",
    "nearest",
    "offset_attention_weights",
    "padding_mask",
    "token_padding_mask",
    "pairwise_cosine_similarity",
    "relative_position_map",
    "scaled_dot_product_attention",
    "single_query_attention",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "soft_lookup",
    "softmax",
    "softmax_jacobian",
    "split_heads",
    "grouped_query_attention",
    "grouped_query_params",
    "online_normalizer",
    "online_softmax",
    "repeat_kv",
    "tile_schedule",
    "tiled_attention",
    "flash_attention_backward",
    "rms_norm",
    "swiglu",
    "apply_rotary",
    "apply_rotary_complex",
    "rotary_angles",
    "rotary_frequencies",
    "rotate_half",
    "sliding_window_mask",
]
