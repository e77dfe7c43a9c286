"""Chapter 8's checkers accept answers computed another way, refuse the package's own attention, softmax
and masks, and reject wrong answers a learner might write."""

import math

import numpy as np
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
from attnbook.exercises import check_cache_causal_mask, check_masked_attention


def attention_by_torch(X, Z, W_q, W_k, W_v, mask):
    Q, K, V = (torch.tensor(a) for a in (X @ W_q, Z @ W_k, Z @ W_v))
    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=torch.tensor(mask))
    return torch.where(torch.tensor(mask).any(-1, keepdim=True), out, 0.0).numpy()  # its empty rows: zero


def cache_mask_by_positions(T_q, T_k):
    query_position = np.arange(T_k - T_q, T_k)[:, None]
    return np.arange(T_k)[None, :] <= query_position


def test_answers_computed_another_way_pass():
    assert check_masked_attention(attention_by_torch)
    assert check_cache_causal_mask(cache_mask_by_positions)


def test_delegating_to_the_package_is_refused_by_name():
    def through_package(X, Z, W_q, W_k, W_v, mask):
        return anp.scaled_dot_product_attention(X @ W_q, Z @ W_k, Z @ W_v, mask=mask)[0]

    def through_package_softmax(X, Z, W_q, W_k, W_v, mask):
        s = np.where(mask, (X @ W_q) @ (Z @ W_k).T / math.sqrt(W_k.shape[1]), -np.inf)
        return anp.softmax(s, axis=-1) @ (Z @ W_v)

    verdict = check_masked_attention(through_package)
    assert not verdict and "scaled_dot_product_attention" in verdict.message
    verdict = check_masked_attention(through_package_softmax)
    assert not verdict and "attnbook.numpy.softmax.softmax" in verdict.message
    verdict = check_cache_causal_mask(lambda T_q, T_k: anp.causal_mask(T_q, T_k))
    assert not verdict and "attnbook.numpy.masks.causal_mask" in verdict.message


def test_wrong_answers_not_among_the_listed_mistakes_fail():
    def unscaled(X, Z, W_q, W_k, W_v, mask):
        s = np.where(mask, (X @ W_q) @ (Z @ W_k).T, -np.inf)
        e = np.exp(s - np.where(mask.any(1, keepdims=True), s.max(1, keepdims=True), 0.0))
        total = e.sum(1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0) @ (Z @ W_v)

    assert not check_masked_attention(unscaled)
    # The diagonal moved one key too far: each new query sees the token after it.
    assert not check_cache_causal_mask(lambda T_q, T_k: np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q + 1))


def test_unattempted_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_masked_attention(todo).attempted and not check_cache_causal_mask(todo).attempted
