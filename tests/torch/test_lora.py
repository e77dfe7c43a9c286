"""LoRA (chapter 27) against Hugging Face ``peft``'s LoRA layer holding the same weights.

``peft`` wraps a ``torch.nn.Linear``, which stores its weight ``(d_out, d_in)`` and computes ``x W^T + b``;
the package's ``Linear`` stores ``W`` ``(d_in, d_out)`` and computes ``x W + b``. peft's ``lora_A.weight`` is
``(r, d_in)`` and ``lora_B.weight`` ``(d_out, r)``: the transposes of the package's ``A`` ``(d_in, r)`` and
``B`` ``(r, d_out)``. Every copy below therefore transposes, and so does every comparison of weights or
gradients.
"""

import copy

import numpy as np
import peft
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.torch.linear import Linear
from attnbook.torch.lora import (
    GPT_LINEAR_NAMES,
    LoRALinear,
    add_lora,
    closest_low_rank_weight,
    count_trainable,
    lora_layers,
    merge_lora,
    unload_lora,
)
from attnbook.torch.transformer import GPT, GPTConfig


class OneLayer(nn.Module):
    def __init__(self, d_in: int, d_out: int, bias: bool) -> None:
        super().__init__()
        self.proj = nn.Linear(d_in, d_out, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


def pair(d_in=6, d_out=5, rank=3, alpha=None, bias=True, seed=0, random_b=True):
    """The package's LoRALinear and peft's LoRA layer with the same weights (B made non-zero unless told)."""
    torch.manual_seed(seed)
    ours = LoRALinear(Linear(d_in, d_out, bias), rank, alpha)
    if random_b:
        with torch.no_grad():
            ours.B.normal_()
    config = peft.LoraConfig(r=rank, lora_alpha=rank if alpha is None else alpha, target_modules=["proj"],
                             lora_dropout=0.0, bias="none")
    theirs = peft.get_peft_model(OneLayer(d_in, d_out, bias), config).base_model.model.proj
    with torch.no_grad():  # (d_out, d_in) against (d_in, d_out): transposed copies
        theirs.base_layer.weight.copy_(ours.W.T)
        if bias:
            theirs.base_layer.bias.copy_(ours.b)
        theirs.lora_A["default"].weight.copy_(ours.A.T)  # (r, d_in)
        theirs.lora_B["default"].weight.copy_(ours.B.T)  # (d_out, r)
    return ours, theirs


@pytest.mark.parametrize("rank, alpha, bias", [(1, None, True), (3, 8.0, True), (4, 1.0, False), (8, 16.0, True)])
def test_outputs_and_gradients_of_a_and_b_match_peft(rank, alpha, bias):
    ours, theirs = pair(d_in=7, d_out=5, rank=rank, alpha=alpha, bias=bias, seed=rank)
    assert theirs.scaling["default"] == pytest.approx(ours.scaling)
    x = torch.randn(2, 4, 7)
    dy = torch.randn(2, 4, 5)
    y_ours, y_theirs = ours(x), theirs(x)
    torch.testing.assert_close(y_ours, y_theirs, rtol=1e-5, atol=1e-6)
    (y_ours * dy).sum().backward()
    (y_theirs * dy).sum().backward()
    torch.testing.assert_close(ours.A.grad, theirs.lora_A["default"].weight.grad.T, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours.B.grad, theirs.lora_B["default"].weight.grad.T, rtol=1e-5, atol=1e-6)
    # the wrapped layer is frozen in both
    assert ours.W.grad is None and theirs.base_layer.weight.grad is None
    assert sorted(n for n, p in ours.named_parameters() if p.requires_grad) == ["A", "B"]


def test_a_fresh_adapter_is_initialised_as_peft_initialises_it():
    # peft: A kaiming-uniform (a = sqrt 5), i.e. uniform in +-1/sqrt(d_in), B zero
    ours, theirs = pair(d_in=400, d_out=3, rank=50, random_b=False)
    fresh = theirs.lora_A["default"].weight
    assert torch.count_nonzero(ours.B) == 0 and torch.count_nonzero(theirs.lora_B["default"].weight) == 0
    bound = 1 / 400**0.5
    assert ours.A.abs().max() <= bound and fresh.abs().max() <= bound
    assert ours.A.abs().max() > 0.95 * bound and ours.A.std().item() == pytest.approx(fresh.std().item(), rel=0.05)


def test_zero_b_gives_the_wrapped_layer_exactly():
    torch.manual_seed(1)
    base = Linear(6, 4)
    plain = copy.deepcopy(base)
    layer = LoRALinear(base, rank=2, alpha=16.0)
    x = torch.randn(3, 6)
    assert torch.equal(layer(x), plain(x))


def test_merge_gives_the_unmerged_outputs_and_peft_s_merged_weight():
    ours, theirs = pair(rank=4, alpha=8.0)
    x = torch.randn(10, 6)
    with torch.no_grad():
        before = ours(x)
        ours.merge()
        theirs.merge()
        torch.testing.assert_close(ours(x), before, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ours.W, theirs.base_layer.weight.T, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-6)
        # merged, the output is the plain layer's with the merged weight
        assert torch.equal(ours(x), F.linear(x, ours.W.T, ours.b))
        W_merged = ours.W.clone()
        ours.unmerge()
        theirs.unmerge()
        torch.testing.assert_close(ours.W, theirs.base_layer.weight.T, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(ours(x), before, rtol=1e-5, atol=1e-6)
        assert not torch.equal(ours.W, W_merged)


def test_merging_twice_or_unmerging_an_unmerged_adapter_is_refused():
    layer = LoRALinear(Linear(3, 3), 1)
    with pytest.raises(ValueError, match="not merged"):
        layer.unmerge()
    layer.merge()
    with pytest.raises(ValueError, match="merged already"):
        layer.merge()


@pytest.mark.parametrize("rank", [0, -1, 1.5, True, "2"])
def test_a_rank_below_one_or_not_an_integer_is_refused(rank):
    with pytest.raises(ValueError, match=r"rank must be an integer, at least 1; got"):
        LoRALinear(Linear(3, 3), rank)
    with pytest.raises(ValueError, match=r"rank must be an integer, at least 1; got"):
        add_lora(tiny_gpt(), rank)


def test_alpha_must_be_positive():
    with pytest.raises(ValueError, match="alpha must be a positive number; got 0"):
        LoRALinear(Linear(3, 3), 2, alpha=0)


def test_a_torch_linear_is_refused_with_the_layouts_named():
    with pytest.raises(ValueError, match=r"attnbook.torch.Linear; got Linear \(torch.nn.Linear stores its weight "
                                         r"\(d_out, d_in\)"):
        LoRALinear(nn.Linear(3, 3), 2)
    with pytest.raises(ValueError, match="attnbook.torch.Linear; got Conv1d"):
        LoRALinear(nn.Conv1d(3, 3, 1), 2)


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=11, block_size=8, n_layers=2, n_heads=2, d_model=16))


@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), GPT_LINEAR_NAMES, ("fc1",)])
def test_add_lora_wraps_the_named_layers_freezes_the_rest_and_starts_at_the_base_model(targets):
    model = tiny_gpt()
    base = copy.deepcopy(model)
    sizes = {name: tuple(m.W.shape) for name, m in model.named_modules() if isinstance(m, Linear)}
    wrapped = add_lora(model, rank=3, alpha=6.0, targets=targets)
    assert sorted(wrapped) == sorted(n for n in sizes if n.rsplit(".", 1)[-1] in targets)
    assert [type(model.get_submodule(n)) for n in wrapped] == [LoRALinear] * len(wrapped)
    # the trainable parameters are the adapters' A and B, r (d_in + d_out) per wrapped layer
    expected = sum(3 * (sizes[n][0] + sizes[n][1]) for n in wrapped)
    assert count_trainable(model) == expected
    assert all(name.endswith((".A", ".B")) for name, p in model.named_parameters() if p.requires_grad)
    ids = torch.randint(11, (2, 8))
    assert torch.equal(model(ids), base(ids))


def test_a_training_step_moves_only_the_adapters_and_merging_keeps_the_logits():
    model = tiny_gpt(1)
    add_lora(model, rank=2, targets=GPT_LINEAR_NAMES)
    frozen = {n: p.clone() for n, p in model.named_parameters() if not p.requires_grad}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.05)
    ids = torch.randint(11, (4, 8))
    for _ in range(3):
        optimizer.zero_grad()
        F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()).backward()
        optimizer.step()
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if not p.requires_grad)
    assert all(torch.count_nonzero(layer.B) > 0 for layer in lora_layers(model))
    with torch.no_grad():
        before = model(ids)
        merge_lora(model)
        after = model(ids)
    assert all(layer.merged for layer in lora_layers(model))
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-5)


def test_at_the_first_step_only_b_has_a_gradient():
    # B = 0: the gradient reaching A passes through B and is exactly zero; B's is not
    model = tiny_gpt(2)
    add_lora(model, rank=2)
    ids = torch.randint(11, (4, 8))
    F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()).backward()
    for layer in lora_layers(model):
        assert torch.count_nonzero(layer.A.grad) == 0 and torch.count_nonzero(layer.B.grad) > 0


def test_no_matching_layer_names_the_layers_there_are():
    with pytest.raises(ValueError, match=r"named any of \['c_attn'\]; its Linear layers are named \['fc1', 'fc2', "
                                         r"'k_proj', 'out_proj', 'q_proj', 'v_proj'\]"):
        add_lora(tiny_gpt(), 2, targets=("c_attn",))


def test_unloading_gives_a_plain_gpt_of_the_original_size_with_the_same_logits():
    model = tiny_gpt(3)
    plain_names = sorted(n for n, _ in model.named_parameters())
    n_params = model.n_params()
    add_lora(model, rank=2, targets=GPT_LINEAR_NAMES)
    with torch.no_grad():
        for layer in lora_layers(model):
            layer.B.normal_(0.0, 0.1)
        ids = torch.randint(11, (2, 8))
        adapted = model(ids)
        unload_lora(model)
        assert not lora_layers(model) and model.n_params() == n_params
        assert sorted(n for n, _ in model.named_parameters()) == plain_names
        fresh = GPT(model.config)
        fresh.load_state_dict(model.state_dict())  # an ordinary GPT takes the weights as they are
        torch.testing.assert_close(fresh(ids), adapted, rtol=1e-4, atol=1e-5)


def test_the_closest_low_rank_weight_is_eckart_young_s_and_beats_random_adapters():
    # Oracle: numpy's SVD of the change; no adapter of the same rank (random A and B) comes closer.
    g = torch.Generator().manual_seed(5)
    before, after = torch.randn(9, 6, generator=g, dtype=torch.float64), torch.randn(9, 6, generator=g,
                                                                                      dtype=torch.float64)
    for rank in (1, 3, 6):
        got = closest_low_rank_weight(before, after, rank)
        U, S, Vh = np.linalg.svd((after - before).numpy(), full_matrices=False)
        np.testing.assert_allclose(got.numpy(), before.numpy() + (U[:, :rank] * S[:rank]) @ Vh[:rank], atol=1e-10)
        assert np.linalg.matrix_rank((got - before).numpy()) == rank
        best = (got - after).norm()
        for _ in range(20):
            A, B = torch.randn(9, rank, generator=g, dtype=torch.float64), torch.randn(rank, 6, generator=g,
                                                                                       dtype=torch.float64)
            assert (before + A @ B - after).norm() >= best
    assert torch.allclose(closest_low_rank_weight(before, after, 6), after)


@pytest.mark.parametrize("shape_after, rank, words", [((9, 5), 2, "one shape"), ((9, 6), 0, "rank"),
                                                      ((9, 6), 7, "at most"), ((9, 6), 2.0, "integer")])
def test_the_closest_low_rank_weight_refuses_what_it_cannot_compute(shape_after, rank, words):
    with pytest.raises(ValueError, match=words):
        closest_low_rank_weight(torch.zeros(9, 6), torch.zeros(*shape_after), rank)
