"""Train from the command line (chapter 17).

    python -m attnbook.train gpt --preset cpu-small
    python -m attnbook.train gpt --preset cpu-small --steps 500 --out-dir runs/small
    python -m attnbook.train gpt --preset cpu-small --out-dir runs/small --resume
    torchrun --standalone --nproc_per_node=2 -m attnbook.train gpt --preset tiny

Every field of ``GPTRunConfig`` can be set with ``--field-name value`` (``--flag``/``--no-flag`` for a
switch, ``none`` for a field that may be None). With ``--out-dir`` the run
keeps ``ckpt.pt`` (atomic, resumable) and ``log.json`` (the losses, for plotting).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

from attnbook._cli import HelpFormatter, add_config_options, at_least, config_overrides, usage_errors
from attnbook.training.lm import PRESETS, GPTRunConfig, preset, train_gpt

# What can be trained, in one line each (``python -m attnbook`` lists them).
MODELS = {"gpt": "a character-level GPT on Tiny Shakespeare (or --text-file)"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m attnbook.train", description=__doc__.split("\n")[0],
                                     formatter_class=HelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="model", required=True)
    gpt = sub.add_parser("gpt", help=MODELS["gpt"],
                         description="Train a character-level GPT: a preset recipe, any of its fields replaced.",
                         formatter_class=HelpFormatter)
    gpt.add_argument("--preset", choices=sorted(PRESETS), default="cpu-small", help="the recipe to start from")
    gpt.add_argument("--resume", action="store_true", help="continue from OUT_DIR/ckpt.pt")
    gpt.add_argument("--text-file", type=Path, help="train on this UTF-8 text instead of Tiny Shakespeare")
    gpt.add_argument("--sample", type=at_least(0), default=300, help="characters to generate at the end (0: none)")
    gpt.add_argument("--threads", type=at_least(0), default=0, help="CPU threads for PyTorch (0: its default)")
    add_config_options(gpt, GPTRunConfig, PRESETS["cpu-small"], "the preset's value if omitted; cpu-small: ")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Every argument is checked here, before any training: a mistake costs a message, not a run.
    overrides = config_overrides(args, GPTRunConfig)
    with usage_errors(parser):
        config = preset(args.preset, **overrides)
    text = None
    if args.text_file:
        try:
            text = args.text_file.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            parser.error(f"--text-file {args.text_file} is not UTF-8 text (byte {e.object[e.start]:#04x} at "
                         f"position {e.start}); save it as UTF-8 first")
        except OSError as e:
            parser.error(f"--text-file {args.text_file} cannot be read: {e.strerror or e}")
    if args.threads:
        torch.set_num_threads(args.threads)
    run = train_gpt(config, text=text, resume=args.resume)
    if int(os.environ.get("RANK", "0")) != 0:
        return
    print(f"steps {run.steps_done}, validation loss {run.val_loss:.4f}, training {run.train_seconds:.1f} s, "
          f"{run.tokens_per_second:,.0f} tokens/s, {run.model.n_params():,} parameters")
    if args.sample:
        from attnbook.torch.decoding import generate

        g = torch.Generator().manual_seed(config.seed)
        start = torch.tensor([[run.tokenizer.stoi.get("\n", 0)]])
        ids = generate(run.model, start, args.sample, temperature=0.8, generator=g, use_cache=True)
        print(run.tokenizer.decode(ids[0, 1:]))


if __name__ == "__main__":
    main()
