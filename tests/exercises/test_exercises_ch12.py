"""Chapter 12's checkers accept answers written another way, refuse one that delegates to PyTorch's own
conversion or to autograd, and reject wrong answers a learner would plausibly write."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from attnbook.exercises import check_mha_float_mask, check_smoothed_ce_grad
from attnbook.exercises.ch12 import _float_mask


def float_mask_with_where(attn_mask, key_padding_mask, n_heads):
    def added(mask):
        if mask.is_floating_point():
            return mask.double()
        return torch.where(mask, float("-inf"), 0.0).double()

    B, T_k = key_padding_mask.shape
    T_q = attn_mask.shape[0]
    out = torch.empty(B, n_heads, T_q, T_k, dtype=torch.float64)
    out[:] = (added(attn_mask)[None] + added(key_padding_mask)[:, None, :])[:, None]
    return out


def smoothed_by_loops(logits, target, smoothing):
    B, V = logits.shape
    kept = [b for b in range(B) if target[b] != -100]
    grad = torch.zeros_like(logits)
    for b in kept:
        q = torch.full((V,), smoothing / V, dtype=logits.dtype)
        q[target[b]] += 1 - smoothing
        grad[b] = (torch.softmax(logits[b], 0) - q) / len(kept)
    return grad


def test_answers_written_another_way_pass():
    assert check_mha_float_mask(float_mask_with_where)
    assert check_smoothed_ce_grad(smoothed_by_loops)


def test_the_reference_mask_makes_sdpa_reproduce_multihead_attention():
    # what the exercise claims: given the merged mask, F.scaled_dot_product_attention on the heads is the layer
    torch.manual_seed(12)
    d_model, h, B, T = 8, 2, 2, 5
    layer = torch.nn.MultiheadAttention(d_model, h, batch_first=True, dtype=torch.float64)
    x = torch.randn(B, T, d_model, dtype=torch.float64)
    bias = -0.3 * (torch.arange(T)[:, None] - torch.arange(T)).abs().double()
    attn_mask = bias.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    key_padding_mask = torch.zeros(B, T, dtype=torch.float64)
    key_padding_mask[1, 3:] = float("-inf")
    mask = _float_mask(attn_mask, key_padding_mask, h)
    W_q, W_k, W_v = layer.in_proj_weight.chunk(3)
    b_q, b_k, b_v = layer.in_proj_bias.chunk(3)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q, k, v = ((x @ W.T + b).unflatten(-1, (h, -1)).transpose(1, 2)
                   for W, b in ((W_q, b_q), (W_k, b_k), (W_v, b_v)))
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        ours = layer.out_proj(heads.transpose(1, 2).flatten(2))
        theirs, _ = layer(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask)
    assert torch.allclose(ours, theirs)


@pytest.mark.parametrize(("checker", "answer", "named"), [
    (check_mha_float_mask,
     lambda a, k, h: (F._canonical_mask(mask=a, mask_name="attn_mask", other_type=None, other_name="",
                                        target_type=torch.float64, check_other=False)
                      + F._canonical_mask(mask=k, mask_name="key_padding_mask", other_type=None, other_name="",
                                          target_type=torch.float64, check_other=False)[:, None])[:, None]
     .expand(-1, h, -1, -1),
     "_canonical_mask"),
    (check_smoothed_ce_grad,
     lambda z, t, s: torch.autograd.grad(F.cross_entropy(z.requires_grad_(), t, label_smoothing=s), z)[0],
     "torch.autograd.grad"),
], ids=["canonical-mask", "autograd"])
def test_delegating_answers_are_refused_by_name(checker, answer, named):
    verdict = checker(answer)
    assert not verdict and named in verdict.message and "calls" in verdict.message


def test_float_mask_from_the_layer_s_own_merge_is_refused():
    def merged_by_the_layer(attn_mask, key_padding_mask, n_heads):
        def added(mask):
            return mask if mask.is_floating_point() else torch.zeros(mask.shape).masked_fill(mask, float("-inf"))

        T_k = attn_mask.shape[-1]
        layer = torch.nn.MultiheadAttention(n_heads, n_heads)
        query = torch.zeros(key_padding_mask.shape[0], T_k, n_heads)
        return layer.merge_masks(added(attn_mask), added(key_padding_mask), query)[0]

    verdict = check_mha_float_mask(merged_by_the_layer)
    assert not verdict and "merge_masks" in verdict.message


def test_float_mask_by_multiplying_with_minus_infinity_is_refused():
    # -inf times False is -inf times 0, NaN: every allowed score would become NaN
    def times_minus_inf(attn_mask, key_padding_mask, n_heads):
        def added(mask):
            return mask if mask.is_floating_point() else mask.double() * float("-inf")

        return (added(attn_mask) + added(key_padding_mask)[:, None])[:, None].expand(-1, n_heads, -1, -1)

    verdict = check_mha_float_mask(times_minus_inf)
    assert not verdict and "NaN" in verdict.message


def test_ignored_rows_left_in_the_gradient_are_refused():
    # a learner who maps -100 to class 0 instead of leaving the row out
    def ignored_as_class_zero(logits, target, smoothing):
        return smoothed_by_loops(logits, target.clamp_min(0), smoothing)

    assert not check_smoothed_ce_grad(ignored_as_class_zero)
