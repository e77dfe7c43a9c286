"""Training an image classifier with the package's trainer (chapter 26).

``train_classifier`` draws random batches of images from a seeded generator and minimises the cross-entropy
of the labels with ``attnbook.training.trainer.train`` (by default AdamW, warm-up and cosine decay, gradient
clipping), so two models trained with the same ``TrainConfig`` see the same batches in the same order.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnbook._validate import shape_str
from attnbook.torch.modes import eval_mode
from attnbook.training.trainer import TrainConfig, TrainResult, train


def accuracy(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """The share of ``images`` ``(n, C, H, W)`` whose top logit is their label ``(n,)``, in eval mode."""
    if images.shape[:1] != labels.shape or labels.dim() != 1:
        raise ValueError(f"expected images (n, C, H, W) and labels (n,); got {shape_str(images.shape)} and "
                         f"{shape_str(labels.shape)}")
    with eval_mode(model), torch.no_grad():
        return (model(images).argmax(dim=-1) == labels).double().mean().item()


def train_classifier(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, config: TrainConfig,
                     eval_images: torch.Tensor | None = None, eval_labels: torch.Tensor | None = None) -> TrainResult:
    """Train ``model`` (images to logits) on ``images`` ``(n, C, H, W)`` and ``labels`` ``(n,)``.

    Every step draws ``config.batch_size`` indices uniformly, with replacement, from a generator seeded with
    ``config.seed`` (``set_seed`` seeds it and torch). With ``eval_images`` and ``eval_labels``, the accuracy
    on them is recorded every ``config.eval_every`` steps and at the end, in ``result.evals``. Chapter 26.
    """
    if images.dim() != 4 or labels.shape != images.shape[:1]:
        raise ValueError(f"expected images (n, C, H, W) and labels (n,); got {shape_str(images.shape)} and "
                         f"{shape_str(labels.shape)}")

    def get_batch(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(len(labels), (config.batch_size,), generator=g)
        return images[idx], labels[idx]

    def loss_fn(m: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(m(x), y)

    evaluate = None
    if eval_images is not None and eval_labels is not None:
        def evaluate(m: torch.nn.Module) -> float:
            return accuracy(m, eval_images, eval_labels)
    return train(model, get_batch, loss_fn, config, evaluate)
