"""Benchmarks that print figures: ``python -m attnbook.bench seq2seq``, ``gpt`` and ``attention``.

seq2seq (chapter 16): for each task, the seconds of training (evaluation excluded) until 99% exact
match on the validation set, the exact match on the held-out test set, and the parameter count.

gpt (chapter 17): this machine's float32 matmul throughput; training tokens per second of attnbook's
GPT and of the same model built from ``torch.nn.TransformerEncoderLayer``, alternated in one run, with
the model FLOPs utilisation; the small CPU recipe trained to the end (validation loss, wall time);
generation tokens per second with and without the key-value cache.

attention (chapter 20): time and peak memory of plain and tiled NumPy attention and of PyTorch's CPU
backends of ``F.scaled_dot_product_attention`` against the sequence length; the saving of skipping causal
tiles; the key-value cache and generation speed of a decoder with multi-head, grouped-query and
multi-query attention.

bpe (chapter 23): the small CPU recipe on characters and on byte-pair tokens of several vocabulary
sizes, same model, steps, batch and context in tokens; validation bits per character on the same
text, parameters, training time, and a sample from each.
mlm (chapter 24): the encoder-only model trained by masked language modelling and the GPT of the same
size, steps, batches and seed, each scored on the same masked positions of the whole validation text,
with the counting baselines.

rotary (chapter 21): the same recipe with learned and with rotary positions, several seeds each, the
validation loss as a table with mean and spread; the rotary models' loss on windows longer than they were
trained on, with full attention and with a sliding window; generation speed with a sliding key-value
cache against recomputing the window for every token.

speedrun (chapter 25): seconds of training until the validation loss reaches a target, for the recipe and
each variant of it (an optimizer, a schedule, an architecture switch), over several seeds, side by side.

modern (chapter 22): the GPT-2 block against the Llama-style block (RMSNorm, SwiGLU, no biases,
grouped-query attention, rotary positions) at nearly the same parameter count on the small CPU recipe,
several seeds each, arms alternated within each seed: final validation loss (mean, spread) and training
tokens per second.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from attnbook._cli import HelpFormatter, at_least, positive_float, usage_errors
from attnbook.bench_speedrun import VARIANTS, bench_speedrun, speedrun_configs
from attnbook.data.text import random_windows
from attnbook.tasks import TASKS
from attnbook.torch.decoding import generate
from attnbook.torch.linear import Linear
from attnbook.torch.reference import TorchGPT, copy_gpt_to_torch
from attnbook.torch.transformer import GPT
from attnbook.training.lm import GPTRunConfig, preset, train_gpt
from attnbook.training.seq2seq import TASK_LENGTHS, train_seq2seq
from attnbook.training.trainer import TrainConfig, make_optimizer, optimizer_step

if TYPE_CHECKING:
    from attnbook.training.mlm import MLMRunConfig


def bench_seq2seq(tasks: list[str], max_steps: int) -> None:
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


def flops_per_token(model: GPT) -> float:
    """Training FLOPs per token, forward and backward: 6 per weight of every matrix multiply (the
    unembedding included, the embedding lookup not) plus 12 L d T for the attention scores and mixing."""
    c = model.config
    matmul_weights = sum(m.W.numel() for m in model.modules() if isinstance(m, Linear)) + c.vocab_size * c.d_model
    return 6 * matmul_weights + 12 * c.n_layers * c.d_model * c.block_size


def _steps_per_second(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor], steps: int) -> float:
    optimizer = make_optimizer(model, 1e-3, 0.1, (0.9, 0.99))
    x, y = batch
    tic = time.perf_counter()
    for _ in range(steps):
        optimizer_step(model, optimizer, F.cross_entropy(model(x).flatten(0, 1), y.flatten()), 1.0)
    return steps / (time.perf_counter() - tic)


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


def bench_bpe(steps: int, vocab_sizes: list[int], char_contexts: list[int]) -> None:
    from attnbook.data.bpe import BPETokenizer
    from attnbook.data.shakespeare import load_tinyshakespeare
    from attnbook.data.text import CharTokenizer
    from attnbook.training.lm import bits_per_character, split_text_ids

    print(f"BPE benchmark: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}; recipe cpu-small, {steps} steps, one run per row, "
          f"seed {preset('cpu-small').seed}", flush=True)
    text = load_tinyshakespeare()
    train_text = text[:int(0.9 * len(text))]  # the tokenizer learns from the training text only
    runs = [("characters", CharTokenizer.from_text(text), c) for c in char_contexts]
    for v in vocab_sizes:
        tic = time.perf_counter()
        tok = BPETokenizer.from_text(train_text, vocab_size=v)
        print(f"BPE with V = {v}: learned in {time.perf_counter() - tic:.1f} s", flush=True)
        runs.append((f"BPE, V = {v}", tok, 64))
    print("| tokens | V | context (tokens) | characters per token (validation) | parameters | of which token "
          "embedding | validation bits per character | training time |", flush=True)
    print("| --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
    samples = []
    for name, tok, context in runs:
        config = preset("cpu-small", steps=steps, warmup=min(100, steps // 20), block_size=context, progress=False)
        run = train_gpt(config, text=text, tokenizer=tok)
        _, val_ids = split_text_ids(text, tok)
        chars_per_token = (len(text) - int(0.9 * len(text))) / len(val_ids)
        bpc = bits_per_character(run.model, val_ids, tok)
        n_params = sum(p.numel() for p in run.model.parameters())
        print(f"| {name} | {tok.vocab_size} | {context} | {chars_per_token:.2f} | {n_params:,} | "
              f"{run.model.tok.E.numel():,} | {bpc:.3f} | {run.train_seconds:.0f} s |", flush=True)
        start = tok.encode("\n")[None]
        new = math.ceil(400 / chars_per_token)
        out = generate(run.model, start, new, temperature=0.8, generator=torch.Generator().manual_seed(0))
        samples.append((name, context, tok.decode(out[0, 1:])[:300]))
    for name, context, sample in samples:
        print(f"\n{name}, context {context}, a sample at temperature 0.8:\n{sample}", flush=True)


def mlm_config(preset_name: str, steps: int) -> MLMRunConfig:
    """The recipe of ``bench mlm``: the preset with ``steps``, its warm-up cut to the run when the run is shorter."""
    from attnbook.training import mlm

    return mlm.preset(preset_name, steps=steps, warmup=min(mlm.PRESETS[preset_name].warmup, steps), progress=False)


def bench_mlm(preset_name: str, steps: int) -> None:
    from attnbook.training import mlm

    print(f"MLM benchmark: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}", flush=True)
    config = mlm_config(preset_name, steps)
    text = mlm.load_tinyshakespeare()
    tic = time.perf_counter()
    enc = mlm.train_mlm(config, text)
    enc_wall = time.perf_counter() - tic
    tic = time.perf_counter()
    gpt = train_gpt(config.gpt_config(), text=text)
    gpt_wall = time.perf_counter() - tic
    tok = enc.tokenizer
    train_ids, val_ids = mlm.split(tok.encode(text), 0.9)
    eval_set = mlm.make_eval_set(val_ids, config.block_size, tok.mask_id, config.rate)  # the whole split
    logits = {"encoder (both sides)": mlm.encoder_logits(enc.model, eval_set.inputs),
              "GPT (left side only)": mlm.gpt_logits(gpt.model, eval_set.windows)}
    print(f"recipe {config.n_layers} layers, {config.n_heads} heads, width {config.d_model}, context "
          f"{config.block_size}, batch {config.batch_size}, {steps} steps, seed {config.seed}; "
          f"{int(eval_set.chosen.sum()):,} masked positions in {len(eval_set.windows):,} validation windows",
          flush=True)
    print(f"{'model':>22} {'accuracy':>9} {'loss':>7} {'params':>9} {'train s':>8} {'wall s':>7} {'targets/step':>13}")
    rows = [("encoder (both sides)", sum(p.numel() for p in enc.model.parameters()), enc.train_seconds, enc_wall,
             config.rate * config.batch_size * config.block_size),
            ("GPT (left side only)", gpt.model.n_params(), gpt.train_seconds, gpt_wall,
             config.batch_size * config.block_size)]
    for name, params, train_s, wall, targets in rows:
        s = mlm.score(logits[name], eval_set)
        print(f"{name:>22} {s['accuracy']:>9.4f} {s['loss']:>7.4f} {params:>9,} {train_s:>8.1f} {wall:>7.1f} "
              f"{targets:>13.0f}", flush=True)
    for name, guess in mlm.baseline_guesses(train_ids, eval_set, len(tok.chars)).items():
        print(f"{name:>22} {(guess == eval_set.targets).double().mean().item():>9.4f}", flush=True)
    cols = eval_set.chosen.nonzero(as_tuple=True)[1]
    quarter = config.block_size // 4
    for name, out in logits.items():
        hits = out[eval_set.chosen].argmax(-1) == eval_set.targets
        by_quarter = [hits[cols // quarter == q].double().mean().item() for q in range(4)]
        print(f"{name}, accuracy by quarter of the window: " + ", ".join(f"{a:.3f}" for a in by_quarter), flush=True)


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
                            eval_every=0, warmup=min(PRESETS_WARMUP.get(preset_name, 100), steps))
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


PRESETS_WARMUP = {"tiny": 5, "notebook": 40, "cpu-small": 100}
# The arms of ``bench modern``: overrides of the recipe. Grouped-query attention (2 key-value heads of 4) and
# rotary positions (no position table) save weights; the Llama-style block's SwiGLU takes them back with
# d_ff = 393 instead of swiglu_hidden(128) = 341, so the two models differ by 128 weights in 809,856.
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


# The benchmarks, in the order of their chapters: what each measures, in one line (``python -m attnbook`` lists them).
BENCHMARKS = {
    "seq2seq": "train the chapter 16 tasks to 99% exact match",
    "gpt": "the small CPU recipe on Tiny Shakespeare; throughput; generation",
    "attention": "time and memory of plain, tiled and PyTorch attention; GQA",
    "rotary": "learned against rotary positions, several seeds; longer contexts; the sliding key-value cache",
    "modern": "the GPT-2 block against the Llama-style block, several seeds each",
    "bpe": "characters against byte-pair tokens, in bits per character",
    "mlm": "masked language modelling against the GPT on the same masked positions",
    "speedrun": "seconds of training to a target validation loss, per variant and seed",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m attnbook.bench", description=__doc__.split("\n")[0],
                                     epilog=__doc__.split("\n", 1)[1], formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="which", required=True)

    def command(name: str) -> argparse.ArgumentParser:
        text = BENCHMARKS[name].replace("%", "%%")  # argparse formats help strings with %
        return sub.add_parser(name, help=text, description=text, formatter_class=HelpFormatter)

    s2s = command("seq2seq")
    s2s.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS), help="the tasks to train")
    s2s.add_argument("--max-steps", type=at_least(1), default=5000, help="steps at most, per task")
    gpt = command("gpt")
    gpt.add_argument("--steps", type=at_least(1), default=2000, help="training steps of the recipe")
    gpt.add_argument("--new-tokens", type=at_least(1), default=256, help="tokens generated per speed measurement")
    attention = command("attention")
    attention.add_argument("--lengths", nargs="+", type=at_least(1),
                           default=[256, 512, 1024, 2048, 4096, 8192, 16384], help="sequence lengths T")
    attention.add_argument("--max-plain-gib", type=float, default=2.0,
                           help="skip plain attention where its score matrices would need more than this")
    bpe = command("bpe")
    bpe.add_argument("--steps", type=at_least(1), default=2000, help="training steps of every model")
    bpe.add_argument("--vocab-sizes", type=at_least(1), nargs="+", default=[512, 1024],
                     help="BPE vocabulary sizes, one model each")
    bpe.add_argument("--char-contexts", type=at_least(1), nargs="+", default=[64],
                     help="contexts of the character models, in characters, one model each")
    mlm = command("mlm")
    mlm.add_argument("--preset", choices=["tiny", "notebook", "cpu-small"], default="notebook",
                     help="the recipe of both models")
    mlm.add_argument("--steps", type=at_least(1), default=3000, help="training steps of both models")
    rotary = command("rotary")
    rotary.add_argument("--preset", choices=list(PRESETS_WARMUP), default="cpu-small", help="the recipe")
    rotary.add_argument("--steps", type=at_least(1), default=2000, help="training steps of every model")
    rotary.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one model per seed and arm")
    rotary.add_argument("--multipliers", type=at_least(1), nargs="+", default=[2, 4],
                        help="windows this many times the trained context are scored")
    rotary.add_argument("--new-tokens", type=at_least(1), default=512, help="tokens generated per speed measurement")
    rotary.add_argument("--speed-only", action="store_true",
                        help="only the generation speed, with an untrained model of the preset's shape")
    speed = command("speedrun")
    speed.add_argument("--variants", nargs="+", choices=list(VARIANTS), metavar="VARIANT",
                       default=["baseline", "muon rotary bf16, 1000 steps"],
                       help="the recipes raced (quote names with spaces); the first is the one the others are "
                            "timed against. Choose from: " + "; ".join(f"'{v}'" for v in VARIANTS))
    speed.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="one run per seed and variant")
    speed.add_argument("--target", type=positive_float, default=1.9,
                       help="validation loss on the whole split; the recipe's seeds end between 1.887 and 1.899")
    speed.add_argument("--eval-every", type=at_least(1), default=50, help="steps between evaluations")
    modern = command("modern")
    modern.add_argument("--steps", type=at_least(1), default=2000, help="training steps of every model")
    modern.add_argument("--seeds", type=int, nargs="+", default=[1337, 1, 2], help="one model per seed and arm")
    modern.add_argument("--arms", nargs="+", choices=list(MODERN_ARMS), metavar="ARM", default=["gpt2", "llama"],
                        help="the blocks compared; the first is the one the others are timed against. Choose from: "
                             + "; ".join(f"'{a}'" for a in MODERN_ARMS))
    modern.add_argument("--threads", type=at_least(1), default=1, help="CPU threads for PyTorch")
    return parser


def check_configs(args: argparse.Namespace) -> None:
    """Build the configurations the chosen benchmark trains with: a bad value raises here, before any work."""
    if args.which == "mlm":
        mlm_config(args.preset, args.steps)
    elif args.which == "speedrun":
        speedrun_configs(args.variants, args.seeds, args.target, eval_every=args.eval_every)


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    with usage_errors(parser):
        check_configs(args)
    if args.which == "rotary":
        bench_rotary(args.preset, args.steps, args.seeds, args.multipliers, args.new_tokens, args.speed_only)
        return
    if args.which == "modern":
        bench_modern(args.steps, args.seeds, args.arms, args.threads)
        return
    if args.which == "bpe":
        bench_bpe(args.steps, args.vocab_sizes, args.char_contexts)
        return
    if args.which == "seq2seq":
        bench_seq2seq(args.tasks, args.max_steps)
    elif args.which == "attention":
        from attnbook.bench_attention import bench_attention  # imported here: only this subcommand needs it

        bench_attention(args.lengths, args.max_plain_gib)
    elif args.which == "speedrun":
        bench_speedrun(args.variants, args.seeds, args.target, eval_every=args.eval_every)
    elif args.which == "mlm":
        bench_mlm(args.preset, args.steps)
    else:
        bench_gpt(args.steps, args.new_tokens)


if __name__ == "__main__":
    main()
