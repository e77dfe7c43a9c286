"""``python -m attnbook.bench gpt`` (chapter 17): this machine's float32 matmul throughput; training tokens per
second of attnbook's GPT and of the same model built from ``torch.nn.TransformerEncoderLayer``, alternated in
one run, with the model FLOPs utilisation; the small CPU recipe trained to the end (validation loss, wall
time); generation tokens per second with and without the key-value cache."""

from __future__ import annotations

import math
import platform
import statistics
import time
from dataclasses import replace

import torch
import torch.nn.functional as F

from attnbook.data.text import random_windows
from attnbook.torch.decoding import generate
from attnbook.torch.flops import flops_per_token
from attnbook.torch.reference import TorchGPT, copy_gpt_to_torch
from attnbook.torch.transformer import GPT
from attnbook.training.lm import GPTRunConfig, preset, train_gpt
from attnbook.training.trainer import TrainConfig, train


def matmul_gflops(n: int = 1024, seconds: float = 3.0) -> float:
    """This machine's float32 matrix-multiply throughput: the median of timed bursts of ``(n, n) @ (n, n)``."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    rates = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        tic = time.perf_counter()
        for _ in range(5):
            a @ b
        rates.append(5 * 2 * n**3 / (time.perf_counter() - tic) / 1e9)
    return statistics.median(rates)


def _steps_per_second(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor], steps: int) -> float:
    """Training steps per second on one batch, with the package's loop (its time excludes setting up)."""
    config = TrainConfig(steps=steps, warmup=0, weight_decay=0.1, beta2=0.99, progress=False)

    def loss_fn(m: torch.nn.Module, b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(m(b[0]).flatten(0, 1), b[1].flatten())

    # A generator of its own: the global seeds are left as they are.
    return steps / train(model, lambda _: batch, loss_fn, config, generator=torch.Generator()).train_seconds


def bench_throughput(config: GPTRunConfig, rounds: int = 5, steps: int = 20) -> dict[str, float]:
    """Training steps of attnbook's GPT and of the torch.nn reference, alternated so both see the same machine."""
    torch.manual_seed(0)
    model_config = config.model_config(vocab_size=65)
    ours, ref = GPT(model_config), TorchGPT(model_config)
    copy_gpt_to_torch(ours, ref)
    batch = random_windows(torch.randint(65, (10_000,)), config.block_size, config.batch_size)
    rates: dict[str, list[float]] = {"ours": [], "torch.nn": []}
    for model in (ours, ref):
        _steps_per_second(model, batch, 5)  # warm-up
    for _ in range(rounds):
        for name, model in (("ours", ours), ("torch.nn", ref)):
            rates[name].append(_steps_per_second(model, batch, steps))
    tokens = config.batch_size * config.block_size
    rates_tokens = {name: tokens * statistics.median(r) for name, r in rates.items()}
    return rates_tokens | {"flops_per_token": flops_per_token(ours)}


def bench_generation(model: GPT, prompt: torch.Tensor, new_tokens: int, repeats: int = 3) -> dict[str, float]:
    """Tokens per second generating ``new_tokens`` with and without the KV cache; checks both agree."""
    out: dict[str, float] = {}
    results = {}
    for use_cache in (False, True):
        best = math.inf
        for _ in range(repeats):
            g = torch.Generator().manual_seed(0)
            tic = time.perf_counter()
            results[use_cache] = generate(model, prompt, new_tokens, generator=g, use_cache=use_cache)
            best = min(best, time.perf_counter() - tic)
        out["cache" if use_cache else "no cache"] = new_tokens * prompt.shape[0] / best
    out["same tokens"] = float(torch.equal(results[False], results[True]))
    return out


def bench_gpt(steps: int, new_tokens: int) -> None:
    """The ``cpu-small`` recipe: training throughput of the package's GPT and of the torch.nn reference against
    the measured matmul rate, a run of ``steps`` steps with its validation loss and a sample, then generation of
    ``new_tokens`` tokens with and without the key-value cache."""
    print(f"GPT benchmark: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}", flush=True)
    config = preset("cpu-small", steps=steps, warmup=min(100, steps), progress=False)  # warm-up within the run
    peak = matmul_gflops()
    print(f"float32 matmul, 1024 x 1024: {peak:.1f} GFLOP/s", flush=True)

    t = bench_throughput(config)
    for name in ("ours", "torch.nn"):
        mfu = t[name] * t["flops_per_token"] / 1e9 / peak
        print(f"training throughput, {name:>8}: {t[name]:8,.0f} tokens/s = {t[name] * t['flops_per_token'] / 1e9:5.1f} "
              f"GFLOP/s, {mfu:.1%} of the matmul throughput", flush=True)
    print(f"ours / torch.nn: {t['ours'] / t['torch.nn']:.2f}  ({t['flops_per_token'] / 1e6:.2f} MFLOP per token)",
          flush=True)

    tic = time.perf_counter()
    run = train_gpt(config)
    wall = time.perf_counter() - tic
    print(f"recipe {config.n_layers} layers, {config.n_heads} heads, width {config.d_model}, context "
          f"{config.block_size}, batch {config.batch_size}, {run.steps_done} steps: validation loss "
          f"{run.val_loss:.4f} (whole validation split), training {run.train_seconds:.1f} s, wall {wall:.1f} s, "
          f"{run.tokens_per_second:,.0f} tokens/s", flush=True)

    newline = torch.tensor([[run.tokenizer.stoi["\n"]]])
    sample = generate(run.model, newline, 300, temperature=0.8, generator=torch.Generator().manual_seed(0))
    print("a sample at temperature 0.8:\n" + run.tokenizer.decode(sample[0, 1:]), flush=True)
    g = bench_generation(run.model, newline, new_tokens)
    print(f"generation, trained model (context {config.block_size}), {new_tokens} new tokens: "
          f"{g['no cache']:,.0f} tokens/s without cache, {g['cache']:,.0f} with, speed-up "
          f"{g['cache'] / g['no cache']:.2f}, same tokens: {bool(g['same tokens'])}", flush=True)
    long = GPT(replace(run.model.config, block_size=64 + new_tokens)).eval()
    g = bench_generation(long, torch.randint(65, (1, 64)), new_tokens)
    print(f"generation, same width with context {64 + new_tokens} (all {new_tokens} tokens fit), prompt 64: "
          f"{g['no cache']:,.0f} tokens/s without cache, {g['cache']:,.0f} with, speed-up "
          f"{g['cache'] / g['no cache']:.2f}, same tokens: {bool(g['same tokens'])}", flush=True)
