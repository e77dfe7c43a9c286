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

import platform
import statistics
from dataclasses import dataclass, replace
from typing import Any

import torch

from attnbook.training.lm import GPTRunConfig, preset, train_gpt

# The single changes the combined variants are made of, so that a combination is the union of its parts by
# construction: Muon on the matrices at four times AdamW's rate (the embeddings and norms keep AdamW's 1e-3),
# rotary positions (chapter 21), the cosine decay ending at step 1000 instead of 2000, Muon's iteration in bfloat16.
_MUON_4X: dict[str, Any] = {"optimizer": "muon", "matrix_lr": 4e-3}
_ROTARY: dict[str, Any] = {"positions": "rotary"}
_SHORT: dict[str, Any] = {"steps": 1000, "warmup": 50}
_BF16: dict[str, Any] = {"muon_precision": "bf16"}
_KEPT: dict[str, Any] = {**_MUON_4X, **_ROTARY, **_SHORT, **_BF16}  # the recipe the benchmark keeps

#: The variants of ``bench speedrun``: overrides of the ``cpu-small`` recipe, by name.
VARIANTS: dict[str, dict[str, Any]] = {
    "baseline": {},
    # Muon on the block matrices at four times AdamW's rate, rotary positions, the schedule ending at step 1000.
    "muon rotary, 1000 steps": {**_MUON_4X, **_ROTARY, **_SHORT},
    # Muon's iteration in bfloat16: on a processor with bfloat16 instructions the batched products run faster.
    "muon rotary bf16, 1000 steps": _KEPT,
    # AdamW given what the Muon arms have (rotary positions, the 1,000-step schedule) at 2 to 4 times its rate:
    # the AdamW that Muon is compared against is tuned first.
    **{f"adamw rotary {k}x, 1000 steps": {"lr": k * 1e-3, **_ROTARY, **_SHORT} for k in (2, 3, 4)},
    # The bfloat16 Muon recipe for about the recipe's training time: no target, one evaluation, at the end.
    "muon rotary bf16, 1800 steps, no target": {**_KEPT, "steps": 1800, "target": None, "eval_every": 0},
    "muon rotary bf16, 1600 steps, no target": {**_KEPT, "steps": 1600, "target": None, "eval_every": 0},
    # The levers of the GPU speedruns, one at a time on the bfloat16 Muon recipe.
    "bf16 + trapezoid": {**_KEPT, "schedule": "trapezoid"},
    "bf16 + zero init": {**_KEPT, "zero_init_projections": True},
    "bf16 + soft-cap": {**_KEPT, "logit_softcap": 15.0},
    "bf16 + adam 4x, betas 0.8 0.95": {**_KEPT, "embed_lr": 4e-3, "beta1": 0.8, "beta2": 0.95},
    "bf16 + momentum warm-up": {**_KEPT, "muon_momentum_warmup": 300},
    "bf16, 4 newton-schulz steps": {**_KEPT, "muon_ns_steps": 4},
    "bf16 + swiglu": {**_KEPT, "activation": "swiglu"},
    "bf16 + qk norm": {**_KEPT, "qk_norm": True},
}

#: The recorded runs of chapter 25, each a suite of variants run together (python -m attnbook.bench speedrun --suite
#: NAME), the first the one the others are timed against; each reproduces one file of notebooks/bench/ (25_NAME.txt).
SUITES: dict[str, list[str]] = {
    "race": ["baseline", "adamw rotary 2x, 1000 steps", "adamw rotary 3x, 1000 steps", "adamw rotary 4x, 1000 steps",
             "muon rotary, 1000 steps", "muon rotary bf16, 1000 steps", "muon rotary bf16, 1800 steps, no target"],
    "levers": ["muon rotary bf16, 1000 steps", "bf16 + trapezoid", "bf16 + zero init", "bf16 + soft-cap",
               "bf16 + adam 4x, betas 0.8 0.95", "bf16 + momentum warm-up", "bf16, 4 newton-schulz steps",
               "bf16 + swiglu", "bf16 + qk norm"],
    "budget": ["baseline", "muon rotary bf16, 1600 steps, no target"],
}



@dataclass
class SpeedrunResult:
    """One run: the seconds of training to the target (``None`` if the run ended first, or had no target), the
    step whose evaluation met it, the loss on the whole validation split when the run stopped, the steps it
    took and their seconds of training (evaluations excluded), tokens per second."""

    variant: str
    seed: int
    seconds: float | None
    step: int | None
    val_loss: float
    tokens_per_second: float
    steps_done: int = 0
    train_seconds: float = 0.0

    @property
    def ms_per_step(self) -> float:
        return 1000 * self.train_seconds / max(self.steps_done, 1)


def processor() -> str:
    """The processor's name and whether it has bfloat16 instructions, from ``/proc/cpuinfo`` where there is one:
    Muon's bfloat16 iteration is fast only with them (chapter 25)."""
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return f"processor {platform.processor() or platform.machine()}"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    bf16 = any(flag in info for flag in ("avx512_bf16", "amx_bf16"))
    return f"processor {name} ({'with' if bf16 else 'without'} bfloat16 instructions)"


def speedrun(config: GPTRunConfig, target: float | None, variant: str = "", text: str | None = None
             ) -> SpeedrunResult:
    """Train ``config`` until its periodic evaluation reaches ``target`` (or its last step; ``None``: no target,
    every step is taken)."""
    run = train_gpt(replace(config, target=target, progress=False), text=text)
    reached = run.reached_target_at is not None
    return SpeedrunResult(variant, config.seed, run.train_seconds if reached else None, run.reached_target_at,
                          run.val_loss, run.tokens_per_second, run.steps_done, run.train_seconds)


def _spread(values: list[float], digits: int = 1) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def speedrun_configs(variants: list[str], seeds: list[int], target: float, recipe: str = "cpu-small",
                     eval_every: int = 50, extra: dict[str, dict[str, Any]] | None = None
                     ) -> list[tuple[str, GPTRunConfig]]:
    """The runs of a benchmark in their order, seeds interleaved: ``(variant, config)``, each config checked.
    A variant may set ``target`` to ``None``: it then takes all its steps (a run for a fixed budget)."""
    table = {**VARIANTS, **(extra or {})}
    unknown = [v for v in variants if v not in table]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; the variants are {sorted(table)}")
    base = preset(recipe, eval_every=eval_every)
    return [(name, replace(base, seed=seed, **{"target": target, **table[name]}))
            for seed in seeds for name in variants]


def bench_speedrun(variants: list[str], seeds: list[int], target: float, recipe: str = "cpu-small",
                   eval_every: int = 50, text: str | None = None,
                   extra: dict[str, dict[str, Any]] | None = None) -> list[SpeedrunResult]:
    """Run every variant with every seed, print one line per run and a table; return the runs.

    The table gives each variant's seconds to the target (mean ± standard deviation over the seeds), its
    milliseconds per training step, its ratio to the first variant's mean time, and the paired difference:
    the variant's seconds minus the first variant's with the same seed, mean ± standard deviation over
    the seeds. A difference whose spread is as large as its mean is not one these seeds can resolve.
    """
    runs = speedrun_configs(variants, seeds, target, recipe, eval_every, extra)  # every config checked first
    print(f"speedrun: recipe {recipe!r}, target validation loss {target} (checked every {eval_every} steps on "
          f"the whole validation split), torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{processor()}", flush=True)
    results: list[SpeedrunResult] = []
    for name, config in runs:
        r = speedrun(config, config.target, name, text)
        results.append(r)
        if config.target is None:
            seconds = f"no target: {r.steps_done} steps in {r.train_seconds:.1f} s"
        else:
            seconds = "not reached" if r.seconds is None else f"{r.seconds:.1f} s at step {r.step}"
        print(f"  {name:>12} seed {config.seed}: {seconds}; whole-split loss {r.val_loss:.4f}; "
              f"{r.ms_per_step:.1f} ms/step; {r.tokens_per_second:,.0f} tokens/s", flush=True)
    reference = variants[0]
    base = {r.seed: r.seconds for r in results if r.variant == reference}
    base_seconds = [v for v in base.values() if v is not None]
    missed = [s for s, v in base.items() if v is None]
    if missed:  # a mean over the seeds that made it would flatter the reference: say so, and give no ratios
        print(f"\nwarning: {reference} missed the target with seed(s) {missed}; its mean is over the other seeds "
              f"only, so no variant is timed against it", flush=True)
    base_ms = statistics.mean(r.ms_per_step for r in results if r.variant == reference)
    print(f"\n| variant | reached | seconds to {target} | steps | whole-split loss | ms/step | "
          f"ms/step against {reference} | time against {reference} | paired difference (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in variants:
        mine = [r for r in results if r.variant == name]
        done = [r for r in mine if r.seconds is not None]
        secs = [r.seconds for r in done]
        complete = bool(secs) and len(done) == len(mine) and not missed
        ratio = f"{statistics.mean(secs) / statistics.mean(base_seconds):.2f}" if complete else "-"
        paired = _spread([r.seconds - base[r.seed] for r in done]) if complete and name != reference else "-"
        steps = ", ".join(str(r.step) for r in done) or ", ".join(str(r.steps_done) for r in mine)
        loss = ", ".join(f"{r.val_loss:.3f}" for r in mine)
        ms = [r.ms_per_step for r in mine]
        print(f"| {name} | {len(done)}/{len(mine)} | {_spread(secs)} | {steps} | {loss} | {_spread(ms)} | "
              f"{statistics.mean(ms) / base_ms:.2f} | {ratio} | {paired} |", flush=True)
    return results
