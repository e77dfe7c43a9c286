"""Chapter 27's checkers accept answers computed another way and refuse ready-made and likely wrong ones."""

import numpy as np
import torch

from attnbook.exercises import check_lora_closest_weight, check_lora_grad_a
from attnbook.exercises.ch27 import _closest_mistake, _grad_a_mistake
from attnbook.torch.lora import closest_low_rank_weight


def closest_by_eigh(before, after, rank):
    # The change's top right singular vectors are the top eigenvectors of D^T D: project D onto them.
    D = (after - before).numpy()
    values, vectors = np.linalg.eigh(D.T @ D)  # ascending
    V = vectors[:, ::-1][:, :rank]
    return before + torch.from_numpy(D @ V @ V.T)


def grad_a_by_einsum(x, A, B, scaling, dy):
    return scaling * torch.einsum("...i,...o,ro->ir", x, dy, B)


def test_answers_computed_another_way_pass():
    assert check_lora_closest_weight(closest_by_eigh)
    assert check_lora_grad_a(grad_a_by_einsum)


def test_the_reference_passes_and_every_mistake_is_refused_with_its_hint():
    for variant, words in (("truncate_after", "not the fine-tuned matrix"), ("change_only", "adapter's change alone"),
                           ("smallest", "largest singular values"), ("no_values", "weighted by its singular")):
        verdict = check_lora_closest_weight(_closest_mistake(variant))
        assert not verdict and words in verdict.message, verdict.message
    for variant, words in (("no_scaling", "multiplied by scaling"), ("scaling_twice", "not squared"),
                           ("mean", "not a mean"), ("last_row", "shared by every row")):
        verdict = check_lora_grad_a(_grad_a_mistake(variant))
        assert not verdict and words in verdict.message, verdict.message


def test_delegating_answers_are_refused_by_name():
    def calls_the_package(before, after, rank):
        return closest_low_rank_weight(before, after, rank)

    verdict = check_lora_closest_weight(calls_the_package)
    assert not verdict and "closest_low_rank_weight" in verdict.message, verdict.message

    def randomised(before, after, rank):
        U, S, V = torch.svd_lowrank(after - before, q=rank, niter=20)
        return before + (U * S) @ V.T

    verdict = check_lora_closest_weight(randomised)
    assert not verdict and "svd_lowrank" in verdict.message, verdict.message

    def by_autograd(x, A, B, scaling, dy):
        A = A.clone().requires_grad_(True)
        y = scaling * (x @ A) @ B
        (y * dy).sum().backward()
        return A.grad

    verdict = check_lora_grad_a(by_autograd)
    assert not verdict and "torch.autograd" in verdict.message, verdict.message


def test_other_wrong_answers_are_refused():
    # cutting the rows of the change instead of its singular directions: rank r columns of D kept
    def first_columns(before, after, rank):
        D = (after - before).clone()
        D[:, rank:] = 0
        return before + D

    assert not check_lora_closest_weight(first_columns)

    # B where B transposed belongs: right only where B happens to be square
    def b_untransposed(x, A, B, scaling, dy):
        X, G = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
        return scaling * X.T @ (G @ B.reshape(B.shape[1], B.shape[0]))

    assert not check_lora_grad_a(b_untransposed)
