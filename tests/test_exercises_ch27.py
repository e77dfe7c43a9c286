"""Chapter 27's checkers accept answers computed another way and refuse ready-made and likely wrong ones."""

import torch

from attnbook.exercises import check_lora_grad_a, check_lora_trainable_count
from attnbook.exercises.ch27 import _count_mistake, _grad_a_mistake
from attnbook.torch.lora import add_lora, count_trainable
from attnbook.torch.transformer import GPT, GPTConfig

SIZES = {"q_proj": "dd", "k_proj": "dd", "v_proj": "dd", "out_proj": "dd", "fc1": "df", "fc2": "fd"}


def count_by_table(n_layers, d_model, d_ff, rank, targets):
    width = {"d": d_model, "f": d_ff}
    return n_layers * rank * sum(width[SIZES[t][0]] + width[SIZES[t][1]] for t in targets)


def grad_a_by_einsum(x, A, B, scaling, dy):
    return scaling * torch.einsum("...i,...o,ro->ir", x, dy, B)


def test_answers_computed_another_way_pass():
    assert check_lora_trainable_count(count_by_table)
    assert check_lora_grad_a(grad_a_by_einsum)


def test_the_reference_passes_and_every_mistake_is_refused_with_its_hint():
    for variant, words in (("full", "frozen matrices"), ("a_only", "B trains too"),
                           ("one_layer", "every block"), ("square_ff", "fc1 maps d_model to d_ff")):
        verdict = check_lora_trainable_count(_count_mistake(variant))
        assert not verdict and words in verdict.message, verdict.message
    for variant, words in (("no_scaling", "multiplied by scaling"), ("scaling_twice", "not squared"),
                           ("mean", "not a mean"), ("last_row", "shared by every row")):
        verdict = check_lora_grad_a(_grad_a_mistake(variant))
        assert not verdict and words in verdict.message, verdict.message


def test_delegating_answers_are_refused_by_name():
    def wraps_a_gpt(n_layers, d_model, d_ff, rank, targets):
        model = GPT(GPTConfig(vocab_size=3, block_size=2, n_layers=n_layers, n_heads=1, d_model=d_model, d_ff=d_ff))
        add_lora(model, rank, targets=targets)
        return count_trainable(model)

    verdict = check_lora_trainable_count(wraps_a_gpt)
    assert not verdict and "add_lora" in verdict.message, verdict.message

    def by_autograd(x, A, B, scaling, dy):
        A = A.clone().requires_grad_(True)
        y = scaling * (x @ A) @ B
        (y * dy).sum().backward()
        return A.grad

    verdict = check_lora_grad_a(by_autograd)
    assert not verdict and "torch.autograd" in verdict.message, verdict.message


def test_other_wrong_answers_are_refused():
    # counting the biases of the wrapped layers too, as if they trained
    def with_biases(n_layers, d_model, d_ff, rank, targets):
        out = {"d": d_model, "f": d_ff}
        return count_by_table(n_layers, d_model, d_ff, rank, targets) + n_layers * sum(out[SIZES[t][1]]
                                                                                       for t in targets)

    assert not check_lora_trainable_count(with_biases)

    # B where B transposed belongs: right only where B happens to be square
    def b_untransposed(x, A, B, scaling, dy):
        X, G = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
        return scaling * X.T @ (G @ B.reshape(B.shape[1], B.shape[0]))

    assert not check_lora_grad_a(b_untransposed)
