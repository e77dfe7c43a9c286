"""A small trainer in plain PyTorch (chapters 16 and 17).

AdamW with decoupled weight decay on matrices only, linear warm-up then decay, gradient clipping, a
tqdm progress bar, periodic evaluation, early stopping at a target metric, and a seed that makes a CPU
run repeat exactly. The task supplies two functions: one that draws a batch and one that computes the
loss on it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from attnbook.training.schedule import lr_at


def set_seed(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch; return a generator for drawing batches."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


@dataclass
class TrainConfig:
    """How to train. ``lr`` is the peak learning rate, reached after ``warmup`` steps."""

    steps: int = 1000
    batch_size: int = 64
    lr: float = 1e-3
    min_lr: float = 0.0
    warmup: int = 100
    schedule: str = "cosine"
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    grad_clip: float | None = 1.0
    eval_every: int = 0
    target: float | None = None  # stop once the evaluation reaches this value
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(f"steps and batch_size must be at least 1; got {self.steps} and {self.batch_size}")
        if not 0 <= self.warmup <= self.steps:
            raise ValueError(f"warmup must lie in [0, steps={self.steps}]; got {self.warmup}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive; got {self.lr}")
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"min_lr must lie in [0, lr = {self.lr}]; got {self.min_lr}")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be 0 or more; got {self.weight_decay}")
        if self.grad_clip is not None and not self.grad_clip >= 0:
            raise ValueError(f"grad_clip must be None or 0 (no clipping), or a positive norm; got {self.grad_clip}")


@dataclass
class TrainResult:
    """What a run produced: per-step losses and learning rates, evaluations, and timings."""

    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    evals: list[tuple[int, float]] = field(default_factory=list)
    train_seconds: float = 0.0
    steps_done: int = 0
    seconds_to_target: float | None = None


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float,
                   betas: tuple[float, float]) -> torch.optim.AdamW:
    """AdamW, decaying only matrices: biases and norm parameters (vectors) are spared."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
    # The fused kernel updates every parameter in one pass; it exists on CPU and CUDA alike since torch 2.4.
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=True)


def optimizer_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss: torch.Tensor,
                   grad_clip: float | None) -> None:
    """One update: clear the old gradients, backpropagate ``loss``, clip the gradient norm to ``grad_clip``
    (``None`` or 0: no clipping), and step. Under data parallelism the gradients are averaged in ``backward``."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()


def train(
    model: torch.nn.Module,
    get_batch: Callable[[torch.Generator], Any],
    loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor],
    config: TrainConfig,
    evaluate: Callable[[torch.nn.Module], float] | None = None,
) -> TrainResult:
    """Train ``model`` for ``config.steps`` steps (or until ``config.target`` is reached).

    ``get_batch(generator)`` returns a batch; ``loss_fn(model, batch)`` returns a scalar loss;
    ``evaluate(model)`` returns a number, called every ``eval_every`` steps in eval mode and at the end.
    """
    g = set_seed(config.seed)
    optimizer = make_optimizer(model, config.lr, config.weight_decay, config.betas)
    result = TrainResult()
    model.train()
    bar = tqdm(range(config.steps), disable=not config.progress, desc="training")
    for step in bar:
        lr = lr_at(step, config.lr, config.warmup, config.steps, config.min_lr, config.schedule)
        for group in optimizer.param_groups:
            group["lr"] = lr
        start = time.perf_counter()
        loss = loss_fn(model, get_batch(g))
        optimizer_step(model, optimizer, loss, config.grad_clip)
        result.train_seconds += time.perf_counter() - start
        result.losses.append(loss.item())
        result.lrs.append(lr)
        result.steps_done = step + 1
        last = step + 1 == config.steps
        if evaluate is not None and ((config.eval_every and (step + 1) % config.eval_every == 0) or last):
            model.eval()
            metric = float(evaluate(model))
            model.train()
            result.evals.append((step + 1, metric))
            bar.set_postfix(loss=f"{loss.item():.3f}", eval=f"{metric:.3f}")
            if config.target is not None and metric >= config.target:
                result.seconds_to_target = result.train_seconds
                break
    bar.close()
    model.eval()
    return result
