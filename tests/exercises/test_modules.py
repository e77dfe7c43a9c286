"""The module checker (``attnbook.exercises._modules.ModuleChecker``) and the exercises that ask for a class.

Every module checker accepts a class written from tensor operations and ``torch.nn``'s building blocks; refuses
its own reference, the package's modules (as submodules, base classes or calls), ``torch.nn``'s Transformer
layers and PyTorch's fused attention; names the parameters that do not fit; reports a stub as not attempted;
and, for a plausible wrong module of each exercise, names the submodule where the difference arises."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnbook.torch as at
from attnbook.exercises import (
    check_cross_attention_block,
    check_encoder_classifier,
    check_gated_cross_block,
    check_multi_query_attention,
    check_parallel_block,
)
from attnbook.exercises._harness import Outcome
from attnbook.exercises._modules import ModuleChecker, module_checkers

# --- answers written from tensor operations --------------------------------------------------------------------


def attend(q, k, v, mask):
    """softmax(q k^T / sqrt(d)) v over heads (B, h, T, d_head); ``mask`` broadcastable to (B, h, T_q, T_k)."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v


class Attention(nn.Module):
    def __init__(self, d_model, n_heads, d_kv=None):
        super().__init__()
        self.h = n_heads
        d_kv = d_model if d_kv is None else d_kv
        self.w_q, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_k, self.w_v = nn.Linear(d_model, d_kv), nn.Linear(d_model, d_kv)

    def forward(self, x_q, x_kv=None, mask=None):
        x_kv = x_q if x_kv is None else x_kv
        B, T, d = x_q.shape
        q = self.w_q(x_q).unflatten(-1, (self.h, -1)).transpose(1, 2)
        k, v = (w(x_kv).unflatten(-1, (-1, q.shape[-1])).transpose(1, 2) for w in (self.w_k, self.w_v))
        mask = None if mask is None else (mask[:, None] if mask.dim() == 3 else mask)
        return self.w_o(attend(q, k, v, mask).transpose(1, 2).reshape(B, T, d))


class MultiQueryAttention(Attention):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads, d_kv=d_model // n_heads)

    def forward(self, x, mask=None):
        return super().forward(x, None, mask)


class SelfAttention(Attention):
    def forward(self, x, mask=None):
        return super().forward(x, None, mask)


class ParallelBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, n_heads)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x, mask=None):
        h = self.norm(x)
        return x + self.attn(h, mask) + self.ff(h)


class EncoderClassifier(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_layers, n_classes):
        super().__init__()
        self.blocks = nn.ModuleList(at.EncoderBlock(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, x, keep):
        for block in self.blocks:
            x = block(x, keep[:, None, :])
        return self.head((x * keep[..., None]).sum(1) / keep.sum(1, keepdim=True))


class CrossAttentionBlock(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attn = Attention(d_model, n_heads)

    def forward(self, x, memory, src_keep):
        return x + self.attn(self.norm(x), memory, src_keep[:, None, :])


class GatedCrossBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model, n_heads)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.attn_gate, self.ff_gate = nn.Parameter(torch.zeros(1)), nn.Parameter(torch.zeros(1))

    def forward(self, x, memory, src_keep):
        x = x + self.attn_gate.tanh() * self.attn(self.norm1(x), memory, src_keep[:, None, :])
        return x + self.ff_gate.tanh() * self.ff(self.norm2(x))


ANSWERS = {check.name: answer for check, answer in (
    (check_multi_query_attention, MultiQueryAttention),
    (check_parallel_block, ParallelBlock),
    (check_encoder_classifier, EncoderClassifier),
    (check_cross_attention_block, CrossAttentionBlock),
    (check_gated_cross_block, GatedCrossBlock),
)}
CHECKERS = module_checkers()
IDS = [name for name, _ in CHECKERS]


def test_every_module_checker_has_an_answer_here_and_five_exist():
    assert sorted(c.name for _, c in CHECKERS) == sorted(ANSWERS)
    assert {name.split(".")[0] for name in IDS} == {"ch12", "ch13", "ch14"}


@pytest.mark.parametrize(("name", "checker"), CHECKERS, ids=IDS)
def test_an_answer_from_tensor_operations_passes(name, checker):
    verdict = checker(ANSWERS[checker.name])
    assert verdict and verdict.outcome is Outcome.PASSED, verdict.message
    assert f"all {len(checker.cases)} checks passed" in verdict.message


@pytest.mark.parametrize(("name", "checker"), CHECKERS, ids=IDS)
def test_the_reference_is_refused_and_a_non_class_is_a_wrong_form(name, checker):
    assert checker(checker.reference).outcome is Outcome.REFUSED
    answer = ANSWERS[checker.name]
    assert checker(lambda x: x).outcome is Outcome.WRONG_FORM
    instance = answer(*checker.cases[0].init)
    verdict = checker(instance)
    assert verdict.outcome is Outcome.WRONG_FORM and "pass the class" in verdict.message


@pytest.mark.parametrize(("name", "checker"), CHECKERS, ids=IDS)
def test_a_stub_is_not_attempted(name, checker):
    class Stub(nn.Module):
        def __init__(self, *args):
            super().__init__()
            # YOUR CODE HERE
            raise NotImplementedError

    class StubForward(ANSWERS[checker.name]):
        def forward(self, *args):
            # YOUR CODE HERE
            raise NotImplementedError

    for stub in (Stub, StubForward):
        verdict = checker(stub)
        assert not verdict and not verdict.attempted and verdict.outcome is Outcome.NOT_ATTEMPTED
        assert "not attempted yet" in verdict.message


@pytest.mark.parametrize(("name", "checker"), CHECKERS, ids=IDS)
def test_a_subclass_of_the_package_module_is_refused(name, checker):
    class Derived(at.MultiHeadAttention):
        pass

    verdict = checker(Derived)  # its __init__ is the package's: refused while it is built
    assert verdict.outcome is Outcome.REFUSED
    assert "`attnbook.torch.multihead.MultiHeadAttention.__init__`, from the book's own package" in verdict.message


@pytest.mark.parametrize(("name", "checker"), CHECKERS, ids=IDS)
def test_torchs_transformer_layers_are_refused_as_submodules(name, checker):
    answer = ANSWERS[checker.name]

    for layer in (lambda d: nn.MultiheadAttention(d, 2, batch_first=True),
                  lambda d: nn.TransformerEncoderLayer(d, 2, 2 * d, batch_first=True)):
        class Holding(answer):
            def __init__(self, d_model, *args, make=layer):
                super().__init__(d_model, *args)
                self.shortcut = make(d_model)

        verdict = checker(Holding)
        assert verdict.outcome is Outcome.REFUSED, verdict.message
        assert "your `shortcut` is PyTorch's ready-made `torch.nn." in verdict.message


def test_the_package_module_built_in_init_is_refused():
    class Packaged(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()
            self.attn = at.MultiHeadAttention(d_model, n_heads, n_kv_heads=1)

        def forward(self, x, mask=None):
            return self.attn(x, mask=mask)[0]

    verdict = check_multi_query_attention(Packaged)
    assert verdict.outcome is Outcome.REFUSED
    assert "`attnbook.torch.multihead.MultiHeadAttention.__init__`, from the book's own package" in verdict.message
    assert "while it is built" in verdict.message


def test_a_package_module_made_outside_init_is_refused_by_the_module_tree():
    shared = at.LayerNorm(8)

    class Borrowing(ParallelBlock):
        def __init__(self, d_model, n_heads, d_ff):
            super().__init__(d_model, n_heads, d_ff)
            self.norm = shared  # built before the check: only the module tree shows it

    verdict = check_parallel_block(Borrowing)
    assert verdict.outcome is Outcome.REFUSED
    assert "your `norm` is the package's `attnbook.torch.layernorm.LayerNorm`" in verdict.message


def test_the_encoder_classifier_allows_the_package_block_and_nothing_else_of_the_package():
    assert check_encoder_classifier(EncoderClassifier)

    class PackageHead(EncoderClassifier):
        def __init__(self, d_model, n_heads, d_ff, n_layers, n_classes):
            super().__init__(d_model, n_heads, d_ff, n_layers, n_classes)
            self.head = at.Linear(d_model, n_classes)

    verdict = check_encoder_classifier(PackageHead)
    assert verdict.outcome is Outcome.REFUSED and "`attnbook.torch.linear.Linear.__init__`" in verdict.message

    class TorchBlocks(EncoderClassifier):
        def __init__(self, d_model, n_heads, d_ff, n_layers, n_classes):
            super().__init__(d_model, n_heads, d_ff, n_layers, n_classes)
            self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(d_model, n_heads, d_ff, 0.0, batch_first=True)
                                        for _ in range(n_layers))

    verdict = check_encoder_classifier(TorchBlocks)
    assert verdict.outcome is Outcome.REFUSED
    assert "your `blocks.0` is PyTorch's ready-made `torch.nn.TransformerEncoderLayer`" in verdict.message


def test_pytorchs_fused_attention_is_refused_and_the_packages_function_allowed():
    class Fused(MultiQueryAttention):
        def forward(self, x, mask=None):
            B, T, d = x.shape
            q = self.w_q(x).unflatten(-1, (self.h, -1)).transpose(1, 2)
            k, v = (w(x)[:, None].expand(-1, self.h, -1, -1) for w in (self.w_k, self.w_v))
            return self.w_o(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, d))

    verdict = check_multi_query_attention(Fused)
    assert verdict.outcome is Outcome.REFUSED and "scaled_dot_product_attention" in verdict.message

    class Packaged(MultiQueryAttention):
        def forward(self, x, mask=None):
            B, T, d = x.shape
            q = self.w_q(x).unflatten(-1, (self.h, -1)).transpose(1, 2)
            k, v = (w(x)[:, None].expand(-1, self.h, -1, -1) for w in (self.w_k, self.w_v))
            m = None if mask is None else (mask[:, None] if mask.dim() == 3 else mask)
            out = at.scaled_dot_product_attention(q, k, v, mask=m)[0]
            return self.w_o(out.transpose(1, 2).reshape(B, T, d))

    assert check_multi_query_attention(Packaged)


# --- names and shapes ----------------------------------------------------------------------------------------------


def test_key_heads_of_full_width_give_the_shape_message():
    class PerHeadKeys(MultiQueryAttention):
        def __init__(self, d_model, n_heads):
            Attention.__init__(self, d_model, n_heads)  # keys and values for every head: (d_model, d_model)

    verdict = check_multi_query_attention(PerHeadKeys)
    assert verdict.outcome is Outcome.WRONG_SHAPE
    assert "`w_k.weight` is (8, 8), expected (4, 8)" in verdict.message
    assert "`w_v.bias` is (8,), expected (4,)" in verdict.message


def test_other_names_give_the_missing_and_unexpected_message():
    class OtherNames(ParallelBlock):
        def __init__(self, d_model, n_heads, d_ff):
            super().__init__(d_model, n_heads, d_ff)
            self.ln = self.norm
            del self.norm

        def forward(self, x, mask=None):
            h = self.ln(x)
            return x + self.attn(h, mask) + self.ff(h)

    verdict = check_parallel_block(OtherNames)
    assert verdict.outcome is Outcome.WRONG_FORM
    assert "missing `norm.weight` (8,), `norm.bias` (8,)" in verdict.message
    assert "unexpected `ln.weight` (8,), `ln.bias` (8,)" in verdict.message
    assert "Traceback" not in verdict.message


# --- plausible mistakes, and the submodule each verdict names ------------------------------------------------------


def test_multi_query_attention_without_the_scale_is_placed_between_w_v_and_w_o():
    class Unscaled(MultiQueryAttention):
        def forward(self, x, mask=None):
            B, T, d = x.shape
            q = self.w_q(x).unflatten(-1, (self.h, -1)).transpose(1, 2)
            k, v = self.w_k(x)[:, None], self.w_v(x)[:, None]
            return self.w_o(((q @ k.transpose(-1, -2)).softmax(-1) @ v).transpose(1, 2).reshape(B, T, d))

    verdict = check_multi_query_attention(Unscaled)
    assert verdict.outcome is Outcome.WRONG_VALUE
    assert "Your `w_q`, `w_k`, `w_v` agree; the input of your `w_o` differs" in verdict.message


def test_a_sequential_block_is_placed_before_its_ff():
    class Sequential(ParallelBlock):  # the usual pre-norm block, not the parallel one
        def forward(self, x, mask=None):
            x = x + self.attn(self.norm(x), mask)
            return x + self.ff(self.norm(x))

    verdict = check_parallel_block(Sequential)
    assert verdict.outcome is Outcome.WRONG_VALUE
    assert "the input of your `ff.0` differs" in verdict.message
    assert "`norm`" in verdict.message and "`attn`" in verdict.message


def test_a_parallel_block_without_the_mask_is_placed_inside_attn():
    class Unmasked(ParallelBlock):
        def forward(self, x, mask=None):
            return super().forward(x, None)

    verdict = check_parallel_block(Unmasked)
    assert "causal mask" in verdict.message
    assert "the input of your `attn.w_o` differs, so the difference arises in `attn`'s forward" in verdict.message


def test_a_classifier_that_averages_the_padding_is_placed_before_its_head():
    class MeanOfAll(EncoderClassifier):
        def forward(self, x, keep):
            for block in self.blocks:
                x = block(x, keep[:, None, :])
            return self.head(x.mean(1))

    verdict = check_encoder_classifier(MeanOfAll)
    assert verdict.outcome is Outcome.WRONG_VALUE
    assert "`blocks.1` agree" in verdict.message and "the input of your `head` differs" in verdict.message


def test_cross_attention_with_the_source_mask_on_the_queries_axis_fails():
    class QueriesMasked(CrossAttentionBlock):
        def forward(self, x, memory, src_keep):
            keep = src_keep[:, : x.shape[1], None] if src_keep.shape[1] >= x.shape[1] else None
            return x + self.attn(self.norm(x), memory, keep)

    verdict = check_cross_attention_block(QueriesMasked)
    assert verdict.outcome is Outcome.WRONG_VALUE
    assert "the input of your `attn.w_o` differs, so the difference arises in `attn`'s forward" in verdict.message


def test_cross_attention_that_normalises_the_memory_is_placed_at_w_k():
    class NormedMemory(CrossAttentionBlock):
        def forward(self, x, memory, src_keep):
            return x + self.attn(self.norm(x), self.norm(memory), src_keep[:, None, :])

    verdict = check_cross_attention_block(NormedMemory)
    assert "the input of your `attn.w_k` differs" in verdict.message


def test_gates_without_the_tanh_are_placed_after_every_submodule():
    class Ungated(GatedCrossBlock):
        def forward(self, x, memory, src_keep):
            x = x + self.attn_gate * self.attn(self.norm1(x), memory, src_keep[:, None, :])
            return x + self.ff_gate * self.ff(self.norm2(x))

    verdict = check_gated_cross_block(Ungated)
    assert verdict.outcome is Outcome.WRONG_VALUE
    assert "the input of your `norm2` differs" in verdict.message


def test_a_gate_left_out_of_forward_gets_no_gradient():
    class FrozenGate(GatedCrossBlock):
        def forward(self, x, memory, src_keep):
            x = x + self.attn_gate.detach().tanh() * self.attn(self.norm1(x), memory, src_keep[:, None, :])
            return x + self.ff_gate.tanh() * self.ff(self.norm2(x))

    verdict = check_gated_cross_block(FrozenGate)
    assert verdict.outcome is Outcome.WRONG_VALUE
    assert "the output agrees" in verdict.message and "`attn_gate` gets no gradient" in verdict.message


def test_a_gradient_that_differs_is_named():
    class HalfGradient(GatedCrossBlock):
        def forward(self, x, memory, src_keep):
            gate = self.ff_gate.tanh()
            gate = gate / 2 + (gate / 2).detach()  # the right value, half its gradient
            x = x + self.attn_gate.tanh() * self.attn(self.norm1(x), memory, src_keep[:, None, :])
            return x + gate * self.ff(self.norm2(x))

    verdict = check_gated_cross_block(HalfGradient)
    assert verdict.outcome is Outcome.WRONG_VALUE
    assert "the gradient of `ff_gate` differs" in verdict.message


def test_an_error_in_forward_is_reported_with_its_case():
    class Broken(CrossAttentionBlock):
        def forward(self, x, memory, src_keep):
            return x + self.attn(self.norm(x), memory, src_keep)  # (B, S) broadcast against (B, h, T, S)

    verdict = check_cross_attention_block(Broken)
    assert verdict.outcome is Outcome.ERROR and "forward raised RuntimeError" in verdict.message
    assert "CrossAttentionBlock(8, 2)" in verdict.message


def test_a_module_checker_is_not_a_function_checker():
    assert all(isinstance(c, ModuleChecker) for _, c in CHECKERS)
    assert "module checker for MultiQueryAttention" in repr(check_multi_query_attention)


def test_a_head_count_fixed_in_the_code_passes_one_case_and_fails_the_next():
    class TwoHeads(ParallelBlock):
        def __init__(self, d_model, n_heads, d_ff):
            super().__init__(d_model, n_heads, d_ff)
            self.attn.h = 2  # right for the first case only

    verdict = check_parallel_block(TwoHeads)
    assert verdict.outcome is Outcome.WRONG_VALUE
    assert "ParallelBlock(12, 3, 24)" in verdict.message  # the first case has 2 heads: it passed
    assert "the input of your `attn.w_o` differs" in verdict.message


def test_one_walk_finds_a_ready_made_part_for_every_module_building_checker():
    """``ready_made_submodule`` is what the module checkers, the Part II and Part V capstones and the Part III
    capstone's model all use: it finds a subclass of a refused class as well as the class itself, at any depth,
    for each package it is told to refuse, and leaves an allowed class alone with whatever it holds."""
    from attnbook.exercises._modules import ready_made_submodule
    from attnbook.exercises._part5 import _delegated
    from attnbook.exercises.ch15 import _ready_made

    class MyGPT(at.GPT):  # a learner's class that only renames the package's
        pass

    model = MyGPT(at.GPTConfig(vocab_size=11, block_size=8, n_layers=1, n_heads=2, d_model=8))
    found = ready_made_submodule(model)
    assert (found.name, found.verb, found.owner) == ("", "derives from", "attnbook"), found
    assert "derives from `attnbook.torch." in _ready_made(model)

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4), nn.TransformerEncoderLayer(4, 2, 8, batch_first=True))

    found = ready_made_submodule(Holder())
    assert (found.name, found.verb, found.owner, found.what) == (
        "inner.1", "is", "torch", "`torch.nn.TransformerEncoderLayer`"), found
    assert "your model's module `inner.1` is `torch.nn.TransformerEncoderLayer`" in _delegated(Holder())
    assert ready_made_submodule(Holder(), allowed=[nn.Sequential]) is None
    assert ready_made_submodule(nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))) is None

    Foreign = type("Foreign", (nn.Module,), {"__module__": "peft.tuners.lora"})
    assert ready_made_submodule(Foreign()) is None  # not refused unless asked for
    assert ready_made_submodule(Foreign(), owners=("peft",)).owner == "peft"
    assert "`peft.tuners.lora.Foreign`" in _delegated(Foreign())
