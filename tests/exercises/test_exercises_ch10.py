"""Chapter 10's checker accepts answers computed another way, refuses the package's convolution and the
library convolutions, and rejects wrong answers a learner might write."""

import numpy as np
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
from attnbook.exercises import check_dilated_causal_conv


def conv_by_loops(x, kernel, dilation):
    T, k = x.shape[0], kernel.shape[-1]
    y = np.zeros((T, kernel.shape[0]))
    for i in range(T):
        for j in range(k):
            t = i - (k - 1 - j) * dilation
            if t >= 0:
                y[i] += kernel[:, :, j] @ x[t]
    return y


def test_an_answer_computed_another_way_passes():
    assert check_dilated_causal_conv(conv_by_loops)


def test_delegating_to_a_convolution_is_refused_by_name():
    def through_torch(x, kernel, dilation):
        k = kernel.shape[-1]
        padded = F.pad(torch.tensor(x.T[None]), ((k - 1) * dilation, 0))
        return F.conv1d(padded, torch.tensor(kernel), dilation=dilation)[0].numpy().T

    def through_package(x, kernel, dilation):
        # Spread the kernel over a dilated, left-shifted window and let the package do the rest.
        k = kernel.shape[-1]
        wide = np.zeros(kernel.shape[:2] + (2 * (k - 1) * dilation + 1,))
        wide[:, :, : (k - 1) * dilation + 1 : dilation] = kernel
        return anp.conv1d_as_attention(x, wide)

    verdict = check_dilated_causal_conv(through_torch)
    assert not verdict and "conv1d" in verdict.message
    verdict = check_dilated_causal_conv(through_package)
    assert not verdict and "attnbook.numpy.convolution.conv1d_as_attention" in verdict.message


def test_wrong_answers_not_among_the_listed_mistakes_fail():
    # The zero padding replaced by wrapping round, and the kernel's channels transposed.
    def wraps_round(x, kernel, dilation):
        k = kernel.shape[-1]
        return sum(np.roll(x, (k - 1 - j) * dilation, axis=0) @ kernel[:, :, j].T for j in range(k))

    assert not check_dilated_causal_conv(wraps_round)
    assert not check_dilated_causal_conv(lambda x, kernel, dilation: conv_by_loops(x, kernel, dilation)[::-1])


def test_unattempted_exercise_says_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_dilated_causal_conv(todo).attempted
