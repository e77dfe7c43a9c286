"""Checkers for the book's coding exercises.

Each ``check_*`` is a ``Checker``: call it with the learner's function (``check_softmax(my_softmax)``)
and it runs that function on fixed and random cases against the package's own implementation, and
returns a ``Verdict`` that reads as a short sentence in the notebook. Its docstring is the exercise's
contract, so ``help(check_softmax)`` or ``check_softmax?`` says what the function must take and return.
"""

from attnbook.exercises._harness import Verdict
from attnbook.exercises.ch01 import (
    check_analogy,
    check_cosine_similarity,
    check_pairwise_cosine_similarity,
)
from attnbook.exercises.ch02 import check_logsumexp, check_softmax
from attnbook.exercises.ch03 import check_attend, check_soft_lookup
from attnbook.exercises.ch04 import check_self_attention
from attnbook.exercises.ch05 import check_attention_columns, check_single_query_attention
from attnbook.exercises.ch06 import check_softmax_jacobian, check_unit_variance_scale
from attnbook.exercises.ch07 import check_bilinear_score, check_local_mask
from attnbook.exercises.ch08 import check_masked_attention
from attnbook.exercises.ch09 import check_mha_parameters, check_split_heads
from attnbook.exercises.ch10 import check_conv1d_same, check_offset_weights
from attnbook.exercises.ch11 import check_encode_positions, check_my_mha, check_offset_between
from attnbook.exercises.ch12 import check_cross_entropy_grad, check_torch_attention
from attnbook.exercises.ch13 import check_layer_norm_columns, check_pre_norm_block
from attnbook.exercises.ch14 import check_decoder_self_mask, check_shift_right
from attnbook.exercises.ch15 import (
    check_gpt_forward,
    check_gpt_parameters,
    check_top_k_filter,
    check_top_p_filter,
)
from attnbook.exercises.ch16 import check_smoothed_targets, check_warmup_cosine
from attnbook.exercises.ch17 import check_attention_scores, check_bigram_loss
from attnbook.exercises.ch18 import check_attention_entropy, check_previous_token_score
from attnbook.exercises.ch19 import check_attention_backward, check_layer_norm_backward
from attnbook.exercises.ch20 import check_blockwise_attention, check_kv_cache_bytes, check_online_softmax
from attnbook.exercises.ch21 import check_apply_rotary, check_window_mask
from attnbook.exercises.ch22 import check_rms_norm, check_swiglu
from attnbook.exercises.ch23 import check_apply_merge, check_most_frequent_pair
from attnbook.exercises.ch24 import check_masked_loss
from attnbook.exercises.ch25 import check_newton_schulz, check_polar_factor

__all__ = [
    "Verdict",
    "check_analogy",
    "check_apply_merge",
    "check_attend",
    "check_attention_entropy",
    "check_attention_scores",
    "check_bigram_loss",
    "check_previous_token_score",
    "check_attention_columns",
    "check_bilinear_score",
    "check_conv1d_same",
    "check_cosine_similarity",
    "check_cross_entropy_grad",
    "check_decoder_self_mask",
    "check_encode_positions",
    "check_gpt_forward",
    "check_gpt_parameters",
    "check_layer_norm_columns",
    "check_local_mask",
    "check_logsumexp",
    "check_masked_attention",
    "check_masked_loss",
    "check_mha_parameters",
    "check_most_frequent_pair",
    "check_my_mha",
    "check_offset_between",
    "check_offset_weights",
    "check_pairwise_cosine_similarity",
    "check_pre_norm_block",
    "check_self_attention",
    "check_shift_right",
    "check_single_query_attention",
    "check_smoothed_targets",
    "check_top_k_filter",
    "check_top_p_filter",
    "check_torch_attention",
    "check_unit_variance_scale",
    "check_warmup_cosine",
    "check_soft_lookup",
    "check_softmax",
    "check_softmax_jacobian",
    "check_split_heads",
    "check_attention_backward",
    "check_layer_norm_backward",
    "check_blockwise_attention",
    "check_kv_cache_bytes",
    "check_online_softmax",
    "check_apply_rotary",
    "check_window_mask",
    "check_rms_norm",
    "check_swiglu",
    "check_newton_schulz",
    "check_polar_factor",
]
