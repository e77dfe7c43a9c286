"""``python -m attnbook.bench mlm`` (chapter 24): the encoder-only model trained by masked language modelling
and the GPT of the same size, steps, batches and seed, each scored on the same masked positions of the
whole validation text, with the counting baselines."""

from __future__ import annotations

import platform
import time

import torch

from attnbook.training import mlm
from attnbook.training.lm import train_gpt


def mlm_config(preset_name: str, steps: int) -> mlm.MLMRunConfig:
    """The recipe of ``bench mlm``: the preset with ``steps``, its warm-up cut to the run when the run is shorter."""
    return mlm.preset(preset_name, steps=steps, warmup=min(mlm.PRESETS[preset_name].warmup, steps), progress=False)


def bench_mlm(preset_name: str, steps: int) -> None:
    """Train the masked language model of recipe ``preset_name`` and a GPT of the same sizes for ``steps`` steps;
    print both models' accuracy and loss on the same masked validation positions, simple guesses' accuracy, and
    the accuracy by quarter of the window."""
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
