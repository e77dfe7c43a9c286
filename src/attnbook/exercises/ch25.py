"""Checkers for the coding exercises of chapter 25 (training faster)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from attnbook.exercises._harness import Case, Checker, Mistake, Outcome, Verdict
from attnbook.training.muon import newton_schulz, polar_factor

# The checkers, exported by ``attnbook.exercises``; ``check_muon_cost`` (a check of two numbers) is imported from here.
__all__ = ["check_polar_from_gram", "check_quintic_for_slope"]

_F64 = dict(dtype=torch.float64)
# What would answer either exercise in one call: the package's iteration and exact factor, and an SVD.
_ORTHOGONALISERS = (newton_schulz, polar_factor, "torch.linalg.svd", "torch.svd", "torch.linalg.svdvals",
                    "numpy.linalg.svd", "scipy.linalg.svd", "scipy.linalg.polar")


# Functions that compute an SVD inside (a pseudo-inverse, least squares, a rank, a condition number): refused
# where the statement rules out an SVD.
_SVD_INSIDE = ("torch.linalg.pinv", "torch.pinverse", "torch.linalg.lstsq", "torch.linalg.matrix_rank",
               "torch.linalg.cond", "numpy.linalg.pinv", "numpy.linalg.lstsq", "numpy.linalg.matrix_rank",
               "numpy.linalg.cond")


# --- an odd quintic with 1 as an attracting fixed point ----------------------------------------------

def _quintic_reference(a):
    # p(1) = a + b + c = 1 and p'(1) = a + 3b + 5c = 0, solved for (b, c) as a linear system
    b, c = np.linalg.solve(np.array([[1.0, 1.0], [3.0, 5.0]]), np.array([1.0 - a, -a]))
    return (a, b, c)


def _fixed_point_only(a):
    return (a, 1.0 - a, 0.0)  # p(1) = 1 met with c = 0: a cubic, its slope at 1 left free


def _slope_one_at_one(a):
    b, c = np.linalg.solve(np.array([[1.0, 1.0], [3.0, 5.0]]), np.array([1.0 - a, 1.0 - a]))
    return (a, b, c)


def _slope_sign_flipped(a):
    b, c = np.linalg.solve(np.array([[1.0, 1.0], [3.0, 5.0]]), np.array([1.0 - a, a]))
    return (a, b, c)


check_quintic_for_slope = Checker(
    name="quintic_for_slope",
    doc="Check ``fn(a) -> (a, b, c)``: the odd quintic ``p(s) = a s + b s^3 + c s^5`` with slope ``a`` at 0, "
        "``p(1) = 1`` and ``p'(1) = 0``.",
    reference=_quintic_reference,
    cases=[Case(f"a = {a}", (a,)) for a in (1.5, 1.875, 3.4445, 2.0, 0.5, 3.0)],
    mistakes=(
        Mistake(_fixed_point_only, "p(1) = 1 alone leaves a coefficient free: the second condition, a flat p at "
                "1 (p'(1) = 0), fixes it, and it is what makes 1 attract the singular values near it."),
        Mistake(_slope_one_at_one, "the slope at 1 must be 0, not 1: with p'(1) = 1 a value near 1 moves away as "
                "fast as it came."),
        Mistake(_slope_sign_flipped, "check the signs: a + 3b + 5c is p'(1), and it must equal 0."),
    ),
    atol=1e-10,
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


def _always_the_gram_of_columns(G):
    w, V = torch.linalg.eigh(G.T @ G)
    return G @ V @ torch.diag(w**-0.5) @ V.T


def _no_root_at_all(G):
    wide = G.shape[0] < G.shape[1]
    M = G.T if wide else G
    w, V = torch.linalg.eigh(M.T @ M)
    P = M @ V @ torch.diag(w.sqrt()) @ V.T / w.sqrt().max()
    return P.T if wide else P


class _NoSVDChecker(Checker):
    """A ``Checker`` whose refusal of a function that computes an SVD inside says so."""

    def _run(self, fn, args, label, forbidden):
        got, problem = super()._run(fn, args, label, forbidden)
        if problem is not None and problem.outcome is Outcome.REFUSED and any(
                f"{name.rsplit('.', 1)[-1]}`" in problem.text for name in _SVD_INSIDE):
            problem = problem.extended("That function computes a singular value decomposition inside, and the "
                                       "exercise asks for the factor without one: from torch.linalg.eigh of the "
                                       "smaller Gram matrix.")
        return got, problem


check_polar_from_gram = _NoSVDChecker(
    name="polar_from_gram",
    doc="Check ``fn(G) -> U @ Vh``: the orthogonal factor of ``G = U S V^T`` (``G`` ``(m, n)`` float64 of full rank), "
        "computed from an eigendecomposition of the smaller Gram matrix, without an SVD; the result ``(m, n)``.",
    reference=_polar_reference,
    cases=_gram_cases(),
    mistakes=(
        Mistake(_inverse_not_root, "(G^T G)^(-1) divides each singular value by its square, leaving 1/s: the "
                "orthogonal factor needs the inverse square root, (G^T G)^(-1/2), which divides by s itself."),
        Mistake(_always_the_gram_of_columns, "for a wide G (m < n) the n x n matrix G^T G has rank m: n - m of its "
                "eigenvalues are 0, or a rounding error away, and their inverse square roots blow up (NaN). Take "
                "the smaller Gram matrix, G G^T, and put its inverse root on the left: (G G^T)^(-1/2) G."),
        Mistake(_no_root_at_all, "scaling by the largest singular value keeps the others smaller than 1: every "
                "singular value of U V^T is 1, so divide each direction by its own s."),
    ),
    forbidden=(*_ORTHOGONALISERS, *_SVD_INSIDE),
)


# --- where Muon's time goes: the two numbers of the cost exercise ---------------------------------------
# The exercise asks for numbers, not a function to run on cases, so its check is not a ``Checker``: it compares
# the two numbers the learner's function returns with the ones computed here, whose source the chapter never
# prints, and says in which direction a wrong one is off.

def _newton_schulz_flops(shape: tuple[int, int], steps: int = 5) -> int:
    m, n = sorted(shape)  # the iteration runs on the wide side: its Gram matrix is m x m
    return steps * (4 * m * m * n + 2 * m**3)


def _ratio_at_width(d: int, batch: int, T: int = 64, layers: int = 4, vocab: int = 65) -> float:
    """Newton-Schulz's operations over the forward and backward passes' for chapter 17's model at width ``d``."""
    shapes = [(d, d)] * 4 + [(d, 4 * d), (4 * d, d)]
    ns_flops = layers * sum(_newton_schulz_flops(s) for s in shapes)
    n_params = layers * (12 * d * d + 13 * d) + vocab * d + 2 * d
    model_flops = 6 * n_params * batch * T + 3 * layers * batch * 4 * T * T * d
    return ns_flops / model_flops


def _smallest_windows(ns_flops: float, training_flops: float, batch: int) -> int:
    per_window = training_flops / batch
    return next(w for w in range(1, 1_000_000) if ns_flops <= 0.1 * w * per_window)


def _smallest_width(batch: int) -> int:
    return next(d for d in range(8, 4097, 8) if _ratio_at_width(d, batch) >= 1)


def _whole(x: object) -> int | None:
    """``x`` as an int when it is a whole number (``76``, ``76.0``, ``np.int64(76)``), else None (text, a bool)."""
    if isinstance(x, (str, bytes, bool, np.bool_)):
        return None
    try:
        value = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return int(value) if math.isfinite(value) and value == int(value) else None


def _cost_reference() -> tuple[int, int]:
    raise NotImplementedError  # never called: the check computes its numbers from the arguments it is given


def check_muon_cost(fn: Callable[[], tuple[int, int]], ns_flops: float, training_flops: float,
                    batch: int) -> Verdict:
    """Check ``fn() -> (windows, width)``: (a) the smallest batch, in windows of 64 characters, at which Newton-Schulz's
    ``ns_flops`` per step add at most 10% to the forward and backward passes (``training_flops`` per step at a batch
    of ``batch`` windows); (b) the smallest width ``d``, a multiple of 8, at which chapter 17's model (four blocks,
    ``d_ff = 4d``) at that batch spends as many operations on Newton-Schulz as on the passes."""
    name = "muon_cost"
    # The answer runs under the watch every checker uses: this module's counts (the reference) and the rest of
    # the package are refused, so the numbers must come from the learner's own arithmetic.
    watched = Checker(name=name, doc=check_muon_cost.__doc__ or "", reference=_cost_reference, cases=(),
                      forbidden=(_newton_schulz_flops, _ratio_at_width, _smallest_windows, _smallest_width))
    answer, problem = watched._run(fn, (), "the cost exercise", watched.forbidden)
    if problem is not None and problem.outcome is Outcome.NOT_ATTEMPTED:
        return Verdict(False, f"{name}: not attempted yet (it raises NotImplementedError). Replace the `raise` line "
                              "with your code and run the cell again.", attempted=False)
    if problem is not None:
        return Verdict(False, f"{name}: {problem.text}", outcome=problem.outcome)
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return Verdict(False, f"{name}: expected two numbers, (windows, width), got {answer!r:.80}.",
                       outcome=Outcome.WRONG_FORM)
    windows, width = (_whole(a) for a in answer)
    if windows is None or width is None:
        return Verdict(False, f"{name}: expected two whole numbers, (windows, width), got {answer!r:.80}.",
                       outcome=Outcome.WRONG_FORM)
    # A wrong number is told on which side of the right one it lies, and nothing more: a share printed for one
    # batch would give the answer away (the smallest batch is that share times the batch over 10%, rounded up).
    problems = []
    over = windows <= 0 or ns_flops > 0.1 * windows * training_flops / batch
    if windows <= 0:
        problems.append(f"(a) {windows} is not a positive number of windows")
    elif over:
        problems.append(f"(a) at {windows} windows Newton-Schulz adds more than 10% to the passes")
    elif windows != _smallest_windows(ns_flops, training_flops, batch):
        problems.append(f"(a) {windows} windows keep Newton-Schulz under 10%, but so does a smaller batch")
    if width % 8 or width <= 0:
        problems.append(f"(b) {width} is not a positive multiple of 8")
    elif _ratio_at_width(width, batch) < 1:
        problems.append(f"(b) at width {width} Newton-Schulz still costs less than the passes")
    elif width != _smallest_width(batch):
        problems.append(f"(b) at width {width} Newton-Schulz costs at least as much as the passes, but so it does at "
                        "a smaller width")
    if problems:
        return Verdict(False, f"{name}: " + "; ".join(problems) + ".", outcome=Outcome.WRONG_VALUE)
    return Verdict(True, f"{name}: both numbers are right.")
