"""The recipe for training an encoder-decoder on a sequence task (chapter 16; Phuong and Hutter, algorithm 11).

Teacher forcing: the decoder reads the target shifted right (begin token first) and predicts every
next token at once; the loss ignores padding and uses label smoothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from attnbook.data.tasks import BOS, EOS, PAD, VOCAB_SIZE, TaskData, make_task
from attnbook.torch.transformer import EncoderDecoderTransformer, TransformerConfig
from attnbook.training.evaluate import exact_match
from attnbook.training.losses import sequence_loss
from attnbook.training.trainer import TrainConfig, TrainResult, train

# Sizes that reach 99% on every task on a laptop CPU (chapter 16 and `python -m attnbook.bench seq2seq`).
TASK_LENGTHS = {"reverse": (2, 8), "sort": (2, 8), "add": (1, 3)}


def shift_right(tgt: torch.Tensor, bos_id: int = BOS) -> torch.Tensor:
    """The decoder input for teacher forcing: ``bos_id``, then the target without its last token. ``(B, T)``."""
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], dim=1)


def default_model_config(d_model: int = 64) -> TransformerConfig:
    return TransformerConfig(src_vocab_size=VOCAB_SIZE, tgt_vocab_size=VOCAB_SIZE, d_model=d_model, n_heads=4,
                             n_encoder_layers=2, n_decoder_layers=2, max_len=32, pad_id=PAD)


@dataclass
class Seq2SeqRun:
    """A trained model with its data, training record and held-out accuracies."""

    model: EncoderDecoderTransformer
    data: TaskData
    result: TrainResult
    val_accuracy: float
    test_accuracy: float
    n_params: int = field(init=False)

    def __post_init__(self) -> None:
        self.n_params = sum(p.numel() for p in self.model.parameters())


def train_seq2seq(task: str, train_config: TrainConfig | None = None, model_config: TransformerConfig | None = None,
                  label_smoothing: float = 0.1, data: TaskData | None = None, n_val_eval: int | None = None
                  ) -> Seq2SeqRun:
    """Train an encoder-decoder on ``task`` ("reverse", "sort" or "add") and measure exact match.

    Evaluation during training (the stopping rule) uses the first ``n_val_eval`` validation pairs, all of
    them by default; the returned accuracies use the whole validation and test sets.
    """
    if data is None:
        lo, hi = TASK_LENGTHS[task]
        data = make_task(task, min_len=lo, max_len=hi, seed=0)
    config = train_config or TrainConfig(steps=3000, batch_size=64, lr=1e-3, warmup=300, eval_every=100,
                                         target=0.99, progress=False)
    torch.manual_seed(config.seed)
    model = EncoderDecoderTransformer(model_config or default_model_config())

    def get_batch(g: torch.Generator):
        src, tgt = data.batch(config.batch_size, g)
        return src, shift_right(tgt), tgt

    def loss_fn(m, batch):
        src, dec_in, tgt = batch
        return sequence_loss(m(src, dec_in), tgt, pad_id=PAD, label_smoothing=label_smoothing)

    def evaluate(m) -> float:
        return exact_match(m, data.val_src[:n_val_eval], data.val_tgt[:n_val_eval], BOS, EOS)

    result = train(model, get_batch, loss_fn, config, evaluate)
    val = exact_match(model, data.val_src, data.val_tgt, BOS, EOS)
    test = exact_match(model, data.test_src, data.test_tgt, BOS, EOS)
    return Seq2SeqRun(model, data, result, val, test)
