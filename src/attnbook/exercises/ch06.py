"""Checkers for the coding exercises of chapter 6 (why divide by sqrt(d))."""

from __future__ import annotations

import math

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import softmax, softmax_jacobian


def _scores_gradient(s: np.ndarray, g: np.ndarray, d: int) -> np.ndarray:
    """dL/ds for p = softmax(s / sqrt(d)) over the last axis and dL/dp = g, by autograd in float64."""
    import torch  # only here: the NumPy chapters' checkers import without PyTorch

    s_t = torch.tensor(np.asarray(s, dtype=np.float64), requires_grad=True)
    p = torch.softmax(s_t / math.sqrt(d), dim=-1)
    (grad,) = torch.autograd.grad(p, s_t, grad_outputs=torch.tensor(np.asarray(g, dtype=np.float64)))
    return grad.numpy()


def _gradient_cases() -> list[Case]:
    rng = np.random.default_rng(601)
    cases = [
        Case("s=[1, 2, 3], g=[1, 0, 0], d=1", (np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 0.0]), 1)),
        Case("s=[0, 0], g=[1, -1], d=4", (np.zeros(2), np.array([1.0, -1.0]), 4)),
        Case("s=[1, 1, 1], g=[2, 2, 2], d=9 (g the same everywhere)", (np.ones(3), np.full(3, 2.0), 9)),
    ]
    for shape, d in (((4, 6), 16), ((3, 5), 64), ((2, 3, 7), 256)):
        s = rng.normal(size=shape) * math.sqrt(d)  # raw scores q . k: standard deviation sqrt(d)
        cases.append(Case(f"random s and g of shape {shape}, d={d}", (s, rng.normal(size=shape), d)))
    return cases


def _p(s: np.ndarray, d: int) -> np.ndarray:
    return softmax(np.asarray(s, dtype=np.float64) / math.sqrt(d), axis=-1)


def _no_chain_factor(s: np.ndarray, g: np.ndarray, d: int) -> np.ndarray:
    p = _p(s, d)
    return p * (g - (p * g).sum(axis=-1, keepdims=True))


def _diagonal_only(s: np.ndarray, g: np.ndarray, d: int) -> np.ndarray:
    return _p(s, d) * g / math.sqrt(d)


def _unscaled_weights(s: np.ndarray, g: np.ndarray, d: int) -> np.ndarray:
    p = softmax(np.asarray(s, dtype=np.float64), axis=-1)
    return p * (g - (p * g).sum(axis=-1, keepdims=True)) / math.sqrt(d)


def _sum_over_everything(s: np.ndarray, g: np.ndarray, d: int) -> np.ndarray:
    p = _p(s, d)
    return p * (g - (p * g).sum()) / math.sqrt(d)


check_scores_gradient = Checker(
    name="scores_gradient",
    doc="Check ``fn(s, g, d) -> dL/ds``: ``s`` raw scores of shape ``(..., n)``, ``p = softmax(s / sqrt(d))`` "
        "over the last axis, ``g = dL/dp`` of the shape of ``s``; returns ``dL/ds``, shape of ``s``, without "
        "building a Jacobian.",
    reference=_scores_gradient,
    cases=_gradient_cases(),
    mistakes=(
        Mistake(_no_chain_factor, "the scores enter the softmax divided by sqrt(d): the chain rule brings that "
                                  "factor into the gradient as well."),
        Mistake(_diagonal_only, "changing one score moves every weight of its row, not only its own: the "
                                "off-diagonal part of the Jacobian is missing."),
        Mistake(_unscaled_weights, "the weights are the softmax of the scaled scores s / sqrt(d), not of s."),
        Mistake(_sum_over_everything, "each row of scores has its own softmax: the weighted sum of g runs over "
                                      "the last axis only, one number per row."),
    ),
    atol=1e-10,
    forbidden=(softmax_jacobian, "torch.autograd.grad", "torch.autograd.backward"),
)


def _correlated_scale(d: int, var_q: float, var_k: float, rho: float) -> float:
    return 1.0 / math.sqrt(d * var_q * var_k * (1.0 + rho * rho))


def _ignores_rho(d: int, var_q: float, var_k: float, rho: float) -> float:
    return 1.0 / math.sqrt(d * var_q * var_k)


def _second_moment(d: int, var_q: float, var_k: float, rho: float) -> float:
    return 1.0 / math.sqrt(d * var_q * var_k * (1.0 + 2.0 * rho * rho))


def _variances_as_stds(d: int, var_q: float, var_k: float, rho: float) -> float:
    return 1.0 / (var_q * var_k * math.sqrt(d * (1.0 + rho * rho)))


check_correlated_scale = Checker(
    name="correlated_scale",
    doc="Check ``fn(d, var_q, var_k, rho) -> float``: the factor ``c`` that gives ``c (q . k)`` variance 1 when "
        "the pairs ``(q_i, k_i)`` are independent, jointly Gaussian, mean 0, variances ``var_q`` and ``var_k``, "
        "correlation ``rho``.",
    reference=_correlated_scale,
    cases=[Case(f"d={d}, var_q={vq}, var_k={vk}, rho={r}", (d, vq, vk, r))
           for d, vq, vk, r in ((64, 1.0, 1.0, 0.0), (64, 1.0, 1.0, 0.5), (16, 4.0, 0.25, 0.8),
                                (512, 2.0, 3.0, -0.3), (1, 1.0, 1.0, 1.0), (128, 0.5, 0.5, -0.9))],
    mistakes=(
        Mistake(_ignores_rho, "with correlated q_i and k_i the products q_i k_i no longer have variance "
                              "var_q var_k: work out E[q_i^2 k_i^2] for jointly Gaussian entries."),
        Mistake(_second_moment, "the variance of q_i k_i is its second moment minus the square of its mean, "
                                "and its mean is no longer 0."),
        Mistake(_variances_as_stds, "the arguments are variances: a product's standard deviation involves "
                                    "their square roots."),
    ),
    atol=1e-12,
)
