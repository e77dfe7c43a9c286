"""Chapter 11's checkers: answers computed another way pass; delegating answers and plausible wrong ones fail,
and the capstone names the part that disagrees."""

import numpy as np

import attnbook.numpy as an
from attnbook.exercises import check_my_mha, check_offset_between, check_position_from_encoding


def position_by_complex_ratios(row, d_model):
    # each pair as a complex number; from slow to fast, the next pair's turn relative to the estimate so far
    omegas = 10000.0 ** (-np.arange(d_model // 2) / (d_model // 2))
    z = row[1::2] + 1j * row[0::2]
    pos = np.angle(z[-1]) % (2 * np.pi) / omegas[-1]
    for zi, w in zip(z[-2::-1], omegas[-2::-1], strict=True):
        pos += np.angle(zi * np.exp(-1j * pos * w)) / w  # the small correction, in (-pi, pi] / w
    return pos


def test_position_from_encoding_another_way_passes_and_delegating_is_refused():
    assert check_position_from_encoding(position_by_complex_ratios)

    def through_the_table(row, d_model):  # a search over whole positions: refused for the table it calls
        table = np.round(an.sinusoidal_encoding(50000, d_model), 4)
        return float(np.argmin(np.abs(table - row).sum(axis=1)))

    def through_the_map(row, d_model):
        pos = position_by_complex_ratios(row, d_model)
        return pos + 0.0 * an.relative_position_map(pos, d_model).sum()

    for answer, name in ((through_the_table, "sinusoidal_encoding"), (through_the_map, "relative_position_map")):
        verdict = check_position_from_encoding(answer)
        assert not verdict and name in verdict.message


def test_position_from_encoding_plausible_wrong_answers_fail():
    def two_slowest_pairs(row, d_model):  # one refinement step only
        omegas = 10000.0 ** (-np.arange(0, d_model, 2) / d_model)
        angles = np.mod(np.arctan2(row[0::2], row[1::2]), 2 * np.pi)
        rough = angles[-1] / omegas[-1]
        turns = np.round((rough * omegas[-2] - angles[-2]) / (2 * np.pi))
        return float((angles[-2] + 2 * np.pi * turns) / omegas[-2])

    def counted_from_one(row, d_model):  # the articles that number positions from 1
        return position_by_complex_ratios(row, d_model) + 1.0

    assert not check_position_from_encoding(two_slowest_pairs)
    assert not check_position_from_encoding(counted_from_one)


def offset_by_every_pair(u, v, d_model):
    # every pair's turn as the angle of a ratio of complex numbers; the slowest pair's gives k
    omegas = an.sinusoidal_frequencies(d_model)
    turns = np.angle((v[0::2] * 1j + v[1::2]) / (u[0::2] * 1j + u[1::2]))
    return int(np.round(turns[-1] / omegas[-1]))


def test_offset_between_another_way_passes_and_delegating_is_refused():
    assert check_offset_between(offset_by_every_pair)

    def delegating(u, v, d_model):
        return min(range(-3000, 3001), key=lambda k: np.abs(u @ an.relative_position_map(k, d_model) - v).max())

    verdict = check_offset_between(delegating)
    assert not verdict and "relative_position_map" in verdict.message


def test_offset_between_from_the_fastest_pair_without_its_frequency_fails():
    def first_pair_unwrapped(u, v, d_model):
        return int(np.round(np.arctan2(v[0], v[1]) - np.arctan2(u[0], u[1])))

    assert not check_offset_between(first_pair_unwrapped)


# --- the capstone ---------------------------------------------------------------------------------------


def my_softmax(x):
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def my_attention(q, k, v, mask):
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return my_softmax(scores) @ v


def my_split_heads(x, n_heads):
    return np.stack(np.split(x, n_heads, axis=-1), axis=1)  # (B, h, T, d_head), head i from its columns


def my_merge_heads(x):
    return np.concatenate(list(np.moveaxis(x, 1, 0)), axis=-1)


def my_mha(query, key, value, weights, n_heads, keep=None, causal=False, out_bias=True):
    projected = [x @ w.T + b for x, w, b in zip((query, key, value), np.split(weights["in_proj_weight"], 3),
                                                 np.split(weights["in_proj_bias"], 3), strict=True)]
    q, k, v = (my_split_heads(x, n_heads) for x in projected)
    B, T_q, T_k = query.shape[0], query.shape[1], key.shape[1]
    mask = np.ones((B, 1, T_q, T_k), dtype=bool)
    if keep is not None:
        mask &= keep[:, None, None, :]
    if causal:
        mask &= np.arange(T_k)[None, :] <= np.arange(T_q)[:, None]
    out = my_merge_heads(my_attention(q, k, v, mask)) @ weights["out_proj.weight"].T
    return out + weights["out_proj.bias"] if out_bias else out


PARTS = {"my_softmax": my_softmax, "my_attention": my_attention, "my_split_heads": my_split_heads,
         "my_merge_heads": my_merge_heads, "my_mha": my_mha}


def test_capstone_another_way_passes_alone_and_with_its_parts():
    assert check_my_mha(my_mha), check_my_mha(my_mha).message
    assert check_my_mha(PARTS), check_my_mha(PARTS).message


def test_capstone_delegating_is_refused_by_name():
    def delegating(query, key, value, weights, n_heads, keep=None, causal=False):
        split = [an.split_heads(x, n_heads) for x in (query, key, value)]
        my_attention(*split, None)
        return my_mha(query, key, value, weights, n_heads, keep, causal)

    verdict = check_my_mha(delegating)
    assert not verdict and "split_heads" in verdict.message
    verdict = check_my_mha({**PARTS, "my_softmax": lambda x: an.softmax(x)})
    assert not verdict and "`my_softmax`" in verdict.message and "attnbook.numpy.softmax.softmax" in verdict.message


def test_capstone_names_the_part_that_disagrees():
    def merge_by_reshape(x):
        B, h, T, d = x.shape
        return x.reshape(B, T, h * d)

    verdict = check_my_mha({**PARTS, "my_merge_heads": merge_by_reshape})
    assert not verdict and "the part `my_merge_heads` disagrees" in verdict.message

    verdict = check_my_mha({**PARTS, "my_mha": lambda *a: my_mha(*a, out_bias=False)})
    assert not verdict and "Your parts each agree" in verdict.message


def test_capstone_parts_not_attempted_read_as_not_attempted():
    def stub(x):
        raise NotImplementedError

    verdict = check_my_mha({**PARTS, "my_softmax": stub})
    assert not verdict and not verdict.attempted and "not attempted yet" in verdict.message


# --- positions in a left-padded batch -------------------------------------------------------------------------

from attnbook.exercises.ch11 import check_left_padded_positions  # noqa: E402


def positions_by_formula(lengths, T, d_model):
    # the encodings written out from the formula, place by place, without the chapter's table
    out = np.zeros((len(lengths), T, d_model))
    for b, n in enumerate(lengths):
        for place in range(T - n, T):
            pos = place - (T - n)
            for i in range(d_model // 2):
                angle = pos * 10000.0 ** (-2 * i / d_model)
                out[b, place, 2 * i], out[b, place, 2 * i + 1] = np.sin(angle), np.cos(angle)
    return out


def test_left_padded_positions_from_the_formula_passes_and_match_each_sequence_alone():
    assert check_left_padded_positions(positions_by_formula)
    batch = positions_by_formula(np.array([2, 5]), 5, 8)
    np.testing.assert_allclose(batch[0, 3:], an.sinusoidal_encoding(2, 8), atol=1e-12)  # as it would be alone
    assert not batch[0, :3].any()


def test_left_padded_positions_with_a_negative_slice_fail_on_an_empty_sequence():
    # out[b, -n:] is the whole row when n = 0: right for every sequence with a token, an error for an empty one
    def negative_slice(lengths, T, d_model):
        table = an.sinusoidal_encoding(T, d_model)
        out = np.zeros((len(lengths), T, d_model))
        for b, n in enumerate(lengths):
            out[b, -n:] = table[:n]
        return out

    verdict = check_left_padded_positions(negative_slice)
    assert not verdict and "one empty sequence" in verdict.message, verdict.message


def test_left_padded_positions_counted_along_the_row_fail_with_their_hint():
    def along_the_row(lengths, T, d_model):  # the chapter's pe[:T] for every row, the padding zeroed
        table = an.sinusoidal_encoding(T, d_model)
        keep = np.arange(T)[None, :] >= T - np.asarray(lengths)[:, None]
        return table[None] * keep[..., None]

    verdict = check_left_padded_positions(along_the_row)
    assert not verdict and "from its own first real token" in verdict.message, verdict.message
