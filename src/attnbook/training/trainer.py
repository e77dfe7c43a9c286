"""The package's one training loop, in plain PyTorch (chapters 16, 17, 24 to 28).

Every run trains with ``train``: the task passes in what differs (a function that draws a batch, one that
computes the loss on it, and one that evaluates the model) and a ``TrainConfig``, which is ``Optimisation``
(the rates, betas, decay, clipping, schedule and optimizer) and the loop's own fields (steps, batch size,
evaluation, target, seed, checkpoints). The loop sets the step's learning rate, steps, clips, evaluates
every ``eval_every`` steps and at the end, stops at a target, writes checkpoints atomically, and resumes
from one exactly. Seeded, a CPU run repeats exactly.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from attnbook._fields import FieldError, count, flag, real, text
from attnbook._files import atomic_write
from attnbook.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from attnbook.training.distributed import DistInfo, mean_over_processes
from attnbook.training.muon import MuonAdamW
from attnbook.training.optimisation import Optimisation, make_optimizer, optimizer_step

Optimizer = torch.optim.Optimizer | MuonAdamW  # what Optimisation.build_optimizer returns

__all__ = ["CHECKPOINT_KEYS", "TrainConfig", "TrainResult", "from_presets", "make_optimizer", "optimizer_step",
           "set_seed", "train"]

# What a checkpoint written by ``train`` holds (a run may add its own keys, such as its tokenizer's).
CHECKPOINT_KEYS = ("model", "optimizer", "step", "generator", "torch_rng", "config", "log", "train_seconds")
# Fields renamed since checkpoints were first written: a saved configuration is read with the new names.
RENAMED = {"target_loss": "target"}


class CheckpointMismatch(CheckpointError):
    """A checkpoint that this run cannot resume: written by another model, data, tokenizer or optimizer, or by
    something other than attnbook's trainer. The message says which and what to do."""


def from_presets(presets: dict[str, Any], name: str, **overrides: Any) -> Any:
    """The recipe ``presets[name]`` with any of its fields replaced (checked again, as a new configuration)."""
    if name not in presets:
        raise ValueError(f"unknown preset {name!r}; the presets are {sorted(presets)}")
    return replace(presets[name], **overrides)


def set_seed(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch; return a generator for drawing batches."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


@dataclass(kw_only=True)
class TrainConfig(Optimisation):
    """How to train: ``Optimisation``'s fields and the loop's.

    ``eval_every``: evaluate every so many steps (0: only at the end). ``target``: stop at the first
    evaluation that reaches it (at or above it for a score such as accuracy, at or below it for a loss; the
    run says which). ``out_dir``: where checkpoints (``ckpt.pt``) and the log (``log.json``) are written at
    every evaluation; ``""`` keeps nothing on disk.
    """

    steps: int = count(1000, help="optimizer steps to take")
    batch_size: int = count(64, help="examples per step")
    eval_every: int = count(0, minimum=0, expected="0 (only at the end) or more",
                            help="evaluate (and checkpoint) every so many steps; 0: only at the end")
    target: float | None = real(None, optional="no target",
                                help="stop at the first evaluation that reaches this value (needs eval_every)")
    seed: int = count(0, minimum=0, expected="a whole number in [0, 2**32)",
                      help="the seed of the model's initialisation and of the batches drawn")
    out_dir: str = text("", expected="a folder's path as a string ('' keeps nothing)",
                        help="the folder for the checkpoint ckpt.pt and the log log.json ('': nothing is written)")
    progress: bool = flag(True, help="show a progress bar")

    def check(self) -> None:
        super().check()
        if self.warmup > self.steps:
            raise FieldError(f"warmup must lie in [0, steps = {self.steps}]; got {self.warmup}", "warmup", "steps")
        if self.target is not None and self.eval_every < 1:
            raise FieldError(f"target needs periodic evaluations (eval_every > 0); got target = {self.target!r}, "
                             f"eval_every = {self.eval_every}", "target", "eval_every")
        if self.seed >= 2**32:
            raise FieldError(f"seed must be a whole number in [0, 2**32); got {self.seed!r}", "seed")

    def resume_fields(self) -> tuple[str, ...]:
        """The fields a checkpoint resumes only into the same values of: the data drawn and the optimizer's
        state depend on them. The others (steps, the rates, betas and decay, evaluation) may change on resume:
        the checkpoint's optimizer keeps its moments and takes this run's settings."""
        return ("batch_size", "seed", "optimizer")


@dataclass
class TrainResult:
    """What a run produced: one log entry per step (``step``, ``loss``, ``lr``, and at evaluations what the
    evaluation returned), and the training time (evaluations excluded).

    ``metric`` names the entry the target is compared with; ``evals`` lists it as ``(step, value)``."""

    log: list[dict[str, float]] = field(default_factory=list)
    train_seconds: float = 0.0
    steps_done: int = 0
    metric: str = "eval"
    reached_target_at: int | None = None  # the step whose evaluation first reached the target
    seconds_to_target: float | None = None

    @property
    def losses(self) -> list[float]:
        return [entry["loss"] for entry in self.log]

    @property
    def lrs(self) -> list[float]:
        return [entry["lr"] for entry in self.log]

    @property
    def evals(self) -> list[tuple[int, float]]:
        return [(entry["step"], entry[self.metric]) for entry in self.log if self.metric in entry]


@dataclass
class _Run:
    """What a checkpoint keeps besides the model and the optimizer: the batches' generator, further generators by
    name, the entries a run saves beside its weights (a tokenizer), and the record so far."""

    generator: torch.Generator
    rngs: dict[str, torch.Generator]
    saved: dict[str, Any]
    result: TrainResult


def _reached(value: float, target: float | None, lower_is_better: bool) -> bool:
    return target is not None and (value <= target if lower_is_better else value >= target)


def train(
    model: torch.nn.Module,
    get_batch: Callable[[torch.Generator], Any],
    loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor],
    config: TrainConfig,
    evaluate: Callable[[torch.nn.Module], float | dict[str, float]] | None = None,
    *,
    metric: str = "eval",
    lower_is_better: bool = False,
    generator: torch.Generator | None = None,
    result: TrainResult | None = None,
    resume: bool = False,
    stop_after: int | None = None,
    saved: dict[str, Any] | None = None,
    dist: DistInfo | None = None,
    rngs: dict[str, torch.Generator] | None = None,
) -> TrainResult:
    """Train ``model`` for ``config.steps`` steps, or until an evaluation reaches ``config.target``.

    ``get_batch(generator)`` returns a batch; ``loss_fn(model, batch)`` a scalar loss; ``evaluate(model)``, called
    in eval mode every ``eval_every`` steps and at the end, a number (logged as ``metric``) or a dict of numbers
    (``metric`` among them); a run with a ``target`` needs one. ``lower_is_better``: the target is a loss,
    reached at or below it.

    ``generator``: the batches' generator, already seeded (global seeds left alone); by default ``set_seed``
    seeds Python, NumPy and torch with ``config.seed`` and gives it. ``result``: the record to fill (an
    ``evaluate`` may read its ``steps_done``). With ``config.out_dir``, a checkpoint (with ``saved``'s entries,
    such as a tokenizer) and ``log.json`` are written every ``eval_every`` steps and at the end, after the
    evaluation if there is one; ``resume=True`` continues from the
    checkpoint, refusing one written with other ``config.resume_fields()`` or other ``saved`` entries.
    ``stop_after`` ends the run after that step, as an interruption would (evaluating and saving there first).
    ``dist``: under data parallelism, the loss logged is the mean over processes and only the main process
    writes. ``rngs``: further generators the batches draw from (by name), saved and restored with the
    checkpoint. Returns ``result``, with the model in eval mode.
    """
    if config.target is not None and evaluate is None:
        raise ValueError(f"target = {config.target} is compared with an evaluation, and this run has none: pass "
                         "evaluate, or leave target None")
    out_dir = Path(config.out_dir) if config.out_dir else None
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():  # checked now, not after minutes
        raise ValueError(f"out_dir must be a folder (checkpoints and the log go there); {out_dir} is a file")
    if resume and out_dir is None:
        raise ValueError("resume=True needs config.out_dir, the folder of the checkpoint to resume from")
    if resume and not (out_dir / "ckpt.pt").is_file():
        raise FileNotFoundError(f"resume=True, but there is no checkpoint at {out_dir / 'ckpt.pt'}")
    g = set_seed(config.seed) if generator is None else generator
    optimizer = config.build_optimizer(model)
    result = TrainResult(metric=metric) if result is None else result
    saved = saved or {}
    is_main = dist is None or dist.is_main
    run = _Run(g, rngs or {}, saved, result)
    if resume:
        _resume(out_dir / "ckpt.pt", model, optimizer, config, run)
    start = result.steps_done
    bar = tqdm(range(start, config.steps), initial=start, total=config.steps, desc="training",
               disable=not (config.progress and is_main))
    model.train()
    for step in bar:
        lr = config.set_step(optimizer, step, config.steps)
        tic = time.perf_counter()
        loss = loss_fn(model, get_batch(g))
        optimizer_step(model, optimizer, loss, config.grad_clip)  # under DDP, backward averages the gradients
        loss_value = (loss if dist is None else mean_over_processes(loss, dist)).item()
        result.train_seconds += time.perf_counter() - tic
        result.steps_done = step + 1
        entry: dict[str, float] = {"step": step + 1, "loss": loss_value, "lr": lr}
        last = step + 1 == config.steps or step + 1 == stop_after
        check = (config.eval_every and (step + 1) % config.eval_every == 0) or last  # evaluate, then save
        if check and evaluate is not None:
            model.eval()
            value = evaluate(model)
            model.train()
            entry |= value if isinstance(value, dict) else {metric: float(value)}
            bar.set_postfix(loss=f"{loss_value:.3f}", **{metric: f"{entry[metric]:.3f}"})
            if _reached(entry[metric], config.target, lower_is_better):
                result.reached_target_at, result.seconds_to_target = step + 1, result.train_seconds
                last = True
        result.log.append(entry)
        if check and out_dir is not None and is_main:
            _save(out_dir, model, optimizer, config, run)
        if last:
            break
    bar.close()
    model.eval()
    return result


def _save(out_dir: Path, model: torch.nn.Module, optimizer: Optimizer, config: TrainConfig, run: _Run) -> None:
    result, rngs = run.result, run.rngs
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": result.steps_done,
             "generator": run.generator.get_state(), "torch_rng": torch.get_rng_state(), "config": asdict(config),
             # Dropout on a GPU draws from the GPU's own generators, which the CPU's state does not cover.
             "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
             **({"rngs": {k: r.get_state() for k, r in rngs.items()}} if rngs else {}),
             **run.saved, "log": result.log, "train_seconds": result.train_seconds}
    save_checkpoint(state, out_dir / "ckpt.pt")
    atomic_write(out_dir / "log.json", lambda f: f.write(json.dumps(result.log).encode()))


def saved_config(state: dict[str, Any], config_type: type, path: str | os.PathLike) -> dict[str, Any]:
    """A checkpoint's configuration with today's field names (``RENAMED``); a field ``config_type`` does not
    have raises ``ValueError`` naming it, rather than a run built from a half-read configuration."""
    saved = {RENAMED.get(k, k): v for k, v in state["config"].items()}
    known = {f.name for f in fields(config_type)}
    unknown = sorted(set(saved) - known)
    if unknown:
        raise CheckpointMismatch(f"the checkpoint {path} has configuration fields this version of attnbook does "
                                 f"not know ({', '.join(unknown)}): it was written by another version, or by "
                                 f"another kind of run than {config_type.__name__}")
    return saved


def require_keys(state: dict[str, Any], keys: tuple[str, ...], path: str | os.PathLike) -> None:
    """Refuse a checkpoint that lacks any of ``keys``, naming them and what it has."""
    missing = [k for k in keys if k not in state]
    if missing:
        has = ", ".join(map(repr, sorted(map(str, state)))) or "nothing"
        raise CheckpointMismatch(f"{path} was not written by attnbook's trainer: it lacks "
                                 f"{', '.join(map(repr, missing))} (it has {has})")


def _resume(path: Path, model: torch.nn.Module, optimizer: Optimizer, config: TrainConfig, run: _Run) -> None:
    saved, rngs, result = run.saved, run.rngs, run.result
    state = load_checkpoint(path)
    require_keys(state, CHECKPOINT_KEYS, path)
    old = saved_config(state, type(config), path)
    defaults = type(config)()  # for fields added since the checkpoint was written
    # Every field that shapes the model, the data or the optimizer state, compared before anything is loaded.
    different = {k: (old.get(k, getattr(defaults, k)), getattr(config, k)) for k in config.resume_fields()
                 if old.get(k, getattr(defaults, k)) != getattr(config, k)}
    if different:
        listed = ", ".join(f"{k}: saved {a!r}, requested {b!r}" for k, (a, b) in different.items())
        raise CheckpointMismatch(f"the checkpoint {path} was trained with another model, data or optimizer "
                                 f"({listed}); resume with the saved values, or start a new run in another out_dir")
    if state["step"] > config.steps:
        raise CheckpointMismatch(f"steps = {config.steps} is below the checkpoint's step {state['step']}; resume "
                                 f"with steps of at least {state['step']} (the run has already trained that far)")
    differ = [k for k in saved if state.get(k) != saved[k]]
    if differ:
        raise CheckpointMismatch(f"the checkpoint {path} was trained with another tokenizer or other data than "
                                 f"this run's (its {', '.join(differ)} differ: another alphabet or other merges)")
    require_keys(state, ("rngs",) if rngs else (), path)
    model.load_state_dict(state["model"])
    # The checkpoint gives the optimizer's moments; this run's configuration its settings (betas, decay, Muon's
    # rate scale), so that a setting changed on resume takes effect, as the rates' do.
    settings = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
    optimizer.load_state_dict(state["optimizer"])
    for group, setting in zip(optimizer.param_groups, settings, strict=True):
        group.update(setting)
    run.generator.set_state(state["generator"])
    for name, rng in rngs.items():
        rng.set_state(state["rngs"][name])
    torch.set_rng_state(state["torch_rng"])
    cuda_rng = state.get("cuda_rng")  # absent from checkpoints written before it was kept, None without CUDA
    if cuda_rng is not None and torch.cuda.is_available() and len(cuda_rng) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_rng)
    result.log, result.train_seconds, result.steps_done = list(state["log"]), state["train_seconds"], state["step"]
