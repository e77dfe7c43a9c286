"""Muon for the weight matrices, AdamW for the rest (chapter 25; Jordan et al. 2024).

Muon keeps a momentum of the gradient, as SGD with Nesterov momentum does, and replaces each matrix's
update by the nearest semi-orthogonal matrix: for an update ``G = U S V^T`` it steps along ``U V^T``,
every direction of the update with the same size. ``newton_schulz`` computes that factor with matrix
products only, as ``torch.optim.Muon`` does; ``polar_factor`` computes it exactly, from the SVD, to
check it against. ``Muon`` is ``torch.optim.Muon``'s step with the iteration's precision as a choice:
``torch.optim.Muon`` always iterates in bfloat16, fast on GPUs; on a CPU float32 lands closer to the
polar factor, and bfloat16 is faster only where the processor has bfloat16 instructions (on the 2-core x86
machine of chapter 25's race, with them, a step took 1.16 times an AdamW step in bfloat16, 1.47 in float32).
``MuonAdamW`` is the optimizer a GPT trains with: ``Muon`` on the matrices of its blocks,
``torch.optim.AdamW`` on the embeddings, norms and biases.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from attnbook._validate import require_int, require_real

#: The quintic iteration's coefficients ``(a, b, c)`` (Jordan et al. 2024): chosen for the steepest slope at 0, so
#: that five steps lift even tiny singular values towards 1, at the price of landing near 1, not on it.
QUINTIC = (3.4445, -4.7750, 2.0315)
#: The classic cubic iteration, ``X <- 1.5 X - 0.5 X X^T X``: it converges to ``U V^T`` exactly, but slowly.
CUBIC = (1.5, -0.5, 0.0)


def newton_schulz(G: torch.Tensor, steps: int = 5, coefficients: tuple[float, float, float] = QUINTIC,
                  eps: float = 1e-7, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Approximately the orthogonal factor ``U V^T`` of ``G = U S V^T``, by Newton-Schulz iteration.

    ``G`` ``(m, n)`` to ``(m, n)``, or a stack of matrices ``(k, m, n)`` to ``(k, m, n)``, each iterated
    alone in one batched product per step (what ``Muon`` does with matrices of one shape). Each step maps
    ``X`` to ``a X + (b A + c A A) X`` with ``A = X X^T``, a polynomial applied to every singular value of
    ``X`` alone, leaving ``U`` and ``V`` as they are. Each matrix is first divided by its Frobenius norm, so
    its singular values lie in ``[0, 1]`` where the polynomial pushes them towards 1. ``dtype`` is the
    precision to iterate in (``torch.optim.Muon`` uses bfloat16); ``None`` keeps ``G``'s. A zero ``G`` has no
    direction and gives zeros (no step); NaN in ``G`` gives NaN, as arithmetic does. Refuses a ``G`` that is
    neither a matrix nor a stack of them, and a ``steps`` that is not an integer, 0 or more.
    """
    _check_newton_schulz(G, steps)
    a, b, c = coefficients
    X = G if dtype is None else G.to(dtype)
    wide = G.shape[-2] <= G.shape[-1]
    X = X if wide else X.mT  # iterate on the wide side: A = X X^T is then the smaller Gram matrix
    if X.dim() == 2:  # (m, n) with m <= n
        X = X / X.norm().clamp(min=eps)  # every singular value now in [0, 1]
        for _ in range(steps):
            A = X @ X.T  # (m, m)
            B = torch.addmm(A, A, A, beta=b, alpha=c)  # b A + c A A, in one kernel (as torch.optim.Muon does)
            X = torch.addmm(X, B, X, beta=a)  # a X + B X = a X + b (X X^T) X + c (X X^T)^2 X
    else:  # the same products, one batched kernel for the whole stack
        X = X / torch.linalg.matrix_norm(X).clamp(min=eps)[:, None, None]
        for _ in range(steps):
            A = X @ X.mT
            B = torch.baddbmm(A, A, A, beta=b, alpha=c)
            X = torch.baddbmm(X, B, X, beta=a)
    return X if wide else X.mT


def _check_newton_schulz(G: torch.Tensor, steps: int) -> None:
    """``newton_schulz``'s refusals: a ``G`` that is neither a matrix nor a stack of them, a ``steps`` that is not an
    integer, 0 or more."""
    if G.dim() not in (2, 3):
        raise ValueError(f"G must be a matrix (m, n) or a stack of matrices (k, m, n); got shape {tuple(G.shape)}")
    require_int("steps", steps)
    if steps < 0:
        raise ValueError(f"steps must be 0 or more; got {steps}")


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


def ns_dtype_for(device: torch.device | str, precision: str = "auto") -> torch.dtype:
    """The precision to iterate in: ``"bf16"``, ``"fp32"``, or ``"auto"``: bfloat16 on a GPU (as
    ``torch.optim.Muon``), float32 on a CPU, where bfloat16 is faster only on a processor with bfloat16
    instructions (``"bf16"`` asks for it there), and float32 is the more accurate everywhere."""
    if precision not in ("auto", "bf16", "fp32"):
        raise ValueError(f"the Newton-Schulz precision must be 'auto', 'bf16' or 'fp32'; got {precision!r}")
    if precision == "auto":
        precision = "bf16" if torch.device(device).type == "cuda" else "fp32"
    return torch.bfloat16 if precision == "bf16" else torch.float32


class Muon(torch.optim.Optimizer):
    """``torch.optim.Muon``'s update (Nesterov momentum, then the quintic Newton-Schulz iteration, decoupled
    weight decay, and ``adjust_lr_fn="match_rms_adamw"``: the step scaled by ``0.2 sqrt(max(m, n))``),
    iterating in ``ns_dtype``. With ``ns_dtype=torch.bfloat16`` it takes ``torch.optim.Muon``'s steps
    exactly (the tests check it). For 2-D parameters only. Refuses a negative or non-finite ``lr``, a
    ``momentum`` outside ``[0, 1)``, a negative ``weight_decay`` and an ``ns_steps`` that is not an integer,
    0 or more, as ``torch.optim`` refuses a negative learning rate.
    """

    def __init__(self, params, lr: float, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_steps: int = 5, ns_dtype: torch.dtype = torch.bfloat16,
                 batched: bool = True) -> None:
        require_real("lr", lr, "a finite number, 0 or more (a negative rate climbs the loss)", lambda v: v >= 0)
        require_real("momentum", momentum, "a number in [0, 1)", lambda v: 0 <= v < 1)
        require_real("weight_decay", weight_decay, "a finite number, 0 or more (0: no decay)", lambda v: v >= 0)
        require_int("ns_steps", ns_steps, 0)
        params = list(params)
        for p in params:
            if p.dim() != 2:
                raise ValueError(f"Muon trains matrices only; got a parameter of shape {tuple(p.shape)}")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                      ns_steps=ns_steps))
        self.ns_dtype = ns_dtype  # not a group setting: a checkpoint's state stays free of dtypes
        # Iterate on every matrix of one shape at once: a GPT's blocks repeat the same few shapes, and one
        # batched product costs far less than as many small ones (the iteration is Muon's largest cost on a
        # CPU). It changes no mathematics; the tests check it against the matrix-by-matrix iteration.
        self.batched = batched

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter with a gradient, each a matrix ``(m, n)``: momentum and Nesterov's
        look-ahead, ``newton_schulz``, decoupled weight decay, and the step scaled by ``0.2 sqrt(max(m, n))``
        (chapter 25). ``closure`` is accepted, as ``torch.optim`` does, and not called."""
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            params, updates = [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - momentum)  # B <- mu B + (1 - mu) G: the running mean of the gradients
                params.append(p)
                # Nesterov's look-ahead M = (1 - mu) G + mu B, or the momentum B itself
                updates.append(p.grad.lerp(buf, momentum) if group["nesterov"] else buf)
            # O ~ U V^T of every M, by newton_schulz (the matrices of one shape in one batched product)
            for p, update in zip(params, self._orthogonalise(updates, group["ns_steps"]), strict=True):
                p.mul_(1 - lr * group["weight_decay"])  # W <- (1 - lr wd) W: decoupled weight decay
                p.add_(update, alpha=-lr * 0.2 * math.sqrt(max(p.shape)))  # W <- W - lr 0.2 sqrt(max(m, n)) O

    def _orthogonalise(self, updates: list[torch.Tensor], steps: int) -> list[torch.Tensor]:
        """``newton_schulz`` of every update, those of one shape (up to a transpose) in one stack."""
        if not self.batched:
            return [newton_schulz(u, steps, dtype=self.ns_dtype) for u in updates]
        out: list[torch.Tensor | None] = [None] * len(updates)
        by_shape: dict[tuple, list[int]] = {}
        for i, u in enumerate(updates):  # a tall matrix joins the wide ones of its transposed shape
            by_shape.setdefault((min(u.shape), max(u.shape), u.dtype, u.device), []).append(i)
        for index in by_shape.values():
            if len(index) == 1:
                out[index[0]] = newton_schulz(updates[index[0]], steps, dtype=self.ns_dtype)
                continue
            wide = [updates[i] if updates[i].shape[0] <= updates[i].shape[1] else updates[i].T for i in index]
            stacked = newton_schulz(torch.stack(wide), steps, dtype=self.ns_dtype)
            for i, X in zip(index, stacked, strict=True):
                out[i] = X if updates[i].shape[0] <= updates[i].shape[1] else X.T
        return out  # type: ignore[return-value]


class MuonAdamW:
    """``Muon`` on the block matrices and ``torch.optim.AdamW`` on everything else, as one optimizer: one
    ``step``, one ``zero_grad``, one ``state_dict``. ``ns_dtype`` is the precision of Muon's iteration and
    ``ns_steps`` its number of steps.

    ``param_groups`` lists both optimizers' groups, so a schedule that sets every group's ``"lr"`` drives
    both; each group carries ``"lr_scale"`` (``matrix_lr / lr`` for Muon's, 1 for AdamW's) for a schedule
    to multiply by. Muon's step size is ``adjust_lr_fn="match_rms_adamw"``'s: its update is scaled to the
    typical size of an AdamW update (Liu et al. 2025), and the scaling does not depend on whether a matrix
    is stored as ``(in, out)``, as here, or ``(out, in)``, as in ``torch.nn.Linear``.
    """

    def __init__(self, model: torch.nn.Module, lr: float, matrix_lr: float, weight_decay: float,
                 betas: tuple[float, float], momentum: float = 0.95, ns_dtype: torch.dtype = torch.bfloat16,
                 ns_steps: int = 5) -> None:
        require_real("lr", lr, "a positive finite number", lambda v: v > 0)  # matrix_lr / lr is every step's scale
        matrices, rest = muon_parameters(model)
        if not matrices:
            raise ValueError("the model has no matrices under 'blocks.' for Muon to train")
        self.muon = Muon(matrices, lr=matrix_lr, weight_decay=weight_decay, momentum=momentum, ns_dtype=ns_dtype,
                         ns_steps=ns_steps)
        # Vectors (norms, biases) are not decayed, as in make_optimizer; nor is the embedding here.
        self.adamw = torch.optim.AdamW(rest, lr=lr, betas=betas, weight_decay=0.0, fused=True)  # as make_optimizer
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
