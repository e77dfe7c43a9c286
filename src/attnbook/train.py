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

from attnbook._cli import (
    HelpFormatter,
    add_config_options,
    at_least,
    config_overrides,
    fail,
    parse,
    plain,
    usage_errors,
)
from attnbook.data.shakespeare import DataUnavailableError
from attnbook.training.checkpoint import CheckpointError
from attnbook.training.lm import PRESETS, GPTRunConfig, preset, train_gpt

# What can be trained, in one line each (``python -m attnbook`` lists them).
MODELS = {"gpt": "a character-level GPT on Tiny Shakespeare (or --text-file)"}


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m attnbook.train``: a subcommand per model, its options from the config fields."""
    parser = argparse.ArgumentParser(prog="python -m attnbook.train", description=plain(__doc__.split("\n")[0]),
                                     formatter_class=HelpFormatter, epilog=plain(__doc__.split("\n", 1)[1]))
    sub = parser.add_subparsers(dest="model", required=True, metavar="MODEL", help="what to train: gpt")
    gpt = sub.add_parser("gpt", help=MODELS["gpt"], prog="python -m attnbook.train gpt",
                         description="Train a character-level GPT: a preset recipe, any of its fields replaced.",
                         formatter_class=HelpFormatter)
    gpt.add_argument("--preset", choices=sorted(PRESETS), default="cpu-small", help="the recipe to start from")
    gpt.add_argument("--resume", action="store_true", help="continue from OUT_DIR/ckpt.pt")
    gpt.add_argument("--text-file", type=Path, help="train on this UTF-8 text instead of Tiny Shakespeare")
    gpt.add_argument("--sample", type=at_least(0), default=300, help="characters to generate at the end (0: none)")
    gpt.add_argument("--threads", type=at_least(0), default=0, help="CPU threads for PyTorch (0: its default)")
    add_config_options(gpt, GPTRunConfig, PRESETS["cpu-small"], "the preset's value if omitted; cpu-small: ")
    return parser


def read_text_file(parser: argparse.ArgumentParser, path: Path) -> str:
    """The UTF-8 text of ``--text-file``, or a usage error that says why it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        fail(parser, f"argument --text-file: {path} is not UTF-8 text (byte {e.object[e.start]:#04x} at position "
                     f"{e.start}); save it as UTF-8 first")
    except OSError as e:
        fail(parser, f"argument --text-file: {path} cannot be read: {e.strerror or e}")


def main(argv: list[str] | None = None) -> None:
    """Train what ``argv`` asks for (``sys.argv[1:]`` when ``None``); a usage error exits with status 2."""
    parser = build_parser()
    args = parse(parser, argv)
    gpt = parser._subparsers._group_actions[0].choices["gpt"]  # errors are shown under the gpt command's usage
    # Every argument is checked here, before any data is read or any training: a mistake costs a message, not
    # a run, and names the option to change.
    with usage_errors(gpt):
        config = preset(args.preset, **config_overrides(args, GPTRunConfig))
        config.resolve_device()  # the device exists here and can run the precision asked for
    if config.out_dir and Path(config.out_dir).exists() and not Path(config.out_dir).is_dir():
        fail(gpt, f"argument --out-dir: {config.out_dir} is a file; give a folder for the checkpoint and the log")
    if args.resume and not config.out_dir:
        fail(gpt, "argument --resume: continues the run in --out-dir, and none was given")
    if args.resume and not (Path(config.out_dir) / "ckpt.pt").is_file():
        fail(gpt, f"argument --resume: there is no checkpoint to continue at {Path(config.out_dir) / 'ckpt.pt'}")
    text = read_text_file(gpt, args.text_file) if args.text_file else None
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        run = train_gpt(config, text=text, resume=args.resume)
    except DataUnavailableError as e:  # no network on a first run, or a file that is not the corpus
        fail(gpt, f"{e}\n(or train on a text of your own: --text-file PATH)", status=1)
    except CheckpointError as e:  # --resume into a run of other settings, or an unreadable checkpoint
        fail(gpt, str(e), status=1)
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
