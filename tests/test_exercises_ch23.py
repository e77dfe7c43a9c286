"""Chapter 23's checkers accept answers computed another way and reject the typical mistakes by name."""

from collections import Counter

from attnbook.data.bpe import BPETokenizer, learn_merges, merge_pair, pair_counts
from attnbook.exercises import check_encode_by_rank, check_learn_merges_incremental
from attnbook.exercises.ch23 import _rank_cases


def in_merge_order(word, merges):
    """Every merge applied once, in the order learned: the same tokens as merging by rank."""
    ids = list(word.encode("utf-8"))
    for k, (a, b) in enumerate(merges):
        text = "".join(chr(0x1000 + i) for i in ids)
        ids = [ord(c) - 0x1000 for c in text.replace(chr(0x1000 + a) + chr(0x1000 + b), chr(0x1000 + 256 + k))]
    return ids


def by_rank_one_occurrence_at_a_time(word, merges):
    """By rank, merging one occurrence at a time: the leftmost occurrence of the best pair, then again."""
    rank = {tuple(p): k for k, p in enumerate(merges)}
    ids = list(word.encode("utf-8"))
    while True:
        found = [(rank[(a, b)], i) for i, (a, b) in enumerate(zip(ids, ids[1:], strict=False)) if (a, b) in rank]
        if not found:
            return ids
        k, i = min(found)
        ids[i:i + 2] = [256 + k]


def recount_with_counter(chunks, n_merges, pick=lambda counts: min(counts, key=lambda p: (-counts[p], p))):
    """Training that recounts everything at each step with a Counter, merging through text."""
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
    assert check_encode_by_rank(in_merge_order)
    assert check_encode_by_rank(by_rank_one_occurrence_at_a_time)
    assert check_learn_merges_incremental(recount_with_counter)


def test_the_cases_include_a_word_where_leftmost_merging_differs():
    for case in _rank_cases():
        word, merges = case.args
        assert BPETokenizer(merges).merges == [tuple(p) for p in merges]
        assert all(BPETokenizer(merges).ranks[tuple(p)][1] == 256 + k for k, p in enumerate(merges))
    assert any("lowest" in case.label for case in _rank_cases())


def test_merging_the_first_pair_found_from_the_left_is_named():
    def leftmost(word, merges):
        rank = {tuple(p): k for k, p in enumerate(merges)}
        ids = list(word.encode("utf-8"))
        while True:
            i = next((i for i, p in enumerate(zip(ids, ids[1:], strict=False)) if p in rank), None)
            if i is None:
                return ids
            ids = merge_pair(ids, (ids[i], ids[i + 1]), 256 + rank[(ids[i], ids[i + 1])])

    verdict = check_encode_by_rank(leftmost)
    assert not verdict and "learned earliest among those present" in verdict.message


def test_the_latest_merge_first_is_named():
    def latest(word, merges):
        rank = {tuple(p): k for k, p in enumerate(merges)}
        ids = list(word.encode("utf-8"))
        while present := [p for p in zip(ids, ids[1:], strict=False) if p in rank]:
            pair = max(present, key=rank.get)
            ids = merge_pair(ids, pair, 256 + rank[pair])
        return ids

    verdict = check_encode_by_rank(latest)
    assert not verdict and "lowest rank" in verdict.message


def test_delegating_to_the_tokenizer_is_refused_by_name():
    verdict = check_encode_by_rank(lambda word, merges: BPETokenizer(merges).encode_list(word))
    assert not verdict and "BPETokenizer.encode_list" in verdict.message
    verdict = check_learn_merges_incremental(lambda chunks, n: learn_merges(chunks, n))
    assert not verdict and "learn_merges" in verdict.message

    def with_pair_counts(chunks, n_merges):
        counts = {}
        for chunk, n in chunks.items():
            pair_counts(list(chunk), counts, n)
        return recount_with_counter(chunks, n_merges)

    verdict = check_learn_merges_incremental(with_pair_counts)
    assert not verdict and "pair_counts" in verdict.message


def test_an_encoder_that_never_repeats_a_pass_is_refused():
    # A plausible slip: one pass over the word per rank, but merging only the first occurrence of each pair.
    def first_occurrence_only(word, merges):
        ids = list(word.encode("utf-8"))
        for k, (a, b) in enumerate(merges):
            for i in range(len(ids) - 1):
                if (ids[i], ids[i + 1]) == (a, b):
                    ids[i:i + 2] = [256 + k]
                    break
        return ids

    assert not check_encode_by_rank(first_occurrence_only)


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
