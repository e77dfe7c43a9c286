"""Chapter 23's checkers accept answers computed another way and reject the typical mistakes by name."""

import heapq
from collections import Counter

from attnbook.data.bpe import BPETokenizer, learn_merges, pair_counts
from attnbook.exercises import check_encode_with_heap, check_learn_merges_incremental
from attnbook.exercises.ch23 import (
    _LOOKUPS_PER_BYTE,
    _heap_encode,
    _latest_first,
    _leftmost_first,
    _merges_of,
    _rank_cases,
    _stale_entries_merged,
    _ties_from_the_right,
)


def heap_with_versions(word, ranks):
    """A heap answer written another way: tokens in a dict keyed by position, stale entries found by a version
    number per position, and `in` before `[]` (two lookups per pair)."""
    tokens = dict(enumerate(word.encode("utf-8")))
    nxt = {i: i + 1 for i in tokens}
    prv = {i: i - 1 for i in tokens}
    version = dict.fromkeys(tokens, 0)
    heap = []

    def push(i):
        j = nxt.get(i)
        if i in tokens and j in tokens and (pair := (tokens[i], tokens[j])) in ranks:
            heapq.heappush(heap, (ranks[pair], i, version[i], version[j]))

    for i in list(tokens):
        push(i)
    while heap:
        rank, i, vi, vj = heapq.heappop(heap)
        j = nxt.get(i)
        if i not in tokens or j not in tokens or version[i] != vi or version[j] != vj:
            continue
        tokens[i] = 256 + rank
        version[i] += 1
        del tokens[j]
        nxt[i] = nxt[j]
        if nxt[i] in tokens:
            prv[nxt[i]] = i
        push(prv[i])
        push(i)
    return [tokens[i] for i in sorted(tokens)]


def rule_as_written(word, ranks):
    """The chapter's rule read literally: every adjacent pair looked up again after each merge."""
    ids = list(word.encode("utf-8"))
    while len(ids) > 1:
        pair = min(zip(ids, ids[1:], strict=False), key=lambda p: ranks.get(p, len(ranks)))
        if pair not in ranks:
            break
        new, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                new.append(256 + ranks[pair])
                i += 2
            else:
                new.append(ids[i])
                i += 1
        ids = new
    return ids


def recount_with_counter(chunks, n_merges, pick=lambda counts: min(counts, key=lambda p: (-counts[p], p))):
    """Training that recounts everything at each step with a Counter, merging through text: the right merges, not
    kept up to date."""
    words = {tuple(c): n for c, n in chunks.items()}
    merges = []
    for k in range(n_merges):
        counts = Counter()
        for ids, n in words.items():
            for pair in zip(ids, ids[1:], strict=False):
                counts[pair] += n
        if not counts:
            break
        best = pick(counts)
        merges.append(best)
        merged = {}
        for ids, n in words.items():
            text = "".join(chr(0x1000 + i) for i in ids)
            text = text.replace(chr(0x1000 + best[0]) + chr(0x1000 + best[1]), chr(0x1000 + 256 + k))
            merged[tuple(ord(c) - 0x1000 for c in text)] = n
        words = merged
    return merges


def test_answers_computed_another_way_pass():
    assert check_encode_with_heap(heap_with_versions)
    verdict = check_encode_with_heap(_heap_encode)
    assert not verdict and "attnbook.exercises.ch23._heap_encode" in verdict.message
    verdict = check_learn_merges_incremental(recount_with_counter)  # right merges, but counted again every step
    assert not verdict and "recounting every chunk at every merge" in verdict.message, verdict.message


def test_the_cases_cover_ties_no_merges_accents_and_a_long_chunk():
    cases = _rank_cases()
    for case in cases:
        word, ranks = case.args
        merges = _merges_of(ranks)
        assert all(BPETokenizer(merges).ranks[p][1] == 256 + k for k, p in enumerate(merges))
    words = [case.args[0] for case in cases]
    assert " lowest" in words and "aaaa" in words and " naïve" in words
    assert any(len(case.args[1]) == 0 for case in cases)
    long_word, ranks = max((case.args for case in cases), key=lambda args: len(args[0]))
    # the rule as written needs many times more lookups than the limit there; the heap stays far below it
    rule_as_written(long_word, ranks)
    assert ranks.lookups > 5 * _LOOKUPS_PER_BYTE * len(long_word)
    ranks.lookups = 0
    heap_with_versions(long_word, ranks)
    assert ranks.lookups <= 2 * 3 * len(long_word)


def test_the_rule_as_written_is_refused_for_its_lookups():
    verdict = check_encode_with_heap(rule_as_written)
    assert not verdict and "the tokens are right" in verdict.message and "looked up" in verdict.message
    assert "heap" in verdict.message


def test_ranks_cannot_be_copied_to_escape_the_count():
    def copied(word, ranks):
        return rule_as_written(word, dict(ranks))

    verdict = check_encode_with_heap(copied)
    assert not verdict and "cannot be listed or copied" in verdict.message


def test_the_typical_mistakes_are_named():
    for mistake, words in ((_ties_from_the_right, "left to right"), (_stale_entries_merged, "stale"),
                           (_leftmost_first, "learned earliest among those present"),
                           (_latest_first, "lowest rank")):
        verdict = check_encode_with_heap(mistake)
        assert not verdict and words in verdict.message, mistake.__name__


def test_delegating_to_the_tokenizer_is_refused_by_name():
    verdict = check_encode_with_heap(lambda word, ranks: BPETokenizer(_merges_of(ranks)).encode_list(word))
    assert not verdict and "the book's own package" in verdict.message
    verdict = check_learn_merges_incremental(lambda chunks, n: learn_merges(chunks, n))
    assert not verdict and "learn_merges" in verdict.message

    def with_pair_counts(chunks, n_merges):
        counts = {}
        for chunk, n in chunks.items():
            pair_counts(list(chunk), counts, n)
        return recount_with_counter(chunks, n_merges)

    verdict = check_learn_merges_incremental(with_pair_counts)
    assert not verdict and "pair_counts" in verdict.message


def test_a_heap_that_forgets_the_left_neighbour_is_refused():
    # A plausible slip: after a merge, push only the pair the new token makes with its right neighbour.
    def right_only(word, ranks):
        ids = list(word.encode("utf-8"))
        n = len(ids)
        after, live = list(range(1, n + 1)), [True] * n
        heap = [(ranks[p], i, p) for i, p in enumerate(zip(ids, ids[1:], strict=False)) if p in ranks]
        heapq.heapify(heap)
        while heap:
            rank, i, pair = heapq.heappop(heap)
            j = after[i]
            if not live[i] or j == n or (ids[i], ids[j]) != pair:
                continue
            ids[i], live[j], after[i] = 256 + rank, False, after[j]
            if after[i] < n and (p := (ids[i], ids[after[i]])) in ranks:
                heapq.heappush(heap, (ranks[p], i, p))
        return [t for t, alive in zip(ids, live, strict=True) if alive]

    verdict = check_encode_with_heap(right_only)
    assert not verdict and "expected shape" in verdict.message  # a merge missed leaves a token too many
    # the message shows the ids themselves: where the two lists part, and both lists when they are short
    case = next(c for c in _rank_cases() if right_only(*c.args) != _heap_encode(*c.args))
    expected, got = _heap_encode(*case.args), right_only(*case.args)
    i = next((k for k, (e, g) in enumerate(zip(expected, got, strict=False)) if e != g), min(len(expected), len(got)))
    assert f"first difference at index {i}: expected {expected[i]}, got {got[i]}" in verdict.message, verdict.message
    if len(got) <= 12:
        assert f"expected {expected}, got {got}" in verdict.message, verdict.message


def test_a_list_one_id_short_is_shown_by_its_values():
    def drops_the_last(word, ranks):
        return heap_with_versions(word, ranks)[:-1]

    verdict = check_encode_with_heap(drops_the_last)
    first = _rank_cases()[0]
    expected = _heap_encode(*first.args)
    n = len(expected) - 1
    assert not verdict and f"the first {n} entries agree, and the expected list goes on with {expected[n]}" in (
        verdict.message), verdict.message


def test_ties_broken_by_first_occurrence_are_named():
    def first_seen(chunks, n_merges):
        return recount_with_counter(chunks, n_merges, lambda counts: counts.most_common(1)[0][0])

    verdict = check_learn_merges_incremental(first_seen)
    assert not verdict and "smallest (left, right)" in verdict.message


def test_unweighted_counts_are_named():
    verdict = check_learn_merges_incremental(lambda chunks, n: recount_with_counter(dict.fromkeys(chunks, 1), n))
    assert not verdict and "weight each chunk" in verdict.message


def test_stale_counts_are_named():
    def only_add(chunks, n_merges):
        words = [list(c) for c in chunks]
        freq = list(chunks.values())
        counts = Counter()
        for w, n in zip(words, freq, strict=True):
            for pair in zip(w, w[1:], strict=False):
                counts[pair] += n
        merges = []
        for k in range(n_merges):
            if not counts:
                break
            top = max(counts.values())
            best = min(p for p, c in counts.items() if c == top)
            merges.append(best)
            del counts[best]
            for i, w in enumerate(words):
                text = "".join(chr(0x1000 + x) for x in w)
                new = [ord(c) - 0x1000 for c in text.replace(chr(0x1000 + best[0]) + chr(0x1000 + best[1]),
                                                             chr(0x1000 + 256 + k))]
                if len(new) < len(w):
                    words[i] = new
                    for pair in zip(new, new[1:], strict=False):
                        counts[pair] += freq[i]
                    counts.pop(best, None)
        return merges

    verdict = check_learn_merges_incremental(only_add)
    assert not verdict and "old pairs out" in verdict.message
