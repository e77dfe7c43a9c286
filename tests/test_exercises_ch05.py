"""Chapter 5's checker: answers written another way pass, an answer that calls the package's attention is
refused by name, and wrong answers a learner writes beyond the listed mistakes are refused."""

import math

import numpy as np
import torch

import attnbook.numpy as anp
from attnbook.exercises import check_batched_attention_columns


def per_query(X, Z, W_q, b_q, W_k, b_k, W_v, b_v):
    """Algorithm 3 of the chapter, one query column of one sequence at a time, with the package's
    single-query attention (allowed here only as a test oracle: the checker forbids it to learners)."""
    B, _, T_q = X.shape
    out = np.zeros((B, W_v.shape[0], T_q))
    for b in range(B):
        for j in range(T_q):
            out[b, :, j] = anp.single_query_attention(X[b, :, j], Z[b].T, W_q.T, b_q, W_k.T, b_k, W_v.T, b_v)[0]
    return out


def by_torch(X, Z, W_q, b_q, W_k, b_k, W_v, b_v):
    """torch.nn.functional.linear stores weights in the column convention, as this exercise does."""
    t = torch.tensor
    Q = torch.nn.functional.linear(t(X).transpose(-1, -2), t(W_q), t(b_q))
    K = torch.nn.functional.linear(t(Z).transpose(-1, -2), t(W_k), t(b_k))
    V = torch.nn.functional.linear(t(Z).transpose(-1, -2), t(W_v), t(b_v))
    W = torch.softmax(Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1]), dim=-1)
    return (W @ V).transpose(-1, -2).numpy()


def test_the_reference_agrees_with_a_loop_over_queries_and_with_torch():
    for case in check_batched_attention_columns.cases:
        expected = check_batched_attention_columns.reference(*case.args)
        assert np.allclose(per_query(*case.args), expected)
        assert np.allclose(by_torch(*case.args), expected)


def test_an_answer_through_torch_passes():
    assert check_batched_attention_columns(by_torch)


def test_an_answer_without_the_key_bias_passes():
    # The key bias shifts every score of a query alike, which the softmax ignores (the chapter's exercise).
    def no_key_bias(X, Z, W_q, b_q, W_k, b_k, W_v, b_v):
        return by_torch(X, Z, W_q, b_q, W_k, np.zeros_like(b_k), W_v, b_v)

    assert check_batched_attention_columns(no_key_bias)


def test_an_answer_through_the_package_is_refused_by_name():
    verdict = check_batched_attention_columns(per_query)
    assert not verdict and "attnbook.numpy.attention.single_query_attention" in verdict.message

    def through_rows(X, Z, W_q, b_q, W_k, b_k, W_v, b_v):
        rows = lambda A: np.swapaxes(A, -1, -2)  # noqa: E731
        out, _ = anp.scaled_dot_product_attention(rows(X) @ W_q.T + b_q, rows(Z) @ W_k.T + b_k,
                                                  rows(Z) @ W_v.T + b_v)
        return rows(out)

    verdict = check_batched_attention_columns(through_rows)
    assert not verdict and "attnbook.numpy.attention.scaled_dot_product_attention" in verdict.message


# --- wrong answers a learner writes, beyond the listed mistakes -------------------------------------

def test_an_answer_that_adds_the_value_bias_twice_is_refused():
    # Adding b_v after the weighted sum as well as before counts it twice.
    def twice(X, Z, W_q, b_q, W_k, b_k, W_v, b_v):
        return by_torch(X, Z, W_q, b_q, W_k, b_k, W_v, b_v) + b_v[:, None]

    verdict = check_batched_attention_columns(twice)
    assert not verdict and "wrong value" in verdict.message


def test_an_answer_with_the_full_transpose_is_refused():
    # .T on a 3-D array reverses every axis: the batch axis ends up last.
    def full_transpose(X, Z, W_q, b_q, W_k, b_k, W_v, b_v):
        Q, K, V = W_q @ X + b_q[:, None], W_k @ Z + b_k[:, None], W_v @ Z + b_v[:, None]
        return V @ anp.softmax(K.T @ Q / math.sqrt(Q.shape[-2]), axis=-2)

    verdict = check_batched_attention_columns(full_transpose)
    assert not verdict
