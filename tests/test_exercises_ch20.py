"""Chapter 20's checkers: answers computed another way pass; two passes, kept blocks, a tile-local softmax
and a whole matrix of weights are refused."""

import math

import numpy as np
import torch

from attnbook.exercises import check_blockwise_attention, check_running_normalizer, check_tiled_backward
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
    def two_passes(blocks):
        m = max(float(b.max()) for b in blocks)
        return m, sum(float(np.exp(b - m).sum()) for b in blocks)  # the stream is spent

    verdict = check_running_normalizer(two_passes)
    assert not verdict and "only once" in verdict.message


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

