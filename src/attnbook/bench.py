"""Benchmarks that print figures: ``python -m attnbook.bench seq2seq`` (more to come with chapter 17).

seq2seq: for each task, the seconds of training (evaluation excluded) until 99% exact match on the
validation set, the exact match on the held-out test set, and the parameter count.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from attnbook.tasks import TASKS
from attnbook.training.seq2seq import TASK_LENGTHS, train_seq2seq
from attnbook.training.trainer import TrainConfig


def bench_seq2seq(tasks: list[str], max_steps: int) -> None:
    print(f"seq2seq benchmark: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}")
    print(f"{'task':>8} {'lengths':>8} {'steps':>6} {'train s':>8} {'s to 99%':>9} {'val EM':>7} {'test EM':>8} "
          f"{'params':>8}")
    for task in tasks:
        config = TrainConfig(steps=max_steps, batch_size=64, lr=1e-3, warmup=300, eval_every=100, target=0.99,
                             progress=False)
        start = time.perf_counter()
        run = train_seq2seq(task, config)
        wall = time.perf_counter() - start
        to_target = f"{run.result.seconds_to_target:.1f}" if run.result.seconds_to_target is not None else "not reached"
        lo, hi = TASK_LENGTHS[task]
        print(f"{task:>8} {f'{lo}-{hi}':>8} {run.result.steps_done:>6} {run.result.train_seconds:>8.1f} "
              f"{to_target:>9} {run.val_accuracy:>7.1%} {run.test_accuracy:>8.1%} {run.n_params:>8,}   "
              f"(wall {wall:.0f} s)", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m attnbook.bench", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="which", required=True)
    s2s = sub.add_parser("seq2seq", help="train the chapter 16 tasks to 99% exact match")
    s2s.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    s2s.add_argument("--max-steps", type=int, default=5000)
    args = parser.parse_args(argv)
    if args.which == "seq2seq":
        bench_seq2seq(args.tasks, args.max_steps)


if __name__ == "__main__":
    main()
