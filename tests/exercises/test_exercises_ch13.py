"""Chapter 13's checkers: answers computed another way pass; delegating answers and plausible wrong ones fail."""

import pytest
import torch
import torch.nn.functional as F

import attnbook.torch as at
from attnbook.exercises import check_group_norm_columns, check_pre_norm_block


def groups_by_loop(x, gamma, beta, groups, eps):
    out = torch.empty_like(x)
    size = x.shape[1] // groups
    for b in range(x.shape[0]):
        for t in range(x.shape[2]):
            for g in range(groups):
                rows = slice(g * size, (g + 1) * size)
                part = x[b, rows, t]
                out[b, rows, t] = (part - part.mean()) / torch.sqrt(part.var(unbiased=False) + eps)
    return out * gamma[:, None] + beta[:, None]


def test_group_norm_columns_by_loop_passes():
    assert check_group_norm_columns(groups_by_loop)


def _into_rows(x, groups):  # (B, d, T) -> (B, T, groups, d / groups): the chapter's layout, one row per group
    B, d, T = x.shape
    return x.transpose(1, 2).reshape(B, T, groups, d // groups)


def _back(z, x, gamma, beta):
    B, d, T = x.shape
    return (z.reshape(B, T, d) * gamma + beta).transpose(1, 2)


@pytest.mark.parametrize(("answer", "named"), [
    (lambda x, g, b, G, eps: _back(at.layer_norm(_into_rows(x, G), torch.ones(x.shape[1] // G, dtype=x.dtype),
                                                 torch.zeros(x.shape[1] // G, dtype=x.dtype), eps), x, g, b),
     "attnbook.torch.layernorm.layer_norm"),
    (lambda x, g, b, G, eps: _back(F.layer_norm(_into_rows(x, G), (x.shape[1] // G,), eps=eps), x, g, b),
     "layer_norm"),
    (lambda x, g, b, G, eps: _back(torch.nn.LayerNorm(x.shape[1] // G, eps=eps, elementwise_affine=False,
                                                      dtype=x.dtype)(_into_rows(x, G)), x, g, b),
     "LayerNorm.forward"),
    (lambda x, g, b, G, eps: F.group_norm(x.transpose(1, 2).reshape(-1, x.shape[1]), G, g, b, eps)
     .reshape(x.shape[0], x.shape[2], x.shape[1]).transpose(1, 2), "group_norm"),
    (lambda x, g, b, G, eps: _back(F.instance_norm(_into_rows(x, G).reshape(-1, G, x.shape[1] // G), eps=eps),
                                   x, g, b), "instance_norm"),
], ids=["package-transposed", "torch-transposed", "module-transposed", "group_norm", "instance_norm"])
def test_group_norm_columns_transposed_and_delegated_is_refused(answer, named):
    verdict = check_group_norm_columns(answer)
    assert not verdict and named in verdict.message and "calls" in verdict.message


def test_group_norm_columns_without_eps_fails_on_a_constant_group():
    def without_eps_and_std(x, gamma, beta, groups, eps):  # torch.std is the unbiased one, and eps forgotten
        B, d, T = x.shape
        z = x.reshape(B, groups, d // groups, T)
        z = (z - z.mean(2, keepdim=True)) / z.std(2, keepdim=True)
        return z.reshape(B, d, T) * gamma[:, None] + beta[:, None]

    def stats_of_the_first_group(x, gamma, beta, groups, eps):  # one mean and variance for every group
        size = x.shape[1] // groups
        first = x[:, :size]
        mean, var = first.mean(1, keepdim=True), first.var(1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + eps) * gamma[:, None] + beta[:, None]

    assert not check_group_norm_columns(without_eps_and_std)
    assert not check_group_norm_columns(stats_of_the_first_group)


def _norm_by_hand(v, gamma, beta, eps):
    centred = v - v.mean(-1, keepdim=True)
    return gamma * centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps) + beta


def test_pre_norm_block_fixed_another_way_passes_and_delegating_is_refused():
    def fixed(x, block, mask):
        normed = _norm_by_hand(x, block.gamma1, block.beta1, block.eps)
        attended = x + block.attn(normed, normed, mask)
        return attended + block.ff(_norm_by_hand(attended, block.gamma2, block.beta2, block.eps))

    assert check_pre_norm_block(fixed)
    verdict = check_pre_norm_block(lambda x, block, mask: block._block(x, mask))
    assert not verdict and "EncoderBlock.forward" in verdict.message

    def through_torch_norm(x, block, mask):
        h = torch.nn.functional.layer_norm(x, x.shape[-1:], block.gamma1, block.beta1, block.eps)
        x = x + block.attn(h, h, mask)
        return x + block.ff(torch.nn.functional.layer_norm(x, x.shape[-1:], block.gamma2, block.beta2, block.eps))

    verdict = check_pre_norm_block(through_torch_norm)
    assert not verdict and "layer_norm" in verdict.message


def test_pre_norm_block_plausible_wrong_answers_fail():
    def raw_keys(x, block, mask):  # normalises the queries only
        h = _norm_by_hand(x, block.gamma1, block.beta1, block.eps)
        x = x + block.attn(h, x, mask)
        return x + block.ff(_norm_by_hand(x, block.gamma2, block.beta2, block.eps))

    def without_scale_and_shift(x, block, mask):
        ones, zeros = torch.ones_like(block.gamma1), torch.zeros_like(block.beta1)
        h = _norm_by_hand(x, ones, zeros, block.eps)
        x = x + block.attn(h, h, mask)
        return x + block.ff(_norm_by_hand(x, ones, zeros, block.eps))

    def over_the_batch(x, block, mask):  # statistics per position and feature, across the sequences
        def norm(v, gamma, beta):
            centred = v - v.mean(0, keepdim=True)
            return gamma * centred / torch.sqrt(centred.pow(2).mean(0, keepdim=True) + block.eps) + beta

        h = norm(x, block.gamma1, block.beta1)
        x = x + block.attn(h, h, mask)
        return x + block.ff(norm(x, block.gamma2, block.beta2))

    assert not check_pre_norm_block(raw_keys)
    assert not check_pre_norm_block(without_scale_and_shift)
    assert not check_pre_norm_block(over_the_batch)


def test_a_post_norm_block_is_named():
    def post_norm(x, block, mask):
        x = _norm_by_hand(x + block.attn(x, x, mask), block.gamma1, block.beta1, block.eps)
        return _norm_by_hand(x + block.ff(x), block.gamma2, block.beta2, block.eps)

    verdict = check_pre_norm_block(post_norm)
    assert not verdict and "post-norm" in verdict.message


# --- the gradient of an embedding lookup -----------------------------------------------------------------------

from attnbook.exercises.ch13 import check_embedding_grad  # noqa: E402


def test_embedding_grad_by_index_add_passes_and_matches_autograd():
    def by_index_add(ids, G, V):
        grad = torch.zeros(V, G.shape[-1], dtype=G.dtype)
        return grad.index_add(0, ids.reshape(-1), G.reshape(-1, G.shape[-1]))

    assert check_embedding_grad(by_index_add)
    E = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    ids, G = torch.tensor([[1, 4, 1], [0, 1, 5]]), torch.randn(2, 3, 3, dtype=torch.float64)
    F.embedding(ids, E).backward(G)
    torch.testing.assert_close(by_index_add(ids, G, 6), E.grad)


def test_embedding_grad_through_autograd_is_refused_by_name():
    def through_autograd(ids, G, V):
        E = torch.zeros(V, G.shape[-1], dtype=G.dtype, requires_grad=True)
        F.embedding(ids, E).backward(G)
        return E.grad

    verdict = check_embedding_grad(through_autograd)
    assert not verdict and "torch.autograd.backward" in verdict.message


@pytest.mark.parametrize("wrong, words", [
    # the learner's likeliest slip: an assignment through the ids, which keeps one row of a repeated token
    (lambda ids, G, V: torch.zeros(V, G.shape[-1], dtype=G.dtype).index_put((ids.reshape(-1),),
                                                                            G.reshape(-1, G.shape[-1])),
     "sum of the gradients"),
    # the one-hot product of the first sequence only
    (lambda ids, G, V: F.one_hot(ids[0], V).to(G.dtype).T @ G[0], "all B sequences add up"),
])
def test_embedding_grad_mistakes_fail_with_their_hint(wrong, words):
    verdict = check_embedding_grad(wrong)
    assert not verdict and words in verdict.message, verdict.message


def test_embedding_grad_in_the_transposed_layout_fails():
    verdict = check_embedding_grad(lambda ids, G, V: torch.einsum("btv,btd->dv", F.one_hot(ids, V).to(G.dtype), G))
    assert not verdict and "shape" in verdict.message, verdict.message
