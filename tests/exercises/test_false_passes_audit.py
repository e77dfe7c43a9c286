"""Answers that delegated the work or were wrong, and passed, each now refused with a sentence that says why.

The policy of every checker (threads, PyTorch's private and operator-level entry points, autograd's engine, PyTorch
in the NumPy exercises of Part I, complex steps where a derivative is asked for), then chapter by chapter. Each test
submits the exact answer and asserts that it does not pass and that the message names the reason; the tests at the
end submit right answers, which still pass."""

from __future__ import annotations

import concurrent.futures
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnbook.exercises.ch15 as ch15
import attnbook.torch as at
from attnbook.exercises import (
    ch01,
    ch02,
    ch03,
    ch06,
    ch07,
    ch08,
    ch09,
    ch11,
    ch12,
    ch13,
    ch22,
)
from attnbook.exercises._harness import Outcome
from attnbook.numpy import softmax


def _refused(verdict, *words):
    assert not verdict and verdict.outcome is Outcome.REFUSED, verdict.message
    for w in words:
        assert w in verdict.message, verdict.message


def _wrong(verdict, *words):
    assert not verdict and verdict.attempted and verdict.outcome is not Outcome.REFUSED, verdict.message
    for w in words:
        assert w in verdict.message, verdict.message


# --- policy: threads ---------------------------------------------------------------------------------------

def test_a_reference_run_in_a_worker_thread_is_refused():
    def top_k(logits, k):
        return concurrent.futures.ThreadPoolExecutor(1).submit(ch15._top_k, logits, k).result()

    _refused(ch15.check_top_k_filter(top_k), "another thread")


def test_a_pool_made_and_warmed_before_the_call_is_refused_too():
    pool = concurrent.futures.ThreadPoolExecutor(1)
    pool.submit(int).result()  # its worker thread is running, idle, when the answer hands it the task
    try:
        _refused(ch15.check_top_k_filter(lambda logits, k: pool.submit(ch15._top_k, logits, k).result()),
                 "another thread")
    finally:
        pool.shutdown()


# --- policy: PyTorch's private and operator-level entry points ----------------------------------------------

PRIVATE = "private or operator-level entry point"


def test_operator_level_group_norm_is_refused():
    def group_norm(x, gamma, beta, groups, eps):
        B, d, T = x.shape
        return torch.ops.aten.native_group_norm(x, gamma, beta, B, d, T, groups, eps)[0]

    _refused(ch13.check_group_norm_columns(group_norm), PRIVATE)


def test_operator_level_layer_norm_is_refused():
    def group_norm(x, gamma, beta, groups, eps):
        B, d, T = x.shape
        y = torch.ops.aten.native_layer_norm(x.reshape(B, groups, -1), (d * T // groups,), None, None, eps)[0]
        return y.reshape(B, d, T) * gamma[:, None] + beta[:, None]

    _refused(ch13.check_group_norm_columns(group_norm), PRIVATE)


@pytest.mark.parametrize("call", [
    lambda logits: torch._softmax(logits, -1, False),
    lambda logits: torch.ops.aten._softmax(logits, -1, False),
    lambda logits: torch.ops.aten._softmax.default(logits, -1, False),
])
def test_private_softmaxes_are_refused(call):
    def grad(logits, target, smoothing):
        V = logits.shape[-1]
        kept = target != -100
        pi = torch.full_like(logits, smoothing / V)
        pi[kept, target[kept]] += 1 - smoothing
        return (call(logits) - pi) * kept[:, None] / kept.sum()

    _refused(ch12.check_smoothed_ce_grad(grad), PRIVATE)


def test_the_private_cross_entropy_with_backward_is_refused():
    def grad(logits, target, smoothing):
        leaf = logits.detach().requires_grad_()
        torch._C._nn.cross_entropy_loss(leaf, target, None, 1, -100, smoothing).backward()
        return leaf.grad

    _refused(ch12.check_smoothed_ce_grad(grad), "torch._C._nn.cross_entropy_loss", PRIVATE)


def test_the_private_softmax_backward_is_refused():
    # 06-temperature-gradient in PyTorch: refused as PyTorch in a NumPy exercise, and as a private entry point
    # wherever PyTorch is allowed (here, chapter 12's checker).
    def temperature_gradient(s, g, tau):
        z = torch.as_tensor(s) / tau
        p = torch.softmax(z, -1)
        dz = torch._softmax_backward_data(torch.as_tensor(g), p, -1, p.dtype)
        return float(-(dz * z).sum() / tau)

    _refused(ch06.check_temperature_gradient(temperature_gradient), "written in NumPy")

    def grad(logits, target, smoothing):
        p = torch.softmax(logits, -1)
        return torch._softmax_backward_data(torch.zeros_like(p), p, -1, p.dtype)

    _refused(ch12.check_smoothed_ce_grad(grad), "_softmax_backward_data", PRIVATE)


def test_autograds_engine_called_directly_is_refused():
    def rms_norm_backward(x_hat, inv_rms, gamma, dy):
        x = (x_hat / inv_rms).detach().requires_grad_()
        y = x * torch.rsqrt((x * x).mean(-1, keepdim=True)) * gamma
        engine = torch.autograd.Variable._execution_engine
        return engine.run_backward((y,), (dy,), False, False, (x,), False, False)[0]

    _refused(ch22.check_rms_norm_backward(rms_norm_backward), "run_backward", PRIVATE)


# --- policy: PyTorch in the NumPy exercises of Part I ---------------------------------------------------------

NUMPY = "written in NumPy"


def test_numpy_exercises_say_so_in_their_allowances():
    assert "NumPy" in ch02.check_softmax_rows.allowances()
    assert ch11.check_my_mha.numpy_only and ch02.check_softmax_rows.numpy_only
    assert not ch12.check_smoothed_ce_grad.numpy_only


def test_additive_scores_in_torch_are_refused():
    def scores(Q, K, W_q, W_k, b, v):
        Pq, Pk = torch.tensor(Q @ W_q + b), torch.tensor(K @ W_k)
        return (torch.tanh(Pq[:, :, None] + Pk[:, None]) @ torch.tensor(v)).numpy()

    _refused(ch07.check_batched_additive_scores(scores), NUMPY)


def test_distance_attention_in_torch_is_refused():
    def attention(Q, K, V, lam):
        Qt, Kt, Vt, lam_t = (torch.tensor(a) for a in (Q, K, V, lam))
        return (torch.softmax(-(((Qt[:, None] - Kt[None]) ** 2) * lam_t).sum(-1), 1) @ Vt).numpy()

    _refused(ch03.check_weighted_distance_attention(attention), NUMPY)


def test_distance_attention_by_torch_sdpa_and_cdist_is_refused():
    def by_sdpa(Q, K, V, lam):
        return F.scaled_dot_product_attention(torch.tensor(2 * Q * lam), torch.tensor(K), torch.tensor(V),
                                              attn_mask=torch.tensor(-(K**2 @ lam)), scale=1.0).numpy()

    def by_cdist(Q, K, V, lam):
        r = torch.tensor(np.sqrt(lam))
        d = torch.cdist(torch.tensor(Q) * r, torch.tensor(K) * r) ** 2
        return (torch.softmax(-d, 1) @ torch.tensor(V)).numpy()

    _refused(ch03.check_weighted_distance_attention(by_sdpa), NUMPY)
    _refused(ch03.check_weighted_distance_attention(by_cdist), NUMPY)


def test_softmax_vjp_through_a_torch_jacobian_is_refused():
    def vjp(W, G):
        W, G = torch.tensor(W), torch.tensor(G)
        J = torch.diag_embed(W) - W[:, :, None] * W[:, None, :]
        return torch.einsum("nij,ni->nj", J, G).numpy()

    _refused(ch02.check_softmax_vjp(vjp), NUMPY)


@pytest.mark.parametrize("answer", [
    lambda S: torch.from_numpy(S).softmax(-1).numpy(),
    lambda S: torch.special.softmax(torch.from_numpy(S), -1).numpy(),
    lambda S: np.exp(S - torch.logsumexp(torch.from_numpy(S), -1, keepdim=True).numpy()),
])
def test_softmax_rows_in_torch_is_refused(answer):
    _refused(ch02.check_softmax_rows(answer), NUMPY)


@pytest.mark.parametrize("answer", [
    lambda S: torch.from_numpy(S).log_softmax(-1).numpy(),
    lambda S: torch.special.log_softmax(torch.from_numpy(S), -1).numpy(),
    lambda S: S - torch.logsumexp(torch.from_numpy(S), -1, keepdim=True).numpy(),
])
def test_log_softmax_rows_in_torch_is_refused(answer):
    _refused(ch02.check_log_softmax_rows(answer), NUMPY)


def test_log_softmax_by_a_ufuncs_reduce_is_refused():
    _refused(ch02.check_log_softmax_rows(lambda S: S - np.logaddexp.reduce(S, 1, keepdims=True)),
             "numpy.logaddexp.reduce")


def test_padded_attention_with_a_torch_softmax_is_refused():
    def padded_attention(X, lengths, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v
        s = Q @ K.transpose(0, 2, 1) / math.sqrt(K.shape[-1])
        keep = np.arange(X.shape[1])[None, None, :] < np.asarray(lengths)[:, None, None]
        s = np.where(keep, s, -np.inf)
        return torch.from_numpy(s).softmax(-1).nan_to_num().numpy() @ V

    _refused(ch08.check_padded_attention(padded_attention), NUMPY)


def test_the_capstones_softmax_in_torch_is_refused():
    verdict = ch11.check_my_mha({"my_softmax": lambda x: torch.from_numpy(np.asarray(x)).softmax(-1).numpy()})
    assert not verdict and NUMPY in verdict.message, verdict.message


def test_neighbours_by_torch_cosine_similarity_is_refused():
    def neighbours(E, k):
        t = torch.from_numpy(E)
        S = F.cosine_similarity(t[:, None], t[None], -1)
        return S.fill_diagonal_(-2).topk(k).indices.numpy()

    _refused(ch01.check_neighbours(neighbours), NUMPY)


# --- policy: what a near miss is told about float32 -----------------------------------------------------------

def test_a_float64_near_miss_is_not_blamed_on_float32():
    def nudged(logits, target, smoothing):  # right, then nudged by 1e-7 relative, all in float64
        V = logits.shape[-1]
        kept = target != -100
        pi = torch.full_like(logits, smoothing / V)
        pi[kept, target[kept]] += 1 - smoothing
        return (torch.softmax(logits, -1) - pi) * kept[:, None] / kept.sum() * (1 + 1e-7)

    _wrong(ch12.check_smoothed_ce_grad(nudged), "above the")
    assert "float32" not in ch12.check_smoothed_ce_grad(nudged).message


def test_a_float32_computation_of_the_smoothed_gradient_is_refused_and_named():
    def grad32(logits, target, smoothing):
        logits = logits.float()
        V = logits.shape[-1]
        kept = target != -100
        pi = torch.full_like(logits, smoothing / V)
        pi[kept, target[kept]] += 1 - smoothing
        return (torch.softmax(logits, -1) - pi) * kept[:, None] / kept.sum()

    _wrong(ch12.check_smoothed_ce_grad(grad32), "float32's rounding")
    # Converted back to float64, its values still lie on float32's grid: the note names float32 all the same.
    _wrong(ch12.check_smoothed_ce_grad(lambda *a: grad32(*a).double()), "float32's rounding")


# --- chapters 1 to 9 and 12 -----------------------------------------------------------------------------------

def _nanmean(S):
    return np.nanmean(np.where(np.isfinite(S), S, np.nan), 1, keepdims=True)


def test_softmax_shifted_by_the_mean_is_named():
    def softmax_rows(S):
        e = np.exp(S - _nanmean(S))
        return e / e.sum(1, keepdims=True)

    _wrong(ch02.check_softmax_rows(softmax_rows), "shift by the row's largest score")


def test_log_softmax_shifted_by_the_mean_is_named():
    def log_softmax_rows(S):
        m = _nanmean(S)
        return S - m - np.log(np.exp(S - m).sum(1, keepdims=True))

    _wrong(ch02.check_log_softmax_rows(log_softmax_rows), "shift by the row's largest score")


def _unit_cosines(E):
    unit = E / np.linalg.norm(E, axis=1, keepdims=True)
    return unit @ unit.T


def test_neighbours_by_dropping_the_first_column_is_named():
    _wrong(ch01.check_neighbours(lambda E, k: np.argsort(-_unit_cosines(E), axis=1, kind="stable")[:, 1:k + 1]),
           "dropping the first column")


def test_correlated_scale_with_one_plus_rho_is_named():
    _wrong(ch06.check_correlated_scale(lambda d, vq, vk, rho: 1 / math.sqrt(d * vq * vk * (1 + rho))),
           "not as 1 + rho")


def _loss(s, g, tau):
    return np.sum(softmax(s / tau, axis=-1) * g)


def test_temperature_gradient_by_central_differences_fails():
    def temperature_gradient(s, g, tau, h=1e-6):
        return float((_loss(s, g, tau * (1 + h)) - _loss(s, g, tau * (1 - h))) / (2 * h * tau))

    _wrong(ch06.check_temperature_gradient(temperature_gradient), "this check allows")


def test_temperature_gradient_by_a_complex_step_is_refused():
    def in_a_helper(s, g, tau):
        return float(_loss(s, g, tau + 1e-30j).imag / 1e-30)

    def inline(s, g, tau):
        z = s / (tau + 1e-30j)
        e = np.exp(z - z.real.max(-1, keepdims=True))
        return float(((e / e.sum(-1, keepdims=True)) * g).sum().imag / 1e-30)

    _refused(ch06.check_temperature_gradient(in_a_helper), "complex")
    _refused(ch06.check_temperature_gradient(inline), "complex")


def test_loo_predictions_by_a_python_loop_fails():
    def loo_predictions(keys, values, sharpness):
        out = []
        for i in range(len(keys)):
            k, v = np.delete(keys, i), np.delete(values, i)
            s = -sharpness * (keys[i] - k) ** 2
            w = np.exp(s - s.max())
            out.append(w @ v / w.sum())
        return np.array(out)

    _wrong(ch03.check_loo_predictions(loo_predictions), "loops over the pairs")


def test_loo_predictions_masking_every_equal_key_is_named():
    def loo_predictions(keys, values, sharpness):
        S = -sharpness * (keys[:, None] - keys[None, :]) ** 2
        S[keys[:, None] == keys[None, :]] = -np.inf
        return softmax(S, axis=1) @ values

    _wrong(ch03.check_loo_predictions(loo_predictions), "leave out pair i alone")


def test_additive_scores_with_the_bias_twice_is_named():
    def scores(Q, K, W_q, W_k, b, v):
        return np.tanh((Q @ W_q + b)[:, :, None] + (K @ W_k + b)[:, None]) @ v

    _wrong(ch07.check_batched_additive_scores(scores), "counts it twice")


def test_dilated_mask_with_a_strict_comparison_is_named():
    def dilated_mask(T, window, dilation):
        i, j = np.indices((T, T))
        return (np.abs(i - j) < window * dilation) & ((i - j) % dilation == 0)

    _wrong(ch07.check_dilated_mask(dilated_mask), "<=, not <")


def test_mha_parameters_with_d_head_from_d_model_is_named():
    def mha_parameters(d_model, d_kv, h, d_head):
        inner = h * (d_model // h)
        return d_model * inner + inner + 2 * (d_kv * inner + inner) + inner * d_model + d_model

    _wrong(ch09.check_mha_parameters(mha_parameters), "need not be d_model / h")


class _MQA(nn.Module):
    head_axis = True

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.w_q, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_k, self.w_v = nn.Linear(d_model, d_model // n_heads), nn.Linear(d_model, d_model // n_heads)

    def forward(self, x, mask=None):
        B, T, d = x.shape
        q = self.w_q(x).unflatten(-1, (self.n_heads, -1)).transpose(1, 2)
        k, v = self.w_k(x)[:, None], self.w_v(x)[:, None]
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~(mask[:, None] if mask.dim() == 3 and self.head_axis else mask), float("-inf"))
        return self.w_o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d))


class _MQANoHeadAxis(_MQA):
    head_axis = False


def test_mqa_with_a_padding_mask_without_a_head_axis_is_told_the_shape():
    _wrong(ch12.check_multi_query_attention(_MQANoHeadAxis), "must match the size", "(B, 1, 1, T)")


# --- right answers still pass ---------------------------------------------------------------------------------

def test_right_answers_pass():
    def softmax_rows(S):
        e = np.exp(S - S.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    def log_softmax_rows(S):
        m = S.max(1, keepdims=True)
        return S - m - np.log(np.exp(S - m).sum(1, keepdims=True))

    def neighbours_ties_last_first(E, k):  # any order among exact ties: the highest index first here
        S = _unit_cosines(E)
        np.fill_diagonal(S, -np.inf)
        return np.argsort(S, axis=1, kind="stable")[:, ::-1][:, :k]

    def temperature_gradient(s, g, tau):
        p = softmax(s / tau, axis=-1)
        return float(-np.sum(s * p * (g - np.sum(p * g, axis=-1, keepdims=True))) / tau**2)

    def loo_predictions(keys, values, sharpness):
        S = -sharpness * (keys[:, None] - keys[None, :]) ** 2
        np.fill_diagonal(S, -np.inf)
        return softmax(S, axis=1) @ values

    def smoothed_ce_grad(logits, target, smoothing):
        kept = target != -100
        pi = torch.full_like(logits, smoothing / logits.shape[-1])
        pi[kept, target[kept]] += 1 - smoothing
        return (torch.softmax(logits, -1) - pi) * kept[:, None] / kept.sum()

    def mha_parameters(d_model, d_kv, h, d_head):
        inner = h * d_head
        return d_model * inner + inner + 2 * (d_kv * inner + inner) + inner * d_model + d_model

    for checker, answer in ((ch02.check_softmax_rows, softmax_rows), (ch02.check_log_softmax_rows, log_softmax_rows),
                            (ch01.check_neighbours, neighbours_ties_last_first),
                            (ch06.check_temperature_gradient, temperature_gradient),
                            (ch06.check_correlated_scale,
                             lambda d, vq, vk, rho: 1 / math.sqrt(d * vq * vk * (1 + rho * rho))),
                            (ch03.check_loo_predictions, loo_predictions),
                            (ch12.check_smoothed_ce_grad, smoothed_ce_grad),
                            (ch09.check_mha_parameters, mha_parameters),
                            (ch12.check_multi_query_attention, _MQA)):
        verdict = checker(answer)
        assert verdict, verdict.message


def test_a_torch_exercise_still_takes_public_torch_and_a_models_own_calls():
    assert ch12.check_multi_query_attention(_MQA)
    assert at.scaled_dot_product_attention in ch12.check_multi_query_attention.allowed


def test_a_float64_mistake_at_float32_sizes_is_not_blamed_on_float32():
    # eps added outside the square root, in float64: an error of a few 1e-6 relative, not float32's rounding
    def group_norm(x, gamma, beta, groups, eps):
        B, d, T = x.shape
        z = x.reshape(B, groups, d // groups, T)
        mean = z.mean(dim=2, keepdim=True)
        var = ((z - mean) ** 2).mean(dim=2, keepdim=True)
        return ((z - mean) / (torch.sqrt(var) + eps)).reshape(B, d, T) * gamma[:, None] + beta[:, None]

    verdict = ch13.check_group_norm_columns(group_norm)
    assert not verdict and "float32" not in verdict.message, verdict.message
