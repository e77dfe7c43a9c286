"""Chapter 20's checkers: answers computed another way pass; two passes, kept blocks, a tile-local softmax
and a whole matrix of weights are refused."""

import math

import numpy as np
import torch

import attnbook.numpy as an
from attnbook.exercises import (
    check_blockwise_attention,
    check_longest_context,
    check_merge_partials,
    check_tiled_backward,
)
from attnbook.exercises.ch20 import BlockStream


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


def _context_by_search(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled):
    # another way to the same integer: a binary search on the bytes kept for T positions
    def kept(T):
        per_head_position = 2 * d_head * (n_heads + n_kv_heads) + (n_heads if tiled else n_heads * T)
        return batch * n_layers * bytes_per_value * T * per_head_position

    lo, hi = 0, 1
    while kept(hi) <= memory_bytes:
        hi *= 2
    while hi - lo > 1:  # kept(lo) fits, kept(hi) does not
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if kept(mid) <= memory_bytes else (lo, mid)
    return lo


def test_longest_context_by_a_search_passes_and_a_strict_bound_fails():
    assert check_longest_context(_context_by_search)

    def strict(*args):  # memory that is exactly full refused
        return _context_by_search(args[0] - 1, *args[1:])

    verdict = check_longest_context(strict)
    assert not verdict and "exactly 1,000 positions" in verdict.message


def test_longest_context_names_the_forgotten_lse_kv_heads_and_linear_terms():
    def no_lse(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled):
        if not tiled:
            return _context_by_search(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value,
                                      tiled)
        return memory_bytes // (batch * n_layers * bytes_per_value * 2 * d_head * (n_heads + n_kv_heads))

    def all_heads(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled):
        return _context_by_search(memory_bytes, batch, n_layers, n_heads, n_heads, d_head, bytes_per_value, tiled)

    def only_P(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled):
        if tiled:
            return _context_by_search(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value,
                                      tiled)
        return math.isqrt(memory_bytes // (batch * n_layers * bytes_per_value * n_heads))

    assert "one number per query and head" in check_longest_context(no_lse).message
    assert "n_kv_heads heads" in check_longest_context(all_heads).message
    assert "solve the quadratic" in check_longest_context(only_P).message


def test_longest_context_with_float_roots_passes_and_without_the_batch_fails():
    def with_float_root(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled):
        c = memory_bytes // (batch * n_layers * bytes_per_value)
        b = 2 * d_head * (n_heads + n_kv_heads)
        if tiled:
            return c // (b + n_heads)
        return int((-b + math.sqrt(b * b + 4 * n_heads * c)) / (2 * n_heads))

    def no_batch(memory_bytes, batch, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled):
        return _context_by_search(memory_bytes, 1, n_layers, n_heads, n_kv_heads, d_head, bytes_per_value, tiled)

    assert check_longest_context(with_float_root)
    assert "shared by batch sequences" in check_longest_context(no_batch).message


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


def test_the_partials_do_not_lead_back_to_their_source():
    # the parts a merge receives are a plain list of triples of arrays: nothing to recompute attention from
    seen = []

    def peek(parts):
        seen.append(parts)
        return np.zeros((len(parts[0][0]), parts[0][2].shape[1]))

    assert not check_merge_partials(peek)
    parts = seen[0]
    assert type(parts) is list and all(type(t) is tuple and len(t) == 3 for t in parts)
    assert not hasattr(parts, "source") and not any(hasattr(p, "source") for p in parts)
    assert all(isinstance(a, np.ndarray) and a.ndim in (1, 2) for t in parts for a in t)

    def from_source(parts):  # an answer that looks for the queries, keys and values fails
        Q, K, V, mask = parts.source
        return an.scaled_dot_product_attention(Q, K, V, mask=mask)[0]

    verdict = check_merge_partials(from_source)
    assert not verdict and "AttributeError" in verdict.message


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


def test_collecting_copies_of_the_blocks_is_refused():
    def collect_copies(q, blocks):  # copies outlive the blocks handed out: the weak references die, memory grows
        Ks, Vs = [], []
        for K_b, V_b in blocks:
            Ks.append(K_b.copy())
            Vs.append(np.array(V_b, copy=True))
        K, V = np.concatenate(Ks), np.concatenate(Vs)
        s = K @ q / math.sqrt(len(q))
        w = np.exp(s - s.max())
        return w @ V / w.sum()

    def collect_lists(q, blocks):  # the same, as Python lists of numbers
        rows = []
        for K_b, V_b in blocks:
            rows.extend(zip(K_b.tolist(), V_b.tolist(), strict=True))
        K, V = np.array([k for k, _ in rows]), np.array([v for _, v in rows])
        s = K @ q / math.sqrt(len(q))
        w = np.exp(s - s.max())
        return w @ V / w.sum()

    for answer in (collect_copies, collect_lists):
        verdict = check_blockwise_attention(answer)
        assert not verdict and "copies?" in verdict.message and "4,096 keys" in verdict.message
    stream = BlockStream((np.zeros((4096, 8)),), 64)
    try:
        kept = [b.copy() for b in stream]
        raise AssertionError(f"{len(kept)} copied blocks were allowed")
    except RuntimeError as error:
        assert "keep running statistics" in str(error)


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
    verdict = check_tiled_backward(lambda *a: _tiled(*a, local_softmax=True))
    assert not verdict and "normalised over that tile's keys alone" in verdict.message, verdict.message



def test_delegating_the_tiled_backward_is_refused_by_name():
    import attnbook.numpy as an

    def delegating(Q, K, V, O, dO, lse, block):  # noqa: E741
        return an.flash_attention_backward(Q, K, V, O, dO, lse, block_q=block, block_k=block)

    verdict = check_tiled_backward(delegating)
    assert not verdict and "flash_attention_backward" in verdict.message


def test_the_pytorch_twin_of_the_tiled_backward_is_refused_by_name():
    import attnbook.torch as at

    def through_torch(Q, K, V, O, dO, lse, block):  # noqa: E741
        grads = at.flash_attention_backward(*(torch.from_numpy(a) for a in (Q, K, V, O, dO, lse)),
                                            block_q=block, block_k=block)
        return tuple(g.numpy() for g in grads)

    verdict = check_tiled_backward(through_torch)
    assert not verdict and "flash_attention_backward" in verdict.message, verdict.message
