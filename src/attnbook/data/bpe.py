"""Byte-level byte-pair encoding (chapter 23; Sennrich et al. 2016, GPT-2's byte-level variant).

The text is cut into chunks by a regular expression (words with their leading space, runs of digits,
runs of punctuation, runs of white space: GPT-2's split), each chunk becomes its UTF-8 bytes, and
training repeatedly merges the most frequent adjacent pair of tokens into a new token. Ids 0-255 are
the 256 bytes, so every string has an encoding. ``pair_counts`` and ``merge_pair`` are the two steps
the chapter builds by hand; ``BPETokenizer`` mirrors ``CharTokenizer``: ``from_text``, ``encode``,
``decode``, ``vocab_size``.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from itertools import pairwise
from numbers import Integral

import torch

from attnbook._validate import require_int

# GPT-2's split (Radford et al. 2019), written for the standard library's ``re``, which has no \p{L}:
# ``[^\W\d_]`` is a word character that is neither a decimal digit nor "_", i.e. a letter of any script
# (and also the few non-decimal numerals such as "²" or "½", which GPT-2's \p{L}/\p{N} would separate).
# Contractions first; then an optional space glued to a run of letters, digits or other symbols; then
# white space, leaving the last space of a run to start the next word.
SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""

# The same split as GPT-2 writes it, for libraries whose regular expressions know Unicode classes.
GPT2_SPLIT_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

Pair = tuple[int, int]


def pair_counts(ids: Sequence[int], counts: dict[Pair, int] | None = None, weight: int = 1) -> dict[Pair, int]:
    """How often each adjacent pair occurs in ``ids`` (every position, overlaps included: "aaa" has
    ("a", "a") twice), each occurrence counting ``weight``; added into ``counts`` when given."""
    counts = {} if counts is None else counts
    for pair in pairwise(ids):
        counts[pair] = counts.get(pair, 0) + weight
    return counts


def merge_pair(ids: Sequence[int], pair: Pair, new_id: int) -> list[int]:
    """``ids`` with every occurrence of ``pair`` replaced by ``new_id``, left to right, without overlaps
    ("aaa" with ("a", "a") becomes "aa", "a"). Refuses a ``new_id`` that is not an integer, 0 or more."""
    require_int("new_id", new_id, 0)
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def chunk_counts(text: str, pattern: str = SPLIT_PATTERN) -> Counter[bytes]:
    """The chunks of ``text`` under ``pattern``, as UTF-8 bytes, with how often each occurs."""
    _check_text(text)
    return Counter(c.encode("utf-8", "surrogatepass") for c in re.findall(pattern, text))


def _check_budget(vocab_size: int | None, n_merges: int | None) -> None:
    """Where BPE training stops: ``vocab_size`` tokens (at least the 256 bytes) or ``n_merges`` merges."""
    if vocab_size is not None and (isinstance(vocab_size, bool) or not isinstance(vocab_size, int)
                                   or vocab_size < 256):
        raise ValueError(f"vocab_size must be an int of at least 256 (the 256 bytes); got {vocab_size!r}")
    if n_merges is not None and (isinstance(n_merges, bool) or not isinstance(n_merges, int) or n_merges < 0):
        raise ValueError(f"n_merges must be an int of at least 0; got {n_merges!r}")


def learn_merges(chunks: dict[bytes, int], n_merges: int | None = None,
                 vocab_size: int | None = None) -> list[Pair]:
    """The merges BPE learns from chunk frequencies, in order.

    Each step merges the pair with the highest count; among equal counts, the pair whose ids come first
    ((left, right) compared as numbers; ids 0-255 are the bytes, then merged tokens in the order they
    were made). A merge whose bytes already form a token reuses that token's id, as Hugging Face's
    ``tokenizers`` does. Training stops after ``n_merges`` merges or at ``vocab_size`` distinct tokens,
    whichever is given, or earlier when no pair is left.

    Counts are updated incrementally: only chunks that contain the merged pair are recounted, and a heap
    holds candidate pairs, an entry being discarded or refreshed when its count is out of date.
    Refuses an ``n_merges`` below 0 and a ``vocab_size`` below 256 (the bytes), or either one not an integer.
    """
    _check_budget(vocab_size, n_merges)
    words = [list(w) for w in chunks]
    freq = list(chunks.values())
    counts: dict[Pair, int] = {}
    where: dict[Pair, set[int]] = defaultdict(set)  # chunks that may contain the pair
    for i, w in enumerate(words):
        pair_counts(w, counts, freq[i])
        for pair in pairwise(w):
            where[pair].add(i)
    heap = [(-c, pair) for pair, c in counts.items()]
    heapq.heapify(heap)
    vocab = [bytes([b]) for b in range(256)]
    index = {b: i for i, b in enumerate(vocab)}
    merges: list[Pair] = []
    while (n_merges is None or len(merges) < n_merges) and (vocab_size is None or len(vocab) < vocab_size):
        while heap and -heap[0][0] != counts.get(heap[0][1], 0):  # an out-of-date entry
            _, pair = heapq.heappop(heap)
            if counts.get(pair, 0) > 0:
                heapq.heappush(heap, (-counts[pair], pair))
        if not heap:
            break
        _, best = heapq.heappop(heap)
        merged = vocab[best[0]] + vocab[best[1]]
        if merged not in index:
            index[merged] = len(vocab)
            vocab.append(merged)
        new_id = index[merged]
        merges.append(best)
        delta: dict[Pair, int] = defaultdict(int)
        for i in where.pop(best):
            old = words[i]
            new = merge_pair(old, best, new_id)
            if len(new) == len(old):
                continue  # the pair left this chunk in an earlier merge
            for pair in pairwise(old):
                delta[pair] -= freq[i]
            for pair in pairwise(new):
                delta[pair] += freq[i]
                where[pair].add(i)
            words[i] = new
        for pair, d in delta.items():
            c = counts.get(pair, 0) + d
            if c > 0:
                counts[pair] = c
                if d > 0:
                    heapq.heappush(heap, (-c, pair))
            else:
                counts.pop(pair, None)
    return merges


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        raise ValueError(f"text must be a str; got {type(text).__name__}")


class BPETokenizer:
    """Byte-level BPE: ids 0-255 are the bytes, each later id a merge of two earlier ones.

    ``merges`` lists the merged pairs in the order they were learned (their rank); ``pattern`` is the
    regular expression that cuts text into chunks, which merges never cross.
    """

    def __init__(self, merges: Iterable[Pair] = (), pattern: str = SPLIT_PATTERN) -> None:
        self.pattern = pattern
        self._regex = re.compile(pattern)
        self.vocab: list[bytes] = [bytes([b]) for b in range(256)]  # id -> its bytes
        index = {b: i for i, b in enumerate(self.vocab)}
        self.merges: list[Pair] = []
        self.ranks: dict[Pair, tuple[int, int]] = {}  # pair -> (rank, id of the merged token)
        for a, b in merges:
            if not (0 <= a < len(self.vocab) and 0 <= b < len(self.vocab)):
                raise ValueError(f"merge {len(self.merges)} = ({a}, {b}) names an id that does not exist yet; "
                                 f"ids so far lie in [0, {len(self.vocab) - 1}]")
            if (a, b) in self.ranks:
                raise ValueError(f"merge {len(self.merges)} = ({a}, {b}) repeats an earlier merge")
            merged = self.vocab[a] + self.vocab[b]
            if merged not in index:
                index[merged] = len(self.vocab)
                self.vocab.append(merged)
            self.ranks[(a, b)] = (len(self.merges), index[merged])
            self.merges.append((a, b))
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_text(cls, text: str, vocab_size: int | None = None, n_merges: int | None = None,
                  pattern: str = SPLIT_PATTERN) -> BPETokenizer:
        """Learn merges from ``text`` until ``vocab_size`` tokens (at least 256) or after ``n_merges``
        merges; give exactly one of the two."""
        _check_text(text)
        if (vocab_size is None) == (n_merges is None):
            raise ValueError("give exactly one of vocab_size and n_merges")
        _check_budget(vocab_size, n_merges)
        return cls(learn_merges(chunk_counts(text, pattern), n_merges, vocab_size), pattern)

    train = from_text

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _encode_chunk(self, chunk: str) -> list[int]:
        """One chunk's ids: its UTF-8 bytes, merged; remembered for the next time the chunk occurs."""
        ids = self._cache.get(chunk)
        if ids is None:
            ids = self._merge(list(chunk.encode("utf-8", "surrogatepass")))
            if len(self._cache) < 100_000:
                self._cache[chunk] = ids
        return ids

    def _merge(self, ids: list[int]) -> list[int]:
        """Apply the merges to one chunk's ids by rank: while some adjacent pair is a merge, merge every
        occurrence of the one learned earliest."""
        while len(ids) > 1:
            # the adjacent pair of lowest rank; a pair that is no merge ranks after every merge
            pair = min(pairwise(ids), key=lambda p: self.ranks.get(p, (len(self.merges),))[0])
            if pair not in self.ranks:
                break  # no adjacent pair is a merge
            ids = merge_pair(ids, pair, self.ranks[pair][1])
        return ids

    def encode_list(self, text: str) -> list[int]:
        """``encode`` as a Python list."""
        _check_text(text)
        return [i for chunk in self._regex.findall(text) for i in self._encode_chunk(chunk)]

    def encode(self, text: str) -> torch.Tensor:
        """A string to a ``(T,)`` tensor of ids (int64); any string has one (its UTF-8 bytes at worst)."""
        return torch.tensor(self.encode_list(text), dtype=torch.long)

    def _ids(self, ids) -> list[int]:
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        # numpy integers are welcome; bools and floats (even 104.0) are not ids
        bad = [i for i in ids if isinstance(i, bool) or not (isinstance(i, Integral) and 0 <= i < self.vocab_size)]
        if bad:
            raise ValueError(f"ids must be ints in [0, {self.vocab_size - 1}]; got {bad[:5]}")
        return ids

    def decode_bytes(self, ids) -> bytes:
        """The bytes a sequence of ids spells."""
        return b"".join(self.vocab[i] for i in self._ids(ids))

    def decode(self, ids) -> str:
        """A sequence of ids (list or 1-D tensor) back to a string. Bytes that are not valid UTF-8 (a
        model's sample may cut a character in two) show as U+FFFD. Refuses ids that are not integers in
        ``[0, vocab_size)`` (``True`` and ``104.0`` included)."""
        data = self.decode_bytes(ids)
        try:
            return data.decode("utf-8", "surrogatepass")  # exact inverse of encode, lone surrogates included
        except UnicodeDecodeError:
            return data.decode("utf-8", "replace")

    def pieces(self, text: str) -> list[bytes]:
        """The tokens ``text`` is cut into, as bytes (to show a split)."""
        return [self.vocab[i] for i in self.encode_list(text)]

    def char_counts(self) -> torch.Tensor:
        """``(V,)``: how many characters each token starts (its bytes that are not UTF-8 continuation
        bytes); summed over a token sequence it gives the number of characters spelt."""
        return torch.tensor([sum((b & 0xC0) != 0x80 for b in t) for t in self.vocab], dtype=torch.long)

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)})"


def gpt2_byte_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte (what Hugging Face's ``ByteLevel`` shows): printable
    Latin-1 bytes stand for themselves, the other 68 (space, newline, ...) for the characters from
    U+0100 on, in byte order; so the space shows as "Ġ" and the newline as "Ċ"."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table
