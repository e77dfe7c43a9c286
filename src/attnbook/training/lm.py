"""Training a character-level GPT on Tiny Shakespeare (chapter 17; Phuong and Hutter, algorithm 13).

``train_gpt(config)`` runs the whole recipe: tokenize, split 90/10, draw random windows, AdamW with
warm-up and cosine decay, periodic evaluation, a loss log, atomic checkpoints that resume exactly, the
device chosen automatically (bf16 autocast on CUDA), and data parallelism when started by torchrun.
``PRESETS`` names the recipes; ``python -m attnbook.train gpt --preset cpu-small`` runs one.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, get_args

import torch
import torch.nn.functional as F

from attnbook._fields import FieldError, choice, count, custom, flag, like, refuse
from attnbook.data.bpe import BPETokenizer
from attnbook.data.shakespeare import load_tinyshakespeare
from attnbook.data.text import CharTokenizer, random_windows
from attnbook.torch.transformer import GPT, GPTConfig, GPTShape
from attnbook.training.checkpoint import load_checkpoint
from attnbook.training.device import autocast, pick_device
from attnbook.training.distributed import init_distributed, shutdown

# The evaluations of a trained language model live in training/evaluate.py; the chapters import them from here too.
from attnbook.training.evaluate import bits_per_character, evaluate_loss, loss_by_position, per_window_losses  # noqa: F401
from attnbook.training.optimisation import Precision
from attnbook.training.trainer import TrainConfig, TrainResult, from_presets, require_keys, saved_config, train

# Fields that fix the model (its shape and what it computes): a checkpoint resumes only into the same ones,
# and into the same data and optimizer (TrainConfig.resume_fields). The model's fields are GPTShape's:
# GPTConfig's less the vocabulary, which the text fixes.
MODEL_FIELDS = tuple(f.name for f in fields(GPTShape))


DEVICES = ("cpu", "cuda", "mps")  # the kinds of device a run may name (with an index, as "cuda:1")


def _device_name(name: str, value: object) -> None:
    if value == "auto":
        return
    try:
        kind = torch.device(value).type if isinstance(value, str) else None
    except RuntimeError:
        kind = None
    if kind not in DEVICES:
        raise refuse(name, "'auto' or a device PyTorch names: 'cpu', 'cuda', 'cuda:1', 'mps'", value)


@dataclass(kw_only=True)
class LMTrainConfig(TrainConfig):
    """Chapter 17's recipe for a small language model on Tiny Shakespeare: ``TrainConfig`` with the defaults
    that differ from chapter 16's, and where the run goes (``device``, ``precision``). The GPT's and the masked
    language model's runs are built on it, so that both train the same way."""

    steps: int = like(TrainConfig, "steps", 2000)
    batch_size: int = like(TrainConfig, "batch_size", 12)
    min_lr: float = like(TrainConfig, "min_lr", 1e-4)
    weight_decay: float = like(TrainConfig, "weight_decay", 0.1)
    beta2: float = like(TrainConfig, "beta2", 0.99)
    eval_every: int = like(TrainConfig, "eval_every", 250)
    seed: int = like(TrainConfig, "seed", 1337)
    device: str = custom("auto", check=_device_name, expected="'auto' or a device PyTorch names",
                         help="where to train: 'auto' (CUDA, else MPS, else the CPU), 'cpu', 'cuda', 'mps'")
    precision: Precision = choice("auto", get_args(Precision),
                                  help="'auto': bf16 autocast on a CUDA GPU that has it, fp32 elsewhere; 'bf16' "
                                       "needs such a GPU")

    def check(self) -> None:
        super().check()
        if self.target is not None and not self.target > 0:
            raise FieldError(f"target is a validation loss here (nats): None, or positive; got {self.target!r}",
                             "target")
        if self.precision == "bf16" and self.device != "auto" and torch.device(self.device).type != "cuda":
            raise FieldError(f"precision 'bf16' is bfloat16 autocast on a CUDA GPU; this run's device is "
                             f"{self.device!r}: use precision 'fp32' or 'auto'", "precision", "device")

    def resolve_device(self) -> torch.device:
        """The device this run trains on (``device="auto"`` resolved); ``FieldError`` naming ``device`` or
        ``precision`` if this machine cannot run it. The command line asks before it loads any data."""
        try:
            device = pick_device(self.device)
        except ValueError as e:
            raise FieldError(str(e), "device") from None
        if self.precision == "bf16" and not (device.type == "cuda" and torch.cuda.is_bf16_supported()):
            raise FieldError(f"precision 'bf16' needs a CUDA GPU with bfloat16; this run would train on "
                             f"{device.type}: use precision 'fp32' or 'auto'", "precision", "device")
        return device


@dataclass(kw_only=True)
class GPTRunConfig(GPTShape, LMTrainConfig):
    """A training run of a GPT: the model's size (the fields of ``GPTShape``), the optimisation and the loop
    (``LMTrainConfig``: ``TrainConfig`` with chapter 17's defaults), and what only a GPT run has.

    ``batch_size`` is the global batch: with torchrun each of N processes takes ``batch_size / N`` of
    the same windows, so a run gives the same result on one process or several. ``target`` is a validation
    loss: the run stops at the first evaluation at or below it, and every evaluation is then on the whole
    split (chapter 25).
    """

    zero_init_projections: bool = flag(False, help="start the blocks' output projections (attention's and the "
                                                   "MLP's second layer) at zero (chapter 25)")
    compile: bool = flag(False, help="torch.compile the training forward pass (its compilation counts in the "
                                     "first step's time)")
    eval_batches: int = count(20, help="batches of validation windows per periodic evaluation")

    def resume_fields(self) -> tuple[str, ...]:
        return MODEL_FIELDS + super().resume_fields()

    def model_config(self, vocab_size: int) -> GPTConfig:
        """The ``GPTConfig`` of this run's model, for a vocabulary of ``vocab_size`` tokens."""
        return GPTConfig(vocab_size=vocab_size, **{name: getattr(self, name) for name in MODEL_FIELDS})


#: The recipes of ``train gpt --preset``, by name. They train with the exact GELU, as nanoGPT's do (GPT-2 itself
#: uses the tanh approximation).
PRESETS: dict[str, GPTRunConfig] = {
    # A few seconds: for tests and for trying the command.
    "tiny": GPTRunConfig(n_layers=2, n_heads=2, d_model=32, block_size=16, activation="gelu", steps=40,
                         batch_size=8, warmup=5, eval_every=20, eval_batches=4),
    # The well-known small CPU recipe: 4 layers, 4 heads, width 128, context 64, batch 12, 2000 steps.
    "cpu-small": GPTRunConfig(activation="gelu"),
    # What chapter 17 trains inside its minute.
    "notebook": GPTRunConfig(activation="gelu", steps=400, lr=2e-3, warmup=40, eval_every=100, eval_batches=10),
    # A GPU recipe: 6 layers, 6 heads, width 384, context 256, batch 64, dropout 0.2.
    "gpu": GPTRunConfig(n_layers=6, n_heads=6, d_model=384, block_size=256, dropout=0.2, activation="gelu",
                        steps=5000, batch_size=64, warmup=100, eval_every=500, eval_batches=40),
}


def preset(name: str, **overrides: Any) -> GPTRunConfig:
    """A named recipe from ``PRESETS``, with any field replaced."""
    return from_presets(PRESETS, name, **overrides)


@dataclass
class GPTRun:
    """What ``train_gpt`` returns: the model (on the CPU, in eval mode), its tokenizer and the log.

    ``log`` has one dict per step: ``step``, ``loss``, ``lr``, and ``val_loss`` at evaluations.
    """

    model: GPT
    tokenizer: CharTokenizer | BPETokenizer
    config: GPTRunConfig
    log: list[dict[str, float]] = field(default_factory=list)
    train_seconds: float = 0.0
    steps_done: int = 0
    val_loss: float = math.nan
    reached_target_at: int | None = None  # the step whose evaluation first met config.target

    @property
    def tokens_per_second(self) -> float:
        return self.steps_done * self.config.batch_size * self.config.block_size / max(self.train_seconds, 1e-9)


def _tokenizer_state(tokenizer: CharTokenizer | BPETokenizer) -> dict[str, Any]:
    if isinstance(tokenizer, BPETokenizer):
        return {"bpe_merges": [list(m) for m in tokenizer.merges], "bpe_pattern": tokenizer.pattern}
    return {"chars": tokenizer.chars}


def _tokenizer_keys(state: dict[str, Any]) -> tuple[str, ...]:
    # A checkpoint holds either a character alphabet or byte-pair merges (chapter 23).
    return ("bpe_merges", "bpe_pattern") if "bpe_merges" in state else ("chars",)


def load_gpt(path: str | os.PathLike) -> tuple[GPT, CharTokenizer | BPETokenizer]:
    """The model and tokenizer of a checkpoint written by ``train_gpt``, on the CPU in eval mode. A checkpoint
    written before a field was renamed loads (``trainer.RENAMED``); one with fields unknown here is refused."""
    state = load_checkpoint(path)
    require_keys(state, ("model", "config") + _tokenizer_keys(state), path)
    tokenizer = (BPETokenizer([tuple(m) for m in state["bpe_merges"]], state["bpe_pattern"])
                 if "bpe_merges" in state else CharTokenizer(state["chars"]))
    model = GPT(GPTRunConfig(**saved_config(state, GPTRunConfig, path)).model_config(tokenizer.vocab_size))
    model.load_state_dict(state["model"])
    return model.eval(), tokenizer


def train_gpt(config: GPTRunConfig, text: str | None = None, resume: bool = False,
              stop_after: int | None = None, tokenizer: CharTokenizer | BPETokenizer | None = None) -> GPTRun:
    """Train a GPT on ``text`` (Tiny Shakespeare by default) as ``config`` says, with the package's loop
    (``trainer.train``): the batch is a set of random windows, the loss the next token's cross-entropy.

    ``tokenizer`` defaults to the characters of ``text``; a ``BPETokenizer`` (chapter 23) trains on its
    tokens instead. The text is split 90/10 by characters before encoding, so every tokenizer is
    validated on the same passage.

    ``resume=True`` continues from ``config.out_dir/ckpt.pt``; ``stop_after`` ends the run after that
    step, as an interruption would (a checkpoint is written there first when ``out_dir`` is set).
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))  # set by torchrun
    if config.batch_size % world_size:
        raise ValueError(f"batch_size = {config.batch_size} must divide evenly among {world_size} processes")
    device = pick_device(config.device)
    info = init_distributed(device.type)
    if info.enabled and device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
    text = load_tinyshakespeare() if text is None else text
    tokenizer = CharTokenizer.from_text(text) if tokenizer is None else tokenizer
    train_ids, val_ids = split_text_ids(text, tokenizer, 0.9)

    torch.manual_seed(config.seed)
    model = GPT(config.model_config(tokenizer.vocab_size)).to(device)
    if config.zero_init_projections:
        zero_output_projections(model)
    generator = torch.Generator().manual_seed(config.seed)  # draws the windows, the same on every process
    net = torch.nn.parallel.DistributedDataParallel(model) if info.enabled else model
    if config.compile:
        net = torch.compile(net)  # evaluation and generation keep the plain model
    share = config.batch_size // info.world_size
    mine = slice(info.rank * share, (info.rank + 1) * share)  # this process's share of every batch
    record = TrainResult(metric="val_loss")

    def get_batch(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = random_windows(train_ids, config.block_size, config.batch_size, g)  # (B, T) each
        return x[mine].to(device), y[mine].to(device)

    def loss_fn(_: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        with autocast(device, config.precision):
            logits = net(x)  # (B / N, T, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())

    def evaluate(m: torch.nn.Module) -> float:
        # The whole split at the end; with a target, at every check, so that the figure which stops the run is
        # the one it reports (the split's first windows score lower than the rest of it).
        whole = record.steps_done == config.steps or config.target is not None
        return evaluate_loss(m, val_ids, config.block_size, 64, None if whole else config.eval_batches, device)

    train(model, get_batch, loss_fn, config, evaluate, metric="val_loss", lower_is_better=True, generator=generator,
          result=record, resume=resume, stop_after=stop_after, saved=_tokenizer_state(tokenizer), dist=info)
    shutdown(info)
    return GPTRun(model.cpu().eval(), tokenizer, config, record.log, record.train_seconds, record.steps_done,
                  next((e["val_loss"] for e in reversed(record.log) if "val_loss" in e), math.nan),
                  record.reached_target_at)


@torch.no_grad()
def zero_output_projections(model: GPT) -> None:
    """Set every block's output projections (attention's ``out_proj`` and the MLP's ``fc2``, weights and
    biases) to zero: each block then adds nothing to the residual stream at the first step (chapter 25)."""
    for name, p in model.named_parameters():
        if name.startswith("blocks.") and (".out_proj." in name or ".fc2." in name):
            p.zero_()


def split_text_ids(text: str, tokenizer: CharTokenizer | BPETokenizer,
                   train_fraction: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``train_fraction`` of the characters of ``text`` and the rest, each encoded: for
    characters this equals ``split(tokenizer.encode(text))``; for BPE the cut falls on the same character."""
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1; got {train_fraction}")
    n = int(train_fraction * len(text))
    return tokenizer.encode(text[:n]), tokenizer.encode(text[n:])


