"""``python -m attnbook.bench speedrun`` (chapter 25): seconds of training to a target validation loss.

Every variant is a recipe, chapter 17's small CPU recipe with some fields replaced. Each run trains until a
periodic evaluation on the whole validation split reaches the target. (A subset would be quicker but is
biased: the split's first windows score lower than the whole, so a run stopped on them is not
yet at the target.) The time counted is training alone (evaluations excluded), the same way for every
variant. Seeds are interleaved (seed 1 of every variant, then seed 2, ...) so that
a change in the machine's load during the benchmark falls on all variants alike, and the speed-up is the
ratio of two means measured in the same invocation.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any

import torch

from attnbook.training.lm import GPTRunConfig, preset, train_gpt

# Each variant: the fields it changes in the recipe. "baseline" is the recipe itself.
VARIANTS: dict[str, dict[str, Any]] = {
    "baseline": {},
    # Muon on the block matrices at AdamW's rate (its steps are scaled to AdamW's size), AdamW on the rest.
    "muon": {"optimizer": "muon"},
    # Muon at four times that rate on the matrices (the embeddings and norms keep AdamW's 1e-3).
    "muon 4x": {"optimizer": "muon", "matrix_lr": 4e-3},
    # AdamW at twice the recipe's peak rate (chapter 17's notebook recipe uses it for its short run).
    "lr 2x": {"lr": 2e-3},
    "rotary": {"positions": "rotary"},  # chapter 21
    "muon rotary": {"optimizer": "muon", "matrix_lr": 4e-3, "positions": "rotary"},
    # The same, with Muon's iteration in bfloat16 (torch.optim.Muon's choice) instead of float32 on a CPU.
    "muon rotary bf16": {"optimizer": "muon", "matrix_lr": 4e-3, "positions": "rotary", "muon_precision": "bf16"},
    # One change each to the recipe (chapter 22's block changes, and those of the GPU speedruns).
    "swiglu": {"activation": "swiglu"},
    "relu2": {"activation": "relu2"},
    "qk norm": {"qk_norm": True},
    "untied": {"tie_embeddings": False},
    "compile": {"compile": True},
    # Twice the batch, half the steps: the same tokens, in larger matrix products.
    "batch 24": {"batch_size": 24, "steps": 1000, "warmup": 50},
    # The schedule alone: the cosine decay ends at step 1000 instead of 2000.
    "1000 steps": {"steps": 1000, "warmup": 50},
    # The schedule with Muon and rotary positions: the recipe the benchmark keeps.
    "muon rotary, 1000 steps": {"optimizer": "muon", "matrix_lr": 4e-3, "positions": "rotary", "steps": 1000,
                                "warmup": 50},
    # The kept recipe with one more change each.
    "muon rotary swiglu, 1000 steps": {"optimizer": "muon", "matrix_lr": 4e-3, "positions": "rotary",
                                       "activation": "swiglu", "steps": 1000, "warmup": 50},
    "muon rotary qk norm, 1000 steps": {"optimizer": "muon", "matrix_lr": 4e-3, "positions": "rotary",
                                        "qk_norm": True, "steps": 1000, "warmup": 50},
}


@dataclass
class SpeedrunResult:
    """One run: the seconds of training to the target (``None`` if the run ended first), the step whose
    evaluation met it, the loss on the whole validation split when the run stopped, tokens per second."""

    variant: str
    seed: int
    seconds: float | None
    step: int | None
    val_loss: float
    tokens_per_second: float


def speedrun(config: GPTRunConfig, target: float, variant: str = "", text: str | None = None) -> SpeedrunResult:
    """Train ``config`` until its periodic evaluation reaches ``target`` (or its last step)."""
    run = train_gpt(replace(config, target_loss=target, progress=False), text=text)
    reached = run.reached_target_at is not None
    return SpeedrunResult(variant, config.seed, run.train_seconds if reached else None, run.reached_target_at,
                          run.val_loss, run.tokens_per_second)


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def speedrun_configs(variants: list[str], seeds: list[int], target: float, recipe: str = "cpu-small",
                     eval_every: int = 50, extra: dict[str, dict[str, Any]] | None = None
                     ) -> list[tuple[str, GPTRunConfig]]:
    """The runs of a benchmark in their order, seeds interleaved: ``(variant, config)``, each config checked."""
    table = {**VARIANTS, **(extra or {})}
    unknown = [v for v in variants if v not in table]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; the variants are {sorted(table)}")
    base = preset(recipe, eval_every=eval_every)
    return [(name, replace(base, seed=seed, target_loss=target, **table[name])) for seed in seeds for name in variants]


def bench_speedrun(variants: list[str], seeds: list[int], target: float, recipe: str = "cpu-small",
                   eval_every: int = 50, text: str | None = None,
                   extra: dict[str, dict[str, Any]] | None = None) -> list[SpeedrunResult]:
    """Run every variant with every seed, print one line per run and a table; return the runs."""
    runs = speedrun_configs(variants, seeds, target, recipe, eval_every, extra)  # every config checked first
    print(f"speedrun: recipe {recipe!r}, target validation loss {target} (checked every {eval_every} steps on "
          f"the whole validation split), torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    results: list[SpeedrunResult] = []
    for name, config in runs:
        r = speedrun(config, target, name, text)
        results.append(r)
        seconds = "not reached" if r.seconds is None else f"{r.seconds:.1f} s at step {r.step}"
        print(f"  {name:>12} seed {config.seed}: {seconds}; whole-split loss {r.val_loss:.4f}; "
              f"{r.tokens_per_second:,.0f} tokens/s", flush=True)
    base_seconds = [r.seconds for r in results if r.variant == variants[0] and r.seconds is not None]
    missed = [r.seed for r in results if r.variant == variants[0] and r.seconds is None]
    if missed:  # a mean over the seeds that made it would flatter the reference: say so, and give no ratios
        print(f"\nwarning: {variants[0]} missed the target with seed(s) {missed}; its mean is over the other seeds "
              f"only, so no variant is timed against it", flush=True)
    print(f"\n| variant | reached | seconds to {target} | steps | whole-split loss | tokens/s | "
          f"time against {variants[0]} |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in variants:
        runs = [r for r in results if r.variant == name]
        done = [r for r in runs if r.seconds is not None]
        secs = [r.seconds for r in done]
        ratio = (f"{statistics.mean(secs) / statistics.mean(base_seconds):.2f}"
                 if secs and base_seconds and len(done) == len(runs) and not missed else "-")
        steps = ", ".join(str(r.step) for r in done) or "-"
        loss = statistics.mean(r.val_loss for r in runs)
        tps = statistics.mean(r.tokens_per_second for r in runs)
        print(f"| {name} | {len(done)}/{len(runs)} | {_spread(secs)} | {steps} | "
              f"{loss:.4f} | {tps:,.0f} | {ratio} |", flush=True)
    return results

