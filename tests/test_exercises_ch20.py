"""Chapter 20's checkers: answers computed another way pass; two passes, kept blocks, a tile-local softmax
and a whole matrix of weights are refused."""

import math

import numpy as np
import torch

from attnbook.exercises import (
    check_blockwise_attention,
    check_longest_context,
    check_merge_partials,
    check_tiled_backward,
)
from attnbook.exercises.ch20 import BlockStream, Partials


def test_a_stream_reads_once_and_refuses_kept_blocks():
    x = np.arange(10.0)
    stream = BlockStream((x,), 3)
    assert [b.tolist() for b in stream] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    try:
        iter(stream)
        raise AssertionError("a second pass was allowed")
    except RuntimeError as error:
        assert "only once" in str(error)
    kept = []
    try:
        for b in BlockStream((x,), 2):
            kept.append(b)
        raise AssertionError("keeping every block was allowed")
    except RuntimeError as error:
        assert "block 1 is still held when block 3 is read" in str(error)
    assert BlockStream((x,), 3) == stream  # reading does not change it: the checker's in-place test passes


def test_two_passes_are_refused():
    def two_passes(q, blocks):
        m = max(float((K_b @ q).max()) for K_b, _ in blocks)  # a first pass for the maximum
        w = [(np.exp(K_b @ q - m), V_b) for K_b, V_b in blocks]  # the stream is spent: this raises
        return sum(e @ V_b for e, V_b in w) / sum(e.sum() for e, _ in w)

    verdict = check_blockwise_attention(two_passes)
    assert not verdict and ("only once" in verdict.message or "keep running statistics" in verdict.message)


def test_longest_context_by_a_search_passes_and_a_strict_bound_fails():
    def by_search(memory_bytes, weights_bytes, batch, n_layers, n_kv_heads, d_head, bytes_per_value):
        per_token = 2 * n_layers * n_kv_heads * d_head * bytes_per_value * batch
        lo, hi = 0, max(0, memory_bytes) // per_token + 1  # the answer lies in [lo, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if weights_bytes + mid * per_token <= memory_bytes else (lo, mid)
        return lo

    def strict(memory_bytes, weights_bytes, batch, n_layers, n_kv_heads, d_head, bytes_per_value):
        per_token = 2 * n_layers * n_kv_heads * d_head * bytes_per_value * batch
        return max(0, (memory_bytes - weights_bytes - 1) // per_token)  # memory that is exactly full refused

    assert check_longest_context(by_search)
    verdict = check_longest_context(strict)
    assert not verdict and "exactly 1,000 tokens" in verdict.message


def test_longest_context_names_the_forgotten_batch_and_weights():
    def one_sequence(memory_bytes, weights_bytes, batch, n_layers, n_kv_heads, d_head, bytes_per_value):
        return max(0, (memory_bytes - weights_bytes) // (2 * n_layers * n_kv_heads * d_head * bytes_per_value))

    def no_weights(memory_bytes, weights_bytes, batch, n_layers, n_kv_heads, d_head, bytes_per_value):
        return memory_bytes // (2 * n_layers * n_kv_heads * d_head * bytes_per_value * batch)

    assert "once per sequence" in check_longest_context(one_sequence).message
    assert "weights take their share" in check_longest_context(no_weights).message


def _merge_pairwise(parts):
    # a tree reduction written another way: fold the triples two at a time, in logsumexp form
    def combine(a, b):
        (m1, l1, a1), (m2, l2, a2) = a, b
        m = np.maximum(m1, m2)
        f1, f2 = np.exp(m1 - m), np.exp(m2 - m)
        return m, l1 * f1 + l2 * f2, a1 * f1[:, None] + a2 * f2[:, None]

    merged = list(parts)
    while len(merged) > 1:
        merged = [combine(*merged[i:i + 2]) if i + 1 < len(merged) else merged[i] for i in range(0, len(merged), 2)]
    m, ell, acc = merged[0]
    return acc / ell[:, None]


def test_a_pairwise_merge_passes_and_wrong_merges_are_named():
    assert check_merge_partials(_merge_pairwise)

    def without_acc_rescale(parts):
        M = np.max([m for m, _, _ in parts], axis=0)
        return sum(acc for _, _, acc in parts) / sum(ell * np.exp(m - M) for m, ell, _ in parts)[:, None]

    def equal_weights(parts):
        return np.mean([acc / ell[:, None] for _, ell, acc in parts], axis=0)

    assert "rescale it by" in check_merge_partials(without_acc_rescale).message
    assert "do not weigh the same" in check_merge_partials(equal_weights).message


def test_a_merge_that_divides_each_part_first_fails_on_a_part_with_no_keys():
    def normalise_each(parts):  # acc / l is 0 / 0 for a query that sees no key in a part
        M = np.max([m for m, _, _ in parts], axis=0)
        weights = [ell * np.exp(m - M) for m, ell, _ in parts]
        outputs = [acc / ell[:, None] for _, ell, acc in parts]
        return sum(w[:, None] * o for w, o in zip(weights, outputs, strict=True)) / sum(weights)[:, None]

    verdict = check_merge_partials(normalise_each)
    assert not verdict and "m = -inf" in verdict.message


def test_partials_keep_their_source_through_a_copy():
    import copy

    parts = Partials([(np.zeros(1), np.ones(1), np.zeros((1, 2)))])
    parts.source = ("Q", "K", "V", "mask")
    assert copy.deepcopy(parts).source == parts.source


def test_a_torch_answer_over_the_blocks_passes():
    def with_torch(q, blocks):  # a learner in PyTorch, logsumexp-style, still one pass
        q = torch.from_numpy(q)
        lse, acc = torch.tensor(-math.inf, dtype=torch.float64), torch.zeros((), dtype=torch.float64)
        for K_b, V_b in blocks:
            s = torch.from_numpy(K_b) @ q / math.sqrt(len(q))
            new = torch.logaddexp(lse, torch.logsumexp(s, 0))
            acc = acc * torch.exp(lse - new) + torch.exp(s - new) @ torch.from_numpy(V_b)
            lse = new
        return acc

    assert check_blockwise_attention(with_torch)


def test_collecting_the_keys_is_refused():
    def collect(q, blocks):
        Ks, Vs = [], []
        for K_b, V_b in blocks:
            Ks.append(K_b)
            Vs.append(V_b)
        K, V = np.concatenate(Ks), np.concatenate(Vs)
        w = np.exp(K @ q / math.sqrt(len(q)) - (K @ q / math.sqrt(len(q))).max())
        return w @ V / w.sum()

    verdict = check_blockwise_attention(collect)
    assert not verdict and "keep running statistics" in verdict.message


def _tiled(Q, K, V, O, dO, lse, block, *, local_softmax=False):  # noqa: E741
    # queries outside, keys inside (the forward's order): another correct loop, or a tile-local softmax
    c, D = 1 / math.sqrt(Q.shape[-1]), (dO * O).sum(-1)
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for q0 in range(0, len(Q), block):
        for k0 in range(0, len(K), block):
            S = Q[q0:q0 + block] @ K[k0:k0 + block].T * c
            if local_softmax:
                P = np.exp(S - S.max(-1, keepdims=True))
                P /= P.sum(-1, keepdims=True)
            else:
                P = np.exp(S - lse[q0:q0 + block, None])
            dV[k0:k0 + block] += P.T @ dO[q0:q0 + block]
            dS = P * (dO[q0:q0 + block] @ V[k0:k0 + block].T - D[q0:q0 + block, None])
            dQ[q0:q0 + block] += c * dS @ K[k0:k0 + block]
            dK[k0:k0 + block] += c * dS.T @ Q[q0:q0 + block]
    return dQ, dK, dV


def test_the_other_loop_order_passes_and_a_tile_softmax_fails():
    assert check_tiled_backward(_tiled)
    assert not check_tiled_backward(lambda *a: _tiled(*a, local_softmax=True))



def test_delegating_the_tiled_backward_is_refused_by_name():
    import attnbook.numpy as an

    def delegating(Q, K, V, O, dO, lse, block):  # noqa: E741
        return an.flash_attention_backward(Q, K, V, O, dO, lse, block_q=block, block_k=block)

    verdict = check_tiled_backward(delegating)
    assert not verdict and "flash_attention_backward" in verdict.message
