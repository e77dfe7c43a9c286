"""Checkers for the book's coding exercises.

Each ``check_*`` is a ``Checker``: call it with the learner's function (``check_softmax_rows(softmax_rows)``)
and it runs that function on fixed and random cases against the package's own implementation, and
returns a ``Verdict`` that reads as a short sentence in the notebook. Its docstring is the exercise's
contract, so ``help(check_softmax_rows)`` or ``check_softmax_rows?`` says what the function must take and
return.
"""

from attnbook._lazy import lazy_exports
from attnbook.exercises._harness import Verdict
from attnbook.exercises.ch01 import check_combined_row_weight, check_neighbours, check_solve_analogies
from attnbook.exercises.ch02 import check_log_softmax_rows, check_softmax_rows, check_softmax_vjp
from attnbook.exercises.ch03 import check_loo_predictions, check_weighted_distance_attention
from attnbook.exercises.ch04 import check_attend_to_others, check_takeover_factor
from attnbook.exercises.ch05 import check_value_weight_grad
from attnbook.exercises.ch06 import check_correlated_scale, check_temperature_gradient
from attnbook.exercises.ch07 import check_batched_additive_scores, check_dilated_mask
from attnbook.exercises.ch08 import check_cache_causal_mask, check_padded_attention
from attnbook.exercises.ch09 import check_head_circuits, check_mha_parameters
from attnbook.exercises.ch10 import check_conv_mixing_matrix, check_dilated_causal_conv
from attnbook.exercises.ch11 import (
    check_left_padded_positions,
    check_my_mha,
    check_offset_between,
    check_position_from_encoding,
)
from attnbook.exercises.ch21 import check_rebase_rotary, check_ring_cache_mask

# The checkers of the chapters whose modules need PyTorch: imported on first use, so that the NumPy
# chapters' checkers work where PyTorch is not installed.
_NEED_TORCH = {
    "check_mha_float_mask": "ch12",
    "check_multi_query_attention": "ch12",
    "check_smoothed_ce_grad": "ch12",
    "check_embedding_grad": "ch13",
    "check_encoder_classifier": "ch13",
    "check_group_norm_columns": "ch13",
    "check_parallel_block": "ch13",
    "check_pre_norm_block": "ch13",
    "check_cross_attention_block": "ch14",
    "check_gated_cross_block": "ch14",
    "check_influence_by_rows": "ch14",
    "check_packed_self_mask": "ch14",
    "check_gpt_forward": "ch15",
    "check_gpt_parameters": "ch15",
    "check_top_k_filter": "ch15",
    "check_top_p_filter": "ch15",
    "check_beam_search": "ch16",
    "check_smoothed_masked_loss": "ch16",
    "check_warmup_cosine": "ch16",
    "check_attention_scores": "ch17",
    "check_bigram_loss": "ch17",
    "check_speculative_greedy": "ch17",
    "check_train_loop_by_hand": "ch17",
    "check_normalised_entropy": "ch18",
    "check_offset_profile": "ch18",
    "check_cross_attention_grads": "ch19",
    "check_mha_input_grad": "ch19",
    "check_swiglu_input_grad": "ch19",
    "check_tied_head_grad": "ch19",
    "check_blockwise_attention": "ch20",
    "check_longest_context": "ch20",
    "check_merge_partials": "ch20",
    "check_tiled_backward": "ch20",
    "check_gqa_by_groups": "ch22",
    "check_llama_block_step": "ch22",
    "check_rms_norm_backward": "ch22",
    "check_rms_norm_fp16": "ch22",
    "check_encode_with_heap": "ch23",
    "check_learn_merges_incremental": "ch23",
    "check_mask_tokens_by_hand": "ch24",
    "check_polar_from_gram": "ch25",
    "check_quintic_for_slope": "ch25",
    "check_grid_encoding": "ch26",
    "check_patches_to_images": "ch26",
    "check_lora_closest_weight": "ch27",
    "check_lora_grad_a": "ch27",
    "check_lora_stages": "ch27",
    "check_induction_targets_by_hand": "ch28",
    "check_v_composition_by_hand": "ch28",
}
__getattr__, __dir__ = lazy_exports(__name__, _NEED_TORCH)

__all__ = [
    "Verdict",
    "check_attend_to_others",
    "check_attention_scores",
    "check_batched_additive_scores",
    "check_beam_search",
    "check_bigram_loss",
    "check_blockwise_attention",
    "check_cache_causal_mask",
    "check_combined_row_weight",
    "check_conv_mixing_matrix",
    "check_correlated_scale",
    "check_cross_attention_block",
    "check_cross_attention_grads",
    "check_dilated_causal_conv",
    "check_dilated_mask",
    "check_embedding_grad",
    "check_encode_with_heap",
    "check_encoder_classifier",
    "check_gated_cross_block",
    "check_gpt_forward",
    "check_gpt_parameters",
    "check_gqa_by_groups",
    "check_grid_encoding",
    "check_group_norm_columns",
    "check_head_circuits",
    "check_induction_targets_by_hand",
    "check_influence_by_rows",
    "check_learn_merges_incremental",
    "check_left_padded_positions",
    "check_llama_block_step",
    "check_log_softmax_rows",
    "check_longest_context",
    "check_loo_predictions",
    "check_lora_closest_weight",
    "check_lora_grad_a",
    "check_lora_stages",
    "check_mask_tokens_by_hand",
    "check_merge_partials",
    "check_mha_float_mask",
    "check_mha_input_grad",
    "check_mha_parameters",
    "check_multi_query_attention",
    "check_my_mha",
    "check_neighbours",
    "check_normalised_entropy",
    "check_offset_between",
    "check_offset_profile",
    "check_packed_self_mask",
    "check_padded_attention",
    "check_parallel_block",
    "check_patches_to_images",
    "check_polar_from_gram",
    "check_position_from_encoding",
    "check_pre_norm_block",
    "check_quintic_for_slope",
    "check_rebase_rotary",
    "check_ring_cache_mask",
    "check_rms_norm_backward",
    "check_rms_norm_fp16",
    "check_smoothed_ce_grad",
    "check_smoothed_masked_loss",
    "check_softmax_rows",
    "check_softmax_vjp",
    "check_solve_analogies",
    "check_speculative_greedy",
    "check_swiglu_input_grad",
    "check_takeover_factor",
    "check_temperature_gradient",
    "check_tied_head_grad",
    "check_tiled_backward",
    "check_top_k_filter",
    "check_top_p_filter",
    "check_train_loop_by_hand",
    "check_v_composition_by_hand",
    "check_value_weight_grad",
    "check_warmup_cosine",
    "check_weighted_distance_attention",
]
