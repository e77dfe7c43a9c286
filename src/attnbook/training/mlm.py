"""Masked language modelling: an encoder-only Transformer trained BERT-style on characters (chapter 24;
Phuong and Hutter, algorithm 12).

``mask_tokens`` corrupts a batch as BERT does (Devlin et al. 2019): each position is chosen with
probability ``rate`` (15%); a chosen position becomes the mask token with probability 0.8, a random
other token with probability 0.1, and stays as it is otherwise. ``masked_lm_loss`` is the cross-entropy
over the chosen positions only. ``train_mlm(config)`` trains chapter 15's ``EncoderOnlyTransformer`` on
Tiny Shakespeare with the recipe of chapter 17's GPT; ``make_eval_set``, ``encoder_logits``,
``gpt_logits``, ``score`` and ``baseline_guesses`` compare it with the GPT and with counting baselines
on the same masked positions of the same validation windows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import torch
import torch.nn.functional as F

from attnbook._fields import FieldError, count, real
from attnbook._validate import require_int
from attnbook.data.masked_text import MaskedCharTokenizer
from attnbook.data.shakespeare import load_tinyshakespeare
from attnbook.data.text import random_windows, split
from attnbook.torch.modes import eval_mode
from attnbook.torch.transformer import GPT, EncoderOnlyTransformer, EncoderShape
from attnbook.training.device import autocast, pick_device
from attnbook.training.lm import GPTRunConfig, LMTrainConfig
from attnbook.training.trainer import from_presets, train

_INTEGER = (torch.int64, torch.int32, torch.int16, torch.uint8)


def _check_probability(name: str, value: float, low_open: bool) -> None:
    ok = (0 < value <= 1) if low_open else (0 <= value <= 1)
    if not ok:
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValueError(f"{name} must lie in {interval}; got {value}")


def mask_tokens(ids: torch.Tensor, mask_id: int, vocab_size: int, rate: float = 0.15, mask_prob: float = 0.8,
                random_prob: float = 0.1,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's corruption of a batch of ids: returns ``(inputs, chosen)``, both shaped like ``ids``.

    Each position is chosen independently with probability ``rate``. A chosen position becomes
    ``mask_id`` with probability ``mask_prob``, a token drawn uniformly from the ``vocab_size - 1`` ids
    other than ``mask_id`` with probability ``random_prob`` (it may happen to be the original), and is
    left as it is otherwise. ``chosen`` (bool) marks the positions the loss is taken on; the targets are
    ``ids`` themselves. The draws come from ``generator``: the same generator state, the same result.
    Shapes: ``ids`` ``(B, T)`` (or any shape) of integer ids in ``[0, vocab_size)``, never ``mask_id``.
    """
    _check_corruption(ids, mask_id, vocab_size, rate, mask_prob, random_prob)
    # Three draws of the full shape, always in this order, so the result depends only on the generator.
    chosen = torch.rand(ids.shape, generator=generator) < rate  # (B, T): the positions M the loss is taken on
    kind = torch.rand(ids.shape, generator=generator)  # (B, T): below mask_prob masked, then random, then kept
    random_ids = torch.randint(vocab_size - 1, ids.shape, generator=generator)  # (B, T), in [0, V - 2]
    random_ids += (random_ids >= mask_id).long()  # skip mask_id: uniform over the other vocab_size - 1 ids
    inputs = ids.clone()
    to_mask = chosen & (kind < mask_prob)
    to_random = chosen & (kind >= mask_prob) & (kind < mask_prob + random_prob)
    inputs[to_mask] = mask_id
    inputs[to_random] = random_ids[to_random].to(ids.dtype)
    return inputs, chosen


def _check_corruption(ids: torch.Tensor, mask_id: int, vocab_size: int, rate: float, mask_prob: float,
                      random_prob: float) -> None:
    """``mask_tokens``'s refusals: ids that are not integer ids in ``[0, vocab_size)`` or already hold the mask,
    a ``mask_id`` outside the vocabulary, and probabilities that are not probabilities."""
    if ids.dtype not in _INTEGER:
        raise ValueError(f"ids must be integer token ids; got dtype {ids.dtype}")
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id must lie in [0, vocab_size - 1 = {vocab_size - 1}]; got {mask_id}")
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2 (a token and the mask); got {vocab_size}")
    _check_probability("rate", rate, low_open=True)
    _check_probability("mask_prob", mask_prob, low_open=False)
    _check_probability("random_prob", random_prob, low_open=False)
    if mask_prob + random_prob > 1:
        raise ValueError(f"mask_prob + random_prob must be at most 1; got {mask_prob} + {random_prob}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"ids must lie in [0, {vocab_size - 1}]; got values from {int(ids.min())} to {int(ids.max())}")
    if bool((ids == mask_id).any()):
        raise ValueError(f"ids already contain the mask id {mask_id}; pass the uncorrupted text")


def masked_lm_loss(logits: torch.Tensor, targets: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats) over the chosen positions only.

    ``logits`` ``(..., T, V)``, ``targets`` ``(..., T)`` ids, ``chosen`` ``(..., T)`` bool. Positions not
    chosen contribute nothing, whatever their logits; at least one position must be chosen. Refuses targets
    that are not integer ids (a dtype check only: no extra pass over the batch).
    """
    _check_masked_lm_loss(logits, targets, chosen)
    # logits[chosen] is (|M|, V) and targets[chosen] (|M|,): the other positions never enter the mean.
    return F.cross_entropy(logits[chosen].float(), targets[chosen])


def _check_masked_lm_loss(logits: torch.Tensor, targets: torch.Tensor, chosen: torch.Tensor) -> None:
    """``masked_lm_loss``'s refusals: shapes that do not line up, targets that are not ids, a ``chosen`` that is not
    boolean or chooses nothing."""
    if logits.dim() < 2 or tuple(logits.shape[:-1]) != tuple(targets.shape):
        raise ValueError(f"logits must have shape targets.shape + (V,); got logits {tuple(logits.shape)} "
                         f"and targets {tuple(targets.shape)}")
    if tuple(chosen.shape) != tuple(targets.shape):
        raise ValueError(f"chosen must have the shape of targets {tuple(targets.shape)}; got {tuple(chosen.shape)}")
    if targets.dtype not in _INTEGER:
        raise ValueError(f"targets must be integer token ids; got dtype {targets.dtype}")
    if chosen.dtype != torch.bool:
        raise ValueError(f"chosen must be a boolean tensor (True where the loss is taken); got dtype {chosen.dtype}")
    if not bool(chosen.any()):
        raise ValueError("no position is chosen: the loss over an empty set is undefined")


def _probability(default: float, help: str, low_open: bool = False) -> float:
    if low_open:
        return real(default, ok=lambda p: 0 < p <= 1, expected="in (0, 1]", help=help)
    return real(default, ok=lambda p: 0 <= p <= 1, expected="in [0, 1]", help=help)


@dataclass(kw_only=True)
class MLMRunConfig(EncoderShape, LMTrainConfig):
    """A masked-language-model run: the encoder's size (``EncoderShape``), the optimisation and the loop of
    chapter 17's GPT (``LMTrainConfig``, the same fields, defaults and checks), and the corruption. So
    ``gpt_config()`` gives the causal model to compare with, of the same size and trained the same way."""

    rate: float = _probability(0.15, "the share of positions chosen for the loss", low_open=True)
    mask_prob: float = _probability(0.8, "of the chosen positions, the share replaced by the mask token")
    random_prob: float = _probability(0.1, "of the chosen positions, the share replaced by a random character "
                                           "(the rest are kept)")
    eval_windows: int = count(256, help="validation windows in the fixed evaluation set")

    def check(self) -> None:
        super().check()
        if self.mask_prob + self.random_prob > 1:
            raise FieldError(f"mask_prob + random_prob must be at most 1; got {self.mask_prob} + {self.random_prob}",
                             "mask_prob", "random_prob")

    def resume_fields(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(EncoderShape)) + ("rate", "mask_prob", "random_prob") + \
            super().resume_fields()

    def build_encoder(self, vocab_size: int) -> EncoderOnlyTransformer:
        """Chapter 15's encoder-only model at this size, with GELU as the GPT has.
        ``vocab_size`` counts the mask token. No padding in these windows, so ``pad_id=-1``."""
        return EncoderOnlyTransformer(self.encoder_config(vocab_size))

    def gpt_config(self, **overrides: Any) -> GPTRunConfig:
        """The GPT of chapter 17 with the same size, optimisation, steps, batches, evaluation steps and seed."""
        shape = {f.name: getattr(self, f.name) for f in fields(EncoderShape) if f.name != "norm_first"}
        # Not the checkpoint folder, nor the target: a masked model's loss is not a next-token loss.
        training = {f.name: getattr(self, f.name) for f in fields(LMTrainConfig) if f.name not in ("out_dir", "target")}
        return GPTRunConfig(**(shape | training | {"activation": "gelu"} | overrides))


#: The recipes of the masked language model (``python -m attnbook.bench mlm --preset``), by name.
PRESETS: dict[str, MLMRunConfig] = {
    # A few seconds: for tests.
    "tiny": MLMRunConfig(n_layers=2, n_heads=2, d_model=32, block_size=16, steps=40, batch_size=8, warmup=5,
                         eval_every=20, eval_windows=16),
    # The small CPU recipe of chapter 17, for the encoder.
    "cpu-small": MLMRunConfig(),
    # What chapter 24 trains inside its minute (and its GPT with gpt_config()).
    # One wide layer on short windows: a hidden character's first clues are its neighbours, and one layer of
    # attention can fetch them; in 16 characters a neighbour is one key in 16, easier to find than in 64.
    "notebook": MLMRunConfig(n_layers=1, n_heads=4, d_model=128, block_size=16, steps=400, batch_size=64, lr=3e-3,
                             warmup=40, eval_every=50, eval_windows=64),
}


def preset(name: str, **overrides: Any) -> MLMRunConfig:
    """A named recipe from ``PRESETS``, with any field replaced."""
    return from_presets(PRESETS, name, **overrides)


@dataclass
class MaskedEvalSet:
    """Validation windows with chosen positions hidden: the same set for every model compared.

    ``windows`` ``(N, T)`` the original ids; ``inputs`` the windows with every chosen position replaced by
    the mask id; ``chosen`` ``(N, T)`` bool, never at position 0, so a causal model always has at least
    one character of left context inside the window.
    """

    windows: torch.Tensor
    inputs: torch.Tensor
    chosen: torch.Tensor

    @property
    def targets(self) -> torch.Tensor:
        """The hidden characters, ``(K,)``, in row-major order of the chosen positions."""
        return self.windows[self.chosen]


def make_eval_set(ids: torch.Tensor, block_size: int, mask_id: int, rate: float = 0.15,
                  n_windows: int | None = None, seed: int = 0) -> MaskedEvalSet:
    """Non-overlapping windows of ``ids`` from the start (``n_windows`` of them, or all), each position
    but the first chosen with probability ``rate`` and every chosen one replaced by ``mask_id``.

    Evaluation hides every chosen character (no random or kept ones): a kept character would let the
    encoder read the answer, which the causal model cannot. Refuses ids that are not integers, a
    ``block_size`` below 2 (position 0 is never chosen), a ``rate`` outside ``(0, 1]`` and a ``mask_id``
    that already occurs in ``ids``.
    """
    if ids.dim() != 1 or ids.dtype not in _INTEGER:
        raise ValueError(f"ids must be one sequence of integer token ids, shape (N,); got shape {tuple(ids.shape)} "
                         f"and dtype {ids.dtype}")
    require_int("block_size", block_size, 2)
    _check_probability("rate", rate, low_open=True)
    if bool((ids == mask_id).any()):
        raise ValueError(f"ids already contain the mask id {mask_id}; pass the uncorrupted text")
    available = len(ids) // block_size
    n = available if n_windows is None else n_windows
    if not 1 <= n <= available:
        raise ValueError(f"n_windows must lie in [1, {available}] for {len(ids)} ids and block_size {block_size}; "
                         f"got {n}")
    windows = ids[: n * block_size].reshape(n, block_size)
    generator = torch.Generator().manual_seed(seed)
    chosen = torch.rand(windows.shape, generator=generator) < rate
    chosen[:, 0] = False
    inputs = windows.masked_fill(chosen, mask_id)
    return MaskedEvalSet(windows, inputs, chosen)


@torch.no_grad()
def encoder_logits(model: torch.nn.Module, inputs: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """``(N, T)`` masked inputs to ``(N, T, V)`` float32 logits, in batches of ``batch_size`` (a positive
    integer), in eval mode."""
    require_int("batch_size", batch_size, 1)
    with eval_mode(model):
        out = torch.cat([model(inputs[i:i + batch_size]).float() for i in range(0, len(inputs), batch_size)])
    return out


@torch.no_grad()
def gpt_logits(model: GPT, windows: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """``(N, T)`` windows to ``(N, T, V)`` logits aligned with the windows: row ``t`` predicts
    ``windows[:, t]`` from ``windows[:, :t]`` only. Row 0 has no context and is NaN (on purpose: no
    prediction exists there, and ``score`` never reads it). ``batch_size`` is a positive integer."""
    require_int("batch_size", batch_size, 1)
    with eval_mode(model):
        body = torch.cat([model(windows[i:i + batch_size, :-1]).float() for i in range(0, len(windows), batch_size)])
    first = torch.full_like(body[:, :1], math.nan)
    return torch.cat([first, body], dim=1)


def score(logits: torch.Tensor, eval_set: MaskedEvalSet) -> dict[str, float]:
    """``loss`` (nats) and ``accuracy`` (argmax) of ``(N, T, V)`` logits on the chosen positions."""
    picked = logits[eval_set.chosen]  # (K, V)
    targets = eval_set.targets
    return {"loss": F.cross_entropy(picked, targets).item(),
            "accuracy": (picked.argmax(dim=-1) == targets).double().mean().item()}


def baseline_guesses(train_ids: torch.Tensor, eval_set: MaskedEvalSet, n_chars: int) -> dict[str, torch.Tensor]:
    """Guesses for the chosen positions, ``(K,)`` each, from counts over ``train_ids``:

    - ``"most frequent"``: the commonest character, everywhere;
    - ``"left neighbour"``: the commonest successor of the (true) character on the left;
    - ``"both neighbours"``: the commonest middle of (left, ?, right) in the training text, falling back to
      the left-neighbour guess at the last position of a window or for a pair never seen.

    Ties go to the smaller id.
    """
    V = n_chars
    unigram = torch.bincount(train_ids, minlength=V)
    bigram = torch.zeros(V * V, dtype=torch.long).index_add_(
        0, train_ids[:-1] * V + train_ids[1:], torch.ones(len(train_ids) - 1, dtype=torch.long)).view(V, V)
    trigram = torch.zeros(V * V * V, dtype=torch.long).index_add_(
        0, (train_ids[:-2] * V + train_ids[2:]) * V + train_ids[1:-1],
        torch.ones(len(train_ids) - 2, dtype=torch.long)).view(V, V, V)  # (left, right, middle)
    rows, cols = eval_set.chosen.nonzero(as_tuple=True)
    windows = eval_set.windows
    left = windows[rows, cols - 1]
    by_left = bigram.argmax(dim=1)[left]
    right = windows[rows, (cols + 1).clamp(max=windows.shape[1] - 1)]
    counts = trigram[left, right]  # (K, V)
    has_both = (cols + 1 < windows.shape[1]) & (counts.sum(dim=1) > 0)
    by_both = torch.where(has_both, counts.argmax(dim=1), by_left)
    return {"most frequent": torch.full_like(left, int(unigram.argmax())), "left neighbour": by_left,
            "both neighbours": by_both}


@dataclass
class MLMRun:
    """What ``train_mlm`` returns: the encoder (on the CPU, in eval mode), its tokenizer and the log.

    ``log`` has one dict per step: ``step``, ``loss``, ``lr``, and ``val_loss``, ``val_accuracy`` at
    evaluations (on ``eval_set``: masked positions of the first ``eval_windows`` validation windows).
    """

    model: EncoderOnlyTransformer
    tokenizer: MaskedCharTokenizer
    config: MLMRunConfig
    eval_set: MaskedEvalSet
    log: list[dict[str, float]] = field(default_factory=list)
    train_seconds: float = 0.0
    steps_done: int = 0
    reached_target_at: int | None = None  # the step whose evaluation first met config.target (a masked-LM loss)

    @property
    def final(self) -> dict[str, float]:
        """The last evaluation: ``val_loss`` and ``val_accuracy``."""
        last = next(e for e in reversed(self.log) if "val_loss" in e)
        return {"val_loss": last["val_loss"], "val_accuracy": last["val_accuracy"]}


def train_mlm(config: MLMRunConfig, text: str | None = None, resume: bool = False,
              stop_after: int | None = None) -> MLMRun:
    """Train an encoder-only Transformer by masked language modelling on ``text`` (Tiny Shakespeare), with the
    package's loop (``trainer.train``).

    The windows are drawn exactly as ``train_gpt`` draws them from the same seed, so with
    ``config.gpt_config()`` both models see the same text at every step; the masks come from a second
    generator, new ones for every batch (RoBERTa's dynamic masking; BERT masked its data once, up front).
    The corrupted inputs pass through the model and the loss is taken on the chosen positions. With
    ``config.out_dir`` the run keeps checkpoints; ``resume=True`` continues from one, and ``stop_after`` ends
    the run after that step, as an interruption would.
    """
    device = pick_device(config.device)
    text = load_tinyshakespeare() if text is None else text
    tokenizer = MaskedCharTokenizer.from_text(text)
    train_ids, val_ids = split(tokenizer.encode(text), 0.9)
    eval_set = make_eval_set(val_ids, config.block_size, tokenizer.mask_id, config.rate,
                             min(config.eval_windows, len(val_ids) // config.block_size))

    torch.manual_seed(config.seed)
    model = config.build_encoder(tokenizer.vocab_size).to(device)
    windows_gen = torch.Generator().manual_seed(config.seed)  # the same windows as train_gpt's
    mask_gen = torch.Generator().manual_seed(config.seed + 1)

    def get_batch(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, _ = random_windows(train_ids, config.block_size, config.batch_size, g)  # (B, T)
        inputs, chosen = mask_tokens(x, tokenizer.mask_id, tokenizer.vocab_size, config.rate, config.mask_prob,
                                     config.random_prob, mask_gen)
        return inputs.to(device), x.to(device), chosen.to(device)

    def loss_fn(m: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        inputs, x, chosen = batch
        with autocast(device, config.precision):
            logits = m(inputs)  # (B, T, V): V counts the mask too
        return masked_lm_loss(logits, x, chosen)

    def evaluate(m: torch.nn.Module) -> dict[str, float]:
        result = score(encoder_logits(m, eval_set.inputs.to(device)).cpu(), eval_set)
        return {"val_loss": result["loss"], "val_accuracy": result["accuracy"]}

    record = train(model, get_batch, loss_fn, config, evaluate, metric="val_loss", lower_is_better=True,
                   generator=windows_gen, resume=resume, stop_after=stop_after, saved={"chars": tokenizer.chars},
                   rngs={"masks": mask_gen})
    return MLMRun(model.cpu().eval(), tokenizer, config, eval_set, record.log, record.train_seconds,
                  record.steps_done, record.reached_target_at)
