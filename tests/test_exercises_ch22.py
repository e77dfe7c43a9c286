"""Chapter 22's checkers accept answers computed another way and name the typical mistakes."""

import numpy as np
import torch

from attnbook.exercises import check_rms_norm, check_swiglu


def rms_norm_by_builtin(x, gamma, eps):
    return torch.nn.functional.rms_norm(x, x.shape[-1:], gamma, eps)


def rms_norm_with_norm(x, gamma, eps):
    # a learner's likely variant: the vector's length over sqrt(d)
    d = x.shape[-1]
    return x / torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / d + eps) * gamma


def swiglu_with_nn(x, W1, W3, W2):
    gate = torch.nn.SiLU()(x @ W1)
    return torch.einsum("...f,fd->...d", gate * (x @ W3), W2)


def swiglu_in_numpy(x, W1, W3, W2):
    a, v = x.numpy() @ W1.numpy(), x.numpy() @ W3.numpy()
    return (a / (1 + np.exp(-a)) * v) @ W2.numpy()  # a NumPy array is an accepted answer


def test_answers_computed_another_way_pass():
    assert check_rms_norm(rms_norm_by_builtin)
    assert check_rms_norm(rms_norm_with_norm)
    assert check_swiglu(swiglu_with_nn)
    assert check_swiglu(swiglu_in_numpy)


def test_layer_norm_without_bias_is_named():
    def centred(x, gamma, eps):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], gamma, None, eps)

    verdict = check_rms_norm(centred)
    assert not verdict and "does not subtract the mean" in verdict.message


def test_a_relu_gate_is_rejected():
    def relu_gate(x, W1, W3, W2):
        return (torch.relu(x @ W1) * (x @ W3)) @ W2

    verdict = check_swiglu(relu_gate)
    assert not verdict and "random x" in verdict.message


def test_an_unattempted_exercise_says_so():
    def todo(x, gamma, eps):
        raise NotImplementedError

    verdict = check_rms_norm(todo)
    assert not verdict and not verdict.attempted
