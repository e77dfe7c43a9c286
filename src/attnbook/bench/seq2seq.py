"""``python -m attnbook.bench seq2seq`` (chapter 16): for each task, the seconds of training (evaluation
excluded) until 99% exact match on the validation set, the exact match on the held-out test set, and the
parameter count."""

from __future__ import annotations

import platform
import time

import torch

from attnbook.training.seq2seq import TASK_LENGTHS, train_seq2seq
from attnbook.training.trainer import TrainConfig


def bench_seq2seq(tasks: list[str], max_steps: int) -> None:
    """Train each task of ``tasks`` (at most ``max_steps`` steps) to 99% validation exact match; print a row each."""
    print(f"seq2seq benchmark: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}")
    print(f"{'task':>8} {'lengths':>8} {'steps':>6} {'train s':>8} {'s to 99%':>9} {'val EM':>7} {'test EM':>8} "
          f"{'params':>8}")
    for task in tasks:
        config = TrainConfig(steps=max_steps, batch_size=64, lr=1e-3, warmup=min(300, max_steps), eval_every=100,
                             target=0.99, progress=False)
        start = time.perf_counter()
        run = train_seq2seq(task, config)
        wall = time.perf_counter() - start
        to_target = f"{run.result.seconds_to_target:.1f}" if run.result.seconds_to_target is not None else "not reached"
        lo, hi = TASK_LENGTHS[task]
        print(f"{task:>8} {f'{lo}-{hi}':>8} {run.result.steps_done:>6} {run.result.train_seconds:>8.1f} "
              f"{to_target:>9} {run.val_accuracy:>7.1%} {run.test_accuracy:>8.1%} {run.n_params:>8,}   "
              f"(wall {wall:.0f} s)", flush=True)
