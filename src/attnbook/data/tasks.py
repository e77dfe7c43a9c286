"""Sequence-to-sequence tasks with held-out test sets, generated from a seed (chapter 16).

Tokens: 0 is padding, 1 begins a sequence, 2 ends it, 3 is "+", and the digits 0 to 9 are 4 to 13.
A source is a row of digit tokens (for addition, "a+b" with each number written least significant digit
first); a target is the answer's digits followed by the end token. Batches are right-padded with 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PAD, BOS, EOS, PLUS = 0, 1, 2, 3  #: padding, begin, end and "+"
DIGIT0 = 4  #: the token of the digit 0; digit ``d`` is ``DIGIT0 + d``
VOCAB_SIZE = DIGIT0 + 10  #: the four special tokens and the ten digits
TASKS = ("reverse", "sort", "add")  #: the tasks, by name


def encode_digits(digits: list[int]) -> list[int]:
    """The tokens of a list of digits: digit ``d`` is token ``DIGIT0 + d``."""
    return [DIGIT0 + d for d in digits]


def decode_tokens(tokens: list[int]) -> str:
    """Readable text for a row of tokens: digits, '+', and nothing for the special tokens."""
    out = []
    for t in tokens:
        if t == EOS:
            break
        if t >= DIGIT0:
            out.append(str(t - DIGIT0))
        elif t == PLUS:
            out.append("+")
    return "".join(out)


def _digits_lsb_first(x: int) -> list[int]:
    return [int(c) for c in reversed(str(x))]


def make_example(task: str, g: torch.Generator, min_len: int, max_len: int) -> tuple[list[int], list[int]]:
    """One ``(source, target)`` pair of token lists; the target ends with the end token."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}; got {task!r}")
    n = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
    if task == "add":
        a_len = int(torch.randint(1, n + 1, (1,), generator=g))
        b_len = int(torch.randint(1, n + 1, (1,), generator=g))
        a = int(torch.randint(10 ** (a_len - 1) if a_len > 1 else 0, 10**a_len, (1,), generator=g))
        b = int(torch.randint(10 ** (b_len - 1) if b_len > 1 else 0, 10**b_len, (1,), generator=g))
        # Numbers are written least significant digit first, in the sources and in the answer, so that
        # each answer digit depends on the digits already seen and one carry (chapter 16 discusses why).
        src = encode_digits(_digits_lsb_first(a)) + [PLUS] + encode_digits(_digits_lsb_first(b))
        return src, encode_digits(_digits_lsb_first(a + b)) + [EOS]
    digits = torch.randint(0, 10, (n,), generator=g).tolist()
    answer = digits[::-1] if task == "reverse" else sorted(digits)
    return encode_digits(digits), encode_digits(answer) + [EOS]


def pad(rows: list[list[int]]) -> torch.Tensor:
    """Right-pad token lists with 0 into a ``(B, T_max)`` tensor."""
    out = torch.full((len(rows), max(len(r) for r in rows)), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


@dataclass
class TaskData:
    """Training, validation and test pairs of one task, as padded tensors ``(N, S)`` and ``(N, T)``.

    Validation decides when to stop; the test set is only for the final figure.
    """

    task: str
    train_src: torch.Tensor
    train_tgt: torch.Tensor
    val_src: torch.Tensor
    val_tgt: torch.Tensor
    test_src: torch.Tensor
    test_tgt: torch.Tensor

    def batch(self, batch_size: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """A random training batch, trimmed of all-padding columns."""
        idx = torch.randint(0, len(self.train_src), (batch_size,), generator=g)
        src, tgt = self.train_src[idx], self.train_tgt[idx]
        return src[:, : int((src != PAD).sum(1).max())], tgt[:, : int((tgt != PAD).sum(1).max())]


def make_task(task: str, n_train: int = 20_000, n_test: int = 1_000, min_len: int = 2, max_len: int = 8,
              seed: int = 0) -> TaskData:
    """Generate a task's data from ``seed``: ``n_train`` training pairs, then ``n_test`` validation and
    ``n_test`` test pairs whose sources appear nowhere else."""
    g = torch.Generator().manual_seed(seed)
    train = [make_example(task, g, min_len, max_len) for _ in range(n_train)]
    seen = {tuple(s) for s, _ in train}
    held_out: list[tuple[list[int], list[int]]] = []
    attempts = 0
    while len(held_out) < 2 * n_test:
        src, tgt = make_example(task, g, min_len, max_len)
        attempts += 1
        if tuple(src) not in seen:
            held_out.append((src, tgt))
            seen.add(tuple(src))
        if attempts > 100 * n_test:
            raise ValueError(f"could not find {2 * n_test} held-out sources unseen in training; "
                             "use longer sequences or fewer examples")
    val, test = held_out[:n_test], held_out[n_test:]
    return TaskData(task, pad([s for s, _ in train]), pad([t for _, t in train]),
                    pad([s for s, _ in val]), pad([t for _, t in val]),
                    pad([s for s, _ in test]), pad([t for _, t in test]))
