"""``python -m attnbook.bench rotary`` (chapter 21): the same recipe with learned and with rotary positions,
several seeds each, the validation loss as a table with mean and spread; the rotary models' loss on windows
longer than they were trained on, with full attention and with a sliding window; generation speed with a
sliding key-value cache against recomputing the window for every token."""

from __future__ import annotations

import platform
import statistics
import time

import torch

from attnbook.torch.decoding import generate
from attnbook.torch.transformer import GPT
from attnbook.training.lm import PRESETS, preset, train_gpt


def bench_sliding_cache(model: GPT, new_tokens: int, repeats: int = 3) -> None:
    """Generation speed of a rotary model with a sliding key-value cache against recomputing the window."""
    T = model.config.block_size
    start = torch.zeros((1, 1), dtype=torch.long)
    timings: dict[str, list[float]] = {"recompute": [], "sliding": []}
    outputs = {}
    for _ in range(repeats):  # alternated, so that both see the same load
        for name in timings:
            tic = time.perf_counter()
            outputs[name] = generate(model, start, new_tokens, greedy=True, use_cache=name == "sliding",
                                     sliding_cache=name == "sliding")
            timings[name].append(time.perf_counter() - tic)
    rate = {name: new_tokens / min(t) for name, t in timings.items()}
    same = bool(torch.equal(outputs["recompute"][:, :T + 1], outputs["sliding"][:, :T + 1]))
    with torch.no_grad():
        window_ref = model(outputs["sliding"][:, :-1], window=T).argmax(-1)
    print(f"generation, {new_tokens} new tokens (context {T}, {model.config.n_layers} layers, width "
          f"{model.config.d_model}), greedy, best of {repeats}: recomputing the window {rate['recompute']:,.0f} "
          f"tokens/s, sliding cache {rate['sliding']:,.0f} tokens/s, "
          f"speed-up {rate['sliding'] / rate['recompute']:.2f}; "
          f"same tokens while the window fills: {same}; sliding-cache tokens equal sliding-window attention's: "
          f"{bool(torch.equal(window_ref, outputs['sliding'][:, 1:]))}", flush=True)


def bench_rotary(preset_name: str, steps: int, seeds: list[int], multipliers: list[int], new_tokens: int,
                 speed_only: bool = False) -> None:
    """Train learned-position and rotary models of recipe ``preset_name`` with each seed; evaluate the last rotary
    model at ``multipliers`` times the training context (full attention and a sliding window), then time
    generation with a sliding cache. With ``speed_only``, the generation timing alone, on an untrained model."""
    from attnbook.data.shakespeare import load_tinyshakespeare
    from attnbook.training.lm import loss_by_position, split_text_ids

    print(f"rotary benchmark: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}", flush=True)
    if speed_only:  # the speed does not depend on the weights: an untrained model of the preset's shape
        torch.manual_seed(0)
        bench_sliding_cache(GPT(preset(preset_name, positions="rotary").model_config(65)).eval(), new_tokens)
        return
    results: dict[str, list[float]] = {"learned": [], "rotary": []}
    models = {}
    for seed in seeds:
        for arm in ("learned", "rotary"):
            config = preset(preset_name, steps=steps, seed=seed, positions=arm, progress=False,
                            eval_every=0, warmup=min(PRESETS[preset_name].warmup, steps))
            run = train_gpt(config)
            results[arm].append(run.val_loss)
            models[arm] = run
            print(f"{preset_name}, {steps} steps, seed {seed}, {arm:>7} positions: validation loss "
                  f"{run.val_loss:.4f} (training {run.train_seconds:.0f} s)", flush=True)
    print(f"\n{'positions':>9} | " + " | ".join(f"seed {s:>4}" for s in seeds) + " |   mean |  spread (max - min)")
    for arm, losses in results.items():
        print(f"{arm:>9} | " + " | ".join(f"{v:9.4f}" for v in losses) + f" | {statistics.mean(losses):.4f} | "
              f"{max(losses) - min(losses):.4f}", flush=True)
    print(f"rotary - learned, mean: {statistics.mean(results['rotary']) - statistics.mean(results['learned']):+.4f}",
          flush=True)

    run = models["rotary"]  # the last seed's rotary model
    T = run.config.block_size
    _, val_ids = split_text_ids(load_tinyshakespeare(), run.tokenizer, 0.9)
    print(f"\nrotary model (seed {seeds[-1]}), validation windows of length L, loss by position range:", flush=True)
    for m in [1, *multipliers]:
        full = loss_by_position(run.model, val_ids, m * T)
        slid = loss_by_position(run.model, val_ids, m * T, window=T)
        past = f", positions {T} and on: {full[T:].mean():.4f} full, {slid[T:].mean():.4f} window {T}" if m > 1 else ""
        print(f"L = {m * T:4} ({m}x): all positions {full.mean():.4f} full attention, {slid.mean():.4f} "
              f"window {T}{past}", flush=True)

    print()
    bench_sliding_cache(run.model, new_tokens)


