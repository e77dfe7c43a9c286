"""Checkers for the coding exercises of chapter 23 (byte-pair encoding)."""

from __future__ import annotations

import random

from attnbook.data.bpe import merge_pair, pair_counts
from attnbook.exercises._harness import Case, Checker, Mistake


def _most_frequent(ids):
    counts = pair_counts(ids)
    return min(counts, key=lambda p: (-counts[p], p))  # highest count, then the smallest pair


def _first_seen(ids):
    counts = pair_counts(ids)
    return max(counts, key=counts.get)  # a dict keeps insertion order: ties go to the pair seen first


def _no_overlaps(ids):
    counts, i = {}, 0
    while i + 1 < len(ids):
        pair = (ids[i], ids[i + 1])
        counts[pair] = counts.get(pair, 0) + 1
        i += 2 if pair[0] == pair[1] else 1  # "aaa" counted as one ("a", "a")
    return min(counts, key=lambda p: (-counts[p], p))


def _pair_cases() -> list[Case]:
    g = random.Random(2323)
    cases = [Case("[3, 3, 3, 1, 2, 1, 2]", ([3, 3, 3, 1, 2, 1, 2],)),
             Case("[1, 2, 1, 2, 7, 7, 7, 7]", ([1, 2, 1, 2, 7, 7, 7, 7],))]
    for n, k in ((30, 3), (200, 6)):
        cases.append(Case(f"{n} random ids below {k}", ([g.randrange(k) for _ in range(n)],)))
    return cases


check_most_frequent_pair = Checker(
    name="most_frequent_pair",
    doc="Check ``fn(ids) -> (a, b)``: the adjacent pair with the highest count, ties to the smallest pair.",
    reference=_most_frequent,
    cases=_pair_cases(),
    mistakes=(
        Mistake(_first_seen, "among pairs with the same count, return the smallest pair (compare the tuples), "
                "not the one seen first: the rule must not depend on where a pair first occurs."),
        Mistake(_no_overlaps, "count every position: in [7, 7, 7] the pair (7, 7) occurs twice, at positions 0 "
                "and 1."),
    ),
)


def _first_only(ids, pair, new_id):
    ids = list(ids)
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return ids[:i] + [new_id] + ids[i + 2:]
    return ids


def _right_to_left(ids, pair, new_id):
    return merge_pair(list(ids)[::-1], tuple(pair)[::-1], new_id)[::-1]


check_apply_merge = Checker(
    name="apply_merge",
    doc="Check ``fn(ids, pair, new_id) -> list``: every occurrence of ``pair`` replaced, left to right.",
    reference=lambda ids, pair, new_id: merge_pair(list(ids), tuple(pair), new_id),
    cases=[Case("ids [1, 2, 3, 1, 2], pair (1, 2), new_id 9", ([1, 2, 3, 1, 2], (1, 2), 9)),
           Case("ids [5, 5, 5, 1], pair (5, 5), new_id 7", ([5, 5, 5, 1], (5, 5), 7)),
           Case("ids [4], pair (4, 4), new_id 8", ([4], (4, 4), 8)),
           Case("ids [2, 1, 2, 1, 2, 1, 1], pair (2, 1), new_id 300", ([2, 1, 2, 1, 2, 1, 1], (2, 1), 300))],
    mistakes=(
        Mistake(_first_only, "replace every occurrence of the pair, not only the first."),
        Mistake(_right_to_left, "scan from the left: in [5, 5, 5] the first two 5s merge, giving [7, 5]."),
    ),
)
