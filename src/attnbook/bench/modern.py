"""``python -m attnbook.bench modern`` (chapter 22): the GPT-2 block against the Llama-style block (RMSNorm,
SwiGLU, no biases, grouped-query attention, rotary positions) at nearly the same parameter count on the small
CPU recipe, several seeds each, arms alternated within each seed: final validation loss (mean, spread) and
training tokens per second."""

from __future__ import annotations

import math
import platform
import statistics
from dataclasses import replace

import torch

from attnbook.training.lm import preset, train_gpt

#: The arms of ``bench modern``: overrides of the recipe. Grouped-query attention (2 key-value heads of 4) and
#: rotary positions (no position table) save weights; the Llama-style block's SwiGLU takes them back with
#: d_ff = 393 instead of swiglu_hidden(128) = 341, so the two models differ by 128 weights in 809,856.
MODERN_ARMS: dict[str, dict] = {
    "gpt2": {},
    "llama": {"norm": "rms", "activation": "swiglu", "bias": False, "n_kv_heads": 2, "d_ff": 393,
              "positions": "rotary"},
    "rms only": {"norm": "rms"},
    "swiglu only": {"activation": "swiglu"},
    "no bias only": {"bias": False},
    # GPT-2's block with rotary positions, its FFN widened by 8 to give back the position table's weights:
    # llama minus this arm is the block's own changes, rotary positions taken out of the comparison (chapter 22)
    "gpt2 rotary": {"positions": "rotary", "d_ff": 520},
}


def bench_modern(steps: int, seeds: list[int], arms: list[str], threads: int) -> None:
    """Train each arm of ``MODERN_ARMS`` named in ``arms`` with each seed for ``steps`` steps of the ``cpu-small``
    recipe on ``threads`` threads; print each run's validation loss and the arms' means."""
    torch.set_num_threads(threads)
    print(f"modern block benchmark: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}", flush=True)
    base = preset("cpu-small", steps=steps, warmup=min(100, steps // 10), eval_every=0, progress=False)
    print(f"recipe cpu-small: {base.n_layers} layers, {base.n_heads} heads, width {base.d_model}, context "
          f"{base.block_size}, batch {base.batch_size}, {steps} steps; seeds {seeds}; validation loss over the "
          "whole validation split", flush=True)
    results: dict[str, list[tuple[float, float]]] = {a: [] for a in arms}
    params: dict[str, int] = {}
    for seed in seeds:  # the arms alternate within each seed, so the load falls on all of them alike
        for arm in arms:
            run = train_gpt(replace(base, seed=seed, **MODERN_ARMS[arm]))
            params[arm] = run.model.n_params()
            results[arm].append((run.val_loss, run.tokens_per_second))
            print(f"  {arm:>12} seed {seed}: val loss {run.val_loss:.4f}, {run.tokens_per_second:,.0f} tokens/s",
                  flush=True)
    first = arms[0]
    speed0 = statistics.mean(t for _, t in results[first])
    print(f"{'arm':>12} {'params':>9} {'val loss mean':>14} {'sd':>7} {'min':>7} {'max':>7} {'tokens/s':>9} "
          f"{'speed vs ' + first:>14}")
    for arm in arms:
        losses = [v for v, _ in results[arm]]
        speed = statistics.mean(t for _, t in results[arm])
        sd = statistics.stdev(losses) if len(losses) > 1 else math.nan
        print(f"{arm:>12} {params[arm]:>9,} {statistics.mean(losses):>14.4f} {sd:>7.4f} {min(losses):>7.4f} "
              f"{max(losses):>7.4f} {speed:>9,.0f} {speed / speed0:>14.2f}", flush=True)
