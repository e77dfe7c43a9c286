"""Checkers for the coding exercises of chapter 6 (why divide by sqrt(d))."""

from __future__ import annotations

import math

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import softmax, softmax_jacobian
from attnbook.numpy.backprop.softmax import softmax_backward

_AUTOGRAD = ("torch.autograd.grad", "torch.autograd.backward", "torch.func.grad", "torch.func.vjp",
             "torch.func.jacrev", "torch.func.jacfwd")


def _temperature_gradient(s: np.ndarray, g: np.ndarray, tau: float) -> float:
    """dL/dtau for p = softmax(s / tau) over the last axis, one tau for every row, dL/dp = g: autograd in float64."""
    import torch  # only here: the NumPy chapters' checkers import without PyTorch

    t = torch.tensor(float(tau), dtype=torch.float64, requires_grad=True)
    p = torch.softmax(torch.as_tensor(np.asarray(s, dtype=np.float64)) / t, dim=-1)
    (grad,) = torch.autograd.grad(p, t, grad_outputs=torch.as_tensor(np.asarray(g, dtype=np.float64)))
    return float(grad)


def _temperature_cases() -> list[Case]:
    rng = np.random.default_rng(602)
    cases = [
        Case("s=[0, 1], g=[0, 1], tau=2", (np.array([0.0, 1.0]), np.array([0.0, 1.0]), 2.0)),
        Case("s=[1, 2, 3], g=[1, 0, 0], tau=0.5", (np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 0.0]), 0.5)),
        Case("s=[[2, 0, -1], [1, 1, 4]], g=[[1, 2, 0], [0, -1, 3]], tau=2",
             (np.array([[2.0, 0.0, -1.0], [1.0, 1.0, 4.0]]), np.array([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]]), 2.0)),
        Case("s=[1, 3, 2], g=[2, 2, 2], tau=1.5 (g the same everywhere)",
             (np.array([1.0, 3.0, 2.0]), np.full(3, 2.0), 1.5)),
        # Scores in the hundreds at a low temperature: s / tau = 800 is past 709.78, where exp overflows float64,
        # unless each row is shifted first.
        Case("s=[[400, 399, 390]], g=[[0, 1, 2]], tau=0.5",
             (np.array([[400.0, 399.0, 390.0]]), np.array([[0.0, 1.0, 2.0]]), 0.5)),
    ]
    for shape, tau in (((4, 6), 8.0), ((2, 3, 5), 0.7)):
        cases.append(Case(f"random s and g of shape {shape}, tau={tau:g}",
                          (3.0 * rng.normal(size=shape), rng.normal(size=shape), tau)))
    return cases


def _row_terms(s, g, tau) -> np.ndarray:
    """sum_j s_j p_j (g_j - g_bar) for every row: the gradient with respect to 1 / tau, row by row."""
    s, g = np.asarray(s, dtype=np.float64), np.asarray(g, dtype=np.float64)
    p = softmax(s / tau, axis=-1)
    return np.sum(s * p * (g - np.sum(p * g, axis=-1, keepdims=True)), axis=-1)


def _sign_flipped(s, g, tau) -> float:
    return float(np.sum(_row_terms(s, g, tau)) / tau**2)


def _gradient_of_inverse(s, g, tau) -> float:
    return float(np.sum(_row_terms(s, g, tau)))


def _one_power_of_tau(s, g, tau) -> float:
    return float(-np.sum(_row_terms(s, g, tau)) / tau)


def _no_normaliser(s, g, tau) -> float:
    s, g = np.asarray(s, dtype=np.float64), np.asarray(g, dtype=np.float64)
    return float(-np.sum(s * softmax(s / tau, axis=-1) * g) / tau**2)


def _per_row(s, g, tau) -> np.ndarray:
    return -_row_terms(s, g, tau) / tau**2


def _unshifted(s, g, tau) -> float:
    s, g = np.asarray(s, dtype=np.float64), np.asarray(g, dtype=np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(s / tau)
        p = e / e.sum(axis=-1, keepdims=True)
    return float(-np.sum(s * p * (g - np.sum(p * g, axis=-1, keepdims=True))) / tau**2)


def _mean_over_rows(s, g, tau) -> float:
    return float(-np.mean(_row_terms(s, g, tau)) / tau**2)


check_temperature_gradient = Checker(
    name="temperature_gradient",
    allowed=(softmax,),  # the forward pass; the derivative is the exercise
    doc="Check ``fn(s, g, tau) -> float``: ``s`` scores of shape ``(..., n)``, ``p = softmax(s / tau)`` over the "
        "last axis with one temperature ``tau`` for every row, ``g = dL/dp`` of the shape of ``s``; returns "
        "``dL/dtau``, one number, without autograd or a Jacobian, and worked out rather than estimated (finite "
        "differences fall outside the tolerance of 1e-12 relative; complex steps are refused).",
    reference=_temperature_gradient,
    cases=_temperature_cases(),
    mistakes=(
        Mistake(_unshifted, "exp(s / tau) overflows float64 past s / tau = 709.78 (inf / inf is NaN): subtract each "
                "row's largest score before the exponential; the softmax does not change."),
        Mistake(_sign_flipped, "raising tau shrinks s / tau: d(s_j / tau)/d tau is -s_j / tau^2, with a minus sign."),
        Mistake(_gradient_of_inverse, "that is the gradient with respect to 1 / tau; the chain rule through "
                                      "s_j / tau brings -s_j / tau^2."),
        Mistake(_one_power_of_tau, "d(s_j / tau)/d tau is -s_j / tau^2: the square of tau, not tau."),
        Mistake(_no_normaliser, "every weight shares the denominator, so the gradient at the scaled scores is "
                                "p_j (g_j - sum_i p_i g_i), not p_j g_j."),
        Mistake(_per_row, "one temperature serves every row, so its gradient is one number: add the rows' "
                          "contributions."),
        Mistake(_mean_over_rows, "the loss adds the rows' contributions: sum them, do not average."),
    ),
    # The formula in float64 agrees with autograd to within 1e-13 of the gradient on these cases; central finite
    # differences come no closer than about 2e-11 at their best step, and five-point ones no closer than 3e-11
    # on the scores in the hundreds, so a tolerance of 1e-12 tells a derivative from its numerical estimate.
    atol=1e-14,
    rtol=1e-12,
    real_only=True,
    forbidden=(softmax_jacobian, softmax_backward, *_AUTOGRAD),
)


def _correlated_scale(d: int, var_q: float, var_k: float, rho: float) -> float:
    return 1.0 / math.sqrt(d * var_q * var_k * (1.0 + rho * rho))


def _ignores_rho(d: int, var_q: float, var_k: float, rho: float) -> float:
    return 1.0 / math.sqrt(d * var_q * var_k)


def _second_moment(d: int, var_q: float, var_k: float, rho: float) -> float:
    return 1.0 / math.sqrt(d * var_q * var_k * (1.0 + 2.0 * rho * rho))


def _linear_in_rho(d: int, var_q: float, var_k: float, rho: float) -> float:
    return 1.0 / math.sqrt(d * var_q * var_k * (1.0 + rho))


def _variances_as_stds(d: int, var_q: float, var_k: float, rho: float) -> float:
    return 1.0 / (var_q * var_k * math.sqrt(d * (1.0 + rho * rho)))


check_correlated_scale = Checker(
    name="correlated_scale",
    doc="Check ``fn(d, var_q, var_k, rho) -> float``: the factor ``c`` that gives ``c (q . k)`` variance 1 when "
        "the pairs ``(q_i, k_i)`` are independent, jointly Gaussian, mean 0, variances ``var_q`` and ``var_k``, "
        "correlation ``rho``.",
    reference=_correlated_scale,
    cases=[Case(f"d={d}, var_q={vq}, var_k={vk}, rho={r}", (d, vq, vk, r))
           # rho = 0.6 first: at 0.5, 1 + rho and 1 + 2 rho^2 are equal, and the hint could not tell them apart.
           for d, vq, vk, r in ((64, 1.0, 1.0, 0.0), (64, 1.0, 1.0, 0.6), (16, 4.0, 0.25, 0.8),
                                (512, 2.0, 3.0, -0.3), (1, 1.0, 1.0, 1.0), (128, 0.5, 0.5, -0.9))],
    mistakes=(
        Mistake(_ignores_rho, "with correlated q_i and k_i the products q_i k_i no longer have variance "
                              "var_q var_k: work out E[q_i^2 k_i^2] for jointly Gaussian entries."),
        Mistake(_second_moment, "the variance of q_i k_i is its second moment minus the square of its mean, "
                                "and its mean is no longer 0."),
        Mistake(_linear_in_rho, "E[q_i k_i] = rho sqrt(var_q var_k), and E[q_i^2 k_i^2] = var_q var_k (1 + 2 "
                                "rho^2) for jointly Gaussian entries: the correlation enters the variance "
                                "squared, not as 1 + rho."),
        Mistake(_variances_as_stds, "the arguments are variances: a product's standard deviation involves "
                                    "their square roots."),
    ),
    atol=1e-12,
)
