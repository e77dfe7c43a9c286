"""Interactive figures, one module a Part; every chapter imports its widgets from here. They use only what
ipywidgets 7 and 8 share, since Colab ships 7."""

from attnbook.widgets._common import controls
from attnbook.widgets.part1 import (
    attention_map_scaled_token,
    convolution_heads,
    dot_vs_cosine,
    head_explorer,
    mask_explorer,
    positional_encoding_explorer,
    query_map_explorer,
    scaling_by_dimension,
    score_landscape_explorer,
    soft_lookup_sharpness,
    softmax_temperature,
)
from attnbook.widgets.part2 import (
    decoder_dependence,
    decoding_explorer,
    lookup_noise,
    norm_placement_depth,
)
from attnbook.widgets.part3 import (
    attention_browser,
    next_char_temperature,
    seq2seq_explorer,
)
from attnbook.widgets.part4 import (
    NS_ITERATIONS,
    bpe_split_explorer,
    fill_in_blank,
    finite_difference_step,
    newton_schulz_explorer,
    newton_schulz_figure,
    norm_shift_scale,
    rotary_explorer,
    rotary_figure,
    tile_explorer,
)

__all__ = [
    "NS_ITERATIONS",
    "attention_browser",
    "attention_map_scaled_token",
    "bpe_split_explorer",
    "controls",
    "convolution_heads",
    "decoder_dependence",
    "decoding_explorer",
    "dot_vs_cosine",
    "fill_in_blank",
    "finite_difference_step",
    "head_explorer",
    "lookup_noise",
    "mask_explorer",
    "newton_schulz_explorer",
    "newton_schulz_figure",
    "next_char_temperature",
    "norm_placement_depth",
    "norm_shift_scale",
    "positional_encoding_explorer",
    "query_map_explorer",
    "rotary_explorer",
    "rotary_figure",
    "scaling_by_dimension",
    "score_landscape_explorer",
    "seq2seq_explorer",
    "soft_lookup_sharpness",
    "softmax_temperature",
    "tile_explorer",
]
