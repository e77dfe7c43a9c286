"""Muon for the weight matrices, AdamW for the rest (chapter 25; Jordan et al. 2024).

Muon keeps a momentum of the gradient, as SGD with Nesterov momentum does, and replaces each matrix's
update by the nearest semi-orthogonal matrix: for an update ``G = U S V^T`` it steps along ``U V^T``,
every direction of the update with the same size. ``newton_schulz`` computes that factor with matrix
products only, as ``torch.optim.Muon`` does; ``polar_factor`` computes it exactly, from the SVD, to
check it against. ``MuonAdamW`` is the optimizer a GPT trains with: ``torch.optim.Muon`` on the
matrices of its blocks, ``torch.optim.AdamW`` on the embeddings, norms and biases.
"""

from __future__ import annotations

from typing import Any

import torch

# The quintic iteration's coefficients (Jordan et al. 2024): chosen for the steepest slope at 0, so that
# five steps lift even tiny singular values towards 1, at the price of landing near 1, not on it.
QUINTIC = (3.4445, -4.7750, 2.0315)
# The classic cubic iteration, X <- 1.5 X - 0.5 X X^T X: it converges to U V^T exactly, but slowly.
CUBIC = (1.5, -0.5, 0.0)


def newton_schulz(G: torch.Tensor, steps: int = 5, coefficients: tuple[float, float, float] = QUINTIC,
                  eps: float = 1e-7, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Approximately the orthogonal factor ``U V^T`` of ``G = U S V^T``, by Newton-Schulz iteration.

    ``G`` ``(m, n)`` to ``(m, n)``. Each step maps ``X`` to ``a X + (b A + c A A) X`` with ``A = X X^T``, a
    polynomial applied to every singular value of ``X`` alone, leaving ``U`` and ``V`` as they are.
    ``G`` is first divided by its Frobenius norm, so its singular values lie in ``[0, 1]`` where the
    polynomial pushes them towards 1. ``dtype`` is the precision to iterate in (``torch.optim.Muon``
    uses bfloat16); ``None`` keeps ``G``'s.
    """
    if G.dim() != 2:
        raise ValueError(f"G must be a matrix (m, n); got shape {tuple(G.shape)}")
    if steps < 0:
        raise ValueError(f"steps must be 0 or more; got {steps}")
    a, b, c = coefficients
    X = G if dtype is None else G.to(dtype)
    wide = G.shape[0] <= G.shape[1]
    X = X if wide else X.T  # iterate on the wide side: A = X X^T is then the smaller Gram matrix
    X = X / X.norm().clamp(min=eps)
    for _ in range(steps):
        A = X @ X.T
        B = torch.addmm(A, A, A, beta=b, alpha=c)  # b A + c A A, in one kernel (as torch.optim.Muon does)
        X = torch.addmm(X, B, X, beta=a)  # a X + B X
    return X if wide else X.T


def polar_factor(G: torch.Tensor) -> torch.Tensor:
    """The orthogonal factor ``U V^T`` of ``G = U S V^T`` (reduced SVD), computed exactly: ``(m, n)``."""
    if G.dim() != 2:
        raise ValueError(f"G must be a matrix (m, n); got shape {tuple(G.shape)}")
    U, _, Vh = torch.linalg.svd(G, full_matrices=False)
    return U @ Vh


def muon_parameters(model: torch.nn.Module) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The model's parameters split in two: the matrices of its blocks (for Muon), and the rest (for AdamW).

    Embedding tables are matrices too, but a row of one is a token's vector, not a map between spaces:
    they stay with AdamW, as in the recipes that introduced Muon, and so does a tied output layer.
    """
    matrices, rest = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (matrices if p.dim() == 2 and name.startswith("blocks.") else rest).append(p)
    return matrices, rest


class MuonAdamW:
    """``torch.optim.Muon`` on the block matrices and ``torch.optim.AdamW`` on everything else, as one
    optimizer: one ``step``, one ``zero_grad``, one ``state_dict``.

    ``param_groups`` lists both optimizers' groups, so a schedule that sets every group's ``"lr"`` drives
    both; each group carries ``"lr_scale"`` (``matrix_lr / lr`` for Muon's, 1 for AdamW's) for a schedule
    to multiply by. Muon's step size uses ``adjust_lr_fn="match_rms_adamw"``: its update is scaled to the
    typical size of an AdamW update (Liu et al. 2025), and the scaling does not depend on whether a matrix
    is stored as ``(in, out)``, as here, or ``(out, in)``, as in ``torch.nn.Linear``.
    """

    def __init__(self, model: torch.nn.Module, lr: float, matrix_lr: float, weight_decay: float,
                 betas: tuple[float, float], momentum: float = 0.95) -> None:
        matrices, rest = muon_parameters(model)
        if not matrices:
            raise ValueError("the model has no matrices under 'blocks.' for Muon to train")
        self.muon = torch.optim.Muon(matrices, lr=matrix_lr, weight_decay=weight_decay, momentum=momentum,
                                     adjust_lr_fn="match_rms_adamw")
        # Vectors (norms, biases) are not decayed, as in make_optimizer; nor is the embedding here.
        self.adamw = torch.optim.AdamW(rest, lr=lr, betas=betas, weight_decay=0.0)
        for group in self.muon.param_groups:
            group["lr_scale"] = matrix_lr / lr
        for group in self.adamw.param_groups:
            group["lr_scale"] = 1.0

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.muon.param_groups + self.adamw.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.muon.zero_grad(set_to_none)
        self.adamw.zero_grad(set_to_none)

    @torch.no_grad()
    def step(self) -> None:
        self.muon.step()
        self.adamw.step()

    def state_dict(self) -> dict[str, Any]:
        return {"muon": self.muon.state_dict(), "adamw": self.adamw.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if set(state_dict) != {"muon", "adamw"}:
            raise ValueError(f"a MuonAdamW state has the keys 'muon' and 'adamw'; got {sorted(state_dict)}")
        self.muon.load_state_dict(state_dict["muon"])
        self.adamw.load_state_dict(state_dict["adamw"])

    def __repr__(self) -> str:
        return f"MuonAdamW(\n{self.muon!r},\n{self.adamw!r})"
