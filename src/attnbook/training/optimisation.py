"""How a run steps its parameters, spelled one way for every run (chapters 16, 17, 24, 25, 26, 28).

``Optimisation`` holds the rates, AdamW's betas and weight decay, the gradient clipping, the schedule and
the choice of optimizer (AdamW, or Muon beside AdamW as in chapter 25). Every run configuration is built on
it (``TrainConfig`` and through it ``GPTRunConfig``, ``MLMRunConfig`` and ``InductionConfig``), so a field
has one name, one meaning and one check everywhere. It builds the optimizer (``build_optimizer``) and sets
each step's learning rate (``set_step``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch

from attnbook._fields import Checked, FieldError, choice, count, real
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


def _positive(default: float | None, help: str, optional: str | None = None) -> float:
    return real(default, ok=lambda v: v > 0, expected="positive", optional=optional, help=help)


@dataclass(kw_only=True)
class Optimisation(Checked):
    """The optimisation of a run. ``lr`` is the peak learning rate, reached after ``warmup`` steps and decayed
    to ``min_lr`` along ``schedule``; ``grad_clip`` 0 means no clipping.

    The defaults are the small-model recipe of chapter 16. A value that would train uphill or not at all (a
    ``lr`` that is not positive, a ``min_lr`` above ``lr``, a ``beta1`` of 1 or more, a negative clipping norm)
    raises ``ValueError`` naming the field, the value and what is accepted.
    """

    lr: float = _positive(1e-3, "the peak learning rate, reached at the end of the warm-up")
    min_lr: float = real(0.0, ok=lambda v: v >= 0, expected="0 or more",
                         help="the learning rate the schedule decays to, at most lr")
    warmup: int = count(100, minimum=0, expected="a whole number of steps, 0 or more",
                        help="steps over which the learning rate rises linearly from 0 to lr")
    schedule: Schedule = choice("cosine", get_args(Schedule),
                                help="the decay after the warm-up: 'cosine' or 'linear' down to min_lr; "
                                     "'trapezoid': constant, then straight down over the last 40% (chapter 25)")
    weight_decay: float = real(0.01, ok=lambda v: v >= 0, expected="0 or more (0: no decay)",
                               help="AdamW's decoupled weight decay, on matrices only")
    beta1: float = real(0.9, ok=lambda v: 0 <= v < 1, expected="in [0, 1)",
                        help="Adam's decay rate of the gradient's running mean")
    beta2: float = real(0.98, ok=lambda v: 0 <= v < 1, expected="in [0, 1)",
                        help="Adam's decay rate of the squared gradient's running mean")
    grad_clip: float = real(1.0, ok=lambda v: v >= 0, expected="0 (no clipping) or a positive maximum gradient norm",
                            help="the largest gradient norm; a larger gradient is scaled down to it (0: no clipping)")
    optimizer: OptimizerName = choice("adamw", get_args(OptimizerName),
                                      help="'adamw', or 'muon': Muon on the block matrices, AdamW on the rest "
                                           "(chapter 25)")
    matrix_lr: float | None = _positive(None, "Muon's peak learning rate (optimizer 'muon' only)", optional="lr")
    embed_lr: float | None = _positive(None, "with Muon, AdamW's peak rate for embeddings, norms and biases",
                                       optional="lr")
    muon_precision: Precision = choice("auto", get_args(Precision),
                                       help="Muon's iteration in 'bf16' or 'fp32'; 'auto': bf16 on a GPU, fp32 on "
                                            "a CPU")
    muon_ns_steps: int = count(5, help="Muon's Newton-Schulz steps")
    muon_momentum_warmup: int = count(0, minimum=0, help="with Muon, steps over which its momentum rises from "
                                                         "0.85 to 0.95 (0: 0.95 throughout)")

    def check(self) -> None:
        """The rules between the fields defined here (``TrainConfig`` checks ``warmup`` against its ``steps``)."""
        super().check()
        if not self.min_lr <= self.lr:
            raise FieldError(f"min_lr must lie in [0, lr = {self.lr}] (the schedule decays from lr down to it); "
                             f"got {self.min_lr!r}", "min_lr", "lr")
        for name, what in (("matrix_lr", "Muon's learning rate"), ("embed_lr", "AdamW's rate beside Muon"),
                           ("muon_momentum_warmup", "Muon's momentum warm-up")):
            if getattr(self, name) and self.optimizer != "muon":
                raise FieldError(f"{name} is {what}; it needs optimizer='muon' (got {self.optimizer!r})",
                                 name, "optimizer")

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
