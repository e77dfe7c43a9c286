"""The `gpt2 rotary` arm of `bench modern`: GPT-2's block with rotary positions, at GPT-2's size."""

from dataclasses import replace

from attnbook.bench import MODERN_ARMS
from attnbook.torch import GPT
from attnbook.training.lm import preset


def test_gpt2_rotary_arm_changes_only_positions_and_matches_the_size():
    base = preset("cpu-small")
    gpt2 = GPT(replace(base, **MODERN_ARMS["gpt2"]).model_config(65))
    rot = GPT(replace(base, **MODERN_ARMS["gpt2 rotary"]).model_config(65))
    assert (rot.config.norm, rot.config.activation, rot.config.bias) == (
        gpt2.config.norm, gpt2.config.activation, gpt2.config.bias)
    assert rot.config.positions == "rotary" and gpt2.config.positions == "learned"
    # the widened FFN gives back the position table: the two differ by less than one row of the table
    assert abs(rot.n_params() - gpt2.n_params()) < gpt2.config.d_model
    # and no other width does better
    others = [GPT(replace(base, positions="rotary", d_ff=w).model_config(65)).n_params() for w in (519, 521)]
    assert all(abs(n - gpt2.n_params()) > abs(rot.n_params() - gpt2.n_params()) for n in others)
