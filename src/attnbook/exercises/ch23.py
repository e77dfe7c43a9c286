"""Checkers for the coding exercises of chapter 23 (byte-pair encoding)."""

from __future__ import annotations

import copy
import functools
import heapq
import inspect
import random
import sys

from attnbook.data.bpe import BPETokenizer, chunk_counts, learn_merges, merge_pair, pair_counts
from attnbook.exercises._capstone import PartsChecker
from attnbook.exercises._harness import Case, Mistake, _resolve


class _CountedRanks:
    """The merges as the checker passes them: a mapping from each merged pair ``(left, right)`` to its rank,
    which counts its lookups (``ranks[pair]``, ``ranks.get(pair)``, ``pair in ranks``) and cannot be listed
    or copied, so that every rank an answer uses is a lookup counted."""

    def __init__(self, merges) -> None:
        self._ranks = {tuple(pair): k for k, pair in enumerate(merges)}
        self.lookups = 0

    def __getitem__(self, pair):
        self.lookups += 1
        return self._ranks[pair]

    def get(self, pair, default=None):
        self.lookups += 1
        return self._ranks.get(pair, default)

    def __contains__(self, pair) -> bool:
        self.lookups += 1
        return pair in self._ranks

    def __len__(self) -> int:
        return len(self._ranks)

    def _refuse(self, *args):
        raise TypeError("the checker's ranks answer lookups only (ranks[pair], ranks.get(pair), pair in ranks): "
                        "they cannot be listed or copied. Look a pair up when you need its rank")

    __iter__ = keys = values = items = copy = _refuse
    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CountedRanks) and other._ranks == self._ranks

    def __repr__(self) -> str:
        return (f"<the ranks of {len(self._ranks)} merges: look a pair up with ranks[pair], ranks.get(pair), "
                "pair in ranks>")


def _merges_of(ranks) -> list[tuple[int, int]]:
    plain = ranks._ranks if isinstance(ranks, _CountedRanks) else dict(ranks)
    return sorted(plain, key=plain.__getitem__)


def _encode_by_rank(word, ranks):
    return BPETokenizer(_merges_of(ranks))._encode_chunk(word)


def _present(ids, ranks):
    return [(i, (a, b)) for i, (a, b) in enumerate(zip(ids, ids[1:], strict=False)) if (a, b) in ranks]


def _merge_until_done(word, merges, pick, first=256):
    """Merge the pair ``pick`` chooses among the learned pairs present, until none is present."""
    ranks = {pair: k for k, pair in enumerate(_merges_of(merges))}
    ids = list(word.encode("utf-8"))
    while present := _present(ids, ranks):
        i, pair = pick(present, ranks)
        ids = merge_pair(ids, pair, first + ranks[pair])
    return ids


def _leftmost_first(word, ranks):
    return _merge_until_done(word, ranks, lambda present, ranks: present[0])


def _latest_first(word, ranks):
    return _merge_until_done(word, ranks, lambda present, ranks: max(present, key=lambda ip: ranks[ip[1]]))


def _smallest_ids_first(word, ranks):
    return _merge_until_done(word, ranks, lambda present, ranks: min(present, key=lambda ip: ip[1]))


def _ids_from_255(word, ranks):
    return _merge_until_done(word, ranks, lambda present, ranks: min(present, key=lambda ip: ranks[ip[1]]), 255)


def _longest_prefix(word, ranks):
    """Greedy longest match from the left, as WordPiece encodes: not BPE's rule."""
    vocab = BPETokenizer(_merges_of(ranks)).vocab
    index = {piece: i for i, piece in enumerate(vocab)}
    data, out = word.encode("utf-8"), []
    while data:
        n = max(n for n in range(1, len(data) + 1) if data[:n] in index)
        out.append(index[data[:n]])
        data = data[n:]
    return out


def _heap_encode(word, ranks, tie=1, check_stale=True):
    """A heap of the adjacent pairs' ranks over a linked list of tokens (and, with a flag changed, two of its
    typical mistakes: ties taken from the right, stale entries merged)."""
    ranks = {pair: k for k, pair in enumerate(_merges_of(ranks))}
    ids = list(word.encode("utf-8"))
    n = len(ids)
    prev, nxt, alive = list(range(-1, n - 1)), list(range(1, n + 1)), [True] * n
    heap = [(ranks[p], tie * i, p) for i, p in enumerate(zip(ids, ids[1:], strict=False)) if p in ranks]
    heapq.heapify(heap)
    while heap:
        rank, i, pair = heapq.heappop(heap)
        i *= tie
        j = nxt[i]
        if not alive[i] or j >= n or (check_stale and (ids[i], ids[j]) != pair):
            continue
        ids[i], alive[j], nxt[i] = 256 + rank, False, nxt[j]
        if nxt[j] < n:
            prev[nxt[j]] = i
        for left in (prev[i], i):
            if left >= 0 and nxt[left] < n and (p := (ids[left], ids[nxt[left]])) in ranks:
                heapq.heappush(heap, (ranks[p], tie * left, p))
    return [t for t, kept in zip(ids, alive, strict=True) if kept]


def _ties_from_the_right(word, ranks):
    return _heap_encode(word, ranks, tie=-1)


def _stale_entries_merged(word, ranks):
    return _heap_encode(word, ranks, check_stale=False)


def _fresh_ids_only(merges):
    """The longest prefix of ``merges`` in which merge k makes the new id 256 + k (no bytes made twice)."""
    tok = BPETokenizer(merges)
    n = next((k for k, pair in enumerate(merges) if tok.ranks[pair][1] != 256 + k), len(merges))
    return [tuple(pair) for pair in merges[:n]]


def _rank_cases() -> list[Case]:
    toy = learn_merges(chunk_counts("low low low low lower lower newest newest newest widest widest newer"), 8)
    g = random.Random(2323)
    # A corpus over few letters: many merges build on one another, so the order they are applied in matters.
    corpus = " ".join("".join(g.choice("aab") for _ in range(g.randint(2, 9))) for _ in range(400))
    merges = _fresh_ids_only(learn_merges(chunk_counts(corpus), 40))
    learned = f"{len(merges)} merges learned from words over 'a' and 'b'"
    repeats = _fresh_ids_only(learn_merges(chunk_counts("aaaaaaaa aaa aaaaa aaaaaaa"), 5))
    accents = _fresh_ids_only(learn_merges(chunk_counts("née née naïve naïve café cafés déjà Ölçü Ölçü"), 12))
    # A long chunk that needs many merges: its own merges, learned from it alone, replay its training.
    long_word = " " + "".join(g.choice("abcdefgh") for _ in range(799))
    own = _fresh_ids_only(learn_merges({long_word.encode(): 1}, 150))

    def case(label, word, merges_):
        return Case(label, (word, _CountedRanks(merges_)))

    # " abaaabab" first: there the leftmost merge is right and the longest match from the left is not.
    cases = [case(f"word ' abaaabab', {learned}", " abaaabab", merges)]
    cases += [case(f"word {w!r}, the chapter's 8 toy merges", w, toy) for w in (" lowest", " newer", " slow")]
    words = [" " + "".join(g.choice("ab") for _ in range(n)) for n in (5, 8, 12, 16, 16, 20, 24, 30)]
    cases += [case(f"word {w!r}, {learned}", w, merges) for w in words]
    cases += [case(f"word {w!r}, {len(repeats)} merges learned from runs of 'a' (ties between equal pairs)", w,
                   repeats) for w in ("aaa", "aaaa", "aaaaa", " aaaaaaa", "aaaaaaaaaaa")]
    cases.append(case("word 'b', no merge applies", "b", merges))
    cases.append(case("word ' hello', no merges at all", " hello", []))
    cases.append(case("word ' naïve' (bytes of 'ï' never merged), the toy merges", " naïve", toy))
    cases += [case(f"word {w!r}, {len(accents)} merges learned from words with accents", w, accents)
              for w in (" déjà", "Ölçü", " naïveté")]
    cases.append(case(f"a chunk of {len(long_word)} characters over 'abcdefgh' and the {len(own)} merges learned "
                      "from it alone (each of them applies)", long_word, own))
    return cases


_LOOKUPS_PER_BYTE = 8


def _lookups_grow_with_bytes(fn, case: Case, call) -> str | None:
    """Once the tokens agree: the lookups in ``ranks`` must stay within a few per byte of the chunk."""
    word, ranks = copy.deepcopy(case.args)
    ranks.lookups = 0
    tokens = call(word, ranks)
    n = len(word.encode("utf-8"))
    if ranks.lookups <= _LOOKUPS_PER_BYTE * n + _LOOKUPS_PER_BYTE:
        return None
    merged = n - len(tokens)
    return (f"the tokens are right, but the answer looked up {ranks.lookups:,} pairs in `ranks` for a chunk of {n} "
            f"bytes, which its merges shorten by {merged} tokens (input: {case.label}). Looking up every adjacent "
            f"pair again after each merge costs about bytes x merges lookups; after a merge only the pairs the new "
            f"token makes with its two neighbours are new. Keep the pairs' ranks in a heap over a linked list of the "
            f"tokens: at most {_LOOKUPS_PER_BYTE} lookups per byte are allowed.")


check_encode_with_heap = PartsChecker(
    name="encode_with_heap",
    doc="Check ``fn(word, ranks) -> list of ids``: the BPE encoding of the string ``word`` (one chunk), where "
        "``ranks`` maps each merged pair (left, right) to its rank k, merge k making the id 256 + k: exactly the "
        "tokens of merging, while some adjacent pair is a merge, every occurrence of the one of lowest rank; "
        f"with at most {_LOOKUPS_PER_BYTE} lookups in ``ranks`` per byte of ``word`` (a mapping that counts them "
        "and cannot be listed).",
    reference=_encode_by_rank,
    cases=_rank_cases(),
    mistakes=(
        Mistake(_ties_from_the_right, "among entries of equal rank, pop the leftmost first (order the heap by rank, "
                "then position): BPE merges every occurrence of a pair from left to right, so 'aaa' is 'aa' + 'a'."),
        Mistake(_stale_entries_merged, "an entry popped from the heap can be stale: since it was pushed, a merge of "
                "lower rank may have joined its left or right token to another one. Before merging, check that the "
                "two tokens at that place are still the entry's pair, and skip the entry if not."),
        Mistake(_leftmost_first, "merge the pair learned earliest among those present, wherever it sits, not the "
                "first learned pair found from the left: in ' lowest', 'we' (merge 2) comes before ' low' "
                "(merge 8), so it takes the 'w' first."),
        Mistake(_latest_first, "the merge learned earliest goes first (the lowest rank), not the latest: the later "
                "merges were learned on text the earlier ones had already merged."),
        Mistake(_smallest_ids_first, "choose among the pairs present by rank (their place in `merges`), not by "
                "their ids: the smallest ids only break ties between equal counts during training."),
        Mistake(_ids_from_255, "merge k makes the id 256 + k: ids 0 to 255 are the bytes, so the first merge is 256."),
        Mistake(_longest_prefix, "that is the longest match from the left (WordPiece's rule); BPE replays its "
                "merges by rank, which can cut a word elsewhere."),
    ),
    forbidden=(BPETokenizer._encode_chunk, BPETokenizer._merge, BPETokenizer.encode_list, BPETokenizer.encode,
               BPETokenizer.pieces),
    extra=_lookups_grow_with_bytes,
)


# --- training with counts kept up to date --------------------------------------------------------------

def _learn_merges(chunks, n_merges):
    return learn_merges(chunks, n_merges)


# The mistakes below count and merge with helpers of their own: the package's are forbidden to an answer.
def _count(ids, counts, weight):
    for pair in zip(ids, ids[1:], strict=False):
        counts[pair] = counts.get(pair, 0) + weight
    return counts


def _merge(ids, pair, new_id):
    text = "".join(map(chr, ids))  # each id one character: str.replace merges from the left, without overlaps
    return [ord(c) for c in text.replace(chr(pair[0]) + chr(pair[1]), chr(new_id))]


def _recount_each_step(chunks, n_merges, counter, pick):
    """Training that recounts every chunk at every step, with ``counter(ids, counts, weight)`` and ``pick``."""
    words = {tuple(chunk): n for chunk, n in chunks.items()}
    merges = []
    for k in range(n_merges):
        counts = {}
        for ids, n in words.items():
            counter(list(ids), counts, n)
        if not counts:
            break
        best = pick(counts)
        merges.append(best)
        words = {tuple(_merge(list(ids), best, 256 + k)): n for ids, n in words.items()}
    return merges


def _smallest(counts):
    return min(counts, key=lambda p: (-counts[p], p))


def _first_seen_ties(chunks, n_merges):
    return _recount_each_step(chunks, n_merges, _count, lambda counts: max(counts, key=counts.get))


def _each_chunk_once(chunks, n_merges):
    return _recount_each_step(chunks, n_merges, lambda ids, counts, n: _count(ids, counts, 1), _smallest)


def _no_overlaps(ids, counts, weight):
    i = 0
    while i + 1 < len(ids):
        counts[(ids[i], ids[i + 1])] = counts.get((ids[i], ids[i + 1]), 0) + weight
        i += 2 if ids[i] == ids[i + 1] else 1  # "aaa" counted as one ("a", "a")
    return counts


def _without_overlaps(chunks, n_merges):
    return _recount_each_step(chunks, n_merges, _no_overlaps, _smallest)


def _never_subtracted(chunks, n_merges):
    """Counts kept between steps, but a changed chunk's old pairs are never taken away: only the merged
    pair is dropped, and the new chunk's pairs are added."""
    words = [list(chunk) for chunk in chunks]
    freq = list(chunks.values())
    counts = {}
    for w, n in zip(words, freq, strict=True):
        _count(w, counts, n)
    merges = []
    for k in range(n_merges):
        if not counts:
            break
        best = _smallest(counts)
        merges.append(best)
        del counts[best]
        for i, w in enumerate(words):
            new = _merge(w, best, 256 + k)
            if len(new) < len(w):
                words[i] = new
                _count(new, counts, freq[i])
                counts.pop(best, None)
    return merges


def _only_the_merged_pair_removed(chunks, n_merges):
    """Counts kept between steps, and after each merge only the merged pair taken out of them: the pairs the merge
    destroyed stay counted, and the pairs it made are never added."""
    words = [list(chunk) for chunk in chunks]
    counts = {}
    for w, n in zip(words, chunks.values(), strict=True):
        _count(w, counts, n)
    merges = []
    for k in range(n_merges):
        if not counts:
            break
        best = _smallest(counts)
        merges.append(best)
        del counts[best]
        words = [_merge(w, best, 256 + k) for w in words]
    return merges


def _training_cases() -> list[Case]:
    toy = chunk_counts("low low low low lower lower newest newest newest widest widest newer")
    cases = [Case("the chapter's toy chunks, 8 merges", (toy, 8)),
             Case("{b'xyz': 2, b'abc': 2}, 3 merges (every pair ties)", ({b"xyz": 2, b"abc": 2}, 3)),
             Case("{b'aaaa': 2, b'abab': 3, b'ba': 1}, 4 merges", ({b"aaaa": 2, b"abab": 3, b"ba": 1}, 4)),
             Case("{b'hello': 1, b'yellow': 1, b' mellow': 5}, 6 merges",
                  ({b"hello": 1, b"yellow": 1, b" mellow": 5}, 6)),
             Case("{b'ab': 4}, 3 merges (one pair to learn: training stops)", ({b"ab": 4}, 3)),
             Case("{b'abc': 1}, 0 merges", ({b"abc": 1}, 0))]
    g = random.Random(23)
    for n_chunks, n_merges in ((30, 15), (200, 40)):
        chunks = {}
        for _ in range(n_chunks):
            chunk = bytes(g.choice(b" abcab") for _ in range(g.randint(1, 10)))
            chunks[chunk] = chunks.get(chunk, 0) + g.randint(1, 5)
        learned = learn_merges(chunks, n_merges)
        fresh = _fresh_ids_only(learned)  # keep the cases where merge k makes id 256 + k
        cases.append(Case(f"{len(chunks)} random chunks over ' abc', {len(fresh)} merges", (chunks, len(fresh))))
    return cases


# --- incrementality: the lines the answer runs on a corpus of many chunks ------------------------------------
# Recounting every chunk at every step runs about chunks x merges x (pairs per chunk) lines of the answer's own
# code; keeping the counts up to date runs the chunks' pairs once, then per merge the changed chunks and a choice
# among the pairs counted. On the case below the chapter's solution runs about 0.6 million lines, a recount
# written as naive_bpe with helpers of its own about 9 million, and one that counts with collections.Counter about
# 3.5 million: the budget lies between.
_LINES_BUDGET = 1_500_000


class _OverBudget(BaseException):
    """Raised inside the answer once it has run more lines than the budget: the rest need not run."""


@functools.cache
def _many_chunks() -> tuple[dict[bytes, int], int]:
    g = random.Random(2324)
    chunks: dict[bytes, int] = {}
    while len(chunks) < 3000:
        word = " " + "".join(g.choice("abcdefghijklmnopqrstuvwx") for _ in range(g.randint(2, 8)))
        chunks[word.encode()] = g.randint(1, 5)
    return chunks, 100


def _lines_run(fn, call, args) -> int | None:
    """The lines of the answer's own module (its notebook, its file) that ``call(*args)`` runs, or None past the
    budget (the answer is stopped there)."""
    own = getattr(inspect.unwrap(fn), "__globals__", None)
    count = [0]

    def local(frame, event, arg):
        if event == "line":
            count[0] += 1
            if count[0] > _LINES_BUDGET:
                raise _OverBudget
        return local

    def anywhere(frame, event, arg):
        return local if frame.f_globals is own else None

    previous = sys.gettrace()
    sys.settrace(anywhere)
    try:
        call(*args)
    except _OverBudget:
        return None
    finally:
        sys.settrace(previous)
    return count[0]


def _recounts(fn, case: Case, call) -> str | None:
    """After the last case: the answer must not recount every chunk at every merge (``_LINES_BUDGET``)."""
    if case is not _TRAINING_CASES[-1]:
        return None
    checker = check_learn_merges_incremental
    if checker.watch(_resolve(checker.forbidden), fn, ()).trusted:
        return None  # a typical mistake, or an answer built from the reference in the tests
    chunks, n_merges = _many_chunks()
    if _lines_run(fn, call, (dict(chunks), n_merges)) is not None:
        return None
    return (f"the merges are right, but on {len(chunks):,} chunks and {n_merges} merges your code ran more than "
            f"{_LINES_BUDGET:,} lines, the work of recounting every chunk at every merge. Keep the counts between "
            "steps: remember which chunks contain each pair, and after a merge visit only those, taking each one's old "
            "pairs out of the counts and its new pairs in.")


_TRAINING_CASES = _training_cases()

check_learn_merges_incremental = PartsChecker(
    name="learn_merges_incremental",
    doc="Check ``fn(chunks, n_merges) -> list of (left, right)``: the merges BPE learns from ``chunks`` (a dict "
        "from each chunk's bytes to its count) in order, at most ``n_merges``: each step merges the pair with the "
        "highest count (every position counted, weighted by the chunk's count), ties to the smallest (left, "
        "right), merge k making the id 256 + k; it stops early when no pair is left.",
    reference=_learn_merges,
    cases=_TRAINING_CASES,
    mistakes=(
        Mistake(_first_seen_ties, "among pairs with the same count, take the smallest (left, right), not the one "
                "your dictionary met first. Taking the first met is a convention too (minbpe's max over a dict), but "
                "then the merges depend on the order of the chunks, and learn_merges's do not."),
        Mistake(_each_chunk_once, "weight each chunk's pairs by its count: a chunk that occurs 5 times in the text "
                "adds 5 to each of its pairs."),
        Mistake(_without_overlaps, "count every position: in 'aaaa' the pair ('a', 'a') occurs 3 times, although "
                "one merge can use only two of them."),
        Mistake(_only_the_merged_pair_removed, "after a merge, the counts change beyond the merged pair: the merge "
                "destroys the pairs that overlapped it and makes new ones with the new token. For each chunk that "
                "changed, take all its old pairs out of the counts and put all its new pairs in."),
        Mistake(_never_subtracted, "when a chunk changes, take its old pairs out of the counts before adding its "
                "new ones: a merge also destroys the pairs that overlapped it (merging 'lo' in 'low' removes 'ow')."),
    ),
    forbidden=(learn_merges, pair_counts, merge_pair, BPETokenizer.from_text),
    extra=_recounts,
)
