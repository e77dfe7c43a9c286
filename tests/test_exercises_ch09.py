"""Chapter 9's checkers accept answers computed another way, refuse the package's own heads, and reject
wrong answers a learner might write."""

import numpy as np
import torch

import attnbook.numpy as anp
from attnbook.exercises import check_heads_attention, check_mha_parameters


def heads_by_torch(X, W_q, W_k, W_v, W_o, h):
    # torch's multi-head attention needs h * d_head = embed_dim: give it kdim/vdim and a wide output instead.
    x = torch.tensor(X)
    q, k, v = (x @ torch.tensor(W) for W in (W_q, W_k, W_v))
    T, inner = q.shape
    q, k, v = (t.view(T, h, inner // h).transpose(0, 1) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return (out.transpose(0, 1).reshape(T, inner) @ torch.tensor(W_o)).numpy()


def heads_by_loop(X, W_q, W_k, W_v, W_o, h):
    d_head = W_q.shape[1] // h
    outs = []
    for i in range(h):
        c = slice(i * d_head, (i + 1) * d_head)
        s = (X @ W_q[:, c]) @ (X @ W_k[:, c]).T / np.sqrt(d_head)
        w = np.exp(s - s.max(1, keepdims=True))
        outs.append(w / w.sum(1, keepdims=True) @ (X @ W_v[:, c]))
    return np.concatenate(outs, axis=1) @ W_o


def count_by_torch(d_model, d_kv, h, d_head):
    layers = [torch.nn.Linear(d_model, h * d_head), torch.nn.Linear(d_kv, h * d_head),
              torch.nn.Linear(d_kv, h * d_head), torch.nn.Linear(h * d_head, d_model)]
    return sum(p.numel() for layer in layers for p in layer.parameters())


def test_answers_computed_another_way_pass():
    assert check_heads_attention(heads_by_torch)
    assert check_heads_attention(heads_by_loop)
    assert check_mha_parameters(count_by_torch)


def test_delegating_to_the_package_is_refused_by_name():
    def through_split(X, W_q, W_k, W_v, W_o, h):
        Q, K, V = (anp.split_heads(X @ W, h) for W in (W_q, W_k, W_v))
        out = anp.scaled_dot_product_attention(Q, K, V)[0]
        return out.transpose(1, 0, 2).reshape(X.shape[0], -1) @ W_o

    def through_merge(X, W_q, W_k, W_v, W_o, h):
        T, inner = X.shape[0], W_q.shape[1]
        Q, K, V = ((X @ W).reshape(T, h, inner // h).transpose(1, 0, 2) for W in (W_q, W_k, W_v))
        return anp.merge_heads(anp.scaled_dot_product_attention(Q, K, V)[0]) @ W_o

    verdict = check_heads_attention(through_split)
    assert not verdict and "attnbook.numpy.multihead.split_heads" in verdict.message
    verdict = check_heads_attention(through_merge)
    assert not verdict and "attnbook.numpy.multihead.merge_heads" in verdict.message


def test_wrong_answers_not_among_the_listed_mistakes_fail():
    # Forgetting the output projection; splitting by every h-th column instead of contiguous blocks.
    def no_output_projection(X, W_q, W_k, W_v, W_o, h):
        return heads_by_loop(X, W_q, W_k, W_v, np.eye(W_o.shape[0])[:, : W_o.shape[1]], h)

    def interleaved(X, W_q, W_k, W_v, W_o, h):
        order = np.arange(W_q.shape[1]).reshape(-1, h).T.ravel()  # every h-th column
        return heads_by_loop(X, W_q[:, order], W_k[:, order], W_v[:, order], W_o[order], h)

    assert not check_heads_attention(no_output_projection)
    assert not check_heads_attention(interleaved)
    assert not check_mha_parameters(lambda d_model, d_kv, h, d_head: 4 * (d_model * h * d_head + h * d_head))


def test_unattempted_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_heads_attention(todo).attempted and not check_mha_parameters(todo).attempted
