"""Chapter 11's checkers: answers computed another way pass; delegating answers and plausible wrong ones fail,
and the capstone names the part that disagrees."""

import numpy as np

import attnbook.numpy as an
from attnbook.exercises import check_encode_times, check_my_mha, check_offset_between


def encode_by_rotation(times, d_model, base):
    # each pair as a complex number turning by omega per unit of time; an odd width drops the last cosine
    n_pairs = (d_model + 1) // 2
    omegas = base ** (-np.arange(n_pairs) / n_pairs)
    z = np.exp(1j * np.asarray(times, dtype=float)[:, None] * omegas)
    return np.stack([z.imag, z.real], axis=-1).reshape(len(times), -1)[:, :d_model]


def test_encode_times_another_way_passes_and_delegating_is_refused():
    assert check_encode_times(encode_by_rotation)

    def through_the_table(times, d_model, base):  # integer times only, even widths only
        return an.sinusoidal_encoding(int(max(times)) + 1, d_model + d_model % 2, base)[np.asarray(times, int)]

    def through_the_map(times, d_model, base):
        even = d_model + d_model % 2
        return np.stack([np.tile([0.0, 1.0], even // 2) @ an.relative_position_map(t, even, base)
                         for t in times])[:, :d_model]

    def through_the_frequencies(times, d_model, base):
        angles = np.asarray(times)[:, None] * an.sinusoidal_frequencies(d_model + d_model % 2, base)
        return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(len(times), -1)[:, :d_model]

    for answer, name in ((through_the_table, "sinusoidal_encoding"), (through_the_map, "relative_position_map"),
                         (through_the_frequencies, "sinusoidal_frequencies")):
        verdict = check_encode_times(answer)
        assert not verdict and name in verdict.message


def test_encode_times_plausible_wrong_answers_fail():
    def halves_of_the_tutorial(times, d_model, base):
        # the usual tutorial code, made to run for an odd width by giving the cosines one frequency fewer
        omegas = base ** (-np.arange(0, d_model, 2) / d_model)
        pe = np.zeros((len(times), d_model))
        pe[:, 0::2] = np.sin(np.asarray(times)[:, None] * omegas)
        pe[:, 1::2] = np.cos(np.asarray(times)[:, None] * omegas[: d_model // 2])
        return pe

    def by_absolute_time(times, d_model, base):  # loses the sign of negative times
        return encode_by_rotation(np.abs(times), d_model, base)

    assert not check_encode_times(halves_of_the_tutorial)
    assert not check_encode_times(by_absolute_time)


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
