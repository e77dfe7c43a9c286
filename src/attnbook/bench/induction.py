"""``python -m attnbook.bench induction`` (chapter 28): one of chapter 17's recipes (the small CPU recipe, 2,000
steps, by default) measured at several points of its training. On the whole validation split: the validation
loss and the loss at each position of its windows, with the in-context learning score of Olsson et al. (2022),
the loss late in the context minus the loss early in it. On random strings written twice (256 rows, the chapter's for
a context of 64 characters): the loss on each copy, their difference with a paired bootstrap interval, and every
head's induction and previous-token scores. The run is stopped at each point and resumed from its checkpoint,
which continues it exactly as an uninterrupted run."""

from __future__ import annotations

import platform
import tempfile
import time
from dataclasses import replace

import torch

from attnbook.data import load_tinyshakespeare
from attnbook.data.repeats import repeated_segments
from attnbook.torch.circuits import induction_score, previous_token_score
from attnbook.torch.inspect import record_attention
from attnbook.training.bootstrap import paired_bootstrap
from attnbook.training.evaluate import loss_by_position
from attnbook.training.induction import copy_losses
from attnbook.training.lm import preset, split_text_ids, train_gpt

ROWS, ROW_SEED = 256, 7  # the chapter's test: 256 random strings filling the context when written twice


def context_positions(block_size: int) -> tuple[int, int]:
    """The early and late positions the in-context learning score compares: the last position of the context
    and a tenth of it (Olsson et al. compare the 500th token with the 50th)."""
    return block_size // 10, block_size - 1


def measure(model: torch.nn.Module, val_ids: torch.Tensor, block_size: int, rows: torch.Tensor) -> dict:
    """Everything the benchmark prints about one model (see the module's docstring)."""
    by_position = loss_by_position(model, val_ids, block_size, batch_size=64)  # (block_size,), whole split
    early, late = context_positions(block_size)
    first, second = copy_losses(model, rows)  # (ROWS,) each
    with torch.no_grad(), record_attention(model) as maps:
        model(rows)
    layers = range(model.config.n_layers)
    induction = torch.stack([induction_score(maps[f"blocks.{layer}.self_attn"], rows).mean(0) for layer in layers])
    previous = torch.stack([previous_token_score(maps[f"blocks.{layer}.self_attn"]).mean(0) for layer in layers])
    return {"by_position": by_position, "icl": float(by_position[late] - by_position[early]),
            "first": float(first.mean()), "second": float(second.mean()),
            "gap": paired_bootstrap(first, second, n_resamples=2000, seed=0),
            "induction": induction, "previous": previous}


def bench_induction(preset_name: str = "cpu-small", at: list[int] | None = None, **overrides) -> list[dict]:
    """Train the recipe, measuring it after each step count in ``at`` (its last step always); print one line
    per point and the per-head scores of the last, and return the measurements."""
    config = preset(preset_name, progress=False, **overrides)
    points = sorted({s for s in (at or []) if 0 < s < config.steps} | {config.steps})
    text = load_tinyshakespeare()
    half = config.block_size // 2  # 32 characters for a context of 64, as in the chapter
    rows = repeated_segments(ROWS, half, 65, torch.Generator().manual_seed(ROW_SEED))  # (256, 64): 65 characters
    early, late = context_positions(config.block_size)
    print(f"induction benchmark: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}", flush=True)
    print(f"recipe '{preset_name}': {config.n_layers} layers x {config.n_heads} heads, width {config.d_model}, "
          f"context {config.block_size}, batch {config.batch_size}, {config.steps} steps, seed {config.seed}; "
          f"measured at steps {points}", flush=True)
    print(f"ICL score: loss at position {late} minus loss at position {early} of the validation windows (whole "
          f"split); copies: {ROWS} random strings of {half} characters written twice (seed {ROW_SEED})", flush=True)
    print(f"{'step':>5} {'val loss':>9} {'loss@1':>7} {f'loss@{early}':>7} {f'loss@{late}':>7} {'ICL':>7} "
          f"{'copy 1':>7} {'copy 2':>7} {'1 - 2 [95% interval]':>24} {'top induction':>20} {'top prev-token':>20}",
          flush=True)
    results = []
    tic = time.perf_counter()
    with tempfile.TemporaryDirectory() as out_dir:
        run_config = replace(config, out_dir=out_dir)
        for k, step in enumerate(points):
            run = train_gpt(run_config, text=text, resume=k > 0, stop_after=None if step == config.steps else step)
            _, val_ids = split_text_ids(text, run.tokenizer)
            m = measure(run.model, val_ids, config.block_size, rows)
            m.update(step=step, val_loss=run.val_loss)
            results.append(m)
            top_i = divmod(int(m["induction"].argmax()), config.n_heads)
            top_p = divmod(int(m["previous"].argmax()), config.n_heads)
            by_position, gap = m["by_position"], m["gap"]
            interval = f"{gap.mean:+.3f} [{gap.low:+.3f}, {gap.high:+.3f}]"
            top_ind = f"L{top_i[0]}h{top_i[1]} {float(m['induction'].max()):.3f}"
            top_prev = f"L{top_p[0]}h{top_p[1]} {float(m['previous'].max()):.3f}"
            print(f"{step:>5} {run.val_loss:>9.4f} {float(by_position[1]):>7.3f} {float(by_position[early]):>7.3f} "
                  f"{float(by_position[late]):>7.3f} {m['icl']:>+7.3f} {m['first']:>7.3f} {m['second']:>7.3f} "
                  f"{interval:>24} {top_ind:>20} {top_prev:>20}", flush=True)
    last = results[-1]
    print(f"after step {last['step']}: induction score of every head (rows: layers, columns: heads)", flush=True)
    print(_table(last["induction"]), flush=True)
    print("previous-token score of every head", flush=True)
    print(_table(last["previous"]), flush=True)
    print("loss at each position of the validation windows, every 8th: " + ", ".join(
        f"{p}: {float(last['by_position'][p]):.3f}" for p in range(0, config.block_size, 8)), flush=True)
    print(f"wall {time.perf_counter() - tic:.0f} s", flush=True)
    return results


def _table(scores: torch.Tensor) -> str:
    return "\n".join("  " + " ".join(f"{float(v):.3f}" for v in row) for row in scores)
