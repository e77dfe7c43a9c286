"""Checkers for the coding exercises of chapter 25 (training faster)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.training.muon import CUBIC, QUINTIC, newton_schulz, polar_factor


def _polar_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2501)
    f64 = dict(dtype=torch.float64)
    cases = [Case("G = diag(3, 0.5): already orthogonal directions, so U V^T = I",
                  (torch.diag(torch.tensor([3.0, 0.5], **f64)),)),
             Case("G = [[0, -2], [1, 0]]: a rotation by 90 degrees, stretched",
                  (torch.tensor([[0.0, -2.0], [1.0, 0.0]], **f64),))]
    for shape in ((3, 5), (6, 4), (5, 5)):
        cases.append(Case(f"random G of shape {shape}", (torch.randn(*shape, generator=g, **f64),)))
    return cases


def _normalised(G):
    return G / torch.linalg.matrix_norm(G, ord=2)


def _sign(G):
    return torch.sign(G)


check_polar_factor = Checker(
    name="polar_factor",
    doc="Check ``fn(G) -> U @ Vh``: the orthogonal factor of ``G = U S V^T`` (reduced SVD), ``G`` ``(m, n)`` "
        "float64, the result ``(m, n)``.",
    reference=polar_factor,
    cases=_polar_cases(),
    mistakes=(
        Mistake(_normalised, "dividing G by its largest singular value keeps the others smaller than 1: every "
                "singular value of U V^T is 1."),
        Mistake(_sign, "the sign of every entry is what Adam's update becomes for a steady gradient, not the "
                "orthogonal factor: take the SVD and drop S."),
    ),
)


def _ns_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2502)
    cases = []
    for shape, steps, coefficients, name in (((4, 6), 1, QUINTIC, "quintic"), ((4, 6), 5, QUINTIC, "quintic"),
                                             ((6, 4), 5, QUINTIC, "quintic"), ((5, 5), 3, CUBIC, "cubic"),
                                             ((3, 7), 0, QUINTIC, "quintic")):
        G = torch.randn(*shape, generator=g, dtype=torch.float64) * 10
        cases.append(Case(f"random G {shape} times 10, {steps} steps, the {name} coefficients",
                          (G, steps, coefficients)))
    return cases


def _iterate(G, steps, coefficients, scale):
    # the iteration on the wide side (A = X X^T the smaller Gram matrix), after dividing G by `scale`
    a, b, c = coefficients
    X = G / scale if G.shape[0] <= G.shape[1] else G.T / scale
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X if G.shape[0] <= G.shape[1] else X.T


def _not_normalised(G, steps, coefficients):
    return _iterate(G, steps, coefficients, 1.0)


def _one_step_fewer(G, steps, coefficients):
    return newton_schulz(G, max(steps - 1, 0), coefficients)


def _spectral_normalised(G, steps, coefficients):
    return _iterate(G, steps, coefficients, torch.linalg.matrix_norm(G, ord=2))


check_newton_schulz = Checker(
    name="newton_schulz",
    doc="Check ``fn(G, steps, coefficients) -> X``: ``G`` ``(m, n)`` float64 divided by its Frobenius norm, then "
        "``steps`` times ``X <- a X + (b A + c A A) X`` with ``A = X X^T`` and ``(a, b, c) = coefficients``.",
    reference=newton_schulz,
    cases=_ns_cases(),
    mistakes=(
        Mistake(_not_normalised, "divide G by its Frobenius norm first: the polynomial pulls singular values "
                "towards 1 only from inside [0, 1], and blows up larger ones."),
        Mistake(_one_step_fewer, "run the step exactly `steps` times (none for steps = 0)."),
        Mistake(_spectral_normalised, "divide by the Frobenius norm, torch.linalg.norm(G), as Muon does: it bounds "
                "the largest singular value and costs no SVD."),
    ),
)
