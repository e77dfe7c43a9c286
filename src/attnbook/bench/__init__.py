"""Benchmarks that print figures, one module per chapter: ``python -m attnbook.bench NAME``.

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
induction (chapter 28): chapter 17's recipe trained and measured at several steps: the heads' induction and
previous-token scores, the loss on the second copy of a repeated random string against the first, and the
in-context learning score on the validation text (late positions' loss minus early ones').

vit (chapter 26): the ViT (mean pooling, and a class token) and the convolutional network of chapter 26,
trained with its recipe on several numbers of training digits and several seeds: test digits right per run,
their mean and spread, and the network's lead over the ViT seed by seed.

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

from attnbook._cli import HelpFormatter, at_least, parse, plain, positive_float, usage_errors
from attnbook.bench.attention import bench_attention
from attnbook.bench.bpe import bench_bpe
from attnbook.bench.gpt import bench_gpt
from attnbook.bench.induction import bench_induction
from attnbook.bench.mlm import bench_mlm, mlm_config
from attnbook.bench.modern import MODERN_ARMS, bench_modern
from attnbook.bench.rotary import bench_rotary
from attnbook.bench.seq2seq import bench_seq2seq
from attnbook.bench.speedrun import SUITES, VARIANTS, bench_speedrun, speedrun_configs
from attnbook.bench.vit import bench_vit
from attnbook.data.tasks import TASKS
from attnbook.training.lm import PRESETS

__all__ = ["BENCHMARKS", "MODERN_ARMS", "SUITES", "VARIANTS", "build_parser", "main", "mlm_config", "speedrun_configs"]

#: The benchmarks, in the order of their chapters: what each measures, in one line (``python -m attnbook`` lists them).
BENCHMARKS = {
    "seq2seq": "train the chapter 16 tasks to 99% exact match",
    "gpt": "the small CPU recipe on Tiny Shakespeare; throughput; generation",
    "attention": "time and memory of plain, tiled and PyTorch attention; GQA",
    "rotary": "learned against rotary positions, several seeds; longer contexts; the sliding key-value cache",
    "modern": "the GPT-2 block against the Llama-style block, several seeds each",
    "bpe": "characters against byte-pair tokens, in bits per character",
    "mlm": "masked language modelling against the GPT on the same masked positions",
    "speedrun": "seconds of training to a target validation loss, per variant and seed",
    "induction": "chapter 17's recipe searched for induction heads and in-context learning as it trains",
    "vit": "the ViT against the convolutional network, several seeds and numbers of training digits",
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m attnbook.bench``: one subcommand per benchmark, its options from their fields."""
    parser = argparse.ArgumentParser(prog="python -m attnbook.bench", description=plain(__doc__.split("\n")[0]),
                                     epilog=plain(__doc__.split("\n", 1)[1]), formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="which", required=True, metavar="BENCHMARK",
                                help="the benchmark to run, in the order of the chapters")

    def command(name: str) -> argparse.ArgumentParser:
        text = BENCHMARKS[name].replace("%", "%%")  # argparse formats help strings with %
        return sub.add_parser(name, help=text, description=text, formatter_class=HelpFormatter,
                              prog=f"python -m attnbook.bench {name}")

    s2s = command("seq2seq")
    s2s.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS), help="the tasks to train")
    s2s.add_argument("--max-steps", type=at_least(1), default=5000, help="steps at most, per task")
    gpt = command("gpt")
    gpt.add_argument("--steps", type=at_least(1), default=2000, help="training steps of the recipe")
    gpt.add_argument("--new-tokens", type=at_least(1), default=256, help="tokens generated per speed measurement")
    attention = command("attention")
    attention.add_argument("--lengths", nargs="+", type=at_least(1),
                           default=[256, 512, 1024, 2048, 4096, 8192, 16384], help="sequence lengths T")
    attention.add_argument("--max-plain-gib", type=positive_float, default=2.0,
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
    rotary.add_argument("--preset", choices=list(PRESETS), default="cpu-small", help="the recipe")
    rotary.add_argument("--steps", type=at_least(1), default=2000, help="training steps of every model")
    rotary.add_argument("--seeds", type=at_least(0), nargs="+", default=[0, 1, 2], help="one model per seed and arm")
    rotary.add_argument("--multipliers", type=at_least(1), nargs="+", default=[2, 4],
                        help="windows this many times the trained context are scored")
    rotary.add_argument("--new-tokens", type=at_least(1), default=512, help="tokens generated per speed measurement")
    rotary.add_argument("--speed-only", action="store_true",
                        help="only the generation speed, with an untrained model of the preset's shape")
    speed = command("speedrun")
    chosen = speed.add_mutually_exclusive_group()
    chosen.add_argument("--suite", choices=list(SUITES),
                        help="a recorded run of chapter 25, its variants in its order (notebooks/bench/25_SUITE.txt)")
    chosen.add_argument("--variants", nargs="+", choices=list(VARIANTS), metavar="VARIANT",
                        default=["baseline", "muon rotary bf16, 1000 steps"],
                        help="the recipes raced (quote names with spaces); the first is the one the others are "
                             "timed against. Choose from: " + "; ".join(f"'{v}'" for v in VARIANTS))
    speed.add_argument("--seeds", nargs="+", type=at_least(0), default=[1, 2, 3], help="one run per seed and variant")
    speed.add_argument("--target", type=positive_float, default=1.9,
                       help="validation loss on the whole split; the recipe's seeds end between 1.887 and 1.899")
    speed.add_argument("--eval-every", type=at_least(1), default=50, help="steps between evaluations")
    modern = command("modern")
    modern.add_argument("--steps", type=at_least(1), default=2000, help="training steps of every model")
    modern.add_argument("--seeds", type=at_least(0), nargs="+", default=[1337, 1, 2], help="one model per seed and arm")
    modern.add_argument("--arms", nargs="+", choices=list(MODERN_ARMS), metavar="ARM", default=["gpt2", "llama"],
                        help="the blocks compared; the first is the one the others are timed against. Choose from: "
                             + "; ".join(f"'{a}'" for a in MODERN_ARMS))
    modern.add_argument("--threads", type=at_least(1), default=1, help="CPU threads for PyTorch")
    induction = command("induction")
    induction.add_argument("--preset", choices=list(PRESETS), default="cpu-small", help="chapter 17's recipe")
    induction.add_argument("--at", type=at_least(1), nargs="+", default=[100, 200, 300, 400, 600, 800, 1000, 1500],
                           help="steps after which the run is measured, besides its last")
    induction.add_argument("--steps", type=at_least(1), default=None, help="training steps (the recipe's by default)")
    vit = command("vit")
    vit.add_argument("--steps", type=at_least(1), default=600, help="training steps of every model")
    vit.add_argument("--seeds", type=at_least(0), nargs="+", default=[0, 1, 2], help="one model per seed, arm and size")
    vit.add_argument("--sizes", type=at_least(1), nargs="+", default=[360, 720, 1437],
                     help="numbers of training digits (the first n of the chapter's 1,437)")
    vit.add_argument("--class-token-sizes", type=at_least(1), nargs="*", default=[1437],
                     help="the sizes at which the class-token ViT is trained too")
    return parser


def check_configs(args: argparse.Namespace) -> None:
    """Build the configurations the chosen benchmark trains with: a bad value raises here, before any work."""
    if args.which == "mlm":
        mlm_config(args.preset, args.steps)
    elif args.which == "speedrun":
        speedrun_configs(args.variants, args.seeds, args.target, eval_every=args.eval_every)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark ``argv`` names (``sys.argv[1:]`` when ``None``); a usage error exits with status 2."""
    parser = build_parser()
    args = parse(parser, argv)
    if getattr(args, "suite", None):
        args.variants = SUITES[args.suite]
    with usage_errors(parser._subparsers._group_actions[0].choices[args.which]):
        check_configs(args)
    run = {
        "seq2seq": lambda: bench_seq2seq(args.tasks, args.max_steps),
        "gpt": lambda: bench_gpt(args.steps, args.new_tokens),
        "attention": lambda: bench_attention(args.lengths, args.max_plain_gib),
        "rotary": lambda: bench_rotary(args.preset, args.steps, args.seeds, args.multipliers, args.new_tokens,
                                       args.speed_only),
        "modern": lambda: bench_modern(args.steps, args.seeds, args.arms, args.threads),
        "bpe": lambda: bench_bpe(args.steps, args.vocab_sizes, args.char_contexts),
        "mlm": lambda: bench_mlm(args.preset, args.steps),
        "speedrun": lambda: bench_speedrun(args.variants, args.seeds, args.target, eval_every=args.eval_every),
        "induction": lambda: bench_induction(args.preset, args.at,
                                             **({} if args.steps is None else {"steps": args.steps})),
        "vit": lambda: bench_vit(args.steps, args.seeds, args.sizes, args.class_token_sizes),
    }
    run[args.which]()
