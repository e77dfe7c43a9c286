"""Answers of chapters 15 to 28 that a checker used to accept although they are wrong, delegate the work or
break a rule the statement sets: each is now refused with a sentence naming the reason, and a right answer
still passes."""

from __future__ import annotations

import torch
from test_exercises_ch15 import ANSWER, load

from attnbook.exercises import check_gpt_forward, check_normalised_entropy
from attnbook.exercises._harness import Outcome


def _wrong(verdict, *words, outcome=None):
    assert not verdict, verdict.message
    assert verdict.attempted, verdict.message
    if outcome is not None:
        assert verdict.outcome is outcome, verdict.message
    for word in words:
        assert word in verdict.message, verdict.message


# --- chapter 15 -------------------------------------------------------------------------------------------

def test_blocks_loaded_in_string_order_are_named_as_such():
    assert check_gpt_forward(ANSWER)

    def string_order(model, hf):
        n = len(model.blocks)
        order = sorted(range(n), key=str)  # "10" before "2": block i gets another block's weights
        renamed = {}
        for key, value in hf.items():
            if key.startswith("transformer.h."):
                i, rest = key.removeprefix("transformer.h.").split(".", 1)
                key = f"transformer.h.{order.index(int(i))}.{rest}"
            renamed[key] = value
        load(model, renamed)

    _wrong(check_gpt_forward({**ANSWER, "load_gpt2": string_order}), "block 2", "h.10",
           "loaded in the wrong order")


# --- chapter 18 -------------------------------------------------------------------------------------------

def _entropies(w):
    return -(w * w.clamp_min(1e-300).log()).sum(-1)


def test_a_ceiling_from_the_keys_given_weight_is_refused():
    def right(w):
        T = w.shape[-1]
        return (_entropies(w)[..., 1:] / torch.arange(2, T + 1, dtype=w.dtype).log()).mean(-1)

    def nonzero(w):
        return torch.nan_to_num(_entropies(w)[..., 1:] / (w > 0).sum(-1).double().log()[..., 1:]).mean(-1)

    assert check_normalised_entropy(right)
    _wrong(check_normalised_entropy(nonzero), "exactly 0", "ln(t + 1)", outcome=Outcome.WRONG_VALUE)
