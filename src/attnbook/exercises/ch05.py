"""Checkers for the coding exercises of chapter 5 (queries, keys and values: three spaces)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import softmax

# PyTorch's automatic differentiation: an answer that calls it has not derived the gradient.
_AUTOGRAD = ("torch.autograd.grad", "torch.autograd.backward", "torch.func.grad", "torch.func.vjp",
             "torch.func.jacrev", "torch.func.jacfwd")


# --- the value map's gradient in the column convention ----------------------------------------------

def _value_grad_cases() -> list[Case]:
    rng = np.random.default_rng(502)
    cases = [
        # One sequence, two tokens, and a one-hot A: query 0 reads token 1, query 1 reads token 0.
        Case("B=1, Z=[[1, 2], [3, 4]], A=[[0, 1], [1, 0]] (one-hot columns), G=[[1, 0], [0, 2]]",
             (np.array([[[1.0, 2.0], [3.0, 4.0]]]), np.array([[[0.0, 1.0], [1.0, 0.0]]]),
              np.array([[[1.0, 0.0], [0.0, 2.0]]]))),
    ]
    # (B, d_z, d_v, T_k, T_q): square ones (d_v = d_z, T_q = T_k) first, where a transposed or
    # reordered answer has the right shape and only its numbers are wrong.
    for B, d_z, d_v, T_k, T_q in ((2, 3, 3, 4, 4), (3, 4, 4, 3, 3), (2, 5, 2, 6, 4), (1, 2, 3, 1, 5),
                                  (4, 3, 6, 5, 2)):
        Z = rng.normal(size=(B, d_z, T_k))
        A = softmax(rng.normal(size=(B, T_k, T_q)), axis=-2)  # each column a query's weights over the keys
        G = rng.normal(size=(B, d_v, T_q))
        cases.append(Case(f"B={B}, d_z={d_z}, d_v={d_v}, T_k={T_k}, T_q={T_q}", (Z, A, G)))
    return cases


def _value_weight_grad(Z: np.ndarray, A: np.ndarray, G: np.ndarray) -> np.ndarray:
    """dL/dW_v for the outputs (W_v Z_b + b_v 1^T) A_b with dL/d output = G_b, by autograd in float64."""
    import torch  # only here: the NumPy chapters' checkers import without PyTorch

    Z_t, A_t, G_t = (torch.as_tensor(np.asarray(x, dtype=np.float64)) for x in (Z, A, G))
    W_v = torch.zeros(G_t.shape[-2], Z_t.shape[-2], dtype=torch.float64, requires_grad=True)
    b_v = torch.zeros(G_t.shape[-2], dtype=torch.float64)
    (grad,) = torch.autograd.grad((W_v @ Z_t + b_v[:, None]) @ A_t, W_v, grad_outputs=G_t)
    return grad.numpy()


def _t(X: np.ndarray) -> np.ndarray:
    return np.swapaxes(X, -1, -2)


def _row_convention(Z, A, G) -> np.ndarray:
    return np.sum(Z @ A @ _t(G), axis=0)


def _per_sequence(Z, A, G) -> np.ndarray:
    return G @ _t(Z @ A)


def _batch_mean(Z, A, G) -> np.ndarray:
    return np.mean(G @ _t(Z @ A), axis=0)


def _weights_not_transposed(Z, A, G) -> np.ndarray:
    return np.sum(G @ A @ _t(Z), axis=0)


def _weights_left_out(Z, A, G) -> np.ndarray:
    return np.sum(G @ _t(Z), axis=0)


check_value_weight_grad = Checker(
    name="value_weight_grad",
    doc="Check ``fn(Z, A, G) -> (d_v, d_z)``: the gradient of a loss with respect to the column-convention "
        "``W_v`` (shape (d_v, d_z)) of the outputs ``(W_v Z[b] + b_v 1^T) A[b]``, for context tokens ``Z`` "
        "(B, d_z, T_k), weights ``A`` (B, T_k, T_q) whose columns sum to 1 and ``G = dL/d output`` "
        "(B, d_v, T_q).",
    reference=_value_weight_grad,
    cases=_value_grad_cases(),
    mistakes=(
        Mistake(_row_convention, "that is the row convention's gradient, shape (d_z, d_v); in the column "
                "convention W_v is (d_v, d_z), and so is its gradient: G (Z A)^T."),
        Mistake(_per_sequence, "one W_v serves every sequence of the batch: add the sequences' gradients into one "
                "(d_v, d_z) matrix."),
        Mistake(_batch_mean, "the loss adds over the batch, so the gradients add: sum them, do not average."),
        Mistake(_weights_not_transposed, "output column j mixes the value columns with the weights in column j "
                "of A, so the gradient reaching V is G A^T: A enters transposed."),
        Mistake(_weights_left_out, "the output is V A, not V: the gradient passes through the attention "
                "weights on its way to W_v."),
    ),
    atol=1e-10,
    forbidden=_AUTOGRAD,
)
