"""Training an attention-only model on repeated random segments, and watching its phase change (chapter 28).

Each step draws one segment length ``L`` between ``min_len`` and ``max_len`` and a batch of rows that repeat
a random segment of that length (``repeated_segments``). The length changes from step to step, so no rule
that looks back a fixed distance predicts the second copy: the model must find the earlier occurrence of
the current token and read what came after it. The log keeps, for every step, the training loss and its two
parts: the mean loss on the first copy's tokens and on the second copy's (``copy_masks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from attnbook._validate import require_int
from attnbook.data.repeats import copy_masks, repeated_segments
from attnbook.torch.attn_only import AttnOnlyConfig, AttnOnlyTransformer, token_losses
from attnbook.training.schedule import lr_at
from attnbook.training.trainer import make_optimizer, optimizer_step, set_seed


@dataclass(kw_only=True)
class InductionConfig:
    """The data (``vocab_size``, segment lengths ``min_len .. max_len``), the model and the optimisation."""

    vocab_size: int = 32
    min_len: int = 6
    max_len: int = 16
    n_layers: int = 2
    n_heads: int = 2
    d_model: int = 64
    positions: str = "rotary"
    steps: int = 800
    batch_size: int = 32
    lr: float = 5e-3
    min_lr: float = 5e-4
    warmup: int = 50
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "steps", "batch_size", "n_layers"):
            require_int(name, getattr(self, name), 1)
        require_int("min_len", self.min_len, 2)
        if self.max_len < self.min_len:
            raise ValueError(f"need min_len <= max_len; got {self.min_len} and {self.max_len}")
        if not 0 <= self.warmup <= self.steps:
            raise ValueError(f"warmup must lie in [0, steps = {self.steps}]; got {self.warmup}")

    def model_config(self) -> AttnOnlyConfig:
        """The model's sizes: rows of up to ``2 max_len`` tokens."""
        return AttnOnlyConfig(vocab_size=self.vocab_size, block_size=2 * self.max_len, n_layers=self.n_layers,
                              n_heads=self.n_heads, d_model=self.d_model, positions=self.positions)


@dataclass
class InductionRun:
    """What ``train_induction`` returns: the model (in eval mode) and one log entry per step, with ``step``,
    ``length`` (the segment length drawn), ``loss`` (over every predicted token), ``first`` and ``second``
    (the mean loss on each copy)."""

    model: AttnOnlyTransformer
    config: InductionConfig
    log: list[dict[str, float]] = field(default_factory=list)

    def curve(self, key: str) -> np.ndarray:
        """One quantity of the log over the steps, ``(steps,)``."""
        return np.array([entry[key] for entry in self.log])

    def probed(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """A quantity the probe returned: ``(steps, values)``, at the steps it ran."""
        entries = [entry for entry in self.log if key in entry]
        return np.array([e["step"] for e in entries]), np.array([e[key] for e in entries])


def train_induction(config: InductionConfig, probe: Callable[[AttnOnlyTransformer], dict[str, float]] | None = None,
                    probe_every: int = 25) -> InductionRun:
    """Train ``AttnOnlyTransformer(config.model_config())`` on repeated segments; AdamW, warm-up and cosine
    decay, gradient clipping. Seeded: on one machine a run repeats exactly. ``probe(model)``, if given, runs
    in eval mode without gradients before the first step and after every ``probe_every`` steps; what it
    returns is added to that step's log entry (before its update). Chapter 28."""
    g = set_seed(config.seed)
    model = AttnOnlyTransformer(config.model_config())
    optimizer = make_optimizer(model, config.lr, config.weight_decay, (0.9, 0.98))
    run = InductionRun(model, config)
    model.train()
    for step in range(config.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, config.lr, config.warmup, config.steps, config.min_lr)
        probed = {}
        if probe is not None and step % probe_every == 0:
            model.eval()
            with torch.no_grad():
                probed = dict(probe(model))
            model.train()
        L = int(torch.randint(config.min_len, config.max_len + 1, (1,), generator=g))
        ids = repeated_segments(config.batch_size, L, config.vocab_size, g)  # (B, 2L)
        logits = model(ids)[:, :-1]  # (B, 2L - 1, V): each position predicts the next token
        losses = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (B, 2L - 1)
        optimizer_step(model, optimizer, losses.mean(), config.grad_clip)
        first, second = copy_masks(L)
        part = losses.detach()
        run.log.append({"step": step, "length": L, "loss": float(part.mean()),
                        "first": float(part[:, first].mean()), "second": float(part[:, second].mean()), **probed})
    model.eval()
    return run


def copy_losses(model: torch.nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row mean loss on each copy of repeated rows ``ids`` ``(B, 2 L)``: two ``(B,)`` tensors, the first
    copy's tokens ``1 .. L - 1`` and the second's ``L + 1 .. 2 L - 1`` (``copy_masks``). Chapter 28."""
    T = ids.shape[-1]
    if ids.dim() != 2 or T % 2 or T < 4 or not torch.equal(ids[:, : T // 2], ids[:, T // 2:]):
        raise ValueError(f"ids must be rows (B, 2L), L >= 2, whose second half repeats the first; got shape "
                         f"{tuple(ids.shape)}")
    losses = token_losses(model, ids)  # (B, 2L - 1)
    first, second = copy_masks(T // 2)
    return losses[:, first].mean(1), losses[:, second].mean(1)


def steepest_drop(curve: np.ndarray, width: int, smooth: int = 25) -> tuple[int, float]:
    """Where a falling curve falls fastest: ``(start, share)``, the window of ``width`` steps from ``start`` over
    which its running mean (over ``smooth`` steps) falls the most, and that fall as a share of the whole fall of
    the running mean, from its first value to its last. A curve that falls at an even rate over ``n`` steps
    gives a share of about ``width / n``; a phase change, most of the fall. Chapter 28."""
    curve = np.asarray(curve, dtype=float)
    if curve.ndim != 1 or smooth < 1 or not 1 <= width < len(curve) - smooth:
        raise ValueError(f"need a curve (steps,) longer than width + smooth = {width + smooth}, width >= 1; got "
                         f"shape {curve.shape}")
    mean = np.convolve(curve, np.ones(smooth) / smooth, mode="valid")  # mean[i]: steps i .. i + smooth - 1
    drop = mean[0] - mean[-1]
    if not drop > 0:
        raise ValueError(f"the curve does not fall: its running mean goes from {mean[0]:.4g} to {mean[-1]:.4g}")
    falls = mean[:-width] - mean[width:]  # falls[i]: from the window centred at i + smooth // 2 to width later
    i = int(np.argmax(falls))
    return i + smooth // 2, float(falls[i] / drop)
