"""Chapter 8's checkers accept answers computed another way, refuse the package's own attention, softmax
and masks, and reject wrong answers a learner might write."""

import numpy as np
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
from attnbook.exercises import check_cache_causal_mask, check_padded_attention
from attnbook.exercises.ch08 import _padded_cases


def attention_by_torch(X, lengths, W_q, W_k, W_v):
    Q, K, V = (torch.tensor(a) for a in (X @ W_q, X @ W_k, X @ W_v))
    keep = (torch.arange(X.shape[1])[None, :] < torch.tensor(lengths)[:, None])[:, None, :]  # (B, 1, T)
    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=keep)
    return torch.where(keep.any(-1, keepdim=True), out, 0.0).numpy()  # its empty rows: zero


def attention_one_sequence_at_a_time(X, lengths, W_q, W_k, W_v):
    out = np.zeros(X.shape[:2] + (W_v.shape[1],))
    for b, n in enumerate(lengths):
        if n == 0:
            continue
        Q, K, V = X[b] @ W_q, X[b, :n] @ W_k, X[b, :n] @ W_v  # only the real keys
        s = Q @ K.T / np.sqrt(W_k.shape[1])
        e = np.exp(s - s.max(axis=1, keepdims=True))
        out[b] = e / e.sum(axis=1, keepdims=True) @ V
    return out


def cache_mask_by_positions(T_q, T_k):
    query_position = np.arange(T_k - T_q, T_k)[:, None]
    return np.arange(T_k)[None, :] <= query_position


def test_answers_computed_another_way_pass():
    assert check_padded_attention(attention_one_sequence_at_a_time)
    assert check_cache_causal_mask(cache_mask_by_positions)


def test_the_cases_cover_an_empty_sequence_and_a_width_unlike_the_length():
    cases = _padded_cases()
    assert any((case.args[1] == 0).any() for case in cases)
    assert all(case.args[0].shape[1] != case.args[2].shape[1] for case in cases)


def test_delegating_to_the_package_or_torch_is_refused_by_name():
    def through_package(X, lengths, W_q, W_k, W_v):
        mask = anp.padding_mask(lengths, X.shape[1])
        return anp.scaled_dot_product_attention(X @ W_q, X @ W_k, X @ W_v, mask=mask)[0]

    def through_package_softmax(X, lengths, W_q, W_k, W_v):
        s = (X @ W_q) @ (X @ W_k).swapaxes(-1, -2) / np.sqrt(W_k.shape[1])
        s = np.where(np.arange(X.shape[1])[None, None, :] < lengths[:, None, None], s, -np.inf)
        return anp.softmax(s, axis=-1) @ (X @ W_v)

    def through_package_mask(X, lengths, W_q, W_k, W_v):
        unused = anp.padding_mask(lengths, X.shape[1])
        return attention_one_sequence_at_a_time(X, lengths, W_q, W_k, W_v) + 0 * unused.sum()

    verdict = check_padded_attention(through_package)
    assert not verdict and "padding_mask" in verdict.message
    verdict = check_padded_attention(through_package_softmax)
    assert not verdict and "attnbook.numpy.softmax.softmax" in verdict.message
    verdict = check_padded_attention(through_package_mask)
    assert not verdict and "padding_mask" in verdict.message
    verdict = check_padded_attention(attention_by_torch)
    assert not verdict and "scaled_dot_product_attention" in verdict.message
    verdict = check_cache_causal_mask(lambda T_q, T_k: anp.causal_mask(T_q, T_k))
    assert not verdict and "attnbook.numpy.masks.causal_mask" in verdict.message


def test_wrong_answers_not_among_the_listed_mistakes_fail():
    def unscaled(X, lengths, W_q, W_k, W_v):
        return attention_one_sequence_at_a_time(X, lengths, W_q * np.sqrt(W_k.shape[1]), W_k, W_v)

    def padding_zeroed_after(X, lengths, W_q, W_k, W_v):  # hides the padding from the values only
        real = (np.arange(X.shape[1])[None, :] < lengths[:, None])[:, :, None]
        Q, K, V = X @ W_q, X @ W_k, np.where(real, X @ W_v, 0.0)
        s = Q @ K.swapaxes(-1, -2) / np.sqrt(K.shape[-1])
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True) @ V

    assert not check_padded_attention(unscaled)
    assert not check_padded_attention(padding_zeroed_after)
    # The diagonal moved one key too far: each new query sees the token after it.
    assert not check_cache_causal_mask(lambda T_q, T_k: np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q + 1))


def test_unattempted_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_padded_attention(todo).attempted and not check_cache_causal_mask(todo).attempted
