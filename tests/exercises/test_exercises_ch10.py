"""Chapter 10's checker accepts heads built another way, whose sum is torch's causal dilated convolution;
refuses the package's convolution and the library convolutions; and rejects wrong heads a learner might
build, each with the hint that names its mistake."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
from attnbook.exercises import check_dilated_causal_conv
from attnbook.exercises.ch10 import _causal_heads


def heads_by_loops(T, k, dilation):
    A = np.zeros((k, T, T))
    for j in range(k):
        for i in range(T):
            t = i - (k - 1 - j) * dilation
            if t >= 0:
                A[j, i, t] = 1.0
    return A


@pytest.mark.parametrize("T, k, dilation", [(9, 3, 2), (7, 2, 4), (6, 4, 1), (4, 3, 3)])
def test_the_reference_heads_add_up_to_torch_s_causal_dilated_convolution(T, k, dilation):
    g = np.random.default_rng(T * 10 + k)
    x, kernel = g.normal(size=(T, 2)), g.normal(size=(3, 2, k))
    A = _causal_heads(T, k, dilation)
    ours = sum(A[j] @ x @ kernel[:, :, j].T for j in range(k))
    padded = F.pad(torch.tensor(x.T[None]), ((k - 1) * dilation, 0))
    torch_y = F.conv1d(padded, torch.tensor(kernel), dilation=dilation)[0].numpy().T
    np.testing.assert_allclose(ours, torch_y, atol=1e-12)


def test_heads_computed_another_way_pass():
    assert check_dilated_causal_conv(heads_by_loops)
    assert check_dilated_causal_conv(lambda T, k, r: heads_by_loops(T, k, r).astype(bool))


def test_delegating_to_the_package_is_refused_by_name():
    def through_package(T, k, dilation):
        return anp.offset_attention_weights(T, [-(k - 1 - j) * dilation for j in range(k)])

    def through_conv(T, k, dilation):
        # each head read off a convolution of the identity with a one-hot kernel
        heads = []
        for j in range(k):
            one_hot = np.zeros((1, 1, k))
            one_hot[0, 0, j] = 1.0
            padded = F.pad(torch.eye(T, dtype=torch.float64)[:, None, :], ((k - 1) * dilation, 0))
            heads.append(F.conv1d(padded, torch.tensor(one_hot), dilation=dilation)[:, 0, :].numpy().T)
        return np.stack(heads)

    verdict = check_dilated_causal_conv(through_package)
    assert not verdict and "attnbook.numpy.convolution.offset_attention_weights" in verdict.message
    verdict = check_dilated_causal_conv(through_conv)
    assert not verdict and "conv1d" in verdict.message


def test_heads_shifted_by_slices_of_the_identity_pass():
    # Any construction of the right matrices is an answer: the exercise asks for the heads, not a method.
    def sliced(T, k, dilation):
        A = np.zeros((k, T, T))
        for j in range(k):
            s = (k - 1 - j) * dilation
            if s < T:
                A[j, s:, : T - s] = np.eye(T - s)
        return A

    def sliced_past_the_end(T, k, dilation):
        # the same without the test: a tap that reads before every token (s >= T) breaks the slice
        A = np.zeros((k, T, T))
        for j in range(k):
            s = (k - 1 - j) * dilation
            A[j, s:, : T - s] = np.eye(max(T - s, 0))
        return A

    assert check_dilated_causal_conv(sliced)
    verdict = check_dilated_causal_conv(sliced_past_the_end)
    assert not verdict and "T=5, k=3, dilation=3" in verdict.message


@pytest.mark.parametrize("wrong, words", [
    # the heads flipped left to right as np.convolve's true convolution would read the kernel
    (lambda T, k, r: heads_by_loops(T, k, r)[::-1], "does not flip the kernel"),
    # keys and queries swapped: every head reads the future
    (lambda T, k, r: heads_by_loops(T, k, r).transpose(0, 2, 1), "on or below the diagonal"),
    # taps r apart forgotten
    (lambda T, k, r: heads_by_loops(T, k, 1), "r positions apart"),
    # the padding read from the other end of the sequence
    (lambda T, k, r: np.stack([np.roll(np.eye(T), -(k - 1 - j) * r, axis=1) for j in range(k)]), "row of zeros"),
])
def test_a_learner_s_mistakes_fail_with_the_hint_that_names_them(wrong, words):
    verdict = check_dilated_causal_conv(wrong)
    assert not verdict and words in verdict.message, verdict.message


def test_wrong_answers_not_among_the_listed_mistakes_fail():
    # The convolution's output instead of its heads, and one head for the whole kernel.
    assert not check_dilated_causal_conv(lambda T, k, r: heads_by_loops(T, k, r).sum(axis=0))
    assert not check_dilated_causal_conv(lambda T, k, r: np.tril(np.ones((k, T, T))))


def test_unattempted_exercise_says_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_dilated_causal_conv(todo).attempted


# --- the convolution's token-mixing matrix ------------------------------------------------------------------

from attnbook.exercises.ch10 import check_conv_mixing_matrix  # noqa: E402


def mixing_by_loops(w, T):
    k, M = len(w), np.zeros((T, T))
    for i in range(T):
        for j in range(k):
            t = i + j - k // 2
            if 0 <= t < T:
                M[i, t] = w[j]
    return M


def test_a_mixing_matrix_built_by_loops_passes_and_equals_torch_s_convolution():
    assert check_conv_mixing_matrix(mixing_by_loops)
    g = np.random.default_rng(7)
    w, x = g.normal(size=5), g.normal(size=9)
    torch_y = F.conv1d(torch.tensor(x)[None, None], torch.tensor(w)[None, None], padding=2)[0, 0].numpy()
    np.testing.assert_allclose(mixing_by_loops(w, 9) @ x, torch_y, atol=1e-12)


def test_a_mixing_matrix_read_off_np_convolve_is_refused_by_name():
    def through_convolve(w, T):  # column t: the convolution of the t-th one-hot signal
        return np.stack([np.convolve(np.eye(T)[t], w[::-1], mode="same") for t in range(T)], axis=1)

    verdict = check_conv_mixing_matrix(through_convolve)
    assert not verdict and "numpy.convolve" in verdict.message


@pytest.mark.parametrize("wrong, words", [
    # the kernel read as np.convolve reads it, flipped: the same as the right matrix transposed
    (lambda w, T: mixing_by_loops(w[::-1], T), "does not flip the kernel"),
    (lambda w, T: mixing_by_loops(w, T).T, "does not flip the kernel"),
    # the padding forgotten: the window starts at the output's own token
    (lambda w, T: sum(w_j * np.eye(T, k=j) for j, w_j in enumerate(w)), "centres the window"),
])
def test_a_learner_s_mixing_matrix_mistakes_fail_with_their_hint(wrong, words):
    verdict = check_conv_mixing_matrix(wrong)
    assert not verdict and words in verdict.message, verdict.message


def test_a_mixing_matrix_that_clips_the_window_instead_of_padding_fails():
    # A plausible answer outside the listed mistakes: at the edges, the window slides inwards to stay inside the
    # sequence (as "valid" windows do) instead of reading zeros.
    def clipped(w, T):
        k, M = len(w), np.zeros((T, T))
        for i in range(T):
            start = min(max(i - k // 2, 0), max(T - k, 0))
            for j in range(k):
                if start + j < T:
                    M[i, start + j] = w[j]
        return M

    assert not check_conv_mixing_matrix(clipped)
