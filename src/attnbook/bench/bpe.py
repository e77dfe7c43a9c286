"""``python -m attnbook.bench bpe`` (chapter 23): the small CPU recipe on characters and on byte-pair tokens of
several vocabulary sizes, same model, steps, batch and context in tokens; validation bits per character on
the same text, parameters, training time, and a sample from each."""

from __future__ import annotations

import math
import platform
import time

import torch

from attnbook.torch.decoding import generate
from attnbook.training.lm import preset, train_gpt


def bench_bpe(steps: int, vocab_sizes: list[int], char_contexts: list[int]) -> None:
    """Train the ``cpu-small`` recipe for ``steps`` steps on characters (one run per context length in
    ``char_contexts``) and on BPE tokens (one run per vocabulary size, context 64); print bits per character on
    the same validation text, and a sample of each."""
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
