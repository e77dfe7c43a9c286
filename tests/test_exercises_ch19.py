"""Chapter 19's checkers accept answers computed another way (autograd) and reject the typical mistakes."""

import numpy as np
import torch
import torch.nn.functional as F

from attnbook.exercises import check_attention_backward, check_layer_norm_backward
from attnbook.torch import scaled_dot_product_attention


def by_autograd_layer_norm(dy, x, gamma, eps):
    xt = torch.tensor(x, requires_grad=True)
    F.layer_norm(xt, x.shape[-1:], torch.tensor(gamma), None, eps).backward(torch.tensor(dy))
    return xt.grad.numpy()


def by_autograd_attention(dO, Q, K, V, mask):
    Qt, Kt, Vt = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
    m = None if mask is None else torch.tensor(mask)
    scaled_dot_product_attention(Qt, Kt, Vt, mask=m)[0].backward(torch.tensor(dO))
    return np.stack([Qt.grad.numpy(), Kt.grad.numpy(), Vt.grad.numpy()])


def test_autograd_answers_pass():
    assert check_layer_norm_backward(by_autograd_layer_norm)
    assert check_attention_backward(by_autograd_attention)


def test_forgetting_the_variance_is_named():
    def mean_only(dy, x, gamma, eps):
        xc = x - x.mean(-1, keepdims=True)
        rstd = 1 / np.sqrt((xc**2).mean(-1, keepdims=True) + eps)
        g = dy * gamma
        return rstd * (g - g.mean(-1, keepdims=True))

    verdict = check_layer_norm_backward(mean_only)
    assert not verdict and "variance" in verdict.message


def test_forgetting_the_scale_is_named():
    def no_scale(dO, Q, K, V, mask):
        dQ, dK, dV = by_autograd_attention(dO, Q, K, V, mask)
        c = np.sqrt(Q.shape[-1])
        return np.stack([dQ * c, dK * c, dV])

    verdict = check_attention_backward(no_scale)
    assert not verdict and "sqrt(d)" in verdict.message


def test_a_hard_coded_eps_is_caught():
    def fixed_eps(dy, x, gamma, eps):
        return by_autograd_layer_norm(dy, x, gamma, 1e-5)

    assert not check_layer_norm_backward(fixed_eps)


def test_a_query_with_no_key_is_checked():
    def nan_for_empty_rows(dO, Q, K, V, mask):
        out = by_autograd_attention(dO, Q, K, V, mask)
        if mask is not None:
            empty = ~np.broadcast_to(mask, Q.shape[:-1] + (K.shape[-2],)).any(-1)  # (..., T_q)
            out[0][empty] = np.nan
        return out

    assert not check_attention_backward(nan_for_empty_rows)
