"""How a run steps its parameters, spelled one way for every run (chapters 16, 17, 24, 25, 26, 28).

``Optimisation`` holds the rates, AdamW's betas and weight decay, the gradient clipping, the schedule and
the choice of optimizer (AdamW, or Muon beside AdamW as in chapter 25). Every run configuration is built on
it (``TrainConfig`` and through it ``GPTRunConfig``, ``MLMRunConfig`` and ``InductionConfig``), so a field
has one name, one meaning and one check everywhere. It builds the optimizer (``build_optimizer``) and sets
each step's learning rate (``set_step``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Literal

import torch

from attnbook.training.muon import MuonAdamW, muon_parameters, ns_dtype_for
from attnbook.training.schedule import lr_at

Schedule = Literal["cosine", "linear", "trapezoid"]
OptimizerName = Literal["adamw", "muon"]
Precision = Literal["auto", "bf16", "fp32"]


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float,
                   betas: tuple[float, float]) -> torch.optim.AdamW:
    """AdamW, decaying only matrices: biases and norm parameters (vectors) are spared."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
    # The fused kernel updates every parameter in one pass; it exists on CPU and CUDA alike since torch 2.4.
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=True)


def optimizer_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer | MuonAdamW, loss: torch.Tensor,
                   grad_clip: float) -> None:
    """One update: clear the old gradients, backpropagate ``loss``, clip the gradient norm to ``grad_clip``
    (0: no clipping), and step. Under data parallelism the gradients are averaged in ``backward``."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()


def muon_momentum(step: int, warmup: int) -> float:
    """Muon's momentum at ``step`` (from 0) under a warm-up of ``warmup`` steps: from 0.85 up a straight line to
    0.95, then 0.95 (the GPU speedruns' warm-up; a smaller momentum averages fewer of the early, fast-changing
    gradients)."""
    return 0.85 + 0.10 * min(1.0, step / warmup)


def _bad(config: object, name: str, expected: str) -> ValueError:
    return ValueError(f"{name} must be {expected}; got {getattr(config, name)!r}")


def _number(config: object, name: str, expected: str, ok: Callable[[float], bool], optional: bool = False) -> None:
    """Refuse a field that is not a finite real number (``bool``, a string, NaN, infinity) or fails ``ok``; with
    ``optional``, ``None`` passes."""
    value = getattr(config, name)
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or not ok(value):
        raise _bad(config, name, expected)


def whole_number(config: object, name: str, minimum: int, expected: str) -> None:
    """Refuse a field that is not an integer (``bool`` and ``2.0`` included) of at least ``minimum``."""
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise _bad(config, name, expected)


@dataclass(kw_only=True)
class Optimisation:
    """The optimisation of a run. ``lr`` is the peak learning rate, reached after ``warmup`` steps and decayed
    to ``min_lr`` along ``schedule``; ``grad_clip`` 0 means no clipping.

    The defaults are the small-model recipe of chapter 16. A value that would train uphill or not at all (a
    ``lr`` that is not positive, a ``min_lr`` above ``lr``, a ``beta1`` of 1 or more, a negative clipping norm)
    raises ``ValueError`` naming the field, the value and what is accepted.
    """

    lr: float = 1e-3
    min_lr: float = 0.0
    warmup: int = 100
    # "cosine" or "linear": decay from the warm-up's end; "trapezoid": constant, then a straight decay over the
    # last 40% (chapter 25)
    schedule: Schedule = "cosine"
    weight_decay: float = 0.01  # AdamW's decoupled decay, on matrices only
    beta1: float = 0.9
    beta2: float = 0.98
    grad_clip: float = 1.0  # the largest gradient norm; 0: no clipping
    # "adamw", or "muon": Muon on the block matrices, AdamW on the rest (chapter 25)
    optimizer: OptimizerName = "adamw"
    matrix_lr: float | None = None  # Muon's peak learning rate; None: lr (Muon's step is scaled to AdamW's size)
    # With Muon, AdamW's peak rate for the rest (embeddings, norms, biases); None: lr (chapter 25)
    embed_lr: float | None = None
    # Muon's iteration: "bf16", "fp32", or "auto" (bf16 on a GPU, fp32 on a CPU)
    muon_precision: Precision = "auto"
    muon_ns_steps: int = 5  # Muon's Newton-Schulz steps
    # With Muon, steps over which its momentum rises linearly from 0.85 to 0.95; 0: 0.95 throughout (chapter 25)
    muon_momentum_warmup: int = 0

    def __post_init__(self) -> None:
        self.check_optimisation()

    def check_optimisation(self) -> None:
        """Check the fields defined here (``TrainConfig`` checks ``warmup`` against its ``steps``)."""
        whole_number(self, "warmup", 0, "a whole number of steps, 0 or more")
        _number(self, "lr", "positive", lambda v: v > 0)
        low = self.min_lr
        if isinstance(low, bool) or not isinstance(low, Real) or not math.isfinite(low) or not 0 <= low <= self.lr:
            raise ValueError(f"min_lr must lie in [0, lr = {self.lr}] (the schedule decays from lr down to it); "
                             f"got {low!r}")
        if self.schedule not in ("cosine", "linear", "trapezoid"):
            raise _bad(self, "schedule", "'cosine', 'linear' or 'trapezoid'")
        _number(self, "weight_decay", "0 or more (0: no decay)", lambda v: v >= 0)
        for name in ("beta1", "beta2"):
            _number(self, name, "in [0, 1)", lambda v: 0 <= v < 1)
        _number(self, "grad_clip", "0 (no clipping) or a positive maximum gradient norm", lambda v: v >= 0)
        if self.optimizer not in ("adamw", "muon"):
            raise _bad(self, "optimizer", "'adamw' or 'muon'")
        _number(self, "matrix_lr", "None (the same as lr) or positive", lambda v: v > 0, optional=True)
        if self.matrix_lr is not None and self.optimizer != "muon":
            raise ValueError(f"matrix_lr is Muon's learning rate; it needs optimizer='muon' (got {self.optimizer!r})")
        _number(self, "embed_lr", "None, or positive with optimizer='muon' (AdamW's rate beside Muon)",
                lambda v: v > 0, optional=True)
        if self.embed_lr is not None and self.optimizer != "muon":
            raise ValueError(f"embed_lr is AdamW's rate beside Muon: None, or positive with optimizer='muon'; got "
                             f"embed_lr = {self.embed_lr!r} with optimizer = {self.optimizer!r}")
        if self.muon_precision not in ("auto", "bf16", "fp32"):
            raise _bad(self, "muon_precision", "'auto', 'bf16' or 'fp32'")
        whole_number(self, "muon_ns_steps", 1, "an integer, at least 1")
        whole_number(self, "muon_momentum_warmup", 0, "0, or a positive whole number of steps with optimizer='muon'")
        if self.muon_momentum_warmup and self.optimizer != "muon":
            raise ValueError(f"muon_momentum_warmup must be 0, or a positive number of steps with optimizer='muon'; "
                             f"got {self.muon_momentum_warmup!r} with optimizer = {self.optimizer!r}")

    @property
    def betas(self) -> tuple[float, float]:
        """``(beta1, beta2)``, as ``torch.optim.AdamW`` takes them."""
        return (self.beta1, self.beta2)

    def build_optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer | MuonAdamW:
        """AdamW on the trainable parameters (``make_optimizer``), or Muon on the block matrices beside AdamW."""
        if self.optimizer == "muon":
            if not muon_parameters(model)[0]:
                raise ValueError(f"optimizer='muon' trains the matrices of a model's blocks (parameters named "
                                 f"'blocks.*'), and this {type(model).__name__} has none: use optimizer='adamw'")
            matrix_lr = self.lr if self.matrix_lr is None else self.matrix_lr
            ns_dtype = ns_dtype_for(next(model.parameters()).device, self.muon_precision)
            optimizer = MuonAdamW(model, self.lr, matrix_lr, self.weight_decay, self.betas, ns_dtype=ns_dtype,
                                  ns_steps=self.muon_ns_steps)
            if self.embed_lr is not None:
                for group in optimizer.adamw.param_groups:
                    group["lr_scale"] = self.embed_lr / self.lr
            return optimizer
        return make_optimizer(model, self.lr, self.weight_decay, self.betas)

    def set_step(self, optimizer: torch.optim.Optimizer | MuonAdamW, step: int, steps: int) -> float:
        """Set every group's rate (and Muon's momentum) for ``step`` (from 0) of ``steps``; return the peak-scaled
        rate ``lr_at`` gives, which the groups take times their ``lr_scale`` (Muon's groups may run at another)."""
        lr = lr_at(step, self.lr, self.warmup, steps, self.min_lr, self.schedule)
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        if self.muon_momentum_warmup:
            for group in optimizer.muon.param_groups:
                group["momentum"] = muon_momentum(step, self.muon_momentum_warmup)
        return lr
