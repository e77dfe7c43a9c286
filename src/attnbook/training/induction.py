"""Training an attention-only model on repeated random segments, and watching its phase change (chapter 28).

Each step draws one segment length ``L`` between ``min_len`` and ``max_len`` and a batch of rows that repeat
a random segment of that length (``repeated_segments``). The length changes from step to step, so no rule
that looks back a fixed distance predicts the second copy: the model must find the earlier occurrence of
the current token and read what came after it. The log keeps, for every step, the training loss and its two
parts: the mean loss on the first copy's tokens and on the second copy's (``copy_masks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

import numpy as np
import torch
import torch.nn.functional as F

from attnbook._fields import FieldError, count, like
from attnbook.data.repeats import copy_masks, repeated_segments
from attnbook.torch.attn_only import AttnOnlyConfig, AttnOnlyShape, AttnOnlyTransformer, token_losses
from attnbook.torch.modes import eval_mode
from attnbook.training.trainer import TrainConfig, set_seed, train


@dataclass(kw_only=True)
class InductionConfig(AttnOnlyShape, TrainConfig):
    """The data (``vocab_size``, segment lengths ``min_len .. max_len``), the model's layers (``AttnOnlyShape``,
    two heads a layer here) and the optimisation and loop (``TrainConfig``, with this recipe's defaults)."""

    vocab_size: int = count(32, help="the random tokens' vocabulary")
    min_len: int = count(6, minimum=2, help="the shortest segment, repeated once in each row")
    max_len: int = count(16, minimum=2, help="the longest segment; rows hold up to 2 max_len tokens")
    n_heads: int = like(AttnOnlyShape, "n_heads", 2)
    steps: int = like(TrainConfig, "steps", 800)
    batch_size: int = like(TrainConfig, "batch_size", 32)
    lr: float = like(TrainConfig, "lr", 5e-3)
    min_lr: float = like(TrainConfig, "min_lr", 5e-4)
    warmup: int = like(TrainConfig, "warmup", 50)
    progress: bool = like(TrainConfig, "progress", False)

    def check(self) -> None:
        super().check()
        if self.max_len < self.min_len:
            raise FieldError(f"need min_len <= max_len; got {self.min_len} and {self.max_len}", "min_len", "max_len")

    def model_config(self) -> AttnOnlyConfig:
        """The model's sizes: rows of up to ``2 max_len`` tokens."""
        return AttnOnlyConfig(vocab_size=self.vocab_size, block_size=2 * self.max_len,
                              **{f.name: getattr(self, f.name) for f in fields(AttnOnlyShape)})


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
    """Train ``AttnOnlyTransformer(config.model_config())`` on repeated segments with the package's trainer
    (``trainer.train``, with the optimisation the config names: AdamW by default, warm-up and cosine decay,
    gradient clipping). Seeded: on one machine a run repeats exactly. ``probe(model)``, if given, runs in eval
    mode without gradients before the first step and after every ``probe_every`` steps; what it returns is added
    to the log entry of the step that follows. The probe is the run's evaluation: ``config`` keeps
    ``eval_every`` 0, ``target`` None and ``out_dir`` empty. Chapter 28."""
    if config.target is not None or config.out_dir or config.eval_every:
        raise ValueError(f"train_induction evaluates with its probe, every probe_every steps, and keeps no "
                         f"checkpoints: leave eval_every 0, target None and out_dir ''; got "
                         f"eval_every = {config.eval_every}, "
                         f"target = {config.target!r}, out_dir = {config.out_dir!r}")
    set_seed(config.seed)  # the model's initial weights; train() seeds again, and draws the batches from its own
    model = AttnOnlyTransformer(config.model_config())
    run = InductionRun(model, config)
    pending: dict[str, float] = {}  # the last probe's results, for the next step's log entry

    def probe_now(m: torch.nn.Module) -> float:
        if len(run.log) < config.steps:  # after the last step no entry follows: train()'s final call is skipped
            with torch.no_grad():
                pending.update(probe(m))
        return 0.0  # train() wants a number; the probe's results go to the log

    def get_batch(g: torch.Generator) -> tuple[int, torch.Tensor]:
        L = int(torch.randint(config.min_len, config.max_len + 1, (1,), generator=g))
        return L, repeated_segments(config.batch_size, L, config.vocab_size, g)  # (B, 2L)

    def loss_fn(m: torch.nn.Module, batch: tuple[int, torch.Tensor]) -> torch.Tensor:
        L, ids = batch
        logits = m(ids)[:, :-1]  # (B, 2L - 1, V): each position predicts the next token
        losses = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (B, 2L - 1)
        first, second = copy_masks(L)
        part = losses.detach()
        run.log.append({"step": len(run.log), "length": L, "loss": float(part.mean()),
                        "first": float(part[:, first].mean()), "second": float(part[:, second].mean()), **pending})
        pending.clear()
        return losses.mean()

    if probe is not None:
        with eval_mode(model):
            probe_now(model)
    train(model, get_batch, loss_fn, replace(config, eval_every=probe_every if probe is not None else 0),
          evaluate=probe_now if probe is not None else None)
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
