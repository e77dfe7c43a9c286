"""Chapter 6's checkers accept answers computed another way, refuse the package's own functions and
autograd, and reject wrong answers a learner might write."""

import math

import numpy as np
import torch

import attnbook.numpy as anp
from attnbook.exercises import check_correlated_scale, check_scores_gradient


def gradient_by_jacobians(s, g, d):
    # Row by row through an explicit Jacobian, written out here (the package's own is refused).
    p = anp.softmax(np.asarray(s) / math.sqrt(d), axis=-1)
    flat_p, flat_g = p.reshape(-1, p.shape[-1]), np.asarray(g).reshape(-1, p.shape[-1])
    rows = [(np.diag(r) - np.outer(r, r)).T @ gr for r, gr in zip(flat_p, flat_g, strict=True)]
    return (np.stack(rows) / math.sqrt(d)).reshape(p.shape)


def scale_by_simulation_formula(d, var_q, var_k, rho):
    # E[(q k)^2] - E[q k]^2 per entry, from the moments of jointly Gaussian variables, summed over d.
    second = var_q * var_k + 2 * (rho * math.sqrt(var_q * var_k)) ** 2
    mean = rho * math.sqrt(var_q * var_k)
    return (d * (second - mean**2)) ** -0.5


def test_answers_computed_another_way_pass():
    assert check_scores_gradient(gradient_by_jacobians)
    assert check_correlated_scale(scale_by_simulation_formula)


def test_delegating_to_the_package_or_autograd_is_refused_by_name():
    def through_package(s, g, d):
        p = anp.softmax(np.asarray(s) / math.sqrt(d), axis=-1)
        flat_p, flat_g = p.reshape(-1, p.shape[-1]), np.asarray(g).reshape(-1, p.shape[-1])
        rows = [anp.softmax_jacobian(r) @ gr for r, gr in zip(flat_p, flat_g, strict=True)]
        return (np.stack(rows) / math.sqrt(d)).reshape(p.shape)

    def through_autograd(s, g, d):
        t = torch.tensor(s, requires_grad=True)
        torch.softmax(t / math.sqrt(d), dim=-1).backward(torch.tensor(g))
        return t.grad.numpy()

    verdict = check_scores_gradient(through_package)
    assert not verdict and "attnbook.numpy.softmax.softmax_jacobian" in verdict.message
    verdict = check_scores_gradient(through_autograd)
    assert not verdict and "torch.autograd" in verdict.message and "backward" in verdict.message


def test_wrong_answers_not_among_the_listed_mistakes_fail():
    def divides_by_d(s, g, d):
        p = anp.softmax(np.asarray(s) / math.sqrt(d), axis=-1)
        return p * (g - (p * g).sum(-1, keepdims=True)) / d

    def sign_flipped(s, g, d):
        return -gradient_by_jacobians(s, g, d)

    assert not check_scores_gradient(divides_by_d)
    assert not check_scores_gradient(sign_flipped)
    # Forgetting the square root of the whole variance: dividing by the variance of q . k, not its deviation.
    assert not check_correlated_scale(lambda d, vq, vk, r: 1 / (d * vq * vk * (1 + r * r)))


def test_unattempted_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_scores_gradient(todo).attempted and not check_correlated_scale(todo).attempted
