"""Checkers for the coding exercises of chapter 25 (training faster)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.training.muon import CUBIC, QUINTIC, newton_schulz, polar_factor

_F64 = dict(dtype=torch.float64)
# What would answer either exercise in one call: the package's iteration and exact factor, and an SVD.
_ORTHOGONALISERS = (newton_schulz, polar_factor, "torch.linalg.svd", "torch.svd", "torch.linalg.svdvals")


# --- Newton-Schulz for a stack of matrices ---------------------------------------------------------------

def _stack_reference(G, steps, coefficients):
    # one matrix at a time through the package's iteration (calls inside a reference are not watched)
    flat = G.reshape(-1, *G.shape[-2:])
    out = torch.stack([newton_schulz(M, steps, coefficients) for M in flat])
    return out.reshape(G.shape)


def _stack_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2503)
    cases = []
    for shape, steps, coefficients, name in (((3, 4, 6), 5, QUINTIC, "quintic"), ((2, 6, 4), 5, QUINTIC, "quintic"),
                                             ((4, 5, 5), 3, CUBIC, "cubic"), ((2, 3, 3, 5), 2, QUINTIC, "quintic"),
                                             ((1, 3, 7), 0, QUINTIC, "quintic")):
        G = torch.randn(*shape, generator=g, **_F64) * 10
        label = f"a stack of shape {shape}, {steps} steps, the {name} coefficients"
        cases.append(Case(label, (G, steps, coefficients)))
    scales = torch.tensor([1e-3, 1.0, 1e3], **_F64)[:, None, None]
    G = torch.randn(3, 4, 8, generator=g, **_F64) * scales
    cases.append(Case("three (4, 8) matrices of sizes 0.001, 1 and 1000, 5 quintic steps", (G, 5, QUINTIC)))
    return cases


def _stack_iterate(G, steps, coefficients, norm):
    a, b, c = coefficients
    tall = G.shape[-2] > G.shape[-1]
    X = G.mT if tall else G
    X = X / norm(X)
    for _ in range(steps):
        A = X @ X.mT
        X = a * X + (b * A + c * A @ A) @ X
    return X.mT if tall else X


def _one_norm_for_the_stack(G, steps, coefficients):
    return _stack_iterate(G, steps, coefficients, lambda X: torch.linalg.norm(X))


def _not_normalised(G, steps, coefficients):
    return _stack_iterate(G, steps, coefficients, lambda X: 1.0)


def _spectral_normalised(G, steps, coefficients):
    return _stack_iterate(G, steps, coefficients, lambda X: torch.linalg.matrix_norm(X, ord=2)[..., None, None])


check_newton_schulz_stack = Checker(
    name="newton_schulz_stack",
    doc="Check ``fn(G, steps, coefficients) -> X``: Newton-Schulz on every matrix of a stack ``G`` ``(..., m, n)`` "
        "float64 at once, each matrix divided by its own Frobenius norm, then ``steps`` times "
        "``X <- a X + (b A + c A A) X`` with ``A = X X^T``; ``X`` has ``G``'s shape.",
    reference=_stack_reference,
    cases=_stack_cases(),
    mistakes=(
        Mistake(_one_norm_for_the_stack, "divide each matrix by its own Frobenius norm (over its last two axes, "
                "keeping them for broadcasting), not the whole stack by one number: a small matrix in a stack "
                "with a large one would start with singular values near 0 and stay far from 1."),
        Mistake(_not_normalised, "divide each matrix by its Frobenius norm first: the polynomial pulls singular "
                "values towards 1 only from inside [0, 1], and blows up larger ones."),
        Mistake(_spectral_normalised, "divide by the Frobenius norm, as Muon does: it bounds the largest singular "
                "value and costs no SVD."),
    ),
    forbidden=_ORTHOGONALISERS,
)


# --- the orthogonal factor from the smaller Gram matrix ------------------------------------------------

def _polar_reference(G):
    return polar_factor(G)


def _gram_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2504)
    cases = [Case("G = diag(3, 0.5): already orthogonal directions, so U V^T = I",
                  (torch.diag(torch.tensor([3.0, 0.5], **_F64)),)),
             Case("G = [[0, -2], [1, 0]]: a rotation by 90 degrees, stretched",
                  (torch.tensor([[0.0, -2.0], [1.0, 0.0]], **_F64),))]
    for shape in ((3, 5), (6, 4), (5, 5), (1, 4), (7, 2)):
        cases.append(Case(f"random G of shape {shape}", (torch.randn(*shape, generator=g, **_F64),)))
    return cases


def _gram_power(G, power):
    # G (G^T G)^power for a tall G, (G G^T)^power G for a wide one: the smaller Gram matrix either way
    wide = G.shape[0] < G.shape[1]
    M = G.T if wide else G
    w, V = torch.linalg.eigh(M.T @ M)
    P = M @ V @ torch.diag(w**power) @ V.T
    return P.T if wide else P


def _inverse_not_root(G):
    return _gram_power(G, -1.0)


def _no_root_at_all(G):
    wide = G.shape[0] < G.shape[1]
    M = G.T if wide else G
    w, V = torch.linalg.eigh(M.T @ M)
    P = M @ V @ torch.diag(w.sqrt()) @ V.T / w.sqrt().max()
    return P.T if wide else P


check_polar_from_gram = Checker(
    name="polar_from_gram",
    doc="Check ``fn(G) -> U @ Vh``: the orthogonal factor of ``G = U S V^T`` (``G`` ``(m, n)`` float64 of full rank), "
        "computed from an eigendecomposition of the smaller Gram matrix, without an SVD; the result ``(m, n)``.",
    reference=_polar_reference,
    cases=_gram_cases(),
    mistakes=(
        Mistake(_inverse_not_root, "(G^T G)^(-1) divides each singular value by its square, leaving 1/s: the "
                "orthogonal factor needs the inverse square root, (G^T G)^(-1/2), which divides by s itself."),
        Mistake(_no_root_at_all, "scaling by the largest singular value keeps the others smaller than 1: every "
                "singular value of U V^T is 1, so divide each direction by its own s."),
    ),
    forbidden=_ORTHOGONALISERS,
)
