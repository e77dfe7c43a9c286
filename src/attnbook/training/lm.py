"""Training a character-level GPT on Tiny Shakespeare (chapter 17; Phuong and Hutter, algorithm 13).

``train_gpt(config)`` runs the whole recipe: tokenize, split 90/10, draw random windows, AdamW with
warm-up and cosine decay, periodic evaluation, a loss log, atomic checkpoints that resume exactly, the
device chosen automatically (bf16 autocast on CUDA), and data parallelism when started by torchrun.
``PRESETS`` names the recipes; ``python -m attnbook.train gpt --preset cpu-small`` runs one.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from attnbook._files import atomic_write
from attnbook.data.bpe import BPETokenizer
from attnbook.data.shakespeare import load_tinyshakespeare
from attnbook.data.text import CharTokenizer, random_windows
from attnbook.torch.transformer import GPT, GPT_ACTIVATIONS, GPTConfig, GPTShape
from attnbook.training.checkpoint import load_checkpoint, save_checkpoint
from attnbook.training.device import autocast, pick_device
from attnbook.training.distributed import init_distributed, mean_over_processes, shutdown

# The evaluations of a trained language model live in training/evaluate.py; the chapters import them from here too.
from attnbook.training.evaluate import bits_per_character, evaluate_loss, loss_by_position, per_window_losses  # noqa: F401
from attnbook.training.muon import MuonAdamW, ns_dtype_for
from attnbook.training.schedule import lr_at
from attnbook.training.trainer import make_optimizer, optimizer_step

# Fields that fix the model (its shape and what it computes) and the data it is fed: a checkpoint resumes
# only into the same ones. The others (steps, the schedule, evaluation, device) may change on resume.
# The model's fields are GPTShape's: GPTConfig's less the vocabulary, which the text fixes.
MODEL_FIELDS = tuple(f.name for f in fields(GPTShape))
DATA_FIELDS = ("batch_size", "seed")
# A checkpoint's optimizer state fits only the optimizer that wrote it.
OPTIMIZER_FIELDS = ("optimizer",)
# What a checkpoint written by train_gpt holds.
# (the tokenizer's keys besides: "chars", or "bpe_merges" and "bpe_pattern")
CHECKPOINT_KEYS = ("model", "optimizer", "step", "generator", "torch_rng", "config", "log", "train_seconds")


def _bad(config: object, name: str, expected: str) -> ValueError:
    return ValueError(f"{name} must be {expected}; got {getattr(config, name)!r}")


def check_optimisation(config: Any) -> None:
    """The checks every training run's configuration shares (``GPTRunConfig``, and ``MLMRunConfig`` of chapter
    24): ``steps``, ``batch_size``, the schedule (``warmup``, ``lr``, ``min_lr``), AdamW's ``weight_decay``,
    ``beta1`` and ``beta2``, ``grad_clip``, ``eval_every`` and ``precision``. Raises ``ValueError`` naming the
    field, the value and what is accepted: a negative ``lr`` would train uphill, ``beta1 >= 1`` not at all."""
    for name in ("steps", "batch_size"):
        if getattr(config, name) < 1:
            raise _bad(config, name, "at least 1")
    if not 0 <= config.warmup <= config.steps:
        raise ValueError(f"warmup must lie in [0, steps = {config.steps}]; got {config.warmup}")
    if not config.lr > 0:
        raise _bad(config, "lr", "positive")
    if not 0 <= config.min_lr <= config.lr:
        raise ValueError(f"min_lr must lie in [0, lr = {config.lr}] (the schedule decays from lr down to it); "
                         f"got {config.min_lr}")
    if not config.weight_decay >= 0:
        raise _bad(config, "weight_decay", "0 or more (0: no decay)")
    for name in ("beta1", "beta2"):
        if not 0 <= getattr(config, name) < 1:
            raise _bad(config, name, "in [0, 1)")
    if not config.grad_clip >= 0:
        raise _bad(config, "grad_clip", "0 (no clipping) or a positive maximum gradient norm")
    if config.eval_every < 0:
        raise _bad(config, "eval_every", "0 (only at the end) or more")
    if config.precision not in ("auto", "bf16", "fp32"):
        raise _bad(config, "precision", "one of 'auto', 'bf16', 'fp32'")


@dataclass
class GPTRunConfig(GPTShape):
    """A training run: the model's size (the fields of ``GPTShape``), the optimisation, evaluation and
    bookkeeping.

    ``batch_size`` is the global batch: with torchrun each of N processes takes ``batch_size / N`` of
    the same windows, so a run gives the same result on one process or several.
    """

    steps: int = 2000
    batch_size: int = 12
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 100
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0
    # "adamw", or "muon": Muon on the block matrices, AdamW on the rest (chapter 25)
    optimizer: Literal["adamw", "muon"] = "adamw"
    matrix_lr: float | None = None  # Muon's peak learning rate; None: lr (Muon's step is scaled to AdamW's size)
    # Muon's iteration: "bf16", "fp32", or "auto" (bf16 on a GPU, fp32 on a CPU)
    muon_precision: Literal["auto", "bf16", "fp32"] = "auto"
    muon_ns_steps: int = 5  # Muon's Newton-Schulz steps
    # With Muon, AdamW's peak rate for the rest (embeddings, norms, biases); None: lr (chapter 25)
    embed_lr: float | None = None
    # With Muon, steps over which its momentum rises linearly from 0.85 to 0.95; 0: 0.95 throughout (chapter 25)
    muon_momentum_warmup: int = 0
    # "cosine": decay from the warm-up's end; "trapezoid": constant, then a straight decay over the last 40%
    schedule: Literal["cosine", "trapezoid"] = "cosine"
    # True: the blocks' output projections (attention's and the MLP's second layer) start at zero (chapter 25)
    zero_init_projections: bool = False
    # torch.compile the training forward pass; the compilation happens in the first step, whose time counts.
    compile: bool = False
    eval_every: int = 250
    eval_batches: int = 20  # batches of validation windows per periodic evaluation
    # Stop at the first evaluation at or below this loss; every evaluation is then on the whole split (chapter 25).
    target_loss: float | None = None
    seed: int = 1337
    device: str = "auto"
    precision: Literal["auto", "bf16", "fp32"] = "auto"  # "auto": bf16 autocast on CUDA, fp32 elsewhere
    out_dir: str = ""  # where checkpoints and the loss log go; "" keeps nothing on disk
    progress: bool = True

    def __post_init__(self) -> None:
        def bad(name: str, expected: str) -> ValueError:
            return _bad(self, name, expected)

        super().__post_init__()  # the model's fields are checked where they are defined, in GPTShape
        check_optimisation(self)
        if self.eval_batches < 1:
            raise bad("eval_batches", "at least 1")
        if self.optimizer not in ("adamw", "muon"):
            raise bad("optimizer", "'adamw' or 'muon'")
        if self.matrix_lr is not None and not self.matrix_lr > 0:
            raise bad("matrix_lr", "None (the same as lr) or positive")
        if self.muon_precision not in ("auto", "bf16", "fp32"):
            raise bad("muon_precision", "'auto', 'bf16' or 'fp32'")
        if self.matrix_lr is not None and self.optimizer != "muon":
            raise ValueError(f"matrix_lr is Muon's learning rate; it needs optimizer='muon' (got {self.optimizer!r})")
        if self.embed_lr is not None and not (self.embed_lr > 0 and self.optimizer == "muon"):
            raise ValueError(f"embed_lr is AdamW's rate beside Muon: None, or positive with optimizer='muon'; got "
                             f"embed_lr = {self.embed_lr!r} with optimizer = {self.optimizer!r}")
        if self.muon_momentum_warmup and not (self.muon_momentum_warmup > 0 and self.optimizer == "muon"):
            raise ValueError(f"muon_momentum_warmup must be 0, or a positive number of steps with optimizer='muon'; "
                             f"got {self.muon_momentum_warmup!r} with optimizer = {self.optimizer!r}")
        if isinstance(self.muon_ns_steps, bool) or not isinstance(self.muon_ns_steps, int) or self.muon_ns_steps < 1:
            raise bad("muon_ns_steps", "an integer, at least 1")
        if self.schedule not in ("cosine", "trapezoid"):
            raise bad("schedule", "'cosine' or 'trapezoid'")
        if self.target_loss is not None and not (self.target_loss > 0 and self.eval_every > 0):
            raise ValueError(f"target_loss needs a positive target and periodic evaluations (eval_every > 0); "
                             f"got target_loss = {self.target_loss}, eval_every = {self.eval_every}")
        if self.activation not in GPT_ACTIVATIONS:
            raise bad("activation", f"one of {list(GPT_ACTIVATIONS)}")

    def model_config(self, vocab_size: int) -> GPTConfig:
        """The ``GPTConfig`` of this run's model, for a vocabulary of ``vocab_size`` tokens."""
        return GPTConfig(vocab_size=vocab_size, **{name: getattr(self, name) for name in MODEL_FIELDS})


# The recipes train with the exact GELU, as nanoGPT's do (GPT-2 itself uses the tanh approximation).
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
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; the presets are {sorted(PRESETS)}")
    return replace(PRESETS[name], **overrides)


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
    reached_target_at: int | None = None  # the step whose evaluation first met config.target_loss

    @property
    def tokens_per_second(self) -> float:
        return self.steps_done * self.config.batch_size * self.config.block_size / max(self.train_seconds, 1e-9)


def _state(model, optimizer, generator, step, config, tokenizer, log, train_seconds) -> dict[str, Any]:
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
            "generator": generator.get_state(), "torch_rng": torch.get_rng_state(), "config": asdict(config),
            # Dropout on a GPU draws from the GPU's own generators, which the CPU's state does not cover.
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            **_tokenizer_state(tokenizer), "log": log, "train_seconds": train_seconds}


def _require_keys(state: dict[str, Any], keys: tuple[str, ...], path: str | os.PathLike) -> None:
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"{path} was not written by train_gpt: it lacks {', '.join(map(repr, missing))} "
                         f"(it has {', '.join(map(repr, sorted(map(str, state)))) or 'nothing'})")


def _tokenizer_state(tokenizer: CharTokenizer | BPETokenizer) -> dict[str, Any]:
    if isinstance(tokenizer, BPETokenizer):
        return {"bpe_merges": [list(m) for m in tokenizer.merges], "bpe_pattern": tokenizer.pattern}
    return {"chars": tokenizer.chars}


def _tokenizer_keys(state: dict[str, Any]) -> tuple[str, ...]:
    # A checkpoint holds either a character alphabet or byte-pair merges (chapter 23).
    return ("bpe_merges", "bpe_pattern") if "bpe_merges" in state else ("chars",)


def load_gpt(path: str | os.PathLike) -> tuple[GPT, CharTokenizer | BPETokenizer]:
    """The model and tokenizer of a checkpoint written by ``train_gpt``, on the CPU in eval mode."""
    state = load_checkpoint(path)
    _require_keys(state, ("model", "config") + _tokenizer_keys(state), path)
    tokenizer = (BPETokenizer([tuple(m) for m in state["bpe_merges"]], state["bpe_pattern"])
                 if "bpe_merges" in state else CharTokenizer(state["chars"]))
    model = GPT(GPTRunConfig(**state["config"]).model_config(tokenizer.vocab_size))
    model.load_state_dict(state["model"])
    return model.eval(), tokenizer


def train_gpt(config: GPTRunConfig, text: str | None = None, resume: bool = False,
              stop_after: int | None = None, tokenizer: CharTokenizer | BPETokenizer | None = None) -> GPTRun:
    """Train a GPT on ``text`` (Tiny Shakespeare by default) as ``config`` says.

    ``tokenizer`` defaults to the characters of ``text``; a ``BPETokenizer`` (chapter 23) trains on its
    tokens instead. The text is split 90/10 by characters before encoding, so every tokenizer is
    validated on the same passage.

    ``resume=True`` continues from ``config.out_dir/ckpt.pt``; ``stop_after`` ends the run after that
    step, as an interruption would (a checkpoint is written there first when ``out_dir`` is set).
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))  # set by torchrun
    if config.batch_size % world_size:
        raise ValueError(f"batch_size = {config.batch_size} must divide evenly among {world_size} processes")
    out_dir = Path(config.out_dir) if config.out_dir else None
    if out_dir is not None:  # checked now, not at the first save after minutes of training
        if out_dir.exists() and not out_dir.is_dir():
            raise ValueError(f"out_dir must be a folder (checkpoints and the log go there); {out_dir} is a file")
        if resume and not (out_dir / "ckpt.pt").is_file():
            raise FileNotFoundError(f"resume=True, but there is no checkpoint at {out_dir / 'ckpt.pt'}")
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
    optimizer = _make_optimizer(model, config)
    generator = torch.Generator().manual_seed(config.seed)  # draws the windows, the same on every process
    run = GPTRun(model, tokenizer, config)
    start = 0
    if resume:
        start = _resume(run, optimizer, generator, out_dir)
    net = torch.nn.parallel.DistributedDataParallel(model) if info.enabled else model
    if config.compile:
        net = torch.compile(net)  # evaluation and generation keep the plain model
    share = config.batch_size // info.world_size
    bar = tqdm(range(start, config.steps), initial=start, total=config.steps, desc="training",
               disable=not (config.progress and info.is_main))
    model.train()
    for step in bar:
        lr = lr_at(step, config.lr, config.warmup, config.steps, config.min_lr, config.schedule)
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)  # Muon's groups may run at another rate
        if config.muon_momentum_warmup:
            for group in optimizer.muon.param_groups:
                group["momentum"] = muon_momentum(step, config.muon_momentum_warmup)
        tic = time.perf_counter()
        x, y = random_windows(train_ids, config.block_size, config.batch_size, generator)  # (B, T) each
        mine = slice(info.rank * share, (info.rank + 1) * share)  # this process's share of the batch
        x, y = x[mine].to(device), y[mine].to(device)
        with autocast(device, config.precision):
            logits = net(x)  # (B / N, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
        optimizer_step(model, optimizer, loss, config.grad_clip)  # under DDP, backward averages the gradients
        loss_value = mean_over_processes(loss, info).item()
        run.train_seconds += time.perf_counter() - tic
        run.steps_done = step + 1
        entry = {"step": step + 1, "loss": loss_value, "lr": lr}
        last = step + 1 == config.steps or step + 1 == stop_after
        if (config.eval_every and (step + 1) % config.eval_every == 0) or last:
            # The whole split at the end; with a target, at every check, so that the figure which stops the
            # run is the one it reports (the split's first windows score lower than the rest of it).
            whole = step + 1 == config.steps or config.target_loss is not None
            batches = None if whole else config.eval_batches
            entry["val_loss"] = evaluate_loss(model, val_ids, config.block_size, 64, batches, device)
            if config.target_loss is not None and entry["val_loss"] <= config.target_loss:
                run.reached_target_at = step + 1
                last = True
            bar.set_postfix(loss=f"{loss_value:.3f}", val=f"{entry['val_loss']:.3f}")
            run.log.append(entry)
            if out_dir is not None and info.is_main:
                _save(run, optimizer, generator, out_dir)
        else:
            run.log.append(entry)
        if last:
            break
    bar.close()
    shutdown(info)
    run.val_loss = next((e["val_loss"] for e in reversed(run.log) if "val_loss" in e), math.nan)
    run.model = model.cpu().eval()
    return run


@torch.no_grad()
def zero_output_projections(model: GPT) -> None:
    """Set every block's output projections (attention's ``out_proj`` and the MLP's ``fc2``, weights and
    biases) to zero: each block then adds nothing to the residual stream at the first step (chapter 25)."""
    for name, p in model.named_parameters():
        if name.startswith("blocks.") and (".out_proj." in name or ".fc2." in name):
            p.zero_()


def muon_momentum(step: int, warmup: int) -> float:
    """Muon's momentum at ``step`` (from 0) under a warm-up of ``warmup`` steps: from 0.85 up a straight line to
    0.95, then 0.95 (the GPU speedruns' warm-up; a smaller momentum averages fewer of the early, fast-changing
    gradients)."""
    return 0.85 + 0.10 * min(1.0, step / warmup)


def _make_optimizer(model: GPT, config: GPTRunConfig) -> torch.optim.Optimizer | MuonAdamW:
    betas = (config.beta1, config.beta2)
    if config.optimizer == "muon":
        matrix_lr = config.lr if config.matrix_lr is None else config.matrix_lr
        ns_dtype = ns_dtype_for(next(model.parameters()).device, config.muon_precision)
        optimizer = MuonAdamW(model, config.lr, matrix_lr, config.weight_decay, betas, ns_dtype=ns_dtype,
                              ns_steps=config.muon_ns_steps)
        if config.embed_lr is not None:
            for group in optimizer.adamw.param_groups:
                group["lr_scale"] = config.embed_lr / config.lr
        return optimizer
    return make_optimizer(model, config.lr, config.weight_decay, betas)


def split_text_ids(text: str, tokenizer: CharTokenizer | BPETokenizer,
                   train_fraction: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``train_fraction`` of the characters of ``text`` and the rest, each encoded: for
    characters this equals ``split(tokenizer.encode(text))``; for BPE the cut falls on the same character."""
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1; got {train_fraction}")
    n = int(train_fraction * len(text))
    return tokenizer.encode(text[:n]), tokenizer.encode(text[n:])


def _save(run: GPTRun, optimizer, generator, out_dir: Path) -> None:
    save_checkpoint(_state(run.model, optimizer, generator, run.steps_done, run.config, run.tokenizer, run.log,
                           run.train_seconds), out_dir / "ckpt.pt")
    atomic_write(out_dir / "log.json", lambda f: f.write(json.dumps(run.log).encode()))


def _resume(run: GPTRun, optimizer, generator, out_dir: Path | None) -> int:
    if out_dir is None:
        raise ValueError("resume=True needs config.out_dir, the folder of the checkpoint to resume from")
    path = out_dir / "ckpt.pt"
    state = load_checkpoint(path)
    _require_keys(state, CHECKPOINT_KEYS + _tokenizer_keys(state), path)
    saved = state["config"]
    defaults = GPTRunConfig()
    # Every field that shapes the model, the data or the optimizer state, compared before anything is loaded.
    matched = MODEL_FIELDS + DATA_FIELDS + OPTIMIZER_FIELDS
    different = {k: (saved.get(k, getattr(defaults, k)), getattr(run.config, k)) for k in matched
                 if saved.get(k, getattr(defaults, k)) != getattr(run.config, k)}
    if different:
        listed = ", ".join(f"{k}: saved {a!r}, requested {b!r}" for k, (a, b) in different.items())
        raise ValueError(f"the checkpoint {path} was trained with another model, data or optimizer ({listed}); "
                         "resume with the saved values, or start a new run in another out_dir")
    if state["step"] > run.config.steps:
        raise ValueError(f"steps = {run.config.steps} is below the checkpoint's step {state['step']}; resume with "
                         f"steps of at least {state['step']} (the run has already trained that far)")
    if {k: state.get(k) for k in _tokenizer_state(run.tokenizer)} != _tokenizer_state(run.tokenizer):
        raise ValueError("the checkpoint was trained with another tokenizer (another alphabet or other merges)")
    run.model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    cuda_rng = state.get("cuda_rng")  # absent from checkpoints written before it was kept, None without CUDA
    if cuda_rng is not None and torch.cuda.is_available() and len(cuda_rng) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_rng)
    run.log, run.train_seconds, run.steps_done = list(state["log"]), state["train_seconds"], state["step"]
    return state["step"]
