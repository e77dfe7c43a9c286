"""Chapter 27's checkers accept answers computed another way and refuse ready-made and likely wrong ones."""

import numpy as np
import torch

from attnbook.exercises import check_lora_closest_weight, check_lora_grad_a
from attnbook.exercises._harness import Outcome
from attnbook.exercises.ch27 import _closest_mistake, _grad_a_mistake, _stages_mistake, check_lora_stages
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


# --- the debugged adapter: three stages, each symptom named ------------------------------------------------------

def run_stages(layer_class, x, W, b, rank, alpha, A, B):
    # The chapter's driver: as built, with A and B set, merged.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(27)
        layer = layer_class(W, b, rank, alpha)
    built = layer(x)
    with torch.no_grad():
        layer.A.copy_(A)
        layer.B.copy_(B)
    trained = layer(x)
    layer.merge()
    return torch.stack([built, trained, layer(x)])


class Fixed(torch.nn.Module):
    def __init__(self, W, b, rank, alpha):
        super().__init__()
        self.W, self.b = W.clone(), b.clone()  # plain tensors: frozen by not being parameters
        self.A = torch.nn.Parameter(torch.rand(W.shape[0], rank, dtype=W.dtype) - 0.5)
        self.B = torch.nn.Parameter(torch.zeros(rank, W.shape[1], dtype=W.dtype))
        self.scaling, self.merged = alpha / rank, False

    def forward(self, x):
        y = torch.einsum("...i,io->...o", x, self.W) + self.b
        return y if self.merged else y + self.scaling * torch.einsum("...i,ir,ro->...o", x, self.A, self.B)

    def merge(self):
        with torch.no_grad():
            self.W = self.W + self.scaling * self.A @ self.B
        self.merged = True


class RandomB(Fixed):
    def __init__(self, W, b, rank, alpha):
        super().__init__(W, b, rank, alpha)
        self.B = torch.nn.Parameter(torch.rand(rank, W.shape[1], dtype=W.dtype) - 0.5)


class InvertedScale(Fixed):
    def __init__(self, W, b, rank, alpha):
        super().__init__(W, b, rank, alpha)
        self.scaling = rank / alpha


class CountedTwice(Fixed):
    def forward(self, x):
        return x @ self.W + self.b + self.scaling * (x @ self.A) @ self.B


class Colleagues(RandomB, InvertedScale, CountedTwice):
    """The chapter's ColleagueLoRA: the three bugs together."""


def stages_of(layer_class):
    def lora_stages(x, W, b, rank, alpha, A, B):
        return run_stages(layer_class, x, W, b, rank, alpha, A, B)

    return lora_stages


def test_the_fixed_adapter_passes_and_each_bug_left_alone_is_named_by_its_stage():
    assert check_lora_stages(stages_of(Fixed))
    for layer_class, stage in ((RandomB, 1), (InvertedScale, 2), (CountedTwice, 3), (Colleagues, 1)):
        verdict = check_lora_stages(stages_of(layer_class))
        assert not verdict and verdict.outcome is Outcome.WRONG_VALUE, verdict.message
        assert f"stage {stage} of 3" in verdict.message, (layer_class.__name__, verdict.message)
        assert all(f"stage {k} of 3" not in verdict.message for k in (1, 2, 3) if k != stage), verdict.message
    for variant, words in (("inverted", "not r / alpha"), ("counted_twice", "counts the change twice"),
                           ("merge_unscaled", "scaling included")):
        verdict = check_lora_stages(_stages_mistake(variant))
        assert not verdict and words in verdict.message, verdict.message


def test_the_package_and_peft_are_refused_and_a_stub_is_not_attempted():
    from attnbook.torch.linear import Linear
    from attnbook.torch.lora import LoRALinear, add_lora

    class Wrapped(torch.nn.Module):  # the package's layer inside a class of one's own
        def __init__(self, W, b, rank, alpha):
            super().__init__()
            base = Linear(W.shape[0], W.shape[1]).to(W.dtype)
            self.inner = LoRALinear(base, rank, alpha)
            self.A, self.B = self.inner.A, self.inner.B

        def forward(self, x):
            return self.inner(x)

        def merge(self):
            self.inner.merge()

    verdict = check_lora_stages(stages_of(Wrapped))
    assert not verdict and verdict.outcome is Outcome.REFUSED and "attnbook" in verdict.message, verdict.message

    def by_add_lora(x, W, b, rank, alpha, A, B):
        model = torch.nn.Sequential()
        model.add_module("fc1", torch.nn.Identity())
        add_lora(model, rank, alpha, targets=("fc1",))

    verdict = check_lora_stages(by_add_lora)
    assert not verdict and verdict.outcome is Outcome.REFUSED and "add_lora" in verdict.message, verdict.message

    def by_peft(x, W, b, rank, alpha, A, B):
        import peft

        layer = torch.nn.Linear(W.shape[0], W.shape[1]).to(W.dtype)
        model = peft.get_peft_model(torch.nn.Sequential(layer),
                                    peft.LoraConfig(r=rank, lora_alpha=alpha, target_modules=["0"]))
        return model(x)

    verdict = check_lora_stages(by_peft)
    assert not verdict and verdict.outcome is Outcome.REFUSED and "peft" in verdict.message, verdict.message

    class Stub(torch.nn.Module):
        def __init__(self, W, b, rank, alpha):
            super().__init__()
            raise NotImplementedError

    def lora_stages(x, W, b, rank, alpha, A, B):
        return run_stages(Stub, x, W, b, rank, alpha, A, B)

    verdict = check_lora_stages(lora_stages)
    assert not verdict and not verdict.attempted and "not attempted yet" in verdict.message, verdict.message
