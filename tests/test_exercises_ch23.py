"""Chapter 23's checkers accept answers computed another way and reject the typical mistakes by name."""

from collections import Counter

from attnbook.exercises import check_apply_merge, check_most_frequent_pair


def by_counter(ids):
    counts = Counter(zip(ids, ids[1:], strict=False))
    best = max(counts.values())
    return min(p for p, c in counts.items() if c == best)


def by_string_replace(ids, pair, new_id):
    # Another way to merge: as text, each id a distinct character; str.replace goes left to right without
    # overlaps, as a merge must.
    text = "".join(chr(0x1000 + i) for i in ids)
    merged = text.replace(chr(0x1000 + pair[0]) + chr(0x1000 + pair[1]), chr(0x1000 + new_id))
    return [ord(c) - 0x1000 for c in merged]


def test_answers_computed_another_way_pass():
    assert check_most_frequent_pair(by_counter)
    assert check_apply_merge(by_string_replace)


def test_ties_broken_by_first_occurrence_are_named():
    def first_seen(ids):
        counts = Counter(zip(ids, ids[1:], strict=False))
        return counts.most_common(1)[0][0]  # Counter keeps insertion order among equal counts

    verdict = check_most_frequent_pair(first_seen)
    assert not verdict and "smallest pair" in verdict.message


def test_counting_without_overlaps_is_named():
    def skip_after_repeat(ids):
        counts, i = Counter(), 0
        while i + 1 < len(ids):
            counts[(ids[i], ids[i + 1])] += 1
            i += 2 if ids[i] == ids[i + 1] else 1
        best = max(counts.values())
        return min(p for p, c in counts.items() if c == best)

    verdict = check_most_frequent_pair(skip_after_repeat)
    assert not verdict and "every position" in verdict.message


def test_merging_only_the_first_occurrence_is_named():
    def first_only(ids, pair, new_id):
        text = "".join(chr(0x1000 + i) for i in ids)
        merged = text.replace(chr(0x1000 + pair[0]) + chr(0x1000 + pair[1]), chr(0x1000 + new_id), 1)
        return [ord(c) - 0x1000 for c in merged]

    verdict = check_apply_merge(first_only)
    assert not verdict and "every occurrence" in verdict.message


def test_merging_from_the_right_is_named():
    def from_right(ids, pair, new_id):
        text = "".join(chr(0x1000 + i) for i in reversed(ids))
        merged = text.replace(chr(0x1000 + pair[1]) + chr(0x1000 + pair[0]), chr(0x1000 + new_id))
        return [ord(c) - 0x1000 for c in reversed(merged)]

    verdict = check_apply_merge(from_right)
    assert not verdict and "from the left" in verdict.message
