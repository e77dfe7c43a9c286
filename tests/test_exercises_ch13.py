"""Chapter 13's checkers: answers computed another way pass; delegating answers and plausible wrong ones fail."""

import torch
import torch.nn.functional as F

import attnbook.torch as at
from attnbook.exercises import check_layer_norm_columns, check_pre_norm_block


def columns_by_loop(x, gamma, beta, eps):
    out = torch.empty_like(x)
    for b in range(x.shape[0]):
        for t in range(x.shape[2]):
            col = x[b, :, t]
            out[b, :, t] = (col - col.mean()) / torch.sqrt(col.var(unbiased=False) + eps) * gamma + beta
    return out


def test_layer_norm_columns_by_loop_passes_and_delegating_is_refused():
    assert check_layer_norm_columns(columns_by_loop)
    verdict = check_layer_norm_columns(lambda x, g, b, eps: at.layer_norm(x.transpose(1, 2), g, b, eps).transpose(1, 2))
    assert not verdict and "layer_norm" in verdict.message
    verdict = check_layer_norm_columns(
        lambda x, g, b, eps: F.layer_norm(x.transpose(1, 2), g.shape, g, b, eps).transpose(1, 2))
    assert not verdict and "layer_norm" in verdict.message


def test_layer_norm_columns_without_eps_fails_on_a_constant_column():
    def without_eps_and_std(x, gamma, beta, eps):  # torch.std is the unbiased one, and eps forgotten
        mean = x.mean(1, keepdim=True)
        return (x - mean) / x.std(1, keepdim=True) * gamma[:, None] + beta[:, None]

    assert not check_layer_norm_columns(without_eps_and_std)


def test_pre_norm_block_fixed_another_way_passes_and_delegating_is_refused():
    def fixed(x, block, mask):
        attended = x + block.attn(block.norm1(x), block.norm1(x), mask)
        return attended + block.ff(block.norm2(attended))

    assert check_pre_norm_block(fixed)
    verdict = check_pre_norm_block(lambda x, block, mask: block._block(x, mask))
    assert not verdict and "EncoderBlock.forward" in verdict.message


def test_pre_norm_block_that_attends_to_the_raw_input_fails():
    def raw_keys(x, block, mask):  # normalises the queries only
        x = x + block.attn(block.norm1(x), x, mask)
        return x + block.ff(block.norm2(x))

    assert not check_pre_norm_block(raw_keys)
