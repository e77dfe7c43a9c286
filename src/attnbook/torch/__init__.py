"""PyTorch implementations (Part II on), twins of ``attnbook.numpy`` where the concept exists in both.

A function here has the same name, signature and meaning as its NumPy twin; the tests check each pair
against each other and against PyTorch's own built-ins. Weights are stored in the row convention.
"""

from attnbook.torch.attention import masked_softmax, scaled_dot_product_attention
from attnbook.torch.blocks import DecoderBlock, EncoderBlock
from attnbook.torch.decoding import generate, greedy_decode, sample_next, top_k_filter
from attnbook.torch.embedding import LearnedPositions, SinusoidalPositions, TokenEmbedding, Unembedding
from attnbook.torch.feedforward import FeedForward, SwiGLU, swiglu, swiglu_hidden
from attnbook.torch.flash import flash_attention_backward, online_normalizer, online_softmax, tiled_attention
from attnbook.torch.gqa import GroupedQueryAttention, grouped_query_attention, repeat_kv
from attnbook.torch.inspect import (
    ablate_heads,
    attention_entropy,
    most_recent,
    offset_score,
    record_attention,
    weight_on,
)
from attnbook.torch.kvcache import KVCache, kv_cache_bytes
from attnbook.torch.layernorm import LayerNorm, layer_norm
from attnbook.torch.linear import Linear
from attnbook.torch.lora import LoRALinear, add_lora, count_trainable, lora_layers, merge_lora, unload_lora
from attnbook.torch.masks import causal_mask, combine_masks, padding_mask, token_padding_mask
from attnbook.torch.modes import eval_mode
from attnbook.torch.multihead import MultiHeadAttention, merge_heads, multi_head_attention, split_heads
from attnbook.torch.rmsnorm import RMSNorm, rms_norm
from attnbook.torch.rotary import (
    apply_rotary,
    apply_rotary_complex,
    rotary_angles,
    rotary_frequencies,
    rotate_half,
    sliding_window_mask,
)
from attnbook.torch.similarity import cosine_similarity, dot, pairwise_cosine_similarity
from attnbook.torch.softmax import softmax
from attnbook.torch.transformer import (
    GPT,
    Decoder,
    Encoder,
    EncoderConfig,
    EncoderDecoderTransformer,
    EncoderOnlyTransformer,
    GPTConfig,
    GPTShape,
    TransformerConfig,
)

__all__ = [
    "GPT",
    "Decoder",
    "DecoderBlock",
    "Encoder",
    "EncoderBlock",
    "EncoderDecoderTransformer",
    "EncoderOnlyTransformer",
    "FeedForward",
    "GPTConfig",
    "KVCache",
    "LayerNorm",
    "LearnedPositions",
    "Linear",
    "MultiHeadAttention",
    "SinusoidalPositions",
    "TokenEmbedding",
    "TransformerConfig",
    "Unembedding",
    "ablate_heads",
    "attention_entropy",
    "cosine_similarity",
    "dot",
    "eval_mode",
    "generate",
    "greedy_decode",
    "layer_norm",
    "merge_heads",
    "most_recent",
    "multi_head_attention",
    "offset_score",
    "pairwise_cosine_similarity",
    "record_attention",
    "sample_next",
    "scaled_dot_product_attention",
    "softmax",
    "split_heads",
    "weight_on",
    "GroupedQueryAttention",
    "grouped_query_attention",
    "kv_cache_bytes",
    "online_normalizer",
    "online_softmax",
    "repeat_kv",
    "tiled_attention",
    "flash_attention_backward",
    "causal_mask",
    "combine_masks",
    "masked_softmax",
    "padding_mask",
    "token_padding_mask",
    "top_k_filter",
    "EncoderConfig",
    "GPTShape",
    "RMSNorm",
    "SwiGLU",
    "rms_norm",
    "swiglu",
    "swiglu_hidden",
    "apply_rotary",
    "apply_rotary_complex",
    "rotary_angles",
    "rotary_frequencies",
    "rotate_half",
    "sliding_window_mask",
    "LoRALinear",
    "add_lora",
    "count_trainable",
    "lora_layers",
    "merge_lora",
    "unload_lora",
]
