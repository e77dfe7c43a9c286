"""Answers that are right on a checker's cases but wrong in general, each now refused.

Each test submits a plausible wrong answer, written here from array operations (no call into the
package, which the checkers refuse), and asserts the verdict fails and says why: a case that catches it
was added or sharpened in the checker."""

from __future__ import annotations

import math

import numpy as np
import torch
from test_exercises_ch15 import ANSWER, load

from attnbook.exercises import (
    check_gpt_forward,
    check_gqa_by_groups,
    check_induction_targets_by_hand,
    check_mask_tokens_by_hand,
    check_my_mha,
    check_neighbours,
    check_offset_between,
    check_temperature_gradient,
)
from attnbook.exercises._harness import Outcome


def _wrong(verdict, *words):
    assert not verdict, verdict.message
    assert verdict.attempted and verdict.outcome is not Outcome.REFUSED, verdict.message
    for word in words:
        assert word in verdict.message, verdict.message


def test_a_softmax_without_the_max_shift_overflows_on_a_case():
    def unshifted(s, g, tau):
        e = np.exp(s / tau)  # overflows past s / tau = 709.78
        p = e / e.sum(axis=-1, keepdims=True)
        return float(-np.sum(s * p * (g - np.sum(p * g, axis=-1, keepdims=True))) / tau**2)

    _wrong(check_temperature_gradient(unshifted), "s=[[400, 399, 390]]", "subtract each row's largest score")


def test_an_angle_difference_left_unwrapped_is_refused():
    def unwrapped(u, v, d_model):
        omega = 10000.0 ** (-(d_model - 2) / d_model)
        return int(np.round((np.arctan2(v[-2], v[-1]) - np.arctan2(u[-2], u[-1])) / omega))

    _wrong(check_offset_between(unwrapped), "PE(12000)", "expected -2493")


def test_neighbours_by_sorting_and_dropping_the_first_column_is_refused():
    def drop_first(E, k):
        unit = E / np.linalg.norm(E, axis=1, keepdims=True)
        return np.argsort(-(unit @ unit.T), axis=1, kind="stable")[:, 1:k + 1]

    _wrong(check_neighbours(drop_first), "parallel to the first")


def _my_mha(query, key, value, weights, n_heads, keep=None, causal=False, square_causal=False):
    d = weights["out_proj.weight"].shape[0]
    Wq, Wk, Wv = np.split(weights["in_proj_weight"], 3)
    bq, bk, bv = np.split(weights["in_proj_bias"], 3)

    def heads(x):
        B, T, _ = x.shape
        return x.reshape(B, T, n_heads, d // n_heads).transpose(0, 2, 1, 3)

    q, k, v = heads(query @ Wq.T + bq), heads(key @ Wk.T + bk), heads(value @ Wv.T + bv)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // n_heads)
    T_q, T_k = s.shape[-2:]
    allowed = np.ones((T_q, T_k), dtype=bool)
    if keep is not None:
        allowed = allowed & keep[:, None, None, :]
    if causal:
        allowed = allowed & np.tril(np.ones((T_q, T_q) if square_causal else (T_q, T_k), dtype=bool))
    s = np.where(allowed, s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    out = (w / w.sum(axis=-1, keepdims=True)) @ v
    B = out.shape[0]
    return out.transpose(0, 2, 1, 3).reshape(B, T_q, d) @ weights["out_proj.weight"].T + weights["out_proj.bias"]


def test_a_causal_mask_that_assumes_as_many_queries_as_keys_is_refused():
    assert check_my_mha(_my_mha), check_my_mha(_my_mha).message
    verdict = check_my_mha(lambda *args: _my_mha(*args, square_causal=True))
    _wrong(verdict, "3 queries to 6 keys", "causal")


def test_blocks_taken_in_string_order_are_refused():
    assert check_gpt_forward(ANSWER), check_gpt_forward(ANSWER).message

    def string_order(model, hf):
        # the blocks' names sorted as strings, "h.10" before "h.2": block i gets the weights of another block
        n = len(model.blocks)
        order = sorted(range(n), key=str)
        renamed = {}
        for key, value in hf.items():
            if key.startswith("transformer.h."):
                i, rest = key.removeprefix("transformer.h.").split(".", 1)
                key = f"transformer.h.{order.index(int(i))}.{rest}"
            renamed[key] = value
        load(model, renamed)

    _wrong(check_gpt_forward({**ANSWER, "load_gpt2": string_order}), "12 block(s)")


def test_a_table_sized_by_the_notebooks_vocabulary_is_refused():
    def by_table(ids):
        latest = [-1] * 32  # the notebook's V
        targets = []
        for t, token in enumerate(ids.tolist()):
            targets.append(latest[token])
            latest[token] = t + 1
        return torch.tensor(targets)

    _wrong(check_induction_targets_by_hand(by_table), "ids 50 to 64", "IndexError")


def _corrupt(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob, *, generator=None, every=None):
    g = torch.Generator().manual_seed(seed) if generator is None else generator
    chosen = torch.rand(ids.shape, generator=g) < rate
    if every is not None:
        chosen = torch.arange(ids.numel()).reshape(ids.shape) % every == 0
    u = torch.rand(ids.shape, generator=g)
    random_ids = torch.randint(vocab_size - 1, ids.shape, generator=g)
    random_ids = random_ids + (random_ids >= mask_id).long()  # every id but the mask's
    inputs = torch.where(chosen & (u < mask_prob), torch.full_like(ids, mask_id),
                         torch.where(chosen & (u < mask_prob + random_prob), random_ids, ids))
    return inputs, chosen


def test_bert_corruption_must_follow_its_seed():
    assert check_mask_tokens_by_hand(_corrupt), check_mask_tokens_by_hand(_corrupt).message
    fresh = torch.Generator()

    def seed_ignored(*args):
        fresh.seed()  # a new seed from the system each call
        return _corrupt(*args, generator=fresh)

    _wrong(check_mask_tokens_by_hand(seed_ignored), "same seed gave different draws")


def test_bert_corruption_of_every_seventh_position_is_refused():
    # about 1/7 = 0.143 of the positions, close to rate 0.15: the shares can pass, the seed cannot
    verdict = check_mask_tokens_by_hand(lambda *args: _corrupt(*args, every=7))
    assert not verdict, verdict.message
    assert "chose the same positions" in verdict.message or "share" in verdict.message, verdict.message


def _gqa(q, k, v, copy_heads=False):
    h, h_kv, T_q, T_k, d = q.shape[-3], k.shape[-3], q.shape[-2], k.shape[-2], q.shape[-1]
    mask = np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)
    if copy_heads:
        index = np.arange(h) // (h // h_kv)
        k, v = np.take(k, index, axis=-3), np.take(v, index, axis=-3)
        s = np.where(mask, q @ np.swapaxes(k, -1, -2) / math.sqrt(d), -np.inf)
        w = np.exp(s - s.max(axis=-1, keepdims=True))
        return (w / w.sum(axis=-1, keepdims=True)) @ v
    grouped = q.reshape(*q.shape[:-3], h_kv, h // h_kv, T_q, d)
    s = np.where(mask, grouped @ np.swapaxes(k, -1, -2)[..., None, :, :] / math.sqrt(d), -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((w / w.sum(axis=-1, keepdims=True)) @ v[..., None, :, :]).reshape(q.shape)


def test_gqa_that_copies_the_key_value_heads_is_refused():
    assert check_gqa_by_groups(_gqa), check_gqa_by_groups(_gqa).message
    _wrong(check_gqa_by_groups(lambda q, k, v: _gqa(q, k, v, copy_heads=True)), "copies the key-value heads")


def _tiled_backward(Q, K, V, O, dO, lse, block, d_from_first_pass=False):  # noqa: E741
    T, d = Q.shape
    scale = 1 / math.sqrt(d)

    def tile(i, j):
        return np.exp(Q[i:i + block] @ K[j:j + block].T * scale - lse[i:i + block, None])

    if d_from_first_pass:  # rowsum(dP * P), one more pass over every tile of P
        D = np.zeros(T)
        for i in range(0, T, block):
            for j in range(0, T, block):
                D[i:i + block] += (tile(i, j) * (dO[i:i + block] @ V[j:j + block].T)).sum(axis=1)
    else:
        D = (dO * O).sum(axis=1)
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for i in range(0, T, block):
        for j in range(0, T, block):
            P = tile(i, j)
            dV[j:j + block] += P.T @ dO[i:i + block]
            dS = P * (dO[i:i + block] @ V[j:j + block].T - D[i:i + block, None])
            dQ[i:i + block] += dS @ K[j:j + block] * scale
            dK[j:j + block] += dS.T @ Q[i:i + block] * scale
    return dQ, dK, dV


def test_the_tiled_backward_must_take_d_from_the_output():
    from attnbook.exercises import check_tiled_backward

    assert check_tiled_backward(_tiled_backward), check_tiled_backward(_tiled_backward).message
    verdict = check_tiled_backward(lambda *args: _tiled_backward(*args, d_from_first_pass=True))
    _wrong(verdict, "never reads O", "D = rowsum(dO * O)")


def test_a_first_pass_for_d_is_refused_even_when_the_answer_reads_o():
    from attnbook.exercises import check_tiled_backward

    def first_pass_reading_o(Q, K, V, O, dO, lse, block):  # noqa: E741
        # D summed over the tiles of P, and O read only for the shape of dV: right values on every true output
        dQ, dK, dV = _tiled_backward(Q, K, V, O, dO, lse, block, d_from_first_pass=True)
        return dQ, dK, np.zeros_like(O) + dV

    _wrong(check_tiled_backward(first_pass_reading_o), "did not change when O did", "extra pass over the tiles")


def test_a_softmax_vjp_through_every_rows_jacobian_is_refused_for_its_memory():
    from attnbook.exercises import check_softmax_vjp

    def by_rows(W, G):
        return W * (G - (W * G).sum(axis=1, keepdims=True))

    def by_jacobians(W, G):
        J = W[:, :, None] * np.eye(W.shape[1])[None] - W[:, :, None] * W[:, None, :]  # (n, k, k)
        return np.einsum("nij,ni->nj", J, G)

    assert check_softmax_vjp(by_rows), check_softmax_vjp(by_rows).message
    _wrong(check_softmax_vjp(by_jacobians), "(k, k) Jacobian", "MiB")


def test_distance_attention_through_the_array_of_differences_is_refused_for_its_memory():
    from attnbook.exercises import check_weighted_distance_attention

    def by_differences(Q, K, V, lam):
        s = -(((Q[:, None, :] - K[None, :, :]) ** 2) * lam).sum(axis=-1)  # (m, n, d) first
        w = np.exp(s - s.max(axis=1, keepdims=True))
        return (w / w.sum(axis=1, keepdims=True)) @ V

    _wrong(check_weighted_distance_attention(by_differences), "(m, n, d) array of differences")


def _lora_stages(x, W, b, rank, alpha, A, B, scaling=None, flatten=False):
    """A LoRA layer's three stages (as built, A and B set, merged) from tensor operations; ``scaling`` replaces
    alpha / r, ``flatten`` returns the rows of x flattened into one batch axis."""
    s = alpha / rank if scaling is None else scaling
    rows = x.reshape(-1, x.shape[-1]) if flatten else x
    frozen = rows @ W + b
    return torch.stack([frozen, frozen + s * (rows @ A) @ B, rows @ (W + s * A @ B) + b])


def test_an_adapter_that_ignores_alpha_or_the_batch_axes_is_refused():
    from attnbook.exercises.ch27 import check_lora_stages

    assert check_lora_stages(_lora_stages), check_lora_stages(_lora_stages).message
    # a scale of 1 is right only where alpha = r (the second case), and the first has alpha = 2 r
    _wrong(check_lora_stages(lambda *args: _lora_stages(*args, scaling=1.0)), "stage 2 of 3", "rank 2, alpha 4")
    # rows flattened: right on the 2-D cases, a shape off on the batched ones
    verdict = check_lora_stages(lambda *args: _lora_stages(*args, flatten=True))
    _wrong(verdict, "(2, 3, 8)")
    assert verdict.outcome is Outcome.WRONG_SHAPE, verdict.message
