"""``python -m attnbook.bench vit`` (chapter 26): chapter 26's ViT (mean pooling and a class token) and its
convolutional network, trained with the chapter's recipe on the first ``n`` of its training digits for several
``n`` and several seeds, each scored on the 360 test digits; per run, then as mean and spread per arm and size,
and the convolutional network's lead over the ViT seed by seed."""

from __future__ import annotations

import platform
import statistics
import time

import numpy as np
import torch

from attnbook.data.digits import load_digits_split
from attnbook.torch.convnet import SmallConvNet
from attnbook.torch.vit import ViT, ViTConfig
from attnbook.training.classify import accuracy, train_classifier
from attnbook.training.trainer import TrainConfig

ARMS = ("ViT, mean", "ViT, class token", "CNN")


def vit_recipe(pool: str = "mean") -> ViTConfig:
    """Chapter 26's ViT: 16 x 16 digits in 2 x 2 patches (an 8 x 8 grid), three layers of four heads, width 32."""
    return ViTConfig(image_size=16, patch_size=2, in_channels=1, n_classes=10, d_model=32, n_heads=4, n_layers=3,
                     d_ff=64, pool=pool, positions="learned")


def train_recipe(steps: int = 600, seed: int = 0) -> TrainConfig:
    """Chapter 26's training: the same for every arm, so that all see the same batches in the same order."""
    return TrainConfig(steps=steps, batch_size=64, lr=3e-3, warmup=steps // 10, weight_decay=0.05,
                       eval_every=100, progress=False, seed=seed)


def build(arm: str, seed: int) -> torch.nn.Module:
    """A fresh model of ``arm``, its weights drawn after ``torch.manual_seed(seed)``, as the chapter draws them."""
    torch.manual_seed(seed)
    if arm == "CNN":
        return SmallConvNet(in_channels=1, n_classes=10, widths=(16, 32, 64))
    return ViT(vit_recipe("cls" if arm == "ViT, class token" else "mean"))


def bench_vit(steps: int, seeds: list[int], sizes: list[int], class_token_sizes: list[int]) -> None:
    """Train the ViT (mean pooling), the class-token ViT and the CNN on the first n digits for each n of ``sizes``
    (the class-token ViT only for n in ``class_token_sizes``), with each seed; print test accuracy and seconds."""
    print(f"ViT benchmark: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}", flush=True)
    data = load_digits_split(n_test=360, seed=0, scale=2)
    n_test = len(data.y_test)
    print(f"digits 16 x 16 (scale 2), {len(data.y_train):,} training and {n_test} test images; {steps} steps of "
          f"64, seeds {seeds}; the first n training images for n in {sizes}; the class-token ViT at "
          f"n in {class_token_sizes}", flush=True)
    hits: dict[tuple[str, int], list[int]] = {}
    for n in sizes:
        X, y = data.X_train[:n], data.y_train[:n]
        for seed in seeds:
            for arm in ARMS:
                if arm == "ViT, class token" and n not in class_token_sizes:
                    continue
                model = build(arm, seed)
                tic = time.perf_counter()
                run = train_classifier(model, X, y, train_recipe(steps, seed))
                seconds = time.perf_counter() - tic
                right = round(accuracy(model, data.X_test, data.y_test) * n_test)
                hits.setdefault((arm, n), []).append(right)
                print(f"  n {n:>5} seed {seed} {arm:>16}: {right} of {n_test} test digits "
                      f"({right / n_test:.4f}); training loss, last 50 steps {np.mean(run.losses[-50:]):.2e}; "
                      f"{seconds:.0f} s", flush=True)
    print(f"\ntest digits right, of {n_test}: mean, spread (min to max) over {len(seeds)} seeds", flush=True)
    print(f"{'arm':>16} {'n':>5} | " + " ".join(f"seed {s:>2}" for s in seeds) + " |   mean | min - max")
    for (arm, n), right in hits.items():
        print(f"{arm:>16} {n:>5} | " + " ".join(f"{r:>7}" for r in right) + f" | {statistics.mean(right):6.1f} | "
              f"{min(right)} - {max(right)}", flush=True)
    print("\nCNN minus ViT (mean pooling), test digits, seed by seed:", flush=True)
    for n in sizes:
        lead = [c - v for c, v in zip(hits[("CNN", n)], hits[("ViT, mean", n)], strict=True)]
        print(f"  n {n:>5}: " + ", ".join(f"{d:+d}" for d in lead) + f"; mean {statistics.mean(lead):+.1f}",
              flush=True)
